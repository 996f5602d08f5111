//! The text's shape: where articles, paragraphs (款) and items (项) begin, and what holds them.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use super::targets::ArticleNo;
use crate::article_ref::{article_number, parse_numeral};
use crate::model::SemanticBlock;
use crate::structure::regulation_marker;

/// One paragraph (款) of an article: its lines, each as (block index, byte range in that block's
/// text), and how many items (项) it has.
#[derive(Debug, Default)]
pub(super) struct Paragraph {
    pub(super) lines: Vec<(usize, Range<usize>)>,
    pub(super) items: u32,
}

/// One article as the text has it, with the divisions that hold it.
#[derive(Debug)]
pub(super) struct Article {
    pub(super) number: ArticleNo,
    pub(super) division: Division,
    pub(super) paragraphs: Vec<Paragraph>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(super) struct Division {
    pub(super) part: Option<u32>,
    pub(super) chapter: Option<u32>,
    pub(super) section: Option<u32>,
}

/// The division numbers a block's section path names (第三编 → part 3, 第二章 → chapter 2, …).
fn division_of(path: &[String]) -> Division {
    let mut d = Division::default();
    for title in path {
        let Some((number, unit, _)) = regulation_marker(title.trim_start()) else {
            continue;
        };
        let n = parse_numeral(&number);
        match unit {
            '编' | '編' => {
                d = Division {
                    part: n,
                    ..Division::default()
                }
            }
            '章' => {
                d.chapter = n;
                d.section = None;
            }
            '节' | '節' => d.section = n,
            _ => {}
        }
    }
    d
}

/// `（一）…`, `(一)…`, `一、…` at the start of a line: an item (项).
fn is_item_line(line: &str) -> bool {
    static ITEM: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[ \u{3000}]*(?:[（(][ \u{3000}]*[零〇一二两三四五六七八九十百]+[ \u{3000}]*[）)]|[零〇一二两三四五六七八九十百]+、)")
            .expect("static regex")
    });
    ITEM.is_match(line)
}

/// `第N条之M` opening a line: the inserted article's number.
fn inserted_article(line: &str) -> Option<ArticleNo> {
    static INSERTED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[ \u{3000}]*第[ \u{3000}]*([零〇一二两三四五六七八九十百千0-9０-９]+)[ \u{3000}]*条之([一二三四五六七八九十]+)")
            .expect("static regex")
    });
    let c = INSERTED.captures(line)?;
    Some(ArticleNo::new(parse_numeral(&c[1])?, parse_numeral(&c[2])?))
}

/// The regulation's articles, in order: each article's blocks (a long one is cut into several)
/// joined, split into paragraphs at line ends, items kept with their paragraph.
pub(super) fn articles(blocks: &[SemanticBlock]) -> Vec<Article> {
    let mut out: Vec<Article> = Vec::new();
    let mut open: Option<(Vec<String>, u32)> = None;
    for (b, block) in blocks.iter().enumerate() {
        let Some(number) = article_number(&block.section_title) else {
            open = None;
            continue;
        };
        let continues = open
            .as_ref()
            .is_some_and(|(path, n)| *path == block.section_path && *n == number);
        if !continues {
            out.push(Article {
                number: ArticleNo::new(number, 0),
                division: division_of(&block.section_path),
                paragraphs: Vec::new(),
            });
            open = Some((block.section_path.clone(), number));
        }
        let mut offset = 0;
        for line in block.text.split('\n') {
            let range = offset..offset + line.len();
            offset += line.len() + 1;
            if line.trim().is_empty() {
                continue;
            }
            let article = out.last_mut().expect("pushed above");
            if let Some(inserted) = inserted_article(line).filter(|a| a.number == number) {
                let division = article.division;
                out.push(Article {
                    number: inserted,
                    division,
                    paragraphs: Vec::new(),
                });
            }
            let article = out.last_mut().expect("pushed above");
            // A block cut inside a paragraph (a long one) goes on in the next block's first line.
            let cut_mid_paragraph = continues && range.start == 0 && !article.paragraphs.is_empty();
            if is_item_line(line) && !article.paragraphs.is_empty() {
                let p = article.paragraphs.last_mut().expect("not empty");
                p.items += 1;
                p.lines.push((b, range));
            } else if cut_mid_paragraph {
                let p = article.paragraphs.last_mut().expect("not empty");
                p.lines.push((b, range));
            } else {
                article.paragraphs.push(Paragraph {
                    lines: vec![(b, range)],
                    items: 0,
                });
            }
        }
    }
    out
}

/// An article as its text has it: paragraphs (款) with their items (项), for serving one article.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArticleText {
    pub number: ArticleNo,
    pub paragraphs: Vec<ParagraphText>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParagraphText {
    /// 1-based.
    pub number: u32,
    /// The paragraph's own lines (its items apart).
    pub text: String,
    pub items: Vec<ItemText>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemText {
    /// 1-based: （一） is 1.
    pub number: u32,
    pub text: String,
}

impl ArticleText {
    /// The whole article, its lines joined.
    pub fn text(&self) -> String {
        let mut lines = Vec::new();
        for p in &self.paragraphs {
            lines.push(p.text.as_str());
            lines.extend(p.items.iter().map(|i| i.text.as_str()));
        }
        lines.join("\n")
    }

    /// The text a target inside this article names: the article, a paragraph, an item, or a span
    /// of paragraphs; none when the article has no such part.
    pub fn part(&self, paragraph: Option<u32>, item: Option<u32>) -> Option<String> {
        match (paragraph, item) {
            (None, None) => Some(self.text()),
            (Some(p), None) => {
                let p = self.paragraphs.get((p as usize).checked_sub(1)?)?;
                let mut lines = vec![p.text.as_str()];
                lines.extend(p.items.iter().map(|i| i.text.as_str()));
                Some(lines.join("\n"))
            }
            (Some(p), Some(i)) => {
                let p = self.paragraphs.get((p as usize).checked_sub(1)?)?;
                Some(p.items.get((i as usize).checked_sub(1)?)?.text.clone())
            }
            (None, Some(i)) => self
                .paragraphs
                .iter()
                .find_map(|p| p.items.get((i as usize).checked_sub(1)?))
                .map(|i| i.text.clone()),
        }
    }
}

/// Every article of a regulation's blocks, split into paragraphs and items as
/// [`extract`](super::extract) reads them.
pub fn article_texts(blocks: &[SemanticBlock]) -> Vec<ArticleText> {
    articles(blocks)
        .into_iter()
        .map(|a| ArticleText {
            number: a.number,
            paragraphs: a
                .paragraphs
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let mut own = Vec::new();
                    let mut items = Vec::new();
                    for (b, range) in &p.lines {
                        let line = &blocks[*b].text[range.clone()];
                        if is_item_line(line) && !own.is_empty() {
                            items.push(ItemText {
                                number: items.len() as u32 + 1,
                                text: line.to_string(),
                            });
                        } else if items.is_empty() {
                            own.push(line);
                        } else if let Some(last) = items.last_mut() {
                            // A long item cut across blocks goes on.
                            last.text.push_str(line);
                        }
                    }
                    ParagraphText {
                        number: k as u32 + 1,
                        text: own.join(""),
                        items,
                    }
                })
                .collect(),
        })
        .collect()
}
