//! The heading tree: explicit headings (styles, `#`, h1–h6, PDF outline) merged with headings
//! recognised in the text (编/章/节/条, 1 / 1.1, 一、, （一）).
//!
//! Rules, in order:
//! - Only the first line of a layout block is examined; the format parsers split blocks before
//!   every line that starts with a marker.
//! - 编/章/节 recognised in plain text must look like a heading: short, no full stop, not followed
//!   by words that make it a cross-reference ("第三章规定的"). 条 must be followed by a space, a
//!   bracketed heading or the end of the line, so a wrapped "第三十条规定…" never starts an article.
//!   条 lines are trusted at any length: an article's first line carries its body.
//! - Inside an article, recognised `1.` / `一、` / `（一）` lines are the article's items, not
//!   nodes: an article with its paragraphs and items is one unit. Outside articles (notices,
//!   standards, appendices) they are headings. Explicit headings always open a node.
//! - Nesting: two explicit headings compare by their levels; two regulation markers by rank
//!   (编 > 章 > 节 > 条 > 一、 > （一）); two numbered headings by depth; an explicit heading closes
//!   recognised ones; anything else nests below what is open.
//! - 款 is deliberately not a node: it is a sub-unit of an article, and it is almost always a
//!   cross-reference when it starts a line.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use crate::model::{padded_id, BlockKind, LayoutBlock, StructureNode};
use crate::normalize::{compact_title, is_space, normalize_line};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Part,
    Chapter,
    Section,
    Article,
    Numbered(u8),
    CnEnum,
    CnParen,
    Explicit,
}

impl Kind {
    pub fn sub_type(self) -> &'static str {
        match self {
            Kind::Part => "part",
            Kind::Chapter => "chapter",
            Kind::Section => "section",
            Kind::Article => "article",
            Kind::Numbered(_) => "numbered",
            Kind::CnEnum => "cn_enum",
            Kind::CnParen => "cn_paren",
            Kind::Explicit => "explicit",
        }
    }

    fn regulation_rank(self) -> Option<u8> {
        match self {
            Kind::Part => Some(1),
            Kind::Chapter => Some(2),
            Kind::Section => Some(3),
            Kind::Article => Some(4),
            Kind::CnEnum => Some(5),
            Kind::CnParen => Some(6),
            Kind::Numbered(_) | Kind::Explicit => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Marker {
    pub kind: Kind,
    pub title: String,
    /// The components of a numbered heading ("4.1.2" → [4, 1, 2]).
    pub number: Vec<u32>,
}

const NUMERALS: &str = "一二三四五六七八九十百千零〇两";

fn is_regulation_numeral(c: char) -> bool {
    NUMERALS.contains(c) || c.is_ascii_digit() || ('０'..='９').contains(&c)
}

/// `第` + numerals (spaces allowed anywhere between) + one of 编章节条 (simplified or
/// traditional), at the start of `line`: the number with its spaces removed, the unit, and the
/// byte offset just past the unit. Every article line passes through here, so it is a plain
/// scan rather than a regex.
pub(crate) fn regulation_marker(line: &str) -> Option<(String, char, usize)> {
    let body = line.strip_prefix('第')?;
    let mut number = String::new();
    for (i, c) in body.char_indices() {
        match c {
            ' ' | '\u{3000}' => {}
            _ if is_regulation_numeral(c) => number.push(c),
            '编' | '章' | '节' | '条' | '編' | '節' | '條' if !number.is_empty() => {
                return Some((number, c, '第'.len_utf8() + i + c.len_utf8()));
            }
            _ => return None,
        }
    }
    None
}

static NUMBERED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d{1,2}(?:[.．]\d{1,2})*)([.．、]?)[ \t\u{3000}]*(\S.*)$").expect("static regex")
});

/// What follows a `一、` or `（一）` marker: the spaces after it skipped, then at least one visible
/// character, on one line.
fn after_marker(s: &str) -> Option<&str> {
    let rest = s.trim_start_matches([' ', '\t', '\u{3000}']);
    (rest.starts_with(|c: char| !c.is_whitespace()) && !rest.contains('\n')).then_some(rest)
}

fn strip_numerals(s: &str) -> Option<&str> {
    let rest = s.trim_start_matches(|c: char| NUMERALS.contains(c));
    (rest.len() < s.len()).then_some(rest)
}

