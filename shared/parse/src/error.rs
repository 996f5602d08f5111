//! Parse failures. Every one of them is permanent: the input itself is bad, so retrying the same
//! bytes can never succeed and the pipeline should dead-letter the document with this message.

use serde::{Deserialize, Serialize};

use crate::model::page_list;

#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParseError {
    #[error("the document is empty: no bytes, or no content on any page")]
    Empty,
    #[error("unsupported format: found {found}")]
    Unsupported { found: String },
    #[error("format mismatch: the name or content type says {claimed}, but the bytes are {found}")]
    Mismatch { claimed: String, found: String },
    #[error("corrupt document: {0}")]
    Corrupt(String),
    #[error("the document is encrypted (password protected); no password is configured")]
    Encrypted,
    #[error("no text layer on any of {pages} page(s) (a scanned document), and OCR not available: {ocr}")]
    NoTextLayer { pages: u32, ocr: String },
    #[error("OCR read {} with too little confidence (mean {confidence:.2}, threshold {threshold:.2}): nothing was indexed", page_list(pages))]
    LowOcrConfidence {
        pages: Vec<u32>,
        confidence: f32,
        threshold: f32,
    },
    #[error("the text layer is glyph garbage (share of garbage {ratio:.2}) on {}: fonts without a usable Unicode mapping; nothing was indexed", page_list(pages))]
    GarbledText { pages: Vec<u32>, ratio: f32 },
    #[error("document too large: {0}")]
    TooLarge(String),
    #[error("a parser library panicked: {0}")]
    ParserPanic(String),
}

impl ParseError {
    /// Stable machine codes, for metrics and the documents table; the messages may change.
    pub fn kind(&self) -> &'static str {
        match self {
            ParseError::Empty => "empty",
            ParseError::Unsupported { .. } => "unsupported",
            ParseError::Mismatch { .. } => "mismatch",
            ParseError::Corrupt(_) => "corrupt",
            ParseError::Encrypted => "encrypted",
            ParseError::NoTextLayer { .. } => "no_text_layer",
            ParseError::LowOcrConfidence { .. } => "low_ocr_confidence",
            ParseError::GarbledText { .. } => "garbled_text",
            ParseError::TooLarge(_) => "too_large",
            ParseError::ParserPanic(_) => "parser_panic",
        }
    }

    /// Always true: kept as a method so callers do not hard-code the policy.
    pub fn is_permanent(&self) -> bool {
        true
    }
}
