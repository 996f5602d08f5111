//! HTML through scraper (html5ever). The walk is iterative, so deeply nested markup cannot
//! exhaust the stack.

use ego_tree::iter::Edge;
use scraper::{ElementRef, Html, Node};

use crate::model::BlockKind;
use crate::raw::{RawBlock, RawDoc};
use crate::text::split_paragraphs;

const SKIPPED: &[&str] = &[
    "script", "style", "head", "template", "noscript", "svg", "math", "title",
];
const PARAGRAPHS: &[&str] = &[
    "p",
    "pre",
    "blockquote",
    "dt",
    "dd",
    "figcaption",
    "caption",
    "address",
];

/// Elements that close themselves or are closed implicitly: they do not deepen real nesting.
const NOT_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "p", "li", "dt", "dd", "option", "tr", "td", "th", "tbody", "thead", "tfoot", "html",
    "head", "body",
];

/// Approximate element nesting from the tags alone. html5ever checks element scopes by walking
/// the stack of open elements, so deep nesting costs quadratic time: refuse it before parsing.
pub fn nesting_depth(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let (mut depth, mut max) = (0u32, 0u32);
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == b'<') {
        i += off + 1;
        let closing = bytes.get(i) == Some(&b'/');
        let start = if closing { i + 1 } else { i };
        let end = bytes[start..]
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .map_or(bytes.len(), |p| start + p);
        if end == start {
            continue;
        }
        let name = text[start..end].to_ascii_lowercase();
        if NOT_NESTING.contains(&name.as_str()) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
        } else {
            let self_closed = bytes[end..]
                .iter()
                .position(|&b| b == b'>')
                .is_some_and(|p| p > 0 && bytes[end + p - 1] == b'/');
            if !self_closed {
                depth += 1;
                max = max.max(depth);
            }
        }
    }
    max
}

pub fn parse(text: &str) -> RawDoc {
    let doc = Html::parse_document(text);
    let mut blocks = Vec::new();
    let mut loose = String::new();
    let mut skip_until: Option<ego_tree::NodeId> = None;

    let flush_loose = |loose: &mut String, blocks: &mut Vec<RawBlock>| {
        for p in split_paragraphs(loose) {
            blocks.push(RawBlock::new(1, BlockKind::Paragraph, p));
        }
        loose.clear();
    };

    for edge in doc.root_element().traverse() {
        match edge {
            Edge::Open(node) => {
                if skip_until.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Element(el) => {
                        let name = el.name();
                        let Some(elem) = ElementRef::wrap(node) else {
                            continue;
                        };
                        if SKIPPED.contains(&name) {
                            skip_until = Some(node.id());
                            continue;
                        }
                        if name == "br" {
                            loose.push('\n');
                            continue;
                        }
                        let heading = match name {
                            "h1" => Some(1),
                            "h2" => Some(2),
                            "h3" => Some(3),
                            "h4" => Some(4),
                            "h5" => Some(5),
                            "h6" => Some(6),
                            _ => None,
                        };
                        if let Some(level) = heading {
                            flush_loose(&mut loose, &mut blocks);
                            let t = collapse(&element_text(elem));
                            if !t.is_empty() {
                                blocks.push(RawBlock::heading(1, level, t));
                            }
                            skip_until = Some(node.id());
                        } else if name == "table" {
                            flush_loose(&mut loose, &mut blocks);
                            let t = table_text(elem);
                            if !t.is_empty() {
                                blocks.push(RawBlock::new(1, BlockKind::Table, t));
                            }
                            skip_until = Some(node.id());
                        } else if name == "li" {
                            flush_loose(&mut loose, &mut blocks);
                            let t = element_text(elem).trim().to_string();
                            if !t.is_empty() {
                                blocks.push(RawBlock::new(1, BlockKind::ListItem, t));
                            }
                            skip_until = Some(node.id());
                        } else if PARAGRAPHS.contains(&name) {
                            flush_loose(&mut loose, &mut blocks);
                            for p in split_paragraphs(&element_text(elem)) {
                                blocks.push(RawBlock::new(1, BlockKind::Paragraph, p));
                            }
                            skip_until = Some(node.id());
                        } else if is_block(name) {
                            flush_loose(&mut loose, &mut blocks);
                        }
                    }
                    Node::Text(t) => loose.push_str(t),
                    _ => {}
                }
            }
            Edge::Close(node) => {
                if skip_until == Some(node.id()) {
                    skip_until = None;
                } else if skip_until.is_none() {
                    if let Node::Element(el) = node.value() {
                        if is_block(el.name()) {
                            flush_loose(&mut loose, &mut blocks);
                        }
                    }
                }
            }
        }
    }
    flush_loose(&mut loose, &mut blocks);
    RawDoc {
        parser_name: "html-scraper".into(),
        page_count: 1,
        blocks,
        warnings: Vec::new(),
        ocr: None,
    }
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "div"
            | "section"
            | "article"
            | "main"
            | "header"
            | "footer"
            | "nav"
            | "aside"
            | "body"
            | "ul"
            | "ol"
            | "dl"
            | "form"
            | "fieldset"
            | "hr"
            | "figure"
    )
}

/// Text of an element with `<br>` as a line break and block children on their own lines.
fn element_text(elem: ElementRef) -> String {
    let mut out = String::new();
    for edge in elem.traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Text(t) => out.push_str(t),
                Node::Element(el) if el.name() == "br" => out.push('\n'),
                Node::Element(el)
                    if (is_block(el.name()) || el.name() == "p" || el.name() == "li")
                        && !out.ends_with('\n')
                        && !out.is_empty() =>
                {
                    out.push('\n');
                }
                _ => {}
            },
            Edge::Close(_) => {}
        }
    }
    out
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn table_text(table: ElementRef) -> String {
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    for edge in table.traverse() {
        match edge {
            Edge::Open(node) => {
                if let Some(el) = ElementRef::wrap(node) {
                    if matches!(el.value().name(), "td" | "th") {
                        row.push(collapse(&element_text(el)));
                    }
                }
            }
            Edge::Close(node) => {
                if let Node::Element(el) = node.value() {
                    if el.name() == "tr" && !row.is_empty() {
                        rows.push(std::mem::take(&mut row).join(" | "));
                    }
                }
            }
        }
    }
    if !row.is_empty() {
        rows.push(row.join(" | "));
    }
    rows.join("\n")
}