/// `一、rest` (or `一．rest`): the rest.
fn cn_enum(line: &str) -> Option<&str> {
    after_marker(strip_numerals(line)?.strip_prefix(['、', '．'])?)
}

/// `（一）rest` (either bracket full- or half-width): the rest.
fn cn_paren(line: &str) -> Option<&str> {
    let inner = line.strip_prefix(['（', '('])?;
    after_marker(strip_numerals(inner)?.strip_prefix(['）', ')'])?)
}

const MAX_HEADING_CHARS: usize = 40;
const MAX_NUMBERED_CHARS: usize = 80;
/// Longer than any non-article heading can be: the longest cap plus the longest marker.
const LINE_PREFIX_CHARS: usize = 2 * MAX_NUMBERED_CHARS;

fn ends_like_sentence(s: &str) -> bool {
    s.ends_with(|c: char| "。，,；;：:、".contains(c))
}

fn looks_like_heading_text(rest: &str, max_chars: usize) -> bool {
    !rest.contains('。') && rest.chars().count() <= max_chars && !ends_like_sentence(rest)
}

/// Recognises a heading marker at the start of one line. `explicit` relaxes the shape checks:
/// a styled heading is a heading whatever its length.
pub fn recognise(line: &str, explicit: bool) -> Option<Marker> {
    // Fast exit for the common case, a body line: most lines never allocate.
    if !explicit && !could_start_marker(line) {
        return None;
    }
    let (line, truncated) = line_opening(line, explicit);
    if line.is_empty() {
        return None;
    }
    if let Some((number, unit, end)) = regulation_marker(&line) {
        return regulation_heading(&line, (number, unit, end), truncated, explicit);
    }
    if truncated {
        return None;
    }
    numbered_heading(&line, explicit)
        .or_else(|| enumerated_heading(&line, explicit))
        .or_else(|| explicit.then(|| unnumbered(Kind::Explicit, &line)))
}

/// Whether the line's first visible character can open any marker at all: every marker starts
/// with 第, a digit, an opening parenthesis or a Chinese numeral.
fn could_start_marker(line: &str) -> bool {
    let first = line
        .chars()
        .find(|c| !is_space(*c) && !crate::normalize::is_invisible(*c));
    first.is_some_and(|c| {
        c == '第' || c.is_ascii_digit() || c == '（' || c == '(' || NUMERALS.contains(c)
    })
}

/// The part of the line that decides what it is, normalised, and whether it was cut short.
fn line_opening(line: &str, explicit: bool) -> (Cow<'_, str>, bool) {
    // Only a line's opening decides what it is. An article's first line carries its whole body,
    // often thousands of characters, and a line is examined several times; a recognised line
    // longer than the prefix can only be an article (every other kind has a length cap far
    // below it), so the prefix answers exactly.
    match line.char_indices().nth(LINE_PREFIX_CHARS) {
        Some((cut, _)) if !explicit => (normalize_line(&line[..cut]), true),
        _ => (normalize_line(line), false),
    }
}

/// A marker with no outline number, titled by the whole line.
fn unnumbered(kind: Kind, line: &str) -> Marker {
    Marker {
        kind,
        title: compact_title(line),
        number: Vec::new(),
    }
}

/// Decides whether a `第…编/章/节/条` line is a heading or an article rather than a
/// cross-reference or running text.
fn regulation_heading(
    line: &str,
    (number, unit, end): (String, char, usize),
    truncated: bool,
    explicit: bool,
) -> Option<Marker> {
    let rest = line[end..].trim_matches(is_space);
    let separated = line[end..]
        .chars()
        .next()
        .is_none_or(|ch| is_space(ch) || "【[［：:".contains(ch));
    let marker = format!("第{number}{unit}");
    if unit == '条' || unit == '條' {
        if !(separated || explicit) {
            return None;
        }
        let title = match bracketed_heading(rest) {
            Some(h) => format!("{marker} {h}"),
            None => marker,
        };
        return Some(Marker {
            kind: Kind::Article,
            title,
            number: Vec::new(),
        });
    }
    if truncated {
        return None;
    }
    let kind = match unit {
        '编' | '編' => Kind::Part,
        '章' => Kind::Chapter,
        _ => Kind::Section,
    };
    let cross_reference = rest.starts_with(|ch: char| "的规之中所和或及至、，。；".contains(ch));
    if !explicit && (cross_reference || !looks_like_heading_text(rest, MAX_HEADING_CHARS)) {
        return None;
    }
    let title = if rest.is_empty() {
        marker
    } else {
        format!("{marker} {}", compact_title(rest))
    };
    Some(Marker {
        kind,
        title,
        number: Vec::new(),
    })
}

