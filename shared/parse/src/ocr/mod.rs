//! OCR for pages without a usable text layer: PaddleOCR's PP-OCRv4 detector and recogniser (the
//! models rapidocr ships) run on ONNX Runtime, which is opened at run time from
//! `$DOCPIPE_OCR_DIR` (default the Lambda layer's `/opt/ocr`). Building needs neither; without
//! them, a scan fails with "OCR not available: …".
//!
//! A page goes: grey bitmap → detector probability map → rotated line boxes (DB
//! post-processing) → strips along each box's slope → recogniser → CTC text with a confidence.

mod detect;
mod geometry;
mod recognise;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::session::Session;
use ort::value::Tensor;
use serde::{Deserialize, Serialize};

pub use geometry::Point;

pub const OCR_DIR_ENV: &str = "DOCPIPE_OCR_DIR";
pub(crate) const OCR_DEFAULT_DIR: &str = "/opt/ocr";

/// The recogniser reads each batch of this many strips at once, as rapidocr does.
const REC_BATCH: usize = 6;
/// The detector sees the page with its longer side at most this (rapidocr's `max_side_len`).
const DET_MAX_SIDE: usize = 2000;
/// Lines the recogniser is less sure of than this are dropped (rapidocr's `text_score`).
const MIN_LINE_SCORE: f32 = 0.5;

/// An 8-bit grey image, row-major.
#[derive(Debug, Clone)]
pub(crate) struct Gray {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl Gray {
    /// Bilinear sample at (x, y) in pixel-centre coordinates, with the border repeated.
    fn sample(&self, x: f32, y: f32) -> u8 {
        let x = x.clamp(0.0, (self.width - 1) as f32);
        let y = y.clamp(0.0, (self.height - 1) as f32);
        let (x0, y0) = (x.floor() as usize, y.floor() as usize);
        let (x1, y1) = ((x0 + 1).min(self.width - 1), (y0 + 1).min(self.height - 1));
        let (fx, fy) = (x - x0 as f32, y - y0 as f32);
        let p = |x: usize, y: usize| self.pixels[y * self.width + x] as f32;
        let top = p(x0, y0) * (1.0 - fx) + p(x1, y0) * fx;
        let bottom = p(x0, y1) * (1.0 - fx) + p(x1, y1) * fx;
        (top * (1.0 - fy) + bottom * fy).round() as u8
    }

    /// Resized (bilinear) to `width × height`.
    fn resized(&self, width: usize, height: usize) -> Gray {
        let (sx, sy) = (
            self.width as f32 / width as f32,
            self.height as f32 / height as f32,
        );
        let mut pixels = vec![0u8; width * height];
        for y in 0..height {
            for x in 0..width {
                pixels[y * width + x] =
                    self.sample((x as f32 + 0.5) * sx - 0.5, (y as f32 + 0.5) * sy - 0.5);
            }
        }
        Gray {
            width,
            height,
            pixels,
        }
    }
}

/// A pixel as the models take it: grey 0..=255 to -1..=1 (PP-OCR's mean 0.5, deviation 0.5).
fn model_input(pixel: u8) -> f32 {
    pixel as f32 / 127.5 - 1.0
}

/// One recognised line: its text, its four corners on the page (pixels, clockwise from the top
/// left of the text) and the recogniser's confidence.
#[derive(Debug, Clone)]
pub(crate) struct OcrLine {
    pub text: String,
    pub corners: [Point; 4],
    pub confidence: f32,
}

impl OcrLine {
    /// Its height on the page: the length of its left edge.
    pub fn height(&self) -> f32 {
        (self.corners[3].y - self.corners[0].y).abs().max(1.0)
    }

    fn middle(&self) -> f32 {
        (self.corners[0].y + self.corners[3].y) / 2.0
    }

