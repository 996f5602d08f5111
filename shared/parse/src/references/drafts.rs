//! A reference being read, and the target it comes to once its pieces are in (前款第（一）项).

use std::ops::Range;

use super::targets::{ArticleNo, Target};

/// A reference being read: its law, the article it is at, and the pieces so far.
#[derive(Debug, Clone)]
pub(super) struct Draft {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) law: Option<String>,
    pub(super) article: Option<ArticleNo>,
    pub(super) paragraph: Option<u32>,
    pub(super) item: Option<u32>,
    /// 前两款 / 前两条 / 本章…: the whole target, already placed.
    pub(super) fixed: Option<Target>,
    /// For 至: the first article of the span.
    pub(super) span_from: Option<ArticleNo>,
    /// The rest of a compressed list at the last level given (第一、二款: [2]).
    pub(super) more: Vec<u32>,
    /// For 第四项至第六项: the first item.
    pub(super) item_from: Option<u32>,
    /// Where the list this reference continues began (本法第六条、第二十一条: 本法…), whose verb
    /// governs every member; `usize::MAX` for a reference that begins one.
    pub(super) group: usize,
}

impl Draft {
    /// A reference over `start..end` that begins its own list, with nothing read yet.
    pub(super) fn spanning(start: usize, end: usize) -> Draft {
        Draft {
            start,
            end,
            law: None,
            article: None,
            paragraph: None,
            item: None,
            fixed: None,
            span_from: None,
            more: Vec::new(),
            item_from: None,
            group: usize::MAX,
        }
    }

    /// The one article the draft is at, for a 款 to follow: its article, or the one 前条 names
    /// (前条第二款).
    pub(super) fn one_article(&self) -> Option<ArticleNo> {
        match &self.fixed {
            None => self.article,
            Some(Target::Articles { from, to }) if from == to => Some(*from),
            Some(_) => None,
        }
    }

    pub(super) fn group_start(&self) -> usize {
        if self.group == usize::MAX {
            self.start
        } else {
            self.group
        }
    }
}

/// A reference read from a line: its span, law and target, and where its list began.
pub(super) type Found = (Range<usize>, Option<String>, Target, usize);

impl Draft {
    fn target(&self) -> Option<Target> {
        if let Some(t) = &self.fixed {
            // 前款第四项至第六项
            if let (Target::Paragraphs { article, from, to }, Some(first), Some(last)) =
                (t, self.item_from, self.item)
            {
                if from == to {
                    return Some(Target::Items {
                        article: *article,
                        paragraph: Some(*from),
                        from: first,
                        to: last,
                    });
                }
            }
            return match (t, self.item) {
                // 前款第（一）项
                (Target::Paragraphs { article, from, to }, Some(i)) if from == to => {
                    Some(Target::Article {
                        article: *article,
                        paragraph: Some(*from),
                        item: Some(i),
                    })
                }
                (Target::Paragraphs { article, from, to }, None) if from == to => {
                    Some(Target::Article {
                        article: *article,
                        paragraph: Some(*from),
                        item: None,
                    })
                }
                // 前条, 前条第（一）项
                (Target::Articles { from, to }, item) if from == to => Some(Target::Article {
                    article: *from,
                    paragraph: None,
                    item,
                }),
                _ => Some(t.clone()),
            };
        }
        let article = self.article?;
        if let Some(from) = self.span_from {
            return Some(Target::Articles { from, to: article });
        }
        if let (Some(from), Some(to)) = (self.item_from, self.item) {
            return Some(Target::Items {
                article,
                paragraph: self.paragraph,
                from,
                to,
            });
        }
        Some(Target::Article {
            article,
            paragraph: self.paragraph,
            item: self.item,
        })
    }
}

/// The `back` articles before `article` (前条, 前两条): an inserted article's previous is its
/// base (第三十九条之一's 前条 is 第三十九条).
pub(super) fn previous_articles(article: ArticleNo, back: u32) -> (ArticleNo, ArticleNo) {
    let to = if article.sub > 0 {
        ArticleNo::new(article.number, article.sub - 1)
    } else {
        ArticleNo::new(article.number.saturating_sub(1), 0)
    };
    let from = ArticleNo::new(
        to.number.saturating_sub(back - 1),
        if back == 1 { to.sub } else { 0 },
    );
    (from, to)
}

pub(super) fn push(d: &Draft, out: &mut Vec<Found>) {
    if let Some(t) = d.target() {
        out.push((d.start..d.end, d.law.clone(), t, d.group_start()));
    }
    // 第一、二款: the same reference at the other numbers.
    for n in &d.more {
        let mut other = Draft {
            more: Vec::new(),
            ..d.clone()
        };
        if d.item.is_some() {
            other.item = Some(*n);
        } else if d.paragraph.is_some() {
            other.paragraph = Some(*n);
        } else {
            continue;
        }
        if let Some(t) = other.target() {
            out.push((d.start..d.end, d.law.clone(), t, d.group_start()));
        }
    }
}

pub(super) fn flush(draft: &mut Option<Draft>, out: &mut Vec<Found>) {
    if let Some(d) = draft.take() {
        push(&d, out);
    }
}