/// Decides whether a `1.` / `1.1` line is an outline heading rather than a quantity or a date.
fn numbered_heading(line: &str, explicit: bool) -> Option<Marker> {
    // `\d` (Unicode Nd) is a subset of `is_numeric`: the gate only skips lines that cannot match.
    if !line.starts_with(|c: char| c.is_numeric()) {
        return None;
    }
    let c = NUMBERED.captures(line)?;
    let number = &c[1];
    let has_sep = !c[2].is_empty() || number.contains(['.', '．']);
    let after_number = &line[number.len()..];
    let spaced = after_number.starts_with(is_space);
    let rest = &c[3];
    let first = rest.chars().next().unwrap_or(' ');
    // "3 月 1 日", "5 号", "30 %": a quantity, not a heading. Dotted numbers are never dates.
    let unit_follows = first.is_ascii_digit()
        || first == '%'
        || (!number.contains(['.', '．'])
            && "年月日号时分秒％)）、个项条款章节页元万亿岁度".contains(first));
    if !((has_sep || spaced)
        && !unit_follows
        && (explicit || looks_like_heading_text(rest, MAX_NUMBERED_CHARS)))
    {
        return None;
    }
    let parts: Vec<u32> = number
        .split(['.', '．'])
        .filter_map(|p| p.parse().ok())
        .collect();
    Some(Marker {
        kind: Kind::Numbered(parts.len().max(1) as u8),
        title: compact_title(line),
        number: parts,
    })
}

/// Decides whether a `一、` or `（一）` line is a heading rather than a sentence-long item.
fn enumerated_heading(line: &str, explicit: bool) -> Option<Marker> {
    let heading_like = |rest: &str| explicit || looks_like_heading_text(rest, MAX_HEADING_CHARS);
    if cn_enum(line).is_some_and(heading_like) {
        return Some(unnumbered(Kind::CnEnum, line));
    }
    if cn_paren(line).is_some_and(heading_like) {
        return Some(unnumbered(Kind::CnParen, line));
    }
    None
}

/// "【立法目的】" or "［…］" right after an article number is the article's own heading.
fn bracketed_heading(rest: &str) -> Option<String> {
    let (open, close) = if rest.starts_with('【') {
        ('【', '】')
    } else if rest.starts_with('［') {
        ('［', '］')
    } else {
        return None;
    };
    let inner = rest.strip_prefix(open)?;
    let end = inner.find(close)?;
    let h = compact_title(&inner[..end]);
    (!h.is_empty() && h.chars().count() <= MAX_HEADING_CHARS).then_some(h)
}

/// True when a line would start a new structural unit; the parsers split text blocks there.
pub(crate) fn starts_unit(line: &str) -> bool {
    recognise(line, false).is_some()
}

/// True for lines that must start a new layout block even in running PDF text: regulation
/// markers and numbered headings, not the `（一）` items that wrap inside paragraphs.
pub(crate) fn starts_strong_unit(line: &str) -> bool {
    matches!(
        recognise(line, false).map(|m| m.kind),
        Some(Kind::Part | Kind::Chapter | Kind::Section | Kind::Article | Kind::Numbered(_))
    )
}

/// The deepest a node may sit in the tree. Kinds that neither close nor rank each other (a
/// numbered heading and a `一、` line, say) nest below whatever is open, so a hostile text that
/// alternates them would make a tree thousands deep; every block and chunk carries its full
/// section path, so that depth is paid again for every block (quadratic). A statute needs five
/// levels (编 章 节 条 and an explicit title), a standard eight or so; beyond this the new node
/// takes the place of the deepest open one, as its sibling.
pub const MAX_TREE_DEPTH: usize = 16;

struct Open {
    node: usize,
    kind: Kind,
    explicit: Option<u8>,
}

fn closes(top: &Open, new: &Open) -> bool {
    if let (Some(a), Some(b)) = (top.explicit, new.explicit) {
        return a >= b;
    }
    if let (Some(a), Some(b)) = (top.kind.regulation_rank(), new.kind.regulation_rank()) {
        return a >= b;
    }
    if let (Kind::Numbered(a), Kind::Numbered(b)) = (top.kind, new.kind) {
        return a >= b;
    }
    new.explicit.is_some() && top.explicit.is_none()
}

