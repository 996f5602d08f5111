//! The forms a reference is written in (第X条, 第一、二款, 前款, 本章, 本法, 《…》), found as atoms.

use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::articles::Division;
use super::targets::{ArticleNo, NUM, SP};
use crate::article_ref::parse_numeral;

/// The pieces a reference is made of, found in one pass; [`chains`] puts them together.
static ATOM: LazyLock<Regex> = LazyLock::new(|| {
    let art =
        format!(r"(?P<art>第{SP}(?P<an>{NUM}){SP}条(?:之(?P<asub>[一二三四五六七八九十0-9]+))?)");
    // 第一、二款 and 第一、二项 name two.
    let para = format!(r"(?P<para>第{SP}(?P<pn>{NUM})(?P<pmore>(?:、{NUM})*){SP}款)");
    let item = format!(
        r"(?P<item>第{SP}(?:[（(]{SP}(?P<in1>{NUM}){SP}[）)](?P<pmore2>(?:、?[（(]{NUM}[）)])*)|(?P<in2>{NUM})(?P<imore>(?:、{NUM})*)){SP}项)"
    );
    let div = format!(r"(?P<div>第{SP}(?P<dn>{NUM}){SP}(?P<du>[编章节]))");
    let rel = r"(?P<rel>本条|前款|上款|前(?P<pk>[两二三四五])款|前条|上一条|前(?P<pa>[两二三])条|本章|本节|本编)";
    let own = r"(?P<own>本(?:法|条例|规定|办法|细则|实施细则|解释|决定|规则|准则))";
    let title = r"(?P<title>《(?P<tname>[^《》\n]{1,80}?(?:〈[^〉\n]*〉[^《》\n]*?)?)》)";
    // `own` before `rel`: 本条例 is the regulation, not 本条 + 例.
    Regex::new(&format!("{art}|{para}|{item}|{own}|{rel}|{title}|{div}")).expect("static regex")
});

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AtomKind {
    Article(ArticleNo),
    Paragraph(u32),
    Item(u32),
    /// 本条
    ThisArticle,
    /// 前款, 前两款 (how many back)
    PreviousParagraphs(u32),
    /// 前条, 前两条
    PreviousArticles(u32),
    Chapter,
    Section,
    Part,
    /// 本法, 本条例…
    Own,
    /// 《…》: its name
    Title,
    /// 第二章, 第一编 (only after 本法/本条例: 本条例第二章)
    Numbered(Division),
}

#[derive(Debug, Clone)]
pub(super) struct Atom {
    pub(super) kind: AtomKind,
    pub(super) range: Range<usize>,
    pub(super) name: Option<String>,
    /// The rest of a compressed list: 第一、二款 → [2].
    pub(super) more: Vec<u32>,
}

fn numbers_after(list: Option<regex::Match<'_>>) -> Vec<u32> {
    list.map(|m| {
        m.as_str()
            .split('、')
            .filter(|n| !n.is_empty())
            .filter_map(parse_numeral)
            .collect()
    })
    .unwrap_or_default()
}

/// Every atom of `text`, in order.
pub(super) fn atoms(text: &str) -> Vec<Atom> {
    ATOM.captures_iter(text)
        .filter_map(|c| {
            let range = c.get(0).expect("group 0").range();
            let (kind, more) = atom_kind(&c, &text[range.end..])?;
            Some(Atom {
                kind,
                range,
                name: c.name("tname").map(|m| m.as_str().to_string()),
                more,
            })
        })
        .collect()
}

/// What one match of [`ATOM`] is, with the rest of its compressed list; none when its number
/// reads as no number, or when it only begins another word (`after` is the text after it).
fn atom_kind(c: &Captures<'_>, after: &str) -> Option<(AtomKind, Vec<u32>)> {
    if c.name("art").is_some() {
        let n = parse_numeral(&c["an"])?;
        let sub = c
            .name("asub")
            .and_then(|m| parse_numeral(m.as_str()))
            .unwrap_or(0);
        Some((AtomKind::Article(ArticleNo::new(n, sub)), Vec::new()))
    } else if c.name("para").is_some() {
        let n = parse_numeral(&c["pn"])?;
        Some((AtomKind::Paragraph(n), numbers_after(c.name("pmore"))))
    } else if c.name("item").is_some() {
        item_atom(c)
    } else if let Some(rel) = c.name("rel") {
        Some((relative_atom(c, rel.as_str(), after)?, Vec::new()))
    } else if c.name("own").is_some() {
        Some((AtomKind::Own, Vec::new()))
    } else if c.name("title").is_some() {
        Some((AtomKind::Title, Vec::new()))
    } else {
        Some((numbered_division(c)?, Vec::new()))
    }
}

/// 第（一）项, 第一、二项, 第（一）（二）项, 第（一）、（二）项.
fn item_atom(c: &Captures<'_>) -> Option<(AtomKind, Vec<u32>)> {
    let n = c.name("in1").or(c.name("in2")).map(|m| m.as_str());
    let n = n.and_then(parse_numeral)?;
    let mut more = numbers_after(c.name("imore"));
    if let Some(list) = c.name("pmore2") {
        more.extend(
            list.as_str()
                .split(['（', '(', '）', ')', '、'])
                .filter(|n| !n.is_empty())
                .filter_map(parse_numeral),
        );
    }
    Some((AtomKind::Item(n), more))
}

/// 本条, 前款, 前两条, 本章…: placed later, where the line stands.
fn relative_atom(c: &Captures<'_>, rel: &str, after: &str) -> Option<AtomKind> {
    let back = |g: &str| {
        c.name(g)
            .and_then(|m| parse_numeral(m.as_str()))
            .unwrap_or(1)
    };
    Some(match rel {
        "本条" => AtomKind::ThisArticle,
        "本章" => {
            if after.starts_with('程') {
                return None; // 本章程: a company's articles of association
            }
            AtomKind::Chapter
        }
        "本节" => {
            if after.starts_with(['能', '约', '日']) {
                return None; // 本节能…, 本节约…, 本节日…
            }
            AtomKind::Section
        }
        "本编" => AtomKind::Part,
        "前条" | "上一条" => AtomKind::PreviousArticles(1),
        "前款" | "上款" => AtomKind::PreviousParagraphs(1),
        s if s.ends_with('款') => AtomKind::PreviousParagraphs(back("pk")),
        _ => AtomKind::PreviousArticles(back("pa")),
    })
}

/// 第二章, 第一编, 第三节.
fn numbered_division(c: &Captures<'_>) -> Option<AtomKind> {
    let n = parse_numeral(&c["dn"])?;
    Some(AtomKind::Numbered(match &c["du"] {
        "编" => Division {
            part: Some(n),
            ..Division::default()
        },
        "章" => Division {
            chapter: Some(n),
            ..Division::default()
        },
        _ => Division {
            section: Some(n),
            ..Division::default()
        },
    }))
}

/// Atoms that touch (nothing but spaces between) form one address: 本法 第三十九条 第一款 第（二）项.
pub(super) fn touches(text: &str, a: &Atom, b: &Atom) -> bool {
    text[a.range.end..b.range.start]
        .chars()
        .all(|c| c == ' ' || c == '\u{3000}')
}
