//! DOCX through zip + quick-xml: paragraphs, heading levels from styles.xml, tables as rows of
//! cells, list paragraphs. Every entry is inflated through a running budget, so a zip bomb stops
//! at `Limits::max_decompressed_bytes` instead of filling memory.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesEnd, BytesRef, BytesStart, BytesText, Event};
use quick_xml::Reader;

use crate::error::ParseError;
use crate::model::{BlockKind, Limits};
use crate::raw::{RawBlock, RawDoc};

struct Budget {
    left: u64,
    cap: u64,
}

fn read_entry(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
    budget: &mut Budget,
) -> Result<Option<String>, ParseError> {
    let entry = match archive.by_name(name) {
        Ok(e) => e,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(ParseError::Corrupt(format!("docx entry {name}: {e}"))),
    };
    if entry.size() > budget.left {
        return Err(bomb(budget.cap));
    }
    let mut bytes = Vec::new();
    entry
        .take(budget.left + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ParseError::Corrupt(format!("docx entry {name}: {e}")))?;
    if bytes.len() as u64 > budget.left {
        return Err(bomb(budget.cap));
    }
    budget.left -= bytes.len() as u64;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ParseError::Corrupt(format!("docx entry {name} is not UTF-8 XML")))
}

fn bomb(cap: u64) -> ParseError {
    ParseError::TooLarge(format!(
        "the DOCX archive inflates to more than {cap} bytes (zip bomb guard)"
    ))
}

pub fn parse(bytes: &[u8], limits: &Limits) -> Result<RawDoc, ParseError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| ParseError::Corrupt(format!("docx zip: {e}")))?;
    let mut budget = Budget {
        left: limits.max_decompressed_bytes,
        cap: limits.max_decompressed_bytes,
    };
    let document = read_entry(&mut archive, "word/document.xml", &mut budget)?
        .ok_or_else(|| ParseError::Corrupt("docx has no word/document.xml".into()))?;
    let styles = match read_entry(&mut archive, "word/styles.xml", &mut budget)? {
        Some(xml) => heading_styles(&xml, limits)?,
        None => HashMap::new(),
    };
    let blocks = body_blocks(&document, &styles, limits)?;
    Ok(RawDoc {
        parser_name: "docx-quickxml".into(),
        page_count: 1,
        blocks,
        warnings: Vec::new(),
        ocr: None,
    })
}

fn attr(e: &BytesStart, local: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == local)
        .and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned())
        })
}

/// "Heading 2", "heading 2", "标题 2", "标题2" → 2; "Title" / "标题" → 1.
fn level_from_name(name: &str) -> Option<u8> {
    let n = name.trim().to_lowercase();
    let rest = n
        .strip_prefix("heading")
        .or_else(|| n.strip_prefix("标题"))?
        .trim();
    if rest.is_empty() {
        return if n == "标题" { Some(1) } else { None };
    }
    rest.parse::<u8>().ok().filter(|l| (1..=9).contains(l))
}

#[derive(Default)]
struct StyleDef {
    name: String,
    based_on: Option<String>,
    outline: Option<u8>,
}

