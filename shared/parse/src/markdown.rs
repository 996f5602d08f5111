//! Markdown through pulldown-cmark. HTML blocks and comments (`<!-- INFO END -->`) are dropped:
//! they are markup, not content.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::model::BlockKind;
use crate::raw::{RawBlock, RawDoc};
use crate::text::split_paragraphs;

/// The block being gathered, and the list and table it sits in.
struct Builder {
    blocks: Vec<RawBlock>,
    buf: String,
    kind: BlockKind,
    level: Option<u8>,
    list_depth: usize,
    table: Option<Vec<Vec<String>>>,
    cell: String,
}

impl Builder {
    /// Ends the gathered block: a heading is one line, a paragraph is split where articles start.
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

    /// Decides which opening tags end the block gathered so far and what kind the next one is.
    fn start(&mut self, tag: Tag) {
        match tag {
            Tag::Heading { level, .. } => {
                self.flush();
                self.kind = BlockKind::Heading;
                self.level = Some(level as u8);
            }
            Tag::Paragraph if self.list_depth == 0 && self.table.is_none() => {
                self.flush();
                self.kind = BlockKind::Paragraph;
            }
            Tag::Item => {
                self.flush();
                self.list_depth += 1;
                self.kind = BlockKind::ListItem;
            }
            Tag::CodeBlock(_) => {
                self.flush();
                self.kind = BlockKind::Code;
            }
            Tag::Table(_) => {
                self.flush();
                self.table = Some(Vec::new());
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = self.table.as_mut() {
                    t.push(Vec::new());
                }
            }
            Tag::TableCell => self.cell.clear(),
            _ => {}
        }
    }

    /// Decides which closing tags complete a block; a paragraph inside a list item is only a
    /// line of the item.
    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) | TagEnd::CodeBlock => self.flush(),
            TagEnd::Paragraph => {
                if self.list_depth == 0 {
                    self.flush();
                } else {
                    self.buf.push('\n');
                }
            }
            TagEnd::Item => {
                self.flush();
                self.list_depth = self.list_depth.saturating_sub(1);
                if self.list_depth > 0 {
                    self.kind = BlockKind::ListItem;
                }
            }
            TagEnd::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.last_mut()) {
                    row.push(self.cell.trim().to_string());
                }
                self.cell.clear();
            }
            TagEnd::Table => self.finish_table(),
            _ => {}
        }
    }

    /// A table becomes one block, a row per line, whatever surrounds it.
    fn finish_table(&mut self) {
        if let Some(rows) = self.table.take() {
            let text = rows
                .iter()
                .filter(|r| !r.is_empty())
                .map(|r| r.join(" | "))
                .collect::<Vec<_>>()
                .join("\n");
            self.blocks.push(RawBlock::new(1, BlockKind::Table, text));
        }
    }

    /// Text inside a table belongs to its cell, elsewhere to the block.
    fn push_text(&mut self, t: &str) {
        if self.table.is_some() {
            self.cell.push_str(t);
        } else {
            self.buf.push_str(t);
        }
    }

    /// A line break keeps its line in a block (articles split there), but not in a table cell.
    fn line_break(&mut self) {
        if self.table.is_some() {
            self.cell.push(' ');
        } else {
            self.buf.push('\n');
        }
    }
}

pub fn parse(text: &str) -> RawDoc {
    let mut b = Builder {
        blocks: Vec::new(),
        buf: String::new(),
        kind: BlockKind::Paragraph,
        level: None,
        list_depth: 0,
        table: None,
        cell: String::new(),
    };
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(text, opts) {
        match event {
            Event::Start(tag) => b.start(tag),
            Event::End(tag) => b.end(tag),
            Event::Text(t) | Event::Code(t) => b.push_text(&t),
            Event::SoftBreak | Event::HardBreak => b.line_break(),
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
