//! DOCX through zip + quick-xml: paragraphs, heading levels from styles.xml, tables as rows of
//! cells, list paragraphs. Every entry is inflated through a running budget, so a zip bomb stops
//! at `Limits::max_decompressed_bytes` instead of filling memory.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesStart, Event};
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
    let mut blocks = Vec::new();
    let mut depth = 0u32;
    let mut para: Option<Para> = None;
    let mut in_text = false;
    // Alternate-content fallbacks repeat the chosen content; skip them whole.
    let mut skip_depth: Option<u32> = None;
    let mut table_depth = 0u32;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut cell: Option<String> = None;

    loop {
        let ev = reader
            .read_event()
            .map_err(|e| ParseError::Corrupt(format!("docx document.xml: {e}")))?;
        match ev {
            Event::Start(e) => {
                depth += 1;
                if depth > limits.max_nesting {
                    return Err(nesting(limits));
                }
                if skip_depth.is_some() {
                    continue;
                }
                match e.local_name().as_ref() {
                    "Fallback" => skip_depth = Some(depth),
                    "delText" | "instrText" => skip_depth = Some(depth),
                    "p" => para = Some(Para::default()),
                    "t" => in_text = true,
                    "tbl" => {
                        table_depth += 1;
                        if table_depth == 1 {
                            rows.clear();
                        }
                    }
                    "tr" if table_depth == 1 => rows.push(Vec::new()),
                    "tc" if table_depth == 1 => cell = Some(String::new()),
                    _ => para_property(&e, para.as_mut()),
                }
            }
            Event::Empty(e) => {
                if skip_depth.is_some() {
                    continue;
                }
                match e.local_name().as_ref() {
                    "tab" => {
                        if let Some(p) = para.as_mut() {
                            p.text.push('\t');
                        }
                    }
                    "br" | "cr" => {
                        if let Some(p) = para.as_mut() {
                            p.text.push('\n');
                        }
                    }
                    _ => para_property(&e, para.as_mut()),
                }
            }
            Event::Text(t) if in_text && skip_depth.is_none() => {
                if let Some(p) = para.as_mut() {
                    p.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) if in_text && skip_depth.is_none() => {
                if let Some(p) = para.as_mut() {
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
            Event::End(e) => {
                let d = depth;
                depth = depth.saturating_sub(1);
                if let Some(s) = skip_depth {
                    if d == s {
                        skip_depth = None;
                    }
                    continue;
                }
                match e.local_name().as_ref() {
                    "t" => in_text = false,
                    "p" => {
                        if let Some(p) = para.take() {
                            finish_para(p, styles, &mut blocks, cell.as_mut());
                        }
                    }
                    "tc" if table_depth == 1 => {
                        if let (Some(c), Some(row)) = (cell.take(), rows.last_mut()) {
                            row.push(c.split_whitespace().collect::<Vec<_>>().join(" "));
                        }
                    }
                    "tbl" => {
                        table_depth = table_depth.saturating_sub(1);
                        if table_depth == 0 {
                            let text = rows
                                .iter()
                                .filter(|r| r.iter().any(|c| !c.is_empty()))
                                .map(|r| r.join(" | "))
                                .collect::<Vec<_>>()
                                .join("\n");
                            if !text.is_empty() {
                                blocks.push(RawBlock::new(1, BlockKind::Table, text));
                            }
                            rows.clear();
                        }
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(blocks)
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