/// Style id → heading level, following `basedOn` chains.
fn heading_styles(xml: &str, limits: &Limits) -> Result<HashMap<String, u8>, ParseError> {
    let mut defs: HashMap<String, StyleDef> = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let mut current: Option<(String, StyleDef)> = None;
    let mut depth = 0u32;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| ParseError::Corrupt(format!("docx styles.xml: {e}")))?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                match e.local_name().as_ref() {
                    "style" => {
                        if let Some((id, def)) = current.take() {
                            defs.insert(id, def);
                        }
                        current = attr(e, "styleId").map(|id| (id, StyleDef::default()));
                    }
                    "name" => {
                        if let Some((_, d)) = current.as_mut() {
                            d.name = attr(e, "val").unwrap_or_default();
                        }
                    }
                    "basedOn" => {
                        if let Some((_, d)) = current.as_mut() {
                            d.based_on = attr(e, "val");
                        }
                    }
                    "outlineLvl" => {
                        if let Some((_, d)) = current.as_mut() {
                            d.outline = attr(e, "val").and_then(|v| v.parse::<u8>().ok());
                        }
                    }
                    _ => {}
                }
                // Empty elements have no End event, so only a Start opens a level.
                if matches!(ev, Event::Start(_)) {
                    depth += 1;
                    if depth > limits.max_nesting {
                        return Err(nesting(limits));
                    }
                }
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some((id, def)) = current.take() {
        defs.insert(id, def);
    }
    let mut out = HashMap::new();
    for id in defs.keys() {
        let mut cur = Some(id.as_str());
        for _ in 0..10 {
            let Some(def) = cur.and_then(|c| defs.get(c)) else {
                break;
            };
            let level = level_from_name(&def.name)
                .or_else(|| def.outline.filter(|o| *o < 9).map(|o| o + 1));
            if let Some(l) = level {
                out.insert(id.clone(), l);
                break;
            }
            cur = def.based_on.as_deref();
        }
    }
    Ok(out)
}

fn nesting(limits: &Limits) -> ParseError {
    ParseError::TooLarge(format!(
        "XML nested deeper than {} elements",
        limits.max_nesting
    ))
}

#[derive(Default)]
struct Para {
    style: Option<String>,
    outline: Option<u8>,
    list: bool,
    text: String,
}

fn body_blocks(
    xml: &str,
    styles: &HashMap<String, u8>,
    limits: &Limits,
) -> Result<Vec<RawBlock>, ParseError> {
    let mut reader = Reader::from_str(xml);
    let mut body = Body::new(styles, limits);
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| ParseError::Corrupt(format!("docx document.xml: {e}")))?;
        match ev {
            Event::Start(e) => body.open(&e)?,
            Event::Empty(e) => body.empty(&e),
            Event::Text(t) if body.reading_text() => body.push_text(&t),
            Event::GeneralRef(r) if body.reading_text() => body.push_entity(&r),
            Event::End(e) => body.close(&e),
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(body.blocks)
}

/// Where the reader is in document.xml: the open paragraph, table and cell, and what to skip.
struct Body<'a> {
    styles: &'a HashMap<String, u8>,
    limits: &'a Limits,
    blocks: Vec<RawBlock>,
    depth: u32,
    para: Option<Para>,
    in_text: bool,
    // Alternate-content fallbacks repeat the chosen content; skip them whole.
    skip_depth: Option<u32>,
    table_depth: u32,
    rows: Vec<Vec<String>>,
    cell: Option<String>,
}

impl<'a> Body<'a> {
    /// Nothing open yet.
    fn new(styles: &'a HashMap<String, u8>, limits: &'a Limits) -> Self {
        Body {
            styles,
            limits,
            blocks: Vec::new(),
            depth: 0,
            para: None,
            in_text: false,
            skip_depth: None,
            table_depth: 0,
            rows: Vec::new(),
            cell: None,
        }
    }

    /// Character data counts only inside a `w:t` run that is not being skipped.
    fn reading_text(&self) -> bool {
        self.in_text && self.skip_depth.is_none()
    }

