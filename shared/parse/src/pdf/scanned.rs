//! Pages without a usable text layer: no text at all but something drawn (a scan), or a text
//! layer that is glyph garbage. pdfium renders each such page and OCR reads it; the lines then
//! take the text PDF's path (paragraphs, headings), so a scan gets the same heading tree. A page
//! with a good text layer is never rendered.

use std::time::Instant;

use pdfium_render::prelude::*;

use super::{Line, PageText};
use crate::error::ParseError;
use crate::model::{Limits, OcrReport};
use crate::normalize::{gap_between, is_cjk};
use crate::ocr::{self, Confidence, Engine, Gray, OcrLine};
use crate::quality::GARBLED_PAGE_RATIO;
use crate::structure::regulation_marker;

/// Pages are rendered at the resolution scans are usually made at; the recogniser's models
/// were trained on text of about this size.
pub const OCR_DPI: u32 = 200;
/// A page read with less mean confidence than this is flagged and left out of the index.
pub(crate) const MIN_PAGE_CONFIDENCE: f32 = 0.8;
/// The most pixels OCR renders of one page: 25 megapixels. pdfium's bitmap is 4 bytes a pixel
/// (100 MB) and its grey copy one (25 MB). Up to A2 a page gets the full [`OCR_DPI`]; a larger
/// one a lower resolution, down to [`MIN_OCR_DPI`]: A1 is rendered at 179 dpi, A0 at 126.
pub const MAX_OCR_PIXELS: u64 = 25_000_000;
/// The lowest resolution a large page is rendered at: below it the recogniser cannot read body
/// text (a 10 pt line is 14 pixels high at 100 dpi). A page too large for [`MAX_OCR_PIXELS`] even
/// at this resolution fails, saying so.
pub const MIN_OCR_DPI: u32 = 100;

/// What became of the pages that needed OCR.
pub enum Scans {
    /// Every page had a usable text layer.
    NoneNeeded,
    /// Some did, and no engine is available: why.
    Unavailable {
        pages: Vec<u32>,
        why: String,
    },
    Read(OcrReport),
}

pub(crate) fn needs_ocr(page: &PageText) -> bool {
    (page.chars == 0 && page.has_objects) || (page.chars > 0 && page.garbage > GARBLED_PAGE_RATIO)
}

/// The resolution page `number` (1-based), `width × height` points, is rendered at for OCR:
/// [`OCR_DPI`], or less so that the bitmap stays within [`MAX_OCR_PIXELS`]. The page's failure
/// (permanent: the same page is always as large) when that would be under [`MIN_OCR_DPI`], or
/// the page has no area.
pub(crate) fn render_dpi(number: u32, width: f32, height: f32) -> Result<u32, String> {
    let size = || format!("{} × {} pt", points(width), points(height));
    if !(width >= 1.0 && height >= 1.0 && width.is_finite() && height.is_finite()) {
        return Err(format!(
            "page {number} is {}: it has no area to render for OCR",
            size()
        ));
    }
    let pixels = |dpi: u32| {
        let side = |pt: f32| (f64::from(pt) * f64::from(dpi) / 72.0).ceil();
        side(width) * side(height)
    };
    let most = 72.0 * (MAX_OCR_PIXELS as f64 / (f64::from(width) * f64::from(height))).sqrt();
    let mut dpi = (most.floor() as u32).min(OCR_DPI);
    while dpi > 0 && pixels(dpi) > MAX_OCR_PIXELS as f64 {
        dpi -= 1;
    }
    if dpi < MIN_OCR_DPI {
        return Err(format!(
            "page {number} is {}; OCR renders at most {} megapixels a page, which at that size \
             is {dpi} dpi, under the {MIN_OCR_DPI} dpi it needs to read text",
            size(),
            MAX_OCR_PIXELS / 1_000_000
        ));
    }
    Ok(dpi)
}

/// Points as a whole number with thousands separators ("10,000").
fn points(pt: f32) -> String {
    crate::model::thousands(pt.round().max(0.0) as u64)
}