    /// Whether the two lines stand on one printed row: their middles lie within half the lower
    /// line's height of each other.
    pub(crate) fn same_row(&self, other: &OcrLine) -> bool {
        (self.middle() - other.middle()).abs() < self.height().min(other.height()) / 2.0
    }
}

/// OCR's confidence averaged over characters. Every merge of confidences goes through it (the
/// boxes of one row, the lines of one block, the lines of a page, the pages of a document), so
/// each piece weighs by its visible characters: a long line counts more than a stray mark, and
/// the spaces put between pieces weigh nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Confidence {
    sum: f64,
    chars: usize,
}

impl Confidence {
    /// `confidence` over the visible characters of `text`.
    pub fn of(text: &str, confidence: f32) -> Self {
        let chars = text.chars().filter(|c| !c.is_whitespace()).count();
        Confidence {
            sum: f64::from(confidence) * chars as f64,
            chars,
        }
    }

    pub fn and(self, other: Confidence) -> Self {
        Confidence {
            sum: self.sum + other.sum,
            chars: self.chars + other.chars,
        }
    }

    pub fn chars(&self) -> usize {
        self.chars
    }

    /// The mean; none over no characters.
    pub fn mean(&self) -> Option<f32> {
        (self.chars > 0).then(|| (self.sum / self.chars as f64) as f32)
    }
}

/// What ran: recorded with every OCR'd run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// e.g. "PP-OCRv4 (rapidocr-onnxruntime 1.4.4 models)".
    pub engine: String,
    /// e.g. "onnxruntime 1.23.2".
    pub runtime: String,
    pub det_model: String,
    pub rec_model: String,
}

/// `manifest.json` beside the models, written by the fetch script.
#[derive(Debug, Deserialize)]
struct Manifest {
    onnxruntime: String,
    models_from: String,
    det_model: String,
    rec_model: String,
}

pub struct Engine {
    det: Mutex<Session>,
    rec: Mutex<Session>,
    charset: Vec<String>,
    pub info: EngineInfo,
}

/// Where the OCR files are looked for: `$DOCPIPE_OCR_DIR`, else the Lambda layer path.
pub(crate) fn ocr_dir() -> PathBuf {
    std::env::var_os(OCR_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(OCR_DEFAULT_DIR))
}

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();

/// The process's engine, loaded on first use; the reason it is unavailable otherwise.
pub fn engine() -> Result<&'static Engine, &'static str> {
    ENGINE
        .get_or_init(|| Engine::load(&ocr_dir()))
        .as_ref()
        .map_err(String::as_str)
}