    /// Decides what an opening element starts: a skipped subtree, a paragraph, a run of text, a
    /// table, row or cell, or a paragraph property.
    fn open(&mut self, e: &BytesStart) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > self.limits.max_nesting {
            return Err(nesting(self.limits));
        }
        if self.skip_depth.is_some() {
            return Ok(());
        }
        match e.local_name().as_ref() {
            "Fallback" => self.skip_depth = Some(self.depth),
            "delText" | "instrText" => self.skip_depth = Some(self.depth),
            "p" => self.para = Some(Para::default()),
            "t" => self.in_text = true,
            "tbl" => {
                self.table_depth += 1;
                if self.table_depth == 1 {
                    self.rows.clear();
                }
            }
            "tr" if self.table_depth == 1 => self.rows.push(Vec::new()),
            "tc" if self.table_depth == 1 => self.cell = Some(String::new()),
            _ => para_property(e, self.para.as_mut()),
        }
        Ok(())
    }

    /// Tabs and breaks are text; other empty elements are paragraph properties.
    fn empty(&mut self, e: &BytesStart) {
        if self.skip_depth.is_some() {
            return;
        }
        match e.local_name().as_ref() {
            "tab" => {
                if let Some(p) = self.para.as_mut() {
                    p.text.push('\t');
                }
            }
            "br" | "cr" => {
                if let Some(p) = self.para.as_mut() {
                    p.text.push('\n');
                }
            }
            _ => para_property(e, self.para.as_mut()),
        }
    }

    /// Text outside a paragraph has nowhere to go and is dropped.
    fn push_text(&mut self, t: &BytesText) {
        if let Some(p) = self.para.as_mut() {
            p.text.push_str(&t.xml10_content());
        }
    }

    /// Character references and the five predefined entities become their character; any other
    /// entity is dropped.
    fn push_entity(&mut self, r: &BytesRef) {
        if let Some(p) = self.para.as_mut() {
            let c = match r.resolve_char_ref() {
                Ok(Some(c)) => Some(c),
                _ => match r.xml10_content().as_ref() {
                    "amp" => Some('&'),
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "quot" => Some('"'),
                    "apos" => Some('\''),
                    _ => None,
                },
            };
            if let Some(c) = c {
                p.text.push(c);
            }
        }
    }

    /// Decides what a closing element completes: a skipped subtree, a paragraph, a cell or a
    /// whole table.
    fn close(&mut self, e: &BytesEnd) {
        let d = self.depth;
        self.depth = self.depth.saturating_sub(1);
        if let Some(s) = self.skip_depth {
            if d == s {
                self.skip_depth = None;
            }
            return;
        }
        match e.local_name().as_ref() {
            "t" => self.in_text = false,
            "p" => {
                if let Some(p) = self.para.take() {
                    finish_para(p, self.styles, &mut self.blocks, self.cell.as_mut());
                }
            }
            "tc" if self.table_depth == 1 => {
                if let (Some(c), Some(row)) = (self.cell.take(), self.rows.last_mut()) {
                    row.push(c.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
            "tbl" => {
                self.table_depth = self.table_depth.saturating_sub(1);
                if self.table_depth == 0 {
                    self.finish_table();
                }
            }
            _ => {}
        }
    }

    /// An outer table becomes one block, a row per line; rows with no text are dropped.
    fn finish_table(&mut self) {
        let text = self
            .rows
            .iter()
            .filter(|r| r.iter().any(|c| !c.is_empty()))
            .map(|r| r.join(" | "))
            .collect::<Vec<_>>()
            .join("\n");
        if !text.is_empty() {
            self.blocks.push(RawBlock::new(1, BlockKind::Table, text));
        }
        self.rows.clear();
    }
}

fn para_property(e: &BytesStart, para: Option<&mut Para>) {
    let Some(p) = para else { return };
    match e.local_name().as_ref() {
        "pStyle" => p.style = attr(e, "val"),
        "outlineLvl" => p.outline = attr(e, "val").and_then(|v| v.parse::<u8>().ok()),
        "numPr" => p.list = true,
        _ => {}
    }
}

fn finish_para(
    p: Para,
    styles: &HashMap<String, u8>,
    blocks: &mut Vec<RawBlock>,
    cell: Option<&mut String>,
) {
    if let Some(c) = cell {
        if !c.is_empty() {
            c.push(' ');
        }
        c.push_str(&p.text);
        return;
    }
    let text = p.text.trim().to_string();
    if text.is_empty() {
        return;
    }
    let level = p
        .outline
        .filter(|o| *o < 9)
        .map(|o| o + 1)
        .or_else(|| p.style.as_ref().and_then(|s| styles.get(s).copied()));
    let block = match level {
        Some(l) => RawBlock::heading(1, l, text.split_whitespace().collect::<Vec<_>>().join(" ")),
        None if p.list => RawBlock::new(1, BlockKind::ListItem, text),
        None => RawBlock::new(1, BlockKind::Paragraph, text),
    };
    blocks.push(block);
}