/// Whether `new` can follow `prev` in a numbered outline.
fn follows(prev: Option<&[u32]>, new: &[u32]) -> bool {
    let Some((&last, head)) = new.split_last() else {
        return false;
    };
    let Some(prev) = prev else {
        return last <= 1;
    };
    if new.len() == prev.len() + 1 && head == prev {
        return last <= 1;
    }
    new.len() <= prev.len() && head == &prev[..head.len()] && last == prev[head.len()] + 1
}

pub struct Tree {
    pub nodes: Vec<StructureNode>,
    /// For every layout block: the node it belongs to (its own node for a heading line).
    pub owner: Vec<Option<usize>>,
    /// For every layout block: whether it is the line that opened its node.
    pub opens_node: Vec<bool>,
    pub kinds: Vec<Kind>,
}

pub fn build(layouts: &mut [LayoutBlock]) -> Tree {
    let mut builder = TreeBuilder::with_capacity(layouts.len());
    for layout in layouts.iter_mut() {
        let explicit = match layout.kind {
            BlockKind::Heading | BlockKind::Title => Some(layout.heading_level.unwrap_or(1)),
            _ => None,
        };
        match builder.accepted_marker(layout, explicit) {
            Some(marker) => builder.open_node(layout, marker, explicit),
            None => builder.continue_node(),
        }
    }
    builder.tree
}

/// The tree under construction and the open path down to the current node.
struct TreeBuilder {
    tree: Tree,
    stack: Vec<Open>,
    last_number: Option<Vec<u32>>,
    in_rejected_run: bool,
}

impl TreeBuilder {
    /// An empty tree, sized for one owner entry per layout block.
    fn with_capacity(blocks: usize) -> Self {
        TreeBuilder {
            tree: Tree {
                nodes: Vec::new(),
                owner: Vec::with_capacity(blocks),
                opens_node: Vec::with_capacity(blocks),
                kinds: Vec::new(),
            },
            stack: Vec::new(),
            last_number: None,
            in_rejected_run: false,
        }
    }

    /// The marker that opens a node at this block, if any: items inside an article and numbered
    /// lines out of sequence are body text, not headings.
    fn accepted_marker(&mut self, layout: &LayoutBlock, explicit: Option<u8>) -> Option<Marker> {
        let first_line = layout.text.lines().next().unwrap_or("");
        let marker = if layout.kind == BlockKind::Table || layout.kind == BlockKind::Code {
            None
        } else {
            recognise(first_line, explicit.is_some())
        };
        let in_article = self.stack.last().is_some_and(|o| o.kind == Kind::Article);
        let marker = marker.filter(|m| {
            explicit.is_some()
                || !(in_article
                    && matches!(m.kind, Kind::Numbered(_) | Kind::CnEnum | Kind::CnParen))
        });
        // Recognised numbered headings must continue the numbering (2.3 after 2.2, 2.3.1 after
        // 2.3, 3 after 2.3.1); anything else is a table row, a list or a reference in the text.
        // A run of numbered lines that began out of sequence is a table or a list: the rest of
        // the run is rejected too, even where a number happens to fit.
        let numbered_candidate = explicit.is_none()
            && marker
                .as_ref()
                .is_some_and(|m| matches!(m.kind, Kind::Numbered(_)));
        let marker = marker.filter(|m| {
            explicit.is_some()
                || !matches!(m.kind, Kind::Numbered(_))
                || (!self.in_rejected_run && follows(self.last_number.as_deref(), &m.number))
        });
        self.in_rejected_run = numbered_candidate && marker.is_none();
        if let Some(m) = marker
            .as_ref()
            .filter(|m| matches!(m.kind, Kind::Numbered(_)))
        {
            self.last_number = Some(m.number.clone());
        }
        marker
    }

    /// A block without a marker belongs to whatever node is open.
    fn continue_node(&mut self) {
        self.tree.owner.push(self.stack.last().map(|o| o.node));
        self.tree.opens_node.push(false);
    }

