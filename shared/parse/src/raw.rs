//! What each format parser hands to the shared structure stage.

use crate::model::BlockKind;

#[derive(Debug, Clone)]
pub(crate) struct RawBlock {
    pub page: u32,
    pub kind: BlockKind,
    pub heading_level: Option<u8>,
    pub text: String,
    pub bbox: Option<[f32; 4]>,
    pub confidence: Option<f32>,
}

impl RawBlock {
    pub fn new(page: u32, kind: BlockKind, text: String) -> Self {
        RawBlock {
            page,
            kind,
            heading_level: None,
            text,
            bbox: None,
            confidence: None,
        }
    }

    pub fn heading(page: u32, level: u8, text: String) -> Self {
        RawBlock {
            page,
            kind: BlockKind::Heading,
            heading_level: Some(level),
            text,
            bbox: None,
            confidence: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct RawDoc {
    pub parser_name: String,
    pub page_count: u32,
    pub blocks: Vec<RawBlock>,
    pub warnings: Vec<String>,
    pub ocr: Option<crate::model::OcrReport>,
}
