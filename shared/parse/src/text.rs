//! Plain text: encoding detection and paragraph splitting.

use encoding_rs::Encoding;

use crate::error::ParseError;
use crate::model::BlockKind;
use crate::normalize::{is_space, strip_invisible};
use crate::raw::{RawBlock, RawDoc};
use crate::structure::starts_unit;

/// Decodes bytes to text: a BOM wins, then valid UTF-8, then chardetng's guess. GBK is decoded
/// with encoding_rs's GBK decoder, which is the GB18030 decoder and so also takes the 4-byte
/// sequences.
pub fn decode(bytes: &[u8]) -> (String, &'static str) {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        let (text, _) = enc.decode_without_bom_handling(&bytes[bom_len..]);
        return (text.into_owned(), enc.name());
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        return (s.to_string(), "UTF-8");
    }
    let mut det = chardetng::EncodingDetector::new();
    det.feed(bytes, true);
    let enc = det.guess(None, false);
    let (text, _, _) = enc.decode(bytes);
    (text.into_owned(), enc.name())
}

pub(crate) fn parser_suffix(encoding: &str) -> String {
    encoding.to_ascii_lowercase().replace('_', "-")
}

/// Share of characters that are U+FFFD after decoding; a high share means the guess was wrong
/// or the bytes are not text.
pub(crate) fn replacement_ratio(text: &str) -> f32 {
    let total = text.chars().filter(|c| !c.is_whitespace()).count();
    if total == 0 {
        return 0.0;
    }
    text.chars().filter(|&c| c == '\u{FFFD}').count() as f32 / total as f32
}

pub fn parse(bytes: &[u8]) -> Result<RawDoc, ParseError> {
    let (text, encoding) = decode(bytes);
    let ratio = replacement_ratio(&text);
    if ratio > 0.05 {
        return Err(ParseError::GarbledText {
            pages: vec![1],
            ratio,
        });
    }
    let blocks = split_paragraphs(&text)
        .into_iter()
        .map(|t| RawBlock::new(1, BlockKind::Paragraph, t))
        .collect();
    Ok(RawDoc {
        parser_name: format!("text-{}", parser_suffix(encoding)),
        page_count: 1,
        blocks,
        warnings: Vec::new(),
        ocr: None,
    })
}

/// Blank lines separate paragraphs; a line that starts a structural unit (第X条, 第X章, 1.1 …)
/// also starts a new one, since plain text often puts articles on consecutive lines.
pub(crate) fn split_paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        let cleaned;
        let line = if raw.chars().any(crate::normalize::is_invisible) {
            cleaned = strip_invisible(raw);
            cleaned.trim_matches(is_space)
        } else {
            raw.trim_matches(is_space)
        };
        if !current.is_empty() && (line.is_empty() || starts_unit(line)) {
            out.push(std::mem::take(&mut current));
        }
        if line.is_empty() {
            continue;
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(line);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
