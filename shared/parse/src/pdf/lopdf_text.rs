//! The text layer read with lopdf, for when pdfium is missing or cannot read the file.

use super::scanned::Scans;
use super::{assemble, too_many_pages, Line, PageText};
use crate::error::ParseError;
use crate::model::Limits;
use crate::normalize::{is_invisible, undo_letter_spacing};
use crate::quality::garbage_ratio;
use crate::raw::RawDoc;

pub(super) fn parse_with_lopdf(
    bytes: &[u8],
    limits: &Limits,
    why: &str,
) -> Result<RawDoc, ParseError> {
    let mut doc = lopdf::Document::load_mem(bytes)
        .map_err(|e| ParseError::Corrupt(format!("{why}; lopdf: {e}")))?;
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(ParseError::Encrypted);
    }
    let page_ids = doc.get_pages();
    if page_ids.is_empty() {
        return Err(ParseError::Corrupt(format!("{why}; lopdf: no pages")));
    }
    let page_count = page_ids.len() as u32;
    if page_count > limits.max_pages {
        return Err(too_many_pages(page_count, limits));
    }
    let mut pages = Vec::with_capacity(page_ids.len());
    let mut undecodable = Vec::new();
    for (&n, &id) in &page_ids {
        let damaged = doc.get_page_contents(id).iter().any(|&cid| {
            doc.get_object(cid)
                .and_then(|o| o.as_stream())
                .map(|st| {
                    st.decompressed_content().is_err()
                        && st.filters().map(|f| !f.is_empty()).unwrap_or(false)
                })
                .unwrap_or(true)
        });
        if damaged {
            undecodable.push(n);
        }
        let text = doc.extract_text(&[n]).unwrap_or_default();
        let raw = text.clone();
        let lines: Vec<Line> = text
            .lines()
            .map(|l| {
                let cleaned: String = l.chars().filter(|c| !is_invisible(*c)).collect();
                undo_letter_spacing(cleaned.trim())
            })
            .filter(|l| !l.is_empty())
            .map(|text| Line {
                text,
                bbox: None,
                hyphenated: false,
                confidence: None,
            })
            .collect();
        let chars = lines.iter().map(|l| l.text.chars().count()).sum();
        pages.push(PageText {
            lines,
            garbage: garbage_ratio(&raw),
            chars,
            has_objects: false,
            ocr_confidence: None,
        });
    }
    if pages.iter().all(|p| p.chars == 0) {
        if !undecodable.is_empty() {
            return Err(ParseError::Corrupt(format!(
                "{why}; the content streams of {} cannot be decoded",
                crate::model::page_list(&undecodable)
            )));
        }
        return Err(ParseError::Corrupt(format!(
            "{why}; lopdf: no text in {page_count} page(s)"
        )));
    }
    assemble(pages, &[], "lopdf", Scans::NoneNeeded)
}
