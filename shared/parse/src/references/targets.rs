//! What a reference points at (article, span, paragraph, item, division), written and read back.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::article_ref::parse_numeral;

/// A numeral as written (Chinese, ASCII or full-width digits), and the spaces a citation may hold.
pub(super) const NUM: &str = "[零〇○一二两三四五六七八九十百千万0-9０-９]+";
pub(super) const SP: &str = "[ \u{3000}]*";

/// An article's number, with the 之M of an inserted article (第三十九条之一 → 39, 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ArticleNo {
    pub number: u32,
    /// 0 for the article itself, M for 之M.
    pub sub: u32,
}

impl ArticleNo {
    pub fn new(number: u32, sub: u32) -> ArticleNo {
        ArticleNo { number, sub }
    }
}

impl fmt::Display for ArticleNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sub {
            0 => write!(f, "{}", self.number),
            m => write!(f, "{}-{m}", self.number),
        }
    }
}

/// What a reference points at. Displayed in the canonical form the API and the labelled set use:
/// `art:39`, `art:39-1`, `art:39:p2`, `art:39:p2:i1`, `art:39:i3`, `arts:18..20`, `art:39:p1..2`,
/// `chapter:3`, `chapter:3/section:2`, `part:3/chapter:2`, `part:3`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Target {
    Article {
        article: ArticleNo,
        paragraph: Option<u32>,
        item: Option<u32>,
    },
    Articles {
        from: ArticleNo,
        to: ArticleNo,
    },
    Paragraphs {
        article: ArticleNo,
        from: u32,
        to: u32,
    },
    /// 前款第四项至第六项
    Items {
        article: ArticleNo,
        paragraph: Option<u32>,
        from: u32,
        to: u32,
    },
    /// The division (编, 章, 节) that holds the citing article, by its numbers from the top.
    Division {
        part: Option<u32>,
        chapter: Option<u32>,
        section: Option<u32>,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Article {
                article,
                paragraph,
                item,
            } => {
                write!(f, "art:{article}")?;
                if let Some(p) = paragraph {
                    write!(f, ":p{p}")?;
                }
                if let Some(i) = item {
                    write!(f, ":i{i}")?;
                }
                Ok(())
            }
            Target::Articles { from, to } => write!(f, "arts:{from}..{to}"),
            Target::Paragraphs { article, from, to } => write!(f, "art:{article}:p{from}..{to}"),
            Target::Items {
                article,
                paragraph,
                from,
                to,
            } => match paragraph {
                Some(p) => write!(f, "art:{article}:p{p}:i{from}..{to}"),
                None => write!(f, "art:{article}:i{from}..{to}"),
            },
            Target::Division {
                part,
                chapter,
                section,
            } => {
                let parts: Vec<String> =
                    [("part", part), ("chapter", chapter), ("section", section)]
                        .into_iter()
                        .filter_map(|(name, n)| n.map(|n| format!("{name}:{n}")))
                        .collect();
                write!(f, "{}", parts.join("/"))
            }
        }
    }
}

impl Target {
    /// The article a target names (its first, for a span), if it names one.
    pub fn article(&self) -> Option<ArticleNo> {
        match self {
            Target::Article { article, .. }
            | Target::Paragraphs { article, .. }
            | Target::Items { article, .. } => Some(*article),
            Target::Articles { from, .. } => Some(*from),
            Target::Division { .. } => None,
        }
    }
}

/// An article as people address it: 第三十九条, 第39条, 三十九, 39, 第三十九条之一, 39-1, 39之一.
pub fn parse_article(s: &str) -> Option<ArticleNo> {
    static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"^{SP}第?{SP}(?P<n>{NUM}){SP}条?{SP}(?:(?:之|-){SP}(?P<m>[一二三四五六七八九十0-9]+))?{SP}$"
        ))
        .expect("static regex")
    });
    let c = ADDRESS.captures(s)?;
    let number = parse_numeral(&c["n"]).filter(|n| *n > 0)?;
    let sub = match c.name("m") {
        Some(m) => parse_numeral(m.as_str()).filter(|m| *m > 0)?,
        None => 0,
    };
    Some(ArticleNo::new(number, sub))
}

/// The article, paragraph and item of a canonical target (`art:39:p2:i1`; a span gives its first):
/// what [`Target`]'s display wrote; none for a division or anything else.
pub fn parse_target(s: &str) -> Option<(ArticleNo, Option<u32>, Option<u32>)> {
    let rest = s.strip_prefix("arts:").or_else(|| s.strip_prefix("art:"))?;
    let mut parts = rest.split(':');
    let first = parts.next()?.split("..").next()?;
    let (number, sub) = match first.split_once('-') {
        Some((n, m)) => (n.parse().ok()?, m.parse().ok()?),
        None => (first.parse().ok()?, 0),
    };
    let (mut paragraph, mut item) = (None, None);
    for part in parts {
        let first = |p: &str| p.split("..").next().and_then(|n| n.parse::<u32>().ok());
        if let Some(p) = part.strip_prefix('p') {
            paragraph = Some(first(p)?);
        } else if let Some(i) = part.strip_prefix('i') {
            item = Some(first(i)?);
        } else {
            return None;
        }
    }
    Some((ArticleNo::new(number, sub), paragraph, item))
}

/// How a citation is written out: 第一千零七十九条之一第三款第（一）项 (what follows the law's name).
pub fn written(article: ArticleNo, paragraph: Option<u32>, item: Option<u32>) -> String {
    use crate::article_ref::chinese_numeral;
    let mut s = format!("第{}条", chinese_numeral(article.number));
    if article.sub > 0 {
        s.push_str(&format!("之{}", chinese_numeral(article.sub)));
    }
    if let Some(p) = paragraph {
        s.push_str(&format!("第{}款", chinese_numeral(p)));
    }
    if let Some(i) = item {
        s.push_str(&format!("第（{}）项", chinese_numeral(i)));
    }
    s
}
