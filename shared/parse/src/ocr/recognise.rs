//! Text recognition around the model: a rotated line crop becomes the recogniser's input, and
//! its per-step class probabilities become text (CTC greedy decoding). Pure logic.

use super::geometry::RotatedRect;
use super::Gray;

/// The recogniser's input height (PP-OCRv4: 3 × 48 × W).
pub(crate) const REC_HEIGHT: usize = 48;
/// The narrowest input: rapidocr pads every batch to at least 320 × 48.
pub(crate) const REC_MIN_WIDTH: usize = 320;
/// The widest strip read: a line longer than 80 heights is a table rule or noise, not text.
const REC_MAX_WIDTH: usize = 80 * REC_HEIGHT;

/// Samples the rectangle from the page straight into a `REC_HEIGHT`-high strip, along its slope
/// (bilinear), so the warp and the resize of rapidocr's crop are one step.
pub(crate) fn crop_line(page: &Gray, rect: &RotatedRect) -> Gray {
    let scale = REC_HEIGHT as f32 / rect.height.max(1.0);
    let width = ((rect.width * scale).ceil() as usize).clamp(1, REC_MAX_WIDTH);
    let [p0, p1, _, p3] = rect.corners();
    let mut pixels = vec![0u8; width * REC_HEIGHT];
    for v in 0..REC_HEIGHT {
        let fv = (v as f32 + 0.5) / REC_HEIGHT as f32;
        for u in 0..width {
            let fu = (u as f32 + 0.5) / width as f32;
            let x = p0.x + fu * (p1.x - p0.x) + fv * (p3.x - p0.x);
            let y = p0.y + fu * (p1.y - p0.y) + fv * (p3.y - p0.y);
            pixels[v * width + u] = page.sample(x - 0.5, y - 0.5);
        }
    }
    Gray {
        width,
        height: REC_HEIGHT,
        pixels,
    }
}

/// A batch of strips as one `[n, 3, 48, width]` tensor, each normalised to [-1, 1] and padded
/// on the right with zeros (mid-grey after normalisation), as rapidocr pads.
pub(crate) fn batch_tensor(strips: &[&Gray]) -> (Vec<usize>, Vec<f32>) {
    let width = strips
        .iter()
        .map(|s| s.width)
        .max()
        .unwrap_or(0)
        .max(REC_MIN_WIDTH);
    let plane = REC_HEIGHT * width;
    let mut data = vec![0f32; strips.len() * 3 * plane];
    for (n, strip) in strips.iter().enumerate() {
        for y in 0..REC_HEIGHT {
            for x in 0..strip.width {
                let v = super::model_input(strip.pixels[y * strip.width + x]);
                for c in 0..3 {
                    data[(n * 3 + c) * plane + y * width + x] = v;
                }
            }
        }
    }
    (vec![strips.len(), 3, REC_HEIGHT, width], data)
}

/// A decoded line: its characters, the step each was read at (steps run left to right along the
/// strip), and the confidence (the mean probability of the characters kept).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decoded {
    pub chars: Vec<(String, usize)>,
    pub confidence: f32,
}

/// Greedy CTC: the best class at each step, repeats collapsed, blanks (class 0) dropped.
pub(crate) fn ctc_decode(
    probs: &[f32],
    steps: usize,
    classes: usize,
    charset: &[String],
) -> Decoded {
    let mut chars = Vec::new();
    let (mut sum, mut kept) = (0f32, 0usize);
    let mut prev = usize::MAX;
    for t in 0..steps {
        let row = &probs[t * classes..(t + 1) * classes];
        let (best, p) = row
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, f32::MIN),
                |acc, (i, v)| if v > acc.1 { (i, v) } else { acc },
            );
        if best != 0 && best != prev {
            if let Some(ch) = charset.get(best) {
                chars.push((ch.clone(), t));
                sum += p;
                kept += 1;
            }
        }
        prev = best;
    }
    let confidence = if kept == 0 { 0.0 } else { sum / kept as f32 };
    Decoded { chars, confidence }
}