    /// Opens a node for this block under the nearest open node it does not close.
    fn open_node(&mut self, layout: &mut LayoutBlock, marker: Marker, explicit: Option<u8>) {
        let nodes = &mut self.tree.nodes;
        let new = Open {
            node: nodes.len(),
            kind: marker.kind,
            explicit,
        };
        while self.stack.last().is_some_and(|top| closes(top, &new)) {
            self.stack.pop();
        }
        self.stack.truncate(MAX_TREE_DEPTH - 1);
        let parent_idx = self.stack.last().map(|o| o.node as i32);
        let idx = nodes.len() as i32;
        nodes.push(StructureNode {
            unique_id: padded_id("N", idx as usize + 1, 5),
            page: layout.page as i32,
            idx,
            level: self.stack.len() as i32 + 1,
            title: marker.title,
            node_type: if marker.kind == Kind::Article {
                "article"
            } else {
                "heading"
            }
            .to_string(),
            sub_type: marker.kind.sub_type().to_string(),
            parent_idx,
        });
        self.tree.kinds.push(marker.kind);
        if explicit.is_none() && marker.kind != Kind::Article && !layout.text.contains('\n') {
            layout.kind = BlockKind::Heading;
        }
        self.tree.owner.push(Some(new.node));
        self.tree.opens_node.push(true);
        self.stack.push(new);
    }
}

