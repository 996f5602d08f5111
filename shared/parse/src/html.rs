//! HTML through scraper (html5ever). The walk is iterative, so deeply nested markup cannot
//! exhaust the stack.

use ego_tree::iter::Edge;
use ego_tree::NodeRef;
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

/// The most attributes one tag may carry. html5ever checks every attribute against each earlier
/// one of its tag (a duplicate is dropped), so a tag of n attributes costs n² / 2 comparisons:
/// one tag of 40,000 attributes (340 KB) took 1.2 s, and 10 MB of them would take hours. Real
/// pages carry a few dozen at most.
pub(crate) const MAX_ATTRIBUTES: u32 = 1_000;

/// What the scan before parsing found in the markup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prescan {
    /// Approximate element nesting.
    pub depth: u32,
    /// The most attributes on one tag.
    pub attributes: u32,
}

/// Element nesting and the largest tag, from the tags alone, in one pass. html5ever checks
/// element scopes by walking the stack of open elements, so deep nesting costs quadratic time,
/// and attributes cost quadratic time per tag (see [`MAX_ATTRIBUTES`]): both are refused before
/// parsing.
pub(crate) fn prescan(text: &str) -> Prescan {
    prescan_counting(text, &mut 0)
}

/// [`prescan`], adding to `work` every byte it examines: each one once, so the scan is linear
/// whatever the markup (it once looked for each tag's `>` afresh from the tag, and text of
/// `<a <a <a …` with no `>` at all made that quadratic).
fn prescan_counting(text: &str, work: &mut usize) -> Prescan {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let (mut depth, mut max, mut attributes) = (0u32, 0u32, 0u32);
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == b'<') {
        *work += off + 1;
        i += off + 1;
        let closing = bytes.get(i) == Some(&b'/');
        let start = if closing { i + 1 } else { i };
        let end = bytes[start..]
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .map_or(n, |p| start + p);
        *work += end - i;
        if end == start {
            // Not a tag: a comment is skipped whole, as the tokenizer reads it.
            if bytes[i..].starts_with(b"!--") {
                let close = find(&bytes[i + 3..], b"-->").map_or(n, |p| i + 3 + p + 3);
                *work += close - i;
                i = close;
            } else {
                i = end;
            }
            continue;
        }
        let tag = scan_tag(bytes, end);
        *work += tag.end - end;
        i = tag.end;
        attributes = attributes.max(tag.attributes);
        let name = text[start..end].to_ascii_lowercase();
        if !closing && RAW_TEXT.contains(&name.as_str()) {
            // Script, style and the like hold text, not tags, up to their end tag.
            let close = end_tag(bytes, i, name.as_bytes());
            *work += close - i;
            i = close;
        }
        if NOT_NESTING.contains(&name.as_str()) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
        } else if !tag.self_closed {
            depth += 1;
            max = max.max(depth);
        }
    }
    Prescan {
        depth: max,
        attributes,
    }
}

/// Elements whose content the tokenizer reads as text up to their end tag.
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
];