/// Reads every page that needs it, in place of its text layer, within the page limit and the
/// time budget of `limits`. Besides what became of the pages: warnings for the pages rendered
/// at less than [`OCR_DPI`].
pub(crate) fn read_scans(
    doc: &PdfDocument,
    pages: &mut [PageText],
    limits: &Limits,
) -> Result<(Scans, Vec<String>), ParseError> {
    let needing: Vec<usize> = (0..pages.len()).filter(|&i| needs_ocr(&pages[i])).collect();
    if needing.is_empty() {
        return Ok((Scans::NoneNeeded, Vec::new()));
    }
    let numbers: Vec<u32> = needing.iter().map(|&i| i as u32 + 1).collect();
    let garbled_text_pages: Vec<u32> = needing
        .iter()
        .filter(|&&i| pages[i].chars > 0)
        .map(|&i| i as u32 + 1)
        .collect();
    let engine = match ocr::engine() {
        Ok(engine) => engine,
        Err(why) => {
            return Ok((
                Scans::Unavailable {
                    pages: numbers,
                    why: why.to_string(),
                },
                Vec::new(),
            ))
        }
    };
    if needing.len() as u32 > limits.max_ocr_pages {
        return Err(ParseError::TooLarge(format!(
            "{} pages have no usable text layer and need OCR (OCR page limit {})",
            needing.len(),
            limits.max_ocr_pages
        )));
    }
    let started = Instant::now();
    let (mean_confidence, notes) =
        read_needed_pages(doc, engine, pages, &needing, limits, started)?;
    let report = OcrReport {
        pages: numbers,
        garbled_text_pages,
        engine: engine.info.clone(),
        dpi: OCR_DPI,
        mean_confidence,
        // Filled by `assemble`, which decides which pages are indexed.
        low_confidence_pages: Vec::new(),
        min_page_confidence: MIN_PAGE_CONFIDENCE,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    Ok((Scans::Read(report), notes))
}

/// Replaces each needing page's text with what OCR read, stopping at the time budget: the
/// mean confidence over all read characters, and the notes on pages rendered at a lower dpi.
fn read_needed_pages(
    doc: &PdfDocument,
    engine: &Engine,
    pages: &mut [PageText],
    needing: &[usize],
    limits: &Limits,
    started: Instant,
) -> Result<(f32, Vec<String>), ParseError> {
    let mut read = Confidence::default();
    let mut notes = Vec::new();
    for (done, &i) in needing.iter().enumerate() {
        within_budget(started, limits.ocr_budget_ms, done, needing.len())?;
        let (lines, page) = render_and_read(doc, engine, i, &mut notes)?;
        read = read.and(page);
        pages[i] = PageText {
            // Read by OCR: its text is what was recognised, not a glyph layer.
            garbage: 0.0,
            lines,
            chars: page.chars(),
            has_objects: true,
            // A page with nothing on it to read is not doubted.
            ocr_confidence: Some(page.mean().unwrap_or(1.0)),
        };
    }
    Ok((read.mean().unwrap_or(0.0), notes))
}

/// Fails as soon as the pages left cannot fit in the OCR time budget (0: no budget).
fn within_budget(
    started: Instant,
    budget_ms: u64,
    done: usize,
    total: usize,
) -> Result<(), ParseError> {
    if budget_ms == 0 || done == 0 {
        return Ok(());
    }
    // Failing at the budget is better than being killed at the function's timeout with nothing
    // said. The projection waits for two pages, so one slow first page (a cold cache, a busy
    // host) decides nothing.
    let spent = started.elapsed().as_millis() as u64;
    let projected = spent + spent / done as u64 * (total - done) as u64;
    if spent >= budget_ms || (done >= 2 && projected > budget_ms) {
        return Err(ParseError::TooLarge(format!(
            "OCR time budget of {:.0} s exceeded: {done} of {total} pages read in {:.0} s, about {:.0} s needed for all",
            budget_ms as f64 / 1000.0,
            spent as f64 / 1000.0,
            projected as f64 / 1000.0
        )));
    }
    Ok(())
}

/// Page `i` read by OCR at the highest resolution within the pixel limit; a page rendered below
/// [`OCR_DPI`] leaves a note saying so.
fn render_and_read(
    doc: &PdfDocument,
    engine: &Engine,
    i: usize,
    notes: &mut Vec<String>,
) -> Result<(Vec<Line>, Confidence), ParseError> {
    let number = i as u32 + 1;
    let page = doc.pages().get(i as i32).map_err(|e| {
        ParseError::Corrupt(format!(
            "pdfium cannot load page {number} for OCR: {}",
            super::pdfium_reason(&e)
        ))
    })?;
    let dpi = render_dpi(number, page.width().value, page.height().value)
        .map_err(ParseError::TooLarge)?;
    if dpi < OCR_DPI {
        notes.push(format!(
            "page {number} is {} × {} pt: rendered for OCR at {dpi} dpi, not {OCR_DPI}, to \
             stay within {} megapixels",
            points(page.width().value),
            points(page.height().value),
            MAX_OCR_PIXELS / 1_000_000
        ));
    }
    read_page(engine, &page, number, dpi)
}

/// One page: rendered grey at `dpi`, read, and turned into text-PDF lines in PDF points (y up).
/// Returns the lines and the page's confidence.
fn read_page(
    engine: &Engine,
    page: &PdfPage,
    number: u32,
    dpi: u32,
) -> Result<(Vec<Line>, Confidence), ParseError> {
    let scale = dpi as f32 / 72.0;
    let bitmap = page
        .render_with_config(&PdfRenderConfig::new().scale_page_by_factor(scale))
        .map_err(|e| {
            ParseError::Corrupt(format!(
                "pdfium cannot render page {number} for OCR at {dpi} dpi: {}",
                super::pdfium_reason(&e)
            ))
        })?;
    let gray = to_gray(&bitmap);
    drop(bitmap);
    let read = engine
        .read_page(&gray)
        .map_err(|e| ParseError::Corrupt(format!("OCR failed on page {number}: {e}")))?;
    let page_height = page.height().value;
    let mut read_confidence = Confidence::default();
    let mut lines: Vec<Line> = join_rows(read)
        .into_iter()
        .map(|l| {
            read_confidence = read_confidence.and(Confidence::of(&l.text, l.confidence));
            let xs = l.corners.map(|p| p.x / scale);
            let ys = l.corners.map(|p| page_height - p.y / scale);
            let min = |v: [f32; 4]| v.into_iter().fold(f32::MAX, f32::min);
            let max = |v: [f32; 4]| v.into_iter().fold(f32::MIN, f32::max);
            Line {
                text: repair(&l.text),
                bbox: Some([min(xs), min(ys), max(xs), max(ys)]),
                hyphenated: false,
                confidence: Some(l.confidence),
            }
        })
        .collect();
    separate_article_numbers(&mut lines);
    Ok((lines, read_confidence))
}

fn to_gray(bitmap: &PdfBitmap) -> Gray {
    let (width, height) = (bitmap.width() as usize, bitmap.height() as usize);
    let raw = bitmap.as_raw_bytes();
    let stride = raw.len() / height.max(1);
    let bpp = match bitmap.format() {
        Ok(PdfBitmapFormat::Gray) => 1,
        Ok(PdfBitmapFormat::BGR) => 3,
        _ => 4,
    };
    let mut pixels = Vec::with_capacity(width * height);
    for y in 0..height {
        let row = &raw[y * stride..];
        for x in 0..width {
            let p = &row[x * bpp..];
            pixels.push(if bpp == 1 {
                p[0]
            } else {
                // BGR order; ITU-R 601 luma.
                ((p[0] as u32 * 29 + p[1] as u32 * 150 + p[2] as u32 * 77) >> 8) as u8
            });
        }
    }
    Gray {
        width,
        height,
        pixels,
    }
}

/// Boxes the detector cut from one printed line ("第一条" apart from its body, table cells) are
/// one line again: same row, left to right, with a space where they stood apart.
fn join_rows(lines: Vec<OcrLine>) -> Vec<OcrLine> {
    let mut out: Vec<OcrLine> = Vec::new();
    for line in lines {
        if let Some(last) = out.last_mut() {
            let to_the_right = line.corners[0].x >= last.corners[1].x - last.height() / 2.0;
            if last.same_row(&line) && to_the_right {
                let joined = Confidence::of(&last.text, last.confidence)
                    .and(Confidence::of(&line.text, line.confidence));
                last.confidence = joined.mean().unwrap_or(last.confidence);
                last.text.push(gap_between(&last.text, &line.text));
                last.text.push_str(&line.text);
                last.corners[1] = line.corners[1];
                last.corners[2] = line.corners[2];
                continue;
            }
        }
        out.push(line);
    }
    out
}

/// "第八条禁止…" at the start of a paragraph is article 8, whose number and body the recogniser
/// read without the space between them; heading recognition needs it (without it the line could
/// be a cross-reference that wrapped, "第八条规定的…"). So where the page's geometry says a
/// paragraph starts, or the previous line ended a sentence, the space is put back.
fn separate_article_numbers(lines: &mut [Line]) {
    let (left_min, right_max) = super::margins(lines);
    for i in 0..lines.len() {
        let starts_paragraph = i == 0 || {
            let prev = &lines[i - 1];
            super::paragraph_ended(prev, &lines[i], right_max, left_min)
                || prev.text.ends_with(['。', '；', '：', ':'])
                || super::heading_line(&prev.text)
        };
        if starts_paragraph {
            if let Some(fixed) = separate_article_number(&lines[i].text) {
                lines[i].text = fixed;
            }
        }
    }
}

/// "第八条禁止" → "第八条　禁止"; None when the line does not start with an article number run
/// into its text, or reads as a cross-reference ("第八条规定的", "第八条的").
fn separate_article_number(text: &str) -> Option<String> {
    let (_, unit, end) = regulation_marker(text)?;
    if !matches!(unit, '条' | '條') {
        return None;
    }
    let body = &text[end..];
    let first = body.chars().next()?;
    if !is_cjk(first) || "的之所和或及至、，。；".contains(first) || body.starts_with("规定")
    {
        return None;
    }
    Some(format!("{}\u{3000}{body}", &text[..end]))
}

/// What OCR typically gets wrong in Chinese regulations, put right: spaces inside a
/// 第…条/章/节/编 marker, punctuation read in place of the space after one, and half-width
/// punctuation among Chinese text.
pub(crate) fn repair(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    // A marker at the start: 第, numerals (spaces between them dropped), a unit.
    if let Some((number, unit, end)) = regulation_marker(text) {
        out.push('第');
        out.push_str(&number);
        out.push(unit);
        i = text[..end].chars().count();
        // "第八条，金融机构": the gap before the body was read as a comma or a dot.
        if i + 1 < chars.len() && "，,、.．。·".contains(chars[i]) && is_cjk(chars[i + 1]) {
            out.push('\u{3000}');
            i += 1;
        }
    }
    while i < chars.len() {
        let c = chars[i];
        let prev_cjk = i > 0 && is_cjk(chars[i - 1]);
        let next_cjk = chars.get(i + 1).is_some_and(|&n| is_cjk(n));
        let full = match c {
            ',' => Some('，'),
            ';' => Some('；'),
            ':' => Some('：'),
            '?' => Some('？'),
            '!' => Some('！'),
            '(' => Some('（'),
            ')' => Some('）'),
            _ => None,
        };
        match full {
            // A half-width mark touching Chinese text is the full-width one misread.
            Some(f) if prev_cjk || (next_cjk && c != ')') => out.push(f),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_punctuation_are_put_right() {
        assert_eq!(repair("第 十 一 条　本法"), "第十一条　本法");
        assert_eq!(repair("第八条，金融机构应当"), "第八条\u{3000}金融机构应当");
        assert_eq!(repair("第三章数据安全"), "第三章数据安全");
        assert_eq!(repair("审计机制;"), "审计机制；");
        assert_eq!(repair("包括:(一)数据"), "包括：（一）数据");
        assert_eq!(repair("see (a), b"), "see (a), b");
        // A cross-reference keeps its punctuation: only a marker at the start is repaired.
        assert_eq!(repair("依照第八条，处罚"), "依照第八条，处罚");
    }

    #[test]
    fn large_pages_are_rendered_at_a_lower_dpi_within_the_pixel_limit() {
        let px = |pt: f32, dpi: u32| (f64::from(pt) * f64::from(dpi) / 72.0).ceil() as u64;
        // A4 and A2: the full resolution.
        assert_eq!(render_dpi(1, 595.0, 842.0), Ok(OCR_DPI));
        assert_eq!(render_dpi(1, 1191.0, 1684.0), Ok(OCR_DPI));
        // A1, A0 and a 3,000 pt square: lower, within the limit, as high as the limit allows.
        assert_eq!(render_dpi(1, 1684.0, 2384.0), Ok(179));
        assert_eq!(render_dpi(1, 2384.0, 3370.0), Ok(126));
        for (w, h) in [(1684.0, 2384.0), (2384.0, 3370.0), (3000.0, 3000.0)] {
            let dpi = render_dpi(2, w, h).unwrap();
            assert!((MIN_OCR_DPI..OCR_DPI).contains(&dpi), "{dpi}");
            assert!(px(w, dpi) * px(h, dpi) <= MAX_OCR_PIXELS);
            assert!(px(w, dpi + 1) * px(h, dpi + 1) > MAX_OCR_PIXELS);
        }
        assert_eq!(render_dpi(2, 3000.0, 3000.0), Ok(120));
        // Too large even at the lowest resolution: a reason, in words.
        assert_eq!(
            render_dpi(1, 10_000.0, 10_000.0),
            Err(
                "page 1 is 10,000 × 10,000 pt; OCR renders at most 25 megapixels a page, which \
                 at that size is 36 dpi, under the 100 dpi it needs to read text"
                    .to_string()
            )
        );
        assert!(render_dpi(3, 0.0, 842.0).unwrap_err().contains("no area"));
        assert!(render_dpi(3, f32::NAN, 842.0).is_err());
    }

    #[test]
    fn an_article_number_run_into_its_body_is_separated() {
        assert_eq!(
            separate_article_number("第十一条违反本条例").as_deref(),
            Some("第十一条\u{3000}违反本条例")
        );
        assert_eq!(separate_article_number("第八条规定的情形"), None);
        assert_eq!(separate_article_number("第八条的规定"), None);
        assert_eq!(separate_article_number("第三章总则"), None);
        assert_eq!(separate_article_number("本条例第八条"), None);
    }
}