impl Decoded {
    /// The text, with a space where the characters stand apart by much more than their usual
    /// pitch. The recogniser has no class for a full-width space or for the gap between two
    /// table cells; their width is all that is left of them. (A half-width space is within the
    /// steps' jitter: see `pdf::scanned` for the one that matters, after an article number.)
    pub fn text(&self) -> String {
        let mut gaps: Vec<usize> = self
            .chars
            .windows(2)
            .map(|w| w[1].1.saturating_sub(w[0].1))
            .collect();
        let mut text = String::new();
        if gaps.len() < 3 {
            self.chars.iter().for_each(|(c, _)| text.push_str(c));
            return text;
        }
        gaps.sort_unstable();
        let pitch = gaps[gaps.len() / 2].max(1);
        for (i, (c, t)) in self.chars.iter().enumerate() {
            if i > 0 {
                let (prev, prev_t) = &self.chars[i - 1];
                // A full-width space is two pitches; characters of one run stay under 1.5.
                let wide = (t - prev_t) * 5 >= pitch * 9;
                if wide && prev != " " && c != " " {
                    text.push(crate::normalize::gap_between(prev, c));
                }
            }
            text.push_str(c);
        }
        text
    }
}

/// The class list as rapidocr builds it: a blank at 0, the model's characters, then a space.
pub(crate) fn charset_from_metadata(character: &str) -> Vec<String> {
    let mut set = vec!["blank".to_string()];
    set.extend(character.lines().map(str::to_string));
    set.push(" ".to_string());
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Vec<String> {
        charset_from_metadata("第\n一\n条")
    }

    #[test]
    fn ctc_collapses_repeats_and_drops_blanks() {
        // Steps: 第 第 blank 一 一 条 blank 条 → 第一条条 (a blank separates a true repeat).
        let classes = 5;
        let best = [1, 1, 0, 2, 2, 3, 0, 3];
        let mut probs = vec![0.0; best.len() * classes];
        for (t, &c) in best.iter().enumerate() {
            probs[t * classes + c] = 0.9;
        }
        let decoded = ctc_decode(&probs, best.len(), classes, &set());
        assert_eq!(decoded.text(), "第一条条");
        assert!((decoded.confidence - 0.9).abs() < 1e-6);
    }

    #[test]
    fn a_wide_gap_reads_as_a_space() {
        let at = |s: &str, t: usize| (s.to_string(), t);
        // 第一条 at a pitch of 3 steps, then its body after a gap of 9.
        let decoded = Decoded {
            chars: vec![
                at("第", 1),
                at("一", 4),
                at("条", 7),
                at("金", 16),
                at("融", 19),
                at("机", 22),
            ],
            confidence: 1.0,
        };
        assert_eq!(decoded.text(), "第一条\u{3000}金融机");
        let even = Decoded {
            chars: vec![at("a", 1), at("b", 4), at("c", 7), at("d", 10)],
            confidence: 1.0,
        };
        assert_eq!(even.text(), "abcd");
    }

    #[test]
    fn the_charset_ends_in_a_space() {
        let s = set();
        assert_eq!(s.len(), 5);
        assert_eq!(s[0], "blank");
        assert_eq!(s[4], " ");
    }

    #[test]
    fn a_crop_follows_the_line_and_has_the_model_height() {
        // A page with one dark horizontal bar; the crop of its rectangle is dark throughout.
        let (w, h) = (200, 100);
        let mut pixels = vec![255u8; w * h];
        for y in 40..60 {
            for x in 20..180 {
                pixels[y * w + x] = 0;
            }
        }
        let page = Gray {
            width: w,
            height: h,
            pixels,
        };
        let rect = RotatedRect {
            center: super::super::geometry::Point::new(100.0, 50.0),
            width: 150.0,
            height: 16.0,
            angle: 0.0,
        };
        let strip = crop_line(&page, &rect);
        assert_eq!(strip.height, REC_HEIGHT);
        assert_eq!(strip.width, 450);
        assert!(strip.pixels.iter().all(|&p| p < 10));
    }
}
