//! Markdown through pulldown-cmark. HTML blocks and comments (`<!-- INFO END -->`) are dropped:
//! they are markup, not content.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::model::BlockKind;
use crate::raw::{RawBlock, RawDoc};
use crate::text::split_paragraphs;

struct Builder {
    blocks: Vec<RawBlock>,
    buf: String,
    kind: BlockKind,
    level: Option<u8>,
}

impl Builder {
    fn flush(&mut self) {
        let text = std::mem::take(&mut self.buf);
        if text.trim().is_empty() {
            return;
        }
        match self.kind {
            BlockKind::Heading | BlockKind::Title => {
                let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
                self.blocks
                    .push(RawBlock::heading(1, self.level.unwrap_or(1), joined));
            }
            BlockKind::Paragraph => {
                // Laws put one article per line with no blank line between: split there.
                for p in split_paragraphs(&text) {
                    self.blocks.push(RawBlock::new(1, BlockKind::Paragraph, p));
                }
            }
            kind => self
                .blocks
                .push(RawBlock::new(1, kind, text.trim().to_string())),
        }
        self.kind = BlockKind::Paragraph;
        self.level = None;
    }
}

pub fn parse(text: &str) -> RawDoc {
    let mut b = Builder {
        blocks: Vec::new(),
        buf: String::new(),
        kind: BlockKind::Paragraph,
        level: None,
    };
    let mut list_depth = 0usize;
    let mut table: Option<Vec<Vec<String>>> = None;
    let mut cell = String::new();
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(text, opts) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                b.flush();
                b.kind = BlockKind::Heading;
                b.level = Some(level as u8);
            }
            Event::End(TagEnd::Heading(_)) => b.flush(),
            Event::Start(Tag::Paragraph) if list_depth == 0 && table.is_none() => {
                b.flush();
                b.kind = BlockKind::Paragraph;
            }
            Event::End(TagEnd::Paragraph) => {
                if list_depth == 0 {
                    b.flush();
                } else {
                    b.buf.push('\n');
                }
            }
            Event::Start(Tag::Item) => {
                b.flush();
                list_depth += 1;
                b.kind = BlockKind::ListItem;
            }
            Event::End(TagEnd::Item) => {
                b.flush();
                list_depth = list_depth.saturating_sub(1);
                if list_depth > 0 {
                    b.kind = BlockKind::ListItem;
                }
            }
            Event::Start(Tag::CodeBlock(_)) => {
                b.flush();
                b.kind = BlockKind::Code;
            }
            Event::End(TagEnd::CodeBlock) => b.flush(),
            Event::Start(Tag::Table(_)) => {
                b.flush();
                table = Some(Vec::new());
            }
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => {
                if let Some(t) = table.as_mut() {
                    t.push(Vec::new());
                }
            }
            Event::Start(Tag::TableCell) => cell.clear(),
            Event::End(TagEnd::TableCell) => {
                if let Some(row) = table.as_mut().and_then(|t| t.last_mut()) {
                    row.push(cell.trim().to_string());
                }
                cell.clear();
            }
            Event::End(TagEnd::Table) => {
                if let Some(rows) = table.take() {
                    let text = rows
                        .iter()
                        .filter(|r| !r.is_empty())
                        .map(|r| r.join(" | "))
                        .collect::<Vec<_>>()
                        .join("\n");
                    b.blocks.push(RawBlock::new(1, BlockKind::Table, text));
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if table.is_some() {
                    cell.push_str(&t);
                } else {
                    b.buf.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if table.is_some() {
                    cell.push(' ');
                } else {
                    b.buf.push('\n');
                }
            }
            Event::Rule => b.flush(),
            // HTML blocks, inline HTML and comments carry no text of their own here.
            _ => {}
        }
    }
    b.flush();
    RawDoc {
        parser_name: "markdown-pulldown".into(),
        page_count: 1,
        blocks: b.blocks,
        warnings: Vec::new(),
        ocr: None,
    }
}