/// Where `</name` (any case) starts, from `from` on, or the end of the text.
fn end_tag(bytes: &[u8], mut from: usize, name: &[u8]) -> usize {
    while let Some(p) = find(&bytes[from..], b"</") {
        let at = from + p;
        let after = &bytes[at + 2..];
        if after.len() >= name.len() && after[..name.len()].eq_ignore_ascii_case(name) {
            return at;
        }
        from = at + 2;
    }
    bytes.len()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Tag {
    /// Just past the tag's `>` (or the end of the text).
    end: usize,
    attributes: u32,
    self_closed: bool,
}

/// The rest of a tag from just after its name, read as html5ever's tokenizer reads it: attribute
/// names, `=`, values quoted (a `>` inside quotes does not end the tag) or not.
fn scan_tag(bytes: &[u8], mut j: usize) -> Tag {
    let n = bytes.len();
    let space = |b: u8| b.is_ascii_whitespace();
    let mut attributes = 0u32;
    loop {
        while j < n && (space(bytes[j]) || bytes[j] == b'/') {
            j += 1;
        }
        if j >= n {
            return Tag {
                end: n,
                attributes,
                self_closed: false,
            };
        }
        if bytes[j] == b'>' {
            return Tag {
                end: j + 1,
                attributes,
                self_closed: bytes[j - 1] == b'/',
            };
        }
        // An attribute name: its first character may be anything (even `=`), then up to a
        // space, `/`, `>` or `=`.
        attributes = attributes.saturating_add(1);
        j += 1;
        while j < n && !space(bytes[j]) && !matches!(bytes[j], b'/' | b'>' | b'=') {
            j += 1;
        }
        while j < n && space(bytes[j]) {
            j += 1;
        }
        if j < n && bytes[j] == b'=' {
            j += 1;
            while j < n && space(bytes[j]) {
                j += 1;
            }
            match bytes.get(j) {
                Some(&q @ (b'"' | b'\'')) => {
                    j = bytes[j + 1..]
                        .iter()
                        .position(|&b| b == q)
                        .map_or(n, |p| j + 1 + p + 1);
                }
                _ => {
                    while j < n && !space(bytes[j]) && bytes[j] != b'>' {
                        j += 1;
                    }
                }
            }
        }
    }
}

pub fn parse(text: &str) -> RawDoc {
    let doc = Html::parse_document(text);
    let mut walk = Walk {
        blocks: Vec::new(),
        loose: String::new(),
        skip_until: None,
    };
    for edge in doc.root_element().traverse() {
        match edge {
            Edge::Open(node) => walk.open(node),
            Edge::Close(node) => walk.close(node),
        }
    }
    walk.flush_loose();
    RawDoc {
        parser_name: "html-scraper".into(),
        page_count: 1,
        blocks: walk.blocks,
        warnings: Vec::new(),
        ocr: None,
    }
}

/// The blocks so far, the loose text not yet in a block, and the subtree already read whole.
struct Walk {
    blocks: Vec<RawBlock>,
    loose: String,
    skip_until: Option<ego_tree::NodeId>,
}

impl Walk {
    /// Loose text between blocks becomes paragraphs, split where a law starts a new article.
    fn flush_loose(&mut self) {
        for p in split_paragraphs(&self.loose) {
            self.blocks.push(RawBlock::new(1, BlockKind::Paragraph, p));
        }
        self.loose.clear();
    }

    /// Nothing inside a subtree read whole (or skipped) is seen again.
    fn open(&mut self, node: NodeRef<'_, Node>) {
        if self.skip_until.is_some() {
            return;
        }
        match node.value() {
            Node::Element(el) => self.open_element(node, el.name()),
            Node::Text(t) => self.loose.push_str(t),
            _ => {}
        }
    }

    /// Decides whether an element is skipped, read whole as a block, or only ends loose text.
    fn open_element(&mut self, node: NodeRef<'_, Node>, name: &str) {
        let Some(elem) = ElementRef::wrap(node) else {
            return;
        };
        if SKIPPED.contains(&name) {
            self.skip_until = Some(node.id());
            return;
        }
        if name == "br" {
            self.loose.push('\n');
            return;
        }
        if self.read_whole(name, elem) {
            self.skip_until = Some(node.id());
        } else if is_block(name) {
            self.flush_loose();
        }
    }

    /// Headings, tables, list items and paragraph elements become blocks of their own, read
    /// whole: true when `name` is one of them.
    fn read_whole(&mut self, name: &str, elem: ElementRef<'_>) -> bool {
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
            self.flush_loose();
            let t = collapse(&element_text(elem));
            if !t.is_empty() {
                self.blocks.push(RawBlock::heading(1, level, t));
            }
        } else if name == "table" {
            self.flush_loose();
            let t = table_text(elem);
            if !t.is_empty() {
                self.blocks.push(RawBlock::new(1, BlockKind::Table, t));
            }
        } else if name == "li" {
            self.flush_loose();
            let t = element_text(elem).trim().to_string();
            if !t.is_empty() {
                self.blocks.push(RawBlock::new(1, BlockKind::ListItem, t));
            }
        } else if PARAGRAPHS.contains(&name) {
            self.flush_loose();
            for p in split_paragraphs(&element_text(elem)) {
                self.blocks.push(RawBlock::new(1, BlockKind::Paragraph, p));
            }
        } else {
            return false;
        }
        true
    }

    /// The end of a subtree read whole resumes the walk; the end of a block element ends the
    /// loose text inside it.
    fn close(&mut self, node: NodeRef<'_, Node>) {
        if self.skip_until == Some(node.id()) {
            self.skip_until = None;
        } else if self.skip_until.is_none() {
            if let Node::Element(el) = node.value() {
                if is_block(el.name()) {
                    self.flush_loose();
                }
            }
        }
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

/// A table's rows, one per line, cells joined by ` | `. A table nested in a cell is part of that
/// cell's text, read once: the walk does not descend into a cell it has read. (It did, and read
/// each nested table again at every level above it: 200 tables deep made 200 copies of the
/// innermost text, so 200 KB of HTML made 13 MB of text.)
fn table_text(table: ElementRef) -> String {
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut inside_cell: Option<ego_tree::NodeId> = None;
    for edge in table.traverse() {
        match edge {
            Edge::Open(node) => {
                if inside_cell.is_some() {
                    continue;
                }
                if let Some(el) = ElementRef::wrap(node) {
                    if matches!(el.value().name(), "td" | "th") {
                        row.push(collapse(&element_text(el)));
                        inside_cell = Some(node.id());
                    }
                }
            }
            Edge::Close(node) => {
                if inside_cell.is_some() {
                    if inside_cell == Some(node.id()) {
                        inside_cell = None;
                    }
                    continue;
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Hint, Limits};

    fn parse_html(html: &str) -> Result<crate::ParsedDocument, crate::ParseError> {
        crate::parse(
            html.as_bytes(),
            &Hint::new("a.html", ""),
            &Limits::default(),
        )
    }

    #[test]
    fn prescan_reads_nesting_and_attributes() {
        let p = prescan("<html><body><div a=1 b='x > y' c><p>x<br/><span/></div></body></html>");
        assert_eq!(
            p,
            Prescan {
                depth: 1,
                attributes: 3
            }
        );
        // Tags inside a comment or a script are not tags.
        let p = prescan(
            "<html><!-- <div><div> --><script>if (a<b && c) { d = '<div>'; }</script><div></div>",
        );
        assert_eq!(p.depth, 1);
        let p = prescan(&format!("<html>{}", "<div>".repeat(300)));
        assert_eq!(p.depth, 300);
    }

    /// Issue 29 (per-item rescans): each tag's `>` was looked for from the tag on, so text of
    /// `<a <a <a …` with no `>` rescanned the rest of the document for every tag. The work is
    /// counted, not timed.
    #[test]
    fn prescan_examines_each_byte_once() {
        for html in [
            format!("<html><body>{}", "<a ".repeat(50_000)),
            format!("<html><body>{}", "<a x='".repeat(50_000)),
            format!("<html><body>{}", "<div>text</div>".repeat(20_000)),
        ] {
            let mut work = 0;
            prescan_counting(&html, &mut work);
            assert!(
                work <= 2 * html.len(),
                "{work} bytes examined for {}",
                html.len()
            );
        }
    }

    /// html5ever compares each attribute with every earlier one of its tag: a tag with 20,000
    /// attributes is refused before it reaches the parser.
    #[test]
    fn a_tag_with_thousands_of_attributes_is_refused() {
        let attrs: String = (0..20_000).map(|i| format!(" a{i}=\"\"")).collect();
        let err = parse_html(&format!("<html><body><p{attrs}>text</p></body></html>")).unwrap_err();
        assert_eq!(err.kind(), "too_large");
        assert_eq!(
            err.to_string(),
            "document too large: an HTML tag with 20000 attributes (limit 1000)"
        );
        // A page with ordinary tags parses.
        let attrs: String = (0..50).map(|i| format!(" data-a{i}=\"x\"")).collect();
        assert!(parse_html(&format!("<html><body><p{attrs}>text</p></body></html>")).is_ok());
    }

    /// Issue 29 (repetition): the text of a table nested in a cell was read again at every level
    /// above it, so tables 200 deep made 200 copies of the innermost text.
    #[test]
    fn nested_tables_are_read_once() {
        let depth = 50;
        let html = format!(
            "<html><body>{}深处的文字{}</body></html>",
            "<table><tr><td>外层".repeat(depth),
            "</td></tr></table>".repeat(depth)
        );
        let doc = parse_html(&html).unwrap();
        let all: String = doc.layouts.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(all.matches("深处的文字").count(), 1);
        assert_eq!(all.matches("外层").count(), depth);
    }
}
