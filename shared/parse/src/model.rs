//! The artifact types. They are serialised as versioned JSON (see `ARTIFACT_SCHEMA_VERSION`), so
//! renaming a field or a variant is a schema change.

use serde::{Deserialize, Serialize};

/// Bump when any serialised type below changes shape or meaning.
pub const ARTIFACT_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hint {
    pub file_name: String,
    pub content_type: String,
}

impl Hint {
    pub fn new(file_name: impl Into<String>, content_type: impl Into<String>) -> Self {
        Hint {
            file_name: file_name.into(),
            content_type: content_type.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_pages: u32,
    /// Total bytes inflated from a DOCX archive before it is refused as a zip bomb.
    pub max_decompressed_bytes: u64,
    /// Deepest PDF object nesting (`[`, `<<`) or DOCX XML element nesting accepted.
    pub max_nesting: u32,
    /// Pages of one document that OCR may read; a scan with more is refused.
    pub max_ocr_pages: u32,
    /// Wall-clock milliseconds OCR may spend on one document (the parse stage takes it from the
    /// function's timeout); 0 means no limit.
    pub ocr_budget_ms: u64,
    /// Chunks one document may make ([`crate::chunk_within`]); a document that makes more is
    /// refused. Its chunks are embedded and inserted by one index run, within that function's
    /// timeout.
    pub max_chunks: u32,
}

/// The default of [`Limits::max_chunks`]: 20,000 chunks of at most 256 tokens, about 5 million
/// tokens (some 9 million Chinese characters, a shelf of codes; the Civil Code makes about 1,300).
pub const DEFAULT_MAX_CHUNKS: u32 = 20_000;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pages: 5_000,
            max_decompressed_bytes: 256 * 1024 * 1024,
            max_nesting: 256,
            max_ocr_pages: 50,
            ocr_budget_ms: 0,
            max_chunks: DEFAULT_MAX_CHUNKS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Pdf,
    Docx,
    Html,
    Markdown,
    Text,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Html => "html",
            Format::Markdown => "markdown",
            Format::Text => "text",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    Title,
    Heading,
    Paragraph,
    ListItem,
    Table,
    Code,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutBlock {
    pub id: String,
    /// 1-based; formats without pages put everything on page 1.
    pub page: u32,
    pub order: u32,
    pub kind: BlockKind,
    /// Only explicit levels (Markdown `#`, DOCX heading styles, HTML h1–h6, PDF outline depth).
    pub heading_level: Option<u8>,
    pub text: String,
    /// `[left, bottom, right, top]` in PDF points, from pdfium's text segments or OCR's boxes.
    pub bbox: Option<[f32; 4]>,
    /// The recogniser's mean confidence, on blocks read by OCR only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
}

/// One row of `structure_nodes(unique_id, page, idx, level, title, type, sub_type)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructureNode {
    pub unique_id: String,
    pub page: i32,
    pub idx: i32,
    pub level: i32,
    pub title: String,
    /// `heading` or `article`.
    pub node_type: String,
    /// `part` (编), `chapter` (章), `section` (节), `article` (条), `numbered`, `cn_enum` (一、),
    /// `cn_paren` (（一）) or `explicit` (a styled heading with no recognised numbering).
    pub sub_type: String,
    pub parent_idx: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SemanticBlock {
    pub semantic_id: String,
    /// `article`, `section_text`, `table` or `preamble`.
    pub block_type: String,
    pub page_start: u32,
    pub page_end: u32,
    pub section_path: Vec<String>,
    pub section_level: i32,
    pub section_title: String,
    pub source_ids: Vec<String>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedDocument {
    pub format: Format,
    pub parser_name: String,
    pub page_count: u32,
    pub layouts: Vec<LayoutBlock>,
    pub structure_nodes: Vec<StructureNode>,
    pub semantic_blocks: Vec<SemanticBlock>,
    pub warnings: Vec<String>,
    /// What OCR did, when any page was read by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr: Option<OcrReport>,
}

/// What OCR did to one document: recorded with its run and shown by `GET /documents/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OcrReport {
    /// The pages OCR read (1-based): those without a usable text layer.
    pub pages: Vec<u32>,
    /// Of those, the pages that had a text layer, and it was glyph garbage.
    pub garbled_text_pages: Vec<u32>,
    #[serde(flatten)]
    pub engine: crate::ocr::EngineInfo,
    /// The resolution pages were rendered at for the recogniser.
    pub dpi: u32,
    /// Mean line confidence over every page read, weighted by characters.
    pub mean_confidence: f32,
    /// Pages whose confidence fell below `min_page_confidence`: flagged, and not indexed.
    pub low_confidence_pages: Vec<u32>,
    pub min_page_confidence: f32,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkConfig {
    pub max_tokens: u32,
    pub overlap_tokens: u32,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            max_tokens: 256,
            overlap_tokens: 32,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorChunk {
    pub chunk_key: String,
    /// Position within its semantic block (0-based).
    pub chunk_index: u32,
    pub semantic_id: String,
    pub section_path: Vec<String>,
    pub section_title: String,
    pub page_start: u32,
    pub page_end: u32,
    /// Offsets into the semantic block's `text`, in chars; `text` is exactly that slice.
    pub char_start: u32,
    pub char_end: u32,
    pub text: String,
    pub token_estimate: u32,
}

/// `prefix` and then `n` zero-padded to `width` digits, appended to `out`: the ids every artifact
/// carries (`L000001`, `S00001`, `N00001`, the chunk keys). By hand rather than with `format!`,
/// which was a tenth of the Markdown set's parse time.
pub(crate) fn push_padded(out: &mut String, prefix: &str, n: usize, width: usize) {
    out.push_str(prefix);
    let mut digits = [0u8; 20];
    let mut len = 0;
    let mut rest = n;
    loop {
        digits[len] = b'0' + (rest % 10) as u8;
        len += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for _ in len..width {
        out.push('0');
    }
    out.extend(digits[..len].iter().rev().map(|&d| char::from(d)));
}

/// `n` with a comma between thousands: "31,000".
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// Page numbers for a message: "page 3", "pages 1, 2 and 5"; past ten, the first ten and how
/// many more, so a message stays short whatever the document.
pub(crate) fn page_list(pages: &[u32]) -> String {
    const SHOWN: usize = 10;
    let listed: Vec<String> = pages.iter().take(SHOWN).map(u32::to_string).collect();
    match pages.len() {
        0 => "no page".into(),
        1 => format!("page {}", listed[0]),
        n if n <= SHOWN => format!("pages {} and {}", listed[..n - 1].join(", "), listed[n - 1]),
        n => format!(
            "pages {} and {} more",
            listed.join(", "),
            thousands((n - SHOWN) as u64)
        ),
    }
}

pub(crate) fn padded_id(prefix: &str, n: usize, width: usize) -> String {
    let mut id = String::with_capacity(prefix.len() + width.max(20));
    push_padded(&mut id, prefix, n, width);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_page_lists_read_as_words() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(31_000), "31,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(page_list(&[3]), "page 3");
        assert_eq!(page_list(&[1, 2, 5]), "pages 1, 2 and 5");
        let many: Vec<u32> = (1..=5000).collect();
        assert_eq!(
            page_list(&many),
            "pages 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 4,990 more"
        );
    }

    #[test]
    fn padded_ids_match_format() {
        for n in [0usize, 1, 9, 10, 99_999, 100_000, 1_234_567, usize::MAX] {
            assert_eq!(padded_id("L", n, 6), format!("L{n:06}"));
            assert_eq!(padded_id("S", n, 5), format!("S{n:05}"));
            let mut key = String::from("S00001");
            push_padded(&mut key, "-", n, 4);
            assert_eq!(key, format!("S00001-{n:04}"));
        }
    }
}