/// Loads the engine now (if not yet) and says whether it is usable, so that a process can say
/// at cold start what it will do with a scan.
pub fn ocr_status() -> Result<&'static EngineInfo, String> {
    engine().map(|e| &e.info).map_err(str::to_string)
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum OcrError {
    #[error("ONNX Runtime: {0}")]
    Runtime(#[from] ort::Error),
    #[error("the model gave an output of unexpected shape {}", shape_text(.0))]
    Shape(Vec<i64>),
}

/// A tensor shape as "1 × 3 × 640 × 640".
fn shape_text(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    if dims.is_empty() {
        "(none)".into()
    } else {
        dims.join(" × ")
    }
}

impl Engine {
    fn load(dir: &Path) -> Result<Engine, String> {
        let manifest_path = dir.join("manifest.json");
        let manifest: Manifest = std::fs::read(&manifest_path)
            .map_err(|e| format!("cannot read {}: {e}", manifest_path.display()))
            .and_then(|b| {
                serde_json::from_slice(&b)
                    .map_err(|e| format!("{} is not a manifest: {e}", manifest_path.display()))
            })?;
        let lib = dir.join("lib").join("libonnxruntime.so");
        if !lib.is_file() {
            return Err(format!("{} is missing", lib.display()));
        }
        let env = ort::init_from(&lib)
            .map_err(|e| format!("cannot load {}: {e}", lib.display()))?
            .with_name("docpipe-ocr")
            .with_telemetry(false)
            .build()
            .map_err(|e| format!("ONNX Runtime environment: {e}"))?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let session = |name: &str| -> Result<Session, String> {
            let path = dir.join("models").join(name);
            if !path.is_file() {
                return Err(format!("{} is missing", path.display()));
            }
            let options = |e: ort::Error<_>| format!("session options: {e}");
            Session::builder(&env)
                .map_err(|e| format!("session options: {e}"))?
                .with_intra_threads(threads)
                .map_err(options)?
                .with_inter_threads(1)
                .map_err(options)?
                // Every page and line has its own shape: a memory plan per shape and an arena
                // that keeps the largest of each only grow the process (rapidocr turns the arena
                // off too).
                .with_memory_pattern(false)
                .map_err(options)?
                .with_execution_providers([ort::ep::CPU::default()
                    .with_arena_allocator(false)
                    .build()])
                .map_err(options)?
                .commit_from_file(&path)
                .map_err(|e| format!("cannot load {}: {e}", path.display()))
        };
        let det = session(&manifest.det_model)?;
        let rec = session(&manifest.rec_model)?;
        let character = rec
            .metadata()
            .ok()
            .and_then(|m| m.custom("character"))
            .ok_or_else(|| {
                format!(
                    "{} carries no character dictionary (metadata key \"character\")",
                    manifest.rec_model
                )
            })?;
        Ok(Engine {
            det: Mutex::new(det),
            rec: Mutex::new(rec),
            charset: recognise::charset_from_metadata(&character),
            info: EngineInfo {
                engine: format!("PP-OCRv4 ({} models)", manifest.models_from),
                runtime: format!("onnxruntime {}", manifest.onnxruntime),
                det_model: manifest.det_model,
                rec_model: manifest.rec_model,
            },
        })
    }

    /// Recognises one page: its lines in reading order (top to bottom, then left to right).
    pub(crate) fn read_page(&self, page: &Gray) -> Result<Vec<OcrLine>, OcrError> {
        let boxes = self.detect(page)?;
        let strips: Vec<Gray> = boxes
            .iter()
            .map(|r| recognise::crop_line(page, r))
            .collect();
        let texts = self.recognise(&strips)?;
        let mut lines: Vec<OcrLine> = boxes
            .iter()
            .zip(texts)
            .filter(|(_, (text, score))| *score >= MIN_LINE_SCORE && !text.trim().is_empty())
            .map(|(r, (text, confidence))| OcrLine {
                text,
                corners: r.corners(),
                confidence,
            })
            .collect();
        sort_reading_order(&mut lines);
        Ok(lines)
    }

    /// Text boxes in page pixels, each in its reading frame.
    fn detect(&self, page: &Gray) -> Result<Vec<geometry::RotatedRect>, OcrError> {
        let scale = (DET_MAX_SIDE as f32 / page.width.max(page.height) as f32).min(1.0);
        let round32 = |v: f32| (((v / 32.0).round() as usize) * 32).max(32);
        let (w, h) = (
            round32(page.width as f32 * scale),
            round32(page.height as f32 * scale),
        );
        let small = page.resized(w, h);
        let plane = w * h;
        let mut data = vec![0f32; 3 * plane];
        for (i, &p) in small.pixels.iter().enumerate() {
            let v = model_input(p);
            data[i] = v;
            data[plane + i] = v;
            data[2 * plane + i] = v;
        }
        let input = Tensor::from_array(([1usize, 3, h, w], data))?;
        let mut det = self.det.lock().unwrap_or_else(|p| p.into_inner());
        let outputs = det.run(ort::inputs![input])?;
        let (shape, prob) = outputs[0].try_extract_tensor::<f32>()?;
        if shape.len() != 4 || shape[2] as usize != h || shape[3] as usize != w {
            return Err(OcrError::Shape(shape.to_vec()));
        }
        let (fx, fy) = (page.width as f32 / w as f32, page.height as f32 / h as f32);
        Ok(detect::boxes(prob, w, h, &detect::DbParams::default())
            .into_iter()
            .map(|d| {
                let r = d.reading_frame();
                // Back to page pixels; the frame's angle survives the (nearly uniform) scaling.
                geometry::RotatedRect {
                    center: Point::new(r.center.x * fx, r.center.y * fy),
                    width: r.width * fx,
                    height: r.height * fy,
                    angle: r.angle,
                }
            })
            .filter(|r| r.width > 3.0 && r.height > 3.0)
            .collect())
    }

    /// Text and confidence for each strip, in the strips' order. Strips of similar width share
    /// a batch (sorted by width), so little of each batch is padding.
    fn recognise(&self, strips: &[Gray]) -> Result<Vec<(String, f32)>, OcrError> {
        let mut order: Vec<usize> = (0..strips.len()).collect();
        order.sort_by_key(|&i| strips[i].width);
        let mut out = vec![(String::new(), 0f32); strips.len()];
        let mut rec = self.rec.lock().unwrap_or_else(|p| p.into_inner());
        for batch in order.chunks(REC_BATCH) {
            let members: Vec<&Gray> = batch.iter().map(|&i| &strips[i]).collect();
            let (shape, data) = recognise::batch_tensor(&members);
            let input = Tensor::from_array((shape, data))?;
            let outputs = rec.run(ort::inputs![input])?;
            let (shape, probs) = outputs[0].try_extract_tensor::<f32>()?;
            if shape.len() != 3 || shape[0] as usize != batch.len() {
                return Err(OcrError::Shape(shape.to_vec()));
            }
            let (steps, classes) = (shape[1] as usize, shape[2] as usize);
            for (k, &i) in batch.iter().enumerate() {
                let one = &probs[k * steps * classes..(k + 1) * steps * classes];
                let decoded = recognise::ctc_decode(one, steps, classes, &self.charset);
                out[i] = (decoded.text(), decoded.confidence);
            }
        }
        Ok(out)
    }
}

/// Top to bottom by the line's top-left corner; lines on one row ([`OcrLine::same_row`]) read
/// left to right (rapidocr's sort, with a tolerance that scales with the text instead of its
/// fixed 10 px).
fn sort_reading_order(lines: &mut [OcrLine]) {
    lines.sort_by(|a, b| a.corners[0].y.total_cmp(&b.corners[0].y));
    for i in 1..lines.len() {
        let mut j = i;
        while j > 0
            && lines[j - 1].same_row(&lines[j])
            && lines[j].corners[0].x < lines[j - 1].corners[0].x
        {
            lines.swap(j - 1, j);
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, x: f32, top: f32, height: f32) -> OcrLine {
        let width = 10.0 * text.chars().count() as f32;
        OcrLine {
            text: text.into(),
            corners: [
                Point::new(x, top),
                Point::new(x + width, top),
                Point::new(x + width, top + height),
                Point::new(x, top + height),
            ],
            confidence: 1.0,
        }
    }

    #[test]
    fn confidence_weighs_visible_characters_only() {
        let merged = Confidence::of("第一条\u{3000} ", 0.5).and(Confidence::of("本法所称", 1.0));
        assert_eq!(merged.chars(), 7);
        let mean = merged.mean().unwrap();
        assert!((mean - (0.5 * 3.0 + 4.0) / 7.0).abs() < 1e-6, "{mean}");
        assert_eq!(Confidence::of("  ", 0.9).mean(), None);
    }

    #[test]
    fn lines_on_one_row_read_left_to_right_and_rows_top_to_bottom() {
        // The right box sits 4 px higher than the left one: one row still.
        let mut lines = vec![
            line("右", 300.0, 96.0, 20.0),
            line("下一行", 0.0, 140.0, 20.0),
            line("左", 0.0, 100.0, 20.0),
        ];
        sort_reading_order(&mut lines);
        let order: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(order, ["左", "右", "下一行"]);
        assert!(lines[0].same_row(&lines[1]));
        assert!(!lines[1].same_row(&lines[2]));
    }
}
