//! PDF: pdfium (bound at run time from `DOCPIPE_PDFIUM_LIB`, default the Lambda layer path) for
//! the text layer, page by page, with line boxes; lopdf when pdfium is missing or cannot read
//! the file. Before either sees the bytes, a linear scan refuses nesting bombs.

use pdfium_render::prelude::*;

use crate::error::ParseError;
use crate::model::{BlockKind, Limits, OcrReport};
use crate::normalize::{is_cjk, is_invisible, undo_letter_spacing};
use crate::ocr::Confidence;
use crate::quality::{garbage_ratio, GARBLED_PAGE_RATIO};
use crate::raw::{RawBlock, RawDoc};
use crate::structure::{recognise, starts_strong_unit, Kind};

mod fonts;
mod library;
mod lopdf_text;
mod scanned;

pub use library::{
    pdfium_library_path, pdfium_status, process_pdfium, PDFIUM_DEFAULT_PATH, PDFIUM_ENV,
};
pub use scanned::{MAX_OCR_PIXELS, MIN_OCR_DPI, OCR_DPI};

use library::pdfium;
pub(crate) use library::pdfium_reason;
use lopdf_text::parse_with_lopdf;
use scanned::Scans;

/// Deepest `[`/`<<` nesting outside strings, comments and stream data. lopdf and pdfium both cap
/// their own recursion, but a refusal here is cheaper and gives a clear reason.
pub(crate) fn nesting_depth(bytes: &[u8]) -> u32 {
    let mut depth: u32 = 0;
    let mut max: u32 = 0;
    let mut i = 0;
    let n = bytes.len();
    while i < n {
        match bytes[i] {
            b'%' => {
                while i < n && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
            }
            b'(' => {
                let mut level = 0u32;
                while i < n {
                    match bytes[i] {
                        b'\\' => i += 1,
                        b'(' => level += 1,
                        b')' => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' => depth = depth.saturating_sub(1),
            b'<' if bytes.get(i + 1) == Some(&b'<') => {
                depth += 1;
                max = max.max(depth);
                i += 1;
            }
            b'<' => {
                while i < n && bytes[i] != b'>' {
                    i += 1;
                }
            }
            b'>' if bytes.get(i + 1) == Some(&b'>') => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b's' if bytes[i..].starts_with(b"stream") && !bytes[..i].ends_with(b"end") => {
                // Stream data is binary; resume at its end marker.
                match find(&bytes[i + 6..], b"endstream") {
                    Some(off) => i += 6 + off + 9,
                    None => break,
                }
                continue;
            }
            b'e' if bytes[i..].starts_with(b"endobj") => {
                // Objects are independent: a miscount cannot leak into the next one.
                depth = 0;
                i += 6;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    max
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr_find(hay, needle)
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut start = 0;
    while let Some(pos) = hay[start..].iter().position(|&b| b == first) {
        let at = start + pos;
        if hay[at..].starts_with(needle) {
            return Some(at);
        }
        start = at + 1;
    }
    None
}

/// One line of page text.
#[derive(Debug, Clone)]
struct Line {
    text: String,
    bbox: Option<[f32; 4]>,
    /// The line ended in a soft hyphen: join without a space.
    hyphenated: bool,
    /// OCR's confidence, on lines it read.
    confidence: Option<f32>,
}

struct PageText {
    lines: Vec<Line>,
    /// The share of glyph garbage in the page's text before clean-up (so that replacement
    /// characters still count), measured once for both the OCR and the indexing decision.
    garbage: f32,
    /// Characters before any filtering, for the "no text layer" decision.
    chars: usize,
    has_objects: bool,
    /// The page was read by OCR, with this confidence.
    ocr_confidence: Option<f32>,
}

pub fn parse(bytes: &[u8], limits: &Limits) -> Result<RawDoc, ParseError> {
    let depth = nesting_depth(bytes);
    if depth > limits.max_nesting {
        return Err(ParseError::TooLarge(format!(
            "PDF objects nested {depth} deep (limit {}): a nesting bomb",
            limits.max_nesting
        )));
    }
    match pdfium() {
        Ok(p) => match parse_with_pdfium(p, bytes, limits) {
            Ok(r) => r,
            Err(Fallback::Unreadable(reason)) => parse_with_lopdf(bytes, limits, &reason),
            Err(Fallback::NoContent) => {
                // pdfium opened the file but found nothing on any page: either it is blank, or
                // its content streams are damaged beyond pdfium's tolerance. lopdf decides which.
                match parse_with_lopdf(bytes, limits, "pdfium found no page content") {
                    Ok(mut doc) => {
                        doc.warnings
                            .push("pdfium found no page content; text recovered with lopdf".into());
                        Ok(doc)
                    }
                    Err(ParseError::Corrupt(why)) if why.contains("cannot be decoded") => {
                        Err(ParseError::Corrupt(why))
                    }
                    Err(_) => Err(ParseError::Empty),
                }
            }
        },
        Err(why) => {
            let mut doc = parse_with_lopdf(bytes, limits, &format!("pdfium unavailable ({why})"))?;
            doc.warnings
                .push(format!("pdfium unavailable, parsed with lopdf: {why}"));
            Ok(doc)
        }
    }
}

enum Fallback {
    /// pdfium could not open the file.
    Unreadable(String),
    /// pdfium opened it, but no page has any content object.
    NoContent,
}

fn parse_with_pdfium(
    pdfium: &Pdfium,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Result<RawDoc, ParseError>, Fallback> {
    let doc = match pdfium.load_pdf_from_byte_slice(bytes, None) {
        Ok(d) => d,
        Err(PdfiumError::PdfiumLibraryInternalError(e)) => {
            return match e {
                PdfiumInternalError::PasswordError | PdfiumInternalError::SecurityError => {
                    Ok(Err(ParseError::Encrypted))
                }
                other => Err(Fallback::Unreadable(pdfium_reason(
                    &PdfiumError::PdfiumLibraryInternalError(other),
                ))),
            }
        }
        Err(e) => return Err(Fallback::Unreadable(pdfium_reason(&e))),
    };
    let page_count = doc.pages().len() as u32;
    if page_count == 0 {
        return Err(Fallback::Unreadable("pdfium found no pages".into()));
    }
    if page_count > limits.max_pages {
        return Ok(Err(too_many_pages(page_count, limits)));
    }
    let outline = outline(&doc);
    let mut pages = Vec::with_capacity(page_count as usize);
    for page in doc.pages().iter() {
        pages.push(page_text(&page));
    }
    if pages.iter().all(|p| p.chars == 0 && !p.has_objects) {
        return Err(Fallback::NoContent);
    }
    let (scans, notes) = match scanned::read_scans(&doc, &mut pages, limits) {
        Ok(read) => read,
        Err(e) => return Ok(Err(e)),
    };
    Ok(assemble(pages, &outline, "pdfium", scans).map(|mut doc| {
        doc.warnings.extend(notes);
        doc
    }))
}

fn too_many_pages(pages: u32, limits: &Limits) -> ParseError {
    ParseError::TooLarge(format!("{pages} pages (limit {})", limits.max_pages))
}

fn page_text(page: &PdfPage) -> PageText {
    let has_objects = !page.objects().is_empty();
    let Ok(text) = page.text() else {
        return PageText {
            lines: Vec::new(),
            garbage: 0.0,
            chars: 0,
            has_objects,
            ocr_confidence: None,
        };
    };
    let chars = text.chars();
    let count = chars.len();
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut first: Option<usize> = None;
    let mut last: Option<usize> = None;
    let mut visible = 0usize;
    let mut raw = String::new();
    let finish =
        |cur: &mut String, first: Option<usize>, last: Option<usize>, lines: &mut Vec<Line>| {
            let bbox = match (first, last) {
                (Some(a), Some(b)) => line_box(&chars, a, b),
                _ => None,
            };
            let hyphenated = cur.ends_with('\u{2}');
            let cleaned: String = cur.chars().filter(|c| !is_invisible(*c)).collect();
            let cleaned = undo_letter_spacing(cleaned.trim());
            if !cleaned.is_empty() {
                lines.push(Line {
                    text: cleaned,
                    bbox,
                    hyphenated,
                    confidence: None,
                });
            }
            cur.clear();
        };
    for i in 0..count {
        let Ok(ch) = chars.get(i) else { continue };
        let Some(c) = ch.unicode_char() else { continue };
        raw.push(c);
        match c {
            '\r' => {}
            '\n' => {
                finish(&mut cur, first, last, &mut lines);
                first = None;
                last = None;
            }
            c => {
                cur.push(c);
                if !c.is_whitespace() && c != '\u{2}' {
                    visible += 1;
                    first.get_or_insert(i);
                    last = Some(i);
                }
            }
        }
    }
    finish(&mut cur, first, last, &mut lines);
    PageText {
        lines,
        garbage: garbage_ratio(&raw),
        chars: visible,
        has_objects,
        ocr_confidence: None,
    }
}

/// Tight glyph boxes, except where a font reports flat ones (some Type 3 and re-written fonts):
/// then the loose box, which spans the font's ascent and descent.
fn char_box(chars: &PdfPageTextChars, i: usize) -> Option<PdfRect> {
    let ch = chars.get(i).ok()?;
    let tight = ch.tight_bounds().ok()?;
    if tight.top().value - tight.bottom().value >= 1.0 {
        return Some(tight);
    }
    ch.loose_bounds().ok()
}

fn line_box(chars: &PdfPageTextChars, a: usize, b: usize) -> Option<[f32; 4]> {
    let ra = char_box(chars, a)?;
    let rb = char_box(chars, b)?;
    Some([
        ra.left().value.min(rb.left().value),
        ra.bottom().value.min(rb.bottom().value),
        ra.right().value.max(rb.right().value),
        ra.top().value.max(rb.top().value),
    ])
}

struct OutlineEntry {
    key: String,
    level: u8,
}

/// The most outline entries read, titled or not: far more than any document's table of contents.
const MAX_OUTLINE_ENTRIES: usize = 10_000;

fn outline(doc: &PdfDocument) -> Vec<OutlineEntry> {
    let mut out = Vec::new();
    let Some(root) = doc.bookmarks().root() else {
        return out;
    };
    // Iterative depth-first walk: a hostile outline can be arbitrarily deep or long, and its
    // /First and /Next links can form a cycle. An entry is visited once (pdfium gives one handle
    // per outline dictionary, which is what a bookmark compares and hashes by), and the walk
    // stops after MAX_OUTLINE_ENTRIES visits whether or not the entries have titles.
    let mut visited = std::collections::HashSet::new();
    let mut stack = vec![(root, 1u8)];
    while let Some((bm, level)) = stack.pop() {
        if visited.len() >= MAX_OUTLINE_ENTRIES {
            break;
        }
        if visited.contains(&bm) {
            continue;
        }
        if let Some(t) = bm.title() {
            let key = key(&t);
            if !key.is_empty() {
                out.push(OutlineEntry { key, level });
            }
        }
        let sibling = bm.next_sibling();
        let child = bm.first_child();
        visited.insert(bm);
        if let Some(sib) = sibling.filter(|s| !visited.contains(s)) {
            stack.push((sib, level));
        }
        if let Some(child) = child.filter(|c| !visited.contains(c)) {
            stack.push((child, level.saturating_add(1).min(9)));
        }
    }
    out
}

/// Whitespace-free form for comparing outline titles with page lines.
fn key(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && !is_invisible(*c) && *c != '\u{3000}')
        .collect()
}

fn is_page_number(line: &str) -> bool {
    let t: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    if t.is_empty() || t.chars().count() > 12 {
        return false;
    }
    let core = t.trim_matches(|c| matches!(c, '-' | '—' | '–' | '·'));
    (core.chars().all(|c| c.is_ascii_digit()) && !core.is_empty())
        || (core.starts_with('第') && core.ends_with('页'))
        || core.split_once('/').is_some_and(|(a, b)| {
            a.chars().all(|c| c.is_ascii_digit()) && b.chars().all(|c| c.is_ascii_digit())
        })
}

/// Turns per-page lines into layout blocks, checks the text layer, and reports what was skipped.
fn assemble(
    pages: Vec<PageText>,
    outline: &[OutlineEntry],
    engine: &str,
    scans: Scans,
) -> Result<RawDoc, ParseError> {
    let page_count = pages.len() as u32;
    let mut sorted = SortedPages::sort(pages, outline);
    let (mut ocr, unavailable) = match scans {
        Scans::NoneNeeded => (None, None),
        Scans::Unavailable { pages, why } => (None, Some((pages, why))),
        Scans::Read(report) => (Some(report), None),
    };
    // The one decision of which pages are too doubtful to index is the sort's above; the report
    // records it.
    if let Some(report) = &mut ocr {
        report.low_confidence_pages = sorted.doubtful.iter().map(|d| d.0).collect();
    }
    if sorted.blocks.is_empty() {
        return Err(sorted.nothing_indexed(page_count, ocr.as_ref(), unavailable.as_ref()));
    }
    let warnings = sorted.skipped_page_warnings(unavailable.as_ref());
    let engine = match &ocr {
        Some(_) => format!("{engine}+ocr-ppocrv4"),
        None => engine.to_string(),
    };
    Ok(RawDoc {
        parser_name: engine,
        page_count,
        blocks: sorted.blocks,
        warnings,
        ocr,
    })
}

/// The pages' blocks, and the pages left out of them with the reason each was left out.
struct SortedPages {
    blocks: Vec<RawBlock>,
    empty_pages: Vec<u32>,
    garbled: Vec<u32>,
    garbled_ratio: f32,
    /// OCR pages read with too little confidence to index: (page, confidence).
    doubtful: Vec<(u32, f32)>,
    any_objects: bool,
}

impl SortedPages {
    /// Decides for each page whether its text is indexed, and turns the indexed ones into blocks.
    fn sort(pages: Vec<PageText>, outline: &[OutlineEntry]) -> Self {
        let mut sorted = SortedPages {
            blocks: Vec::new(),
            empty_pages: Vec::new(),
            garbled: Vec::new(),
            garbled_ratio: 0f32,
            doubtful: Vec::new(),
            any_objects: false,
        };
        let mut next_outline = 0usize;
        for (i, page) in pages.into_iter().enumerate() {
            let pno = i as u32 + 1;
            sorted.any_objects |= page.has_objects;
            if page.chars == 0 {
                sorted.empty_pages.push(pno);
                continue;
            }
            if let Some(confidence) = page.ocr_confidence {
                if confidence < scanned::MIN_PAGE_CONFIDENCE {
                    sorted.doubtful.push((pno, confidence));
                    continue;
                }
            } else if page.garbage > GARBLED_PAGE_RATIO {
                sorted.garbled.push(pno);
                sorted.garbled_ratio = sorted.garbled_ratio.max(page.garbage);
                continue;
            }
            paragraphs(
                pno,
                page.lines,
                outline,
                &mut next_outline,
                &mut sorted.blocks,
            );
        }
        sorted
    }

    /// Why a document with no indexable page failed, most specific reason first.
    fn nothing_indexed(
        self,
        page_count: u32,
        ocr: Option<&OcrReport>,
        unavailable: Option<&(Vec<u32>, String)>,
    ) -> ParseError {
        if let Some(report) = ocr {
            if !self.doubtful.is_empty() {
                return ParseError::LowOcrConfidence {
                    pages: self.doubtful.iter().map(|d| d.0).collect(),
                    confidence: report.mean_confidence,
                    threshold: scanned::MIN_PAGE_CONFIDENCE,
                };
            }
        }
        if let Some((pages, why)) = unavailable {
            return ParseError::NoTextLayer {
                pages: pages.len() as u32,
                ocr: why.clone(),
            };
        }
        if !self.garbled.is_empty() {
            return ParseError::GarbledText {
                pages: self.garbled,
                ratio: self.garbled_ratio,
            };
        }
        if self.any_objects {
            return ParseError::NoTextLayer {
                pages: page_count,
                ocr: "no page needed it".into(),
            };
        }
        ParseError::Empty
    }

    /// One warning per reason some pages were left out of an otherwise readable document.
    fn skipped_page_warnings(&mut self, unavailable: Option<&(Vec<u32>, String)>) -> Vec<String> {
        let mut warnings = Vec::new();
        let (garbled, garbled_ratio) = (&self.garbled, self.garbled_ratio);
        if !garbled.is_empty() {
            warnings.push(format!(
                "pages {garbled:?}: text layer is glyph garbage (share {garbled_ratio:.2}), not indexed"
            ));
        }
        if !self.doubtful.is_empty() {
            let listed: Vec<String> = self
                .doubtful
                .iter()
                .map(|(p, c)| format!("{p} ({c:.2})"))
                .collect();
            warnings.push(format!(
                "pages {}: OCR confidence below {:.2}, flagged and not indexed",
                listed.join(", "),
                scanned::MIN_PAGE_CONFIDENCE
            ));
        }
        if let Some((pages, why)) = unavailable {
            warnings.push(format!(
                "pages {pages:?}: no usable text layer, and OCR not available ({why}); not indexed"
            ));
            self.empty_pages.retain(|p| !pages.contains(p));
        }
        let empty_pages = &self.empty_pages;
        if !empty_pages.is_empty() {
            warnings.push(format!(
                "pages {empty_pages:?}: no text layer (scanned or blank), not indexed"
            ));
        }
        warnings
    }
}

fn join_lines(acc: &mut String, prev_hyphenated: bool, next: &str) {
    if acc.is_empty() {
        acc.push_str(next);
        return;
    }
    let last = acc.chars().last().unwrap_or(' ');
    let first = next.chars().next().unwrap_or(' ');
    if !(prev_hyphenated || is_cjk(last) || is_cjk(first)) {
        acc.push(' ');
    }
    acc.push_str(next);
}

/// A heading line (outline entry, or 编/章/节/numbered heading recognised in the text).
fn heading_line(text: &str) -> bool {
    matches!(
        recognise(text, false).map(|m| m.kind),
        Some(Kind::Part | Kind::Chapter | Kind::Section | Kind::Numbered(_))
    )
}

fn paragraphs(
    page: u32,
    mut lines: Vec<Line>,
    outline: &[OutlineEntry],
    next_outline: &mut usize,
    out: &mut Vec<RawBlock>,
) {
    if lines.first().is_some_and(|l| is_page_number(&l.text)) {
        lines.remove(0);
    }
    if lines.last().is_some_and(|l| is_page_number(&l.text)) {
        lines.pop();
    }
    let (left_min, right_max) = margins(&lines);

    let mut i = 0;
    let mut cur: Option<RawBlock> = None;
    let mut prev: Option<&Line> = None;
    let mut prev_was_heading = false;
    while i < lines.len() {
        // Outline titles may wrap over up to three lines.
        if let Some((level, used)) = match_outline(&lines[i..], outline, next_outline) {
            if let Some(b) = cur.take() {
                out.push(b);
            }
            let mut text = String::new();
            for l in &lines[i..i + used] {
                join_lines(&mut text, false, &l.text);
            }
            let mut block = RawBlock::heading(page, level, text);
            block.bbox = union(lines[i..i + used].iter().filter_map(|l| l.bbox));
            block.confidence = lines[i].confidence;
            out.push(block);
            i += used;
            prev = None;
            prev_was_heading = true;
            continue;
        }
        let line = &lines[i];
        let starts_new = match prev {
            None => true,
            Some(p) => {
                prev_was_heading
                    || starts_strong_unit(&line.text)
                    || paragraph_ended(p, line, right_max, left_min)
            }
        };
        if starts_new {
            if let Some(b) = cur.take() {
                out.push(b);
            }
            let mut b = RawBlock::new(page, BlockKind::Paragraph, line.text.clone());
            b.bbox = line.bbox;
            b.confidence = line.confidence;
            cur = Some(b);
        } else if let Some(b) = cur.as_mut() {
            if let (Some(a), Some(c)) = (b.confidence, line.confidence) {
                let merged = Confidence::of(&b.text, a).and(Confidence::of(&line.text, c));
                b.confidence = merged.mean().or(b.confidence);
            }
            join_lines(&mut b.text, prev.is_some_and(|p| p.hyphenated), &line.text);
            b.bbox = union(b.bbox.into_iter().chain(line.bbox));
        }
        // A heading line, or an article number alone on its line, ends its block.
        prev_was_heading = heading_line(&line.text)
            || recognise(&line.text, false).is_some_and(|m| {
                m.kind == Kind::Article
                    && line.text.chars().filter(|c| !c.is_whitespace()).count() <= 8
            });
        prev = Some(line);
        i += 1;
    }
    if let Some(b) = cur.take() {
        out.push(b);
    }
}

/// The leftmost start and the rightmost end of the page's lines: its text block's margins.
fn margins(lines: &[Line]) -> (f32, f32) {
    let boxes = lines.iter().filter_map(|l| l.bbox);
    boxes.fold((f32::MAX, f32::MIN), |(left, right), b| {
        (left.min(b[0]), right.max(b[2]))
    })
}

fn paragraph_ended(prev: &Line, cur: &Line, right_max: f32, left_min: f32) -> bool {
    match (prev.bbox, cur.bbox) {
        (Some(p), Some(c)) => {
            let h = (p[3] - p[1]).max(c[3] - c[1]).max(1.0);
            // The previous line ended its paragraph if the next line's first word would have
            // fitted in the room left at its end (ragged Latin wrapping leaves big gaps too).
            let visible = cur
                .text
                .chars()
                .filter(|ch| !ch.is_whitespace())
                .count()
                .max(1);
            let char_w = ((c[2] - c[0]) / visible as f32).max(h * 0.4);
            let first_len = match cur.text.chars().next() {
                Some(ch) if is_cjk(ch) => 1,
                _ => cur
                    .text
                    .split_whitespace()
                    .next()
                    .map_or(1, |w| w.chars().count()),
            };
            let short = right_max - p[2] > (first_len as f32 + 1.0) * char_w;
            let gap = p[1] - c[3] > 1.2 * h;
            let indented = c[0] - left_min > 1.5 * h && c[0] > p[0] + 1.5 * h;
            short || gap || indented
        }
        _ => prev.text.ends_with(|c: char| "。！？!?：:".contains(c)),
    }
}

fn match_outline(
    lines: &[Line],
    outline: &[OutlineEntry],
    next: &mut usize,
) -> Option<(u8, usize)> {
    if outline.is_empty() || *next >= outline.len() {
        return None;
    }
    let window = (*next..outline.len().min(*next + 4)).collect::<Vec<_>>();
    let mut joined = String::new();
    for used in 1..=3.min(lines.len()) {
        joined.push_str(&key(&lines[used - 1].text));
        for &k in &window {
            if outline[k].key == joined {
                *next = k + 1;
                return Some((outline[k].level, used));
            }
        }
        if !window.iter().any(|&k| outline[k].key.starts_with(&joined)) {
            break;
        }
    }
    None
}

fn union(mut boxes: impl Iterator<Item = [f32; 4]>) -> Option<[f32; 4]> {
    let first = boxes.next()?;
    Some(boxes.fold(first, |a, b| {
        [
            a[0].min(b[0]),
            a[1].min(b[1]),
            a[2].max(b[2]),
            a[3].max(b[3]),
        ]
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_nesting() {
        assert_eq!(nesting_depth(b"1 0 obj << /A [1 2 [3]] >> endobj"), 3);
        assert_eq!(nesting_depth(b"1 0 obj (((([[[) <abc> endobj"), 0);
        let bomb = format!("1 0 obj {} endobj", "[".repeat(1000));
        assert_eq!(nesting_depth(bomb.as_bytes()), 1000);
        assert_eq!(nesting_depth(b"stream\n[[[[[[\nendstream [ ]"), 1);
    }

    fn ocr_page(text: &str, confidence: f32) -> PageText {
        PageText {
            lines: vec![Line {
                text: text.into(),
                bbox: Some([72.0, 700.0, 500.0, 712.0]),
                hyphenated: false,
                confidence: Some(confidence),
            }],
            garbage: garbage_ratio(text),
            chars: text.chars().count(),
            has_objects: true,
            ocr_confidence: Some(confidence),
        }
    }

    fn report(pages: Vec<u32>) -> Scans {
        Scans::Read(crate::model::OcrReport {
            pages,
            garbled_text_pages: Vec::new(),
            engine: crate::ocr::EngineInfo {
                engine: "PP-OCRv4".into(),
                runtime: "onnxruntime".into(),
                det_model: "det.onnx".into(),
                rec_model: "rec.onnx".into(),
            },
            dpi: scanned::OCR_DPI,
            mean_confidence: 0.7,
            low_confidence_pages: Vec::new(),
            min_page_confidence: scanned::MIN_PAGE_CONFIDENCE,
            duration_ms: 1,
        })
    }

    #[test]
    fn a_page_read_with_low_confidence_is_flagged_and_not_indexed() {
        let pages = vec![
            ocr_page("第一条　本条例适用于本市。", 0.97),
            ocr_page("第二条　口口口口口口", 0.41),
        ];
        let doc = assemble(pages, &[], "pdfium", report(vec![1, 2])).unwrap();
        assert!(doc.blocks.iter().all(|b| b.page == 1), "{:?}", doc.blocks);
        assert_eq!(doc.blocks[0].confidence, Some(0.97));
        assert!(
            doc.warnings
                .iter()
                .any(|w| w.starts_with("pages 2 (0.41): OCR confidence below 0.80")),
            "{:?}",
            doc.warnings
        );
        assert_eq!(doc.ocr.unwrap().low_confidence_pages, vec![2]);
        // With nothing else to index, the document fails and says why.
        let only = vec![ocr_page("口口口", 0.3)];
        let err = assemble(only, &[], "pdfium", report(vec![1])).unwrap_err();
        assert_eq!(err.kind(), "low_ocr_confidence", "{err}");
    }

    /// pdfium-render's `Display` is its pretty `Debug`: "PdfiumLibraryInternalError(\n Unknown,\n)"
    /// reached a run's error message. Its errors read as words.
    #[test]
    fn pdfium_errors_read_as_words() {
        let unknown = PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::Unknown);
        assert!(
            format!("{unknown}").contains('\n'),
            "the library's own text"
        );
        assert_eq!(
            pdfium_reason(&unknown),
            "pdfium reported a failure without a reason"
        );
        assert_eq!(
            pdfium_reason(&PdfiumError::PageIndexOutOfBounds),
            "pdfium: page index out of bounds"
        );
        for e in [
            unknown,
            PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::FormatError),
            PdfiumError::ImageSizeOutOfBounds,
            PdfiumError::IoError(std::io::Error::other("disk gone")),
        ] {
            let words = pdfium_reason(&e);
            assert!(
                !words.contains(['\n', '(', '{']) && !words.contains("Error"),
                "{words}"
            );
        }
    }

    #[test]
    fn page_numbers() {
        assert!(is_page_number("- 3 -"));
        assert!(is_page_number("12"));
        assert!(is_page_number("第 3 页"));
        assert!(!is_page_number("第一条"));
    }
}