/// Public face of [`recognise`] for callers that want to classify a single line:
/// `(sub_type, title)`.
pub fn recognise_heading(line: &str) -> Option<(&'static str, String)> {
    recognise(line, false).map(|m| (m.kind.sub_type(), m.title))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> Option<Kind> {
        recognise(line, false).map(|m| m.kind)
    }

    #[test]
    fn long_lines_are_judged_by_their_opening() {
        let body = "本条例所称数据处理，包括数据的收集、存储、使用、加工、传输。".repeat(40);
        let article = recognise(&format!("第十条【立法目的】{body}"), false).unwrap();
        assert_eq!(article.kind, Kind::Article);
        assert_eq!(article.title, "第十条 立法目的");
        // Long enough that only its opening is read: still never a chapter or a numbered heading.
        assert_eq!(kind(&format!("第三章 {body}")), None);
        assert_eq!(kind(&format!("1. {body}")), None);
        assert_eq!(kind(&format!("（一）{body}")), None);
        // Explicit headings are read whole.
        let explicit = recognise(&format!("附则 {body}"), true).unwrap();
        assert!(explicit.title.ends_with('。'), "{}", explicit.title);
    }

    #[test]
    fn recognises_regulation_markers() {
        assert_eq!(recognise("第 十 条 ", false).unwrap().title, "第十条");
        assert_eq!(
            recognise("第一百零一条　内容", false).unwrap().title,
            "第一百零一条"
        );
        assert_eq!(
            recognise("第十条【立法目的】为了", false).unwrap().title,
            "第十条 立法目的"
        );
        assert_eq!(recognise("## x", false), None);
        assert_eq!(
            recognise("第一章  总则", false).unwrap().title,
            "第一章 总则"
        );
        assert_eq!(
            recognise("第 一 章 总 则", false).unwrap().title,
            "第一章 总则"
        );
        assert_eq!(kind("第二编 物权"), Some(Kind::Part));
        assert_eq!(kind("第三节 风险评估"), Some(Kind::Section));
        assert_eq!(kind("\u{200B}第五条 内容"), Some(Kind::Article));
    }

    #[test]
    fn rejects_cross_references_and_body_text() {
        assert_eq!(kind("第三十条规定的情形，依照本法处罚。"), None);
        assert_eq!(kind("第三章规定的义务"), None);
        assert_eq!(kind("第二章至第四章的规定，适用于本条例。"), None);
        assert_eq!(
            kind("2019 年 10 月 30 日 漯河市第七届人民代表大会常务委员会"),
            None
        );
        assert_eq!(kind("3 月 1 日"), None);
        assert_eq!(kind("（一）数据分类分级保护制度；"), None);
    }

    #[test]
    fn recognises_numbered_and_enumerated() {
        assert_eq!(kind("1. 范围"), Some(Kind::Numbered(1)));
        assert_eq!(kind("1.1 数据安全应急处置预案"), Some(Kind::Numbered(2)));
        assert_eq!(kind("1.1.1 要求"), Some(Kind::Numbered(3)));
        assert_eq!(kind("一、总体要求"), Some(Kind::CnEnum));
        assert_eq!(kind("（二）工作目标"), Some(Kind::CnParen));
        assert_eq!(kind("12345 things"), None);
        assert_eq!(kind("3.1 日志留存与审计机制"), Some(Kind::Numbered(2)));
        assert_eq!(kind("第一條　為規範"), Some(Kind::Article));
    }

    /// The hand-written marker scanners against the regexes they replaced, on the awkward cases:
    /// spaces inside and around the number, full-width digits, half-width brackets, a missing
    /// unit or body, a line break after the marker.
    #[test]
    fn marker_scanners_agree_with_the_regexes_they_replaced() {
        let regulation = Regex::new(&format!(
            r"^第[ \u{{3000}}]*((?:[{NUMERALS}0-9０-９][ \u{{3000}}]*)+)([编章节条編節條])"
        ))
        .unwrap();
        let cn_enum_re =
            Regex::new(&format!(r"^([{NUMERALS}]+)[、．][ \t\u{{3000}}]*(\S.*)$")).unwrap();
        let cn_paren_re = Regex::new(&format!(
            r"^[（(]([{NUMERALS}]+)[）)][ \t\u{{3000}}]*(\S.*)$"
        ))
        .unwrap();
        let lines = [
            "第一条",
            "第 一 条 x",
            "第　十　章",
            "第12条",
            "第１２条",
            "第条",
            "第一",
            "第一款",
            "第 ",
            "第一百零一條　為",
            "第二編",
            "第三節",
            "第十条规定",
            "第 1 2 3 节",
            "一、总则",
            "一．总则",
            "一、",
            "一、 ",
            "一、\n总则",
            "十二、　x",
            "、x",
            "一 、x",
            "（一）内容",
            "(二)内容",
            "（三) x",
            "（）x",
            "（四）",
            "（五）\u{3000}\u{3000}x",
            "（六） \u{00A0}x",
            "（七）x\ny",
            "两、x",
            "〇、x",
        ];
        for line in lines {
            let want = regulation.captures(line).map(|c| {
                let number: String = c[1].chars().filter(|c| !is_space(*c)).collect();
                let unit = c[2].chars().next().unwrap();
                (number, unit, c.get(0).unwrap().end())
            });
            assert_eq!(regulation_marker(line), want, "{line:?}");
            let want = cn_enum_re
                .captures(line)
                .map(|c| c.get(2).unwrap().as_str());
            assert_eq!(cn_enum(line), want, "{line:?}");
            let want = cn_paren_re
                .captures(line)
                .map(|c| c.get(2).unwrap().as_str());
            assert_eq!(cn_paren(line), want, "{line:?}");
        }
    }

    /// Issue 29 (nesting): a numbered heading and a `一、` line neither close nor rank each other,
    /// so alternating them nested each below the last, thousands deep, and every block carried
    /// a section path that long (250 KB of such text took 3 s and a path per chunk of thousands
    /// of titles). The tree stops at MAX_TREE_DEPTH.
    #[test]
    fn alternating_kinds_nest_no_deeper_than_the_maximum() {
        let mut text = String::new();
        for i in 1..=99 {
            text.push_str(&format!(
                "{i} 标题

一、条目

正文。

"
            ));
        }
        let doc = crate::parse(
            text.as_bytes(),
            &crate::Hint::new("a.txt", ""),
            &crate::Limits::default(),
        )
        .unwrap();
        assert_eq!(
            doc.structure_nodes.len(),
            198,
            "every heading is still a node"
        );
        let deepest = doc.structure_nodes.iter().map(|n| n.level).max().unwrap();
        assert_eq!(deepest as usize, MAX_TREE_DEPTH);
        for n in &doc.structure_nodes {
            if let Some(p) = n.parent_idx {
                assert_eq!(doc.structure_nodes[p as usize].level, n.level - 1);
            }
        }
        assert_eq!(doc.semantic_blocks.len(), 99);
        for b in &doc.semantic_blocks {
            assert!(
                b.section_path.len() <= MAX_TREE_DEPTH,
                "{:?}",
                b.section_path
            );
            assert_eq!(b.section_path.len() as i32, b.section_level);
        }
    }

    #[test]
    fn numbering_sequence() {
        assert!(follows(None, &[1]));
        assert!(follows(Some(&[1]), &[1, 1]));
        assert!(follows(Some(&[1, 1, 1]), &[2]));
        assert!(follows(Some(&[2, 3]), &[2, 4]));
        assert!(!follows(Some(&[4, 2]), &[4, 1]));
        assert!(!follows(Some(&[4, 2]), &[7]));
    }
}
