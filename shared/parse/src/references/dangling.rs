//! Whether the regulation has what a reference names: a target it lacks is marked dangling.

use std::collections::{HashMap, HashSet};

use super::articles::{Article, Division};
use super::targets::{ArticleNo, Target};

/// What the regulation has, to tell a target it has from a dangling one.
pub(super) struct Outline {
    /// Article → its paragraphs' item counts.
    articles: HashMap<ArticleNo, Vec<u32>>,
    divisions: HashSet<Division>,
}

impl Outline {
    pub(super) fn of(articles: &[Article]) -> Outline {
        let mut divisions = HashSet::new();
        for a in articles {
            let d = a.division;
            divisions.insert(d);
            divisions.insert(Division { section: None, ..d });
            divisions.insert(Division {
                chapter: None,
                section: None,
                ..d
            });
        }
        Outline {
            articles: articles
                .iter()
                .map(|a| (a.number, a.paragraphs.iter().map(|p| p.items).collect()))
                .collect(),
            divisions,
        }
    }

    pub(super) fn has(&self, target: &Target) -> bool {
        match target {
            Target::Article {
                article,
                paragraph,
                item,
            } => {
                let Some(paragraphs) = self.articles.get(article) else {
                    return false;
                };
                match (paragraph, item) {
                    (None, None) => true,
                    (Some(p), None) => *p >= 1 && (*p as usize) <= paragraphs.len(),
                    (Some(p), Some(i)) => {
                        *p >= 1
                            && paragraphs
                                .get(*p as usize - 1)
                                .is_some_and(|items| *i >= 1 && i <= items)
                    }
                    // An item with no paragraph named: any paragraph of the article with that many.
                    (None, Some(i)) => *i >= 1 && paragraphs.iter().any(|items| i <= items),
                }
            }
            Target::Articles { from, to } => {
                from < to && self.articles.contains_key(from) && self.articles.contains_key(to)
            }
            Target::Paragraphs { article, from, to } => {
                *from >= 1
                    && from < to
                    && self
                        .articles
                        .get(article)
                        .is_some_and(|p| (*to as usize) <= p.len())
            }
            Target::Items {
                article,
                paragraph,
                from,
                to,
            } => {
                let items = |p: &u32| {
                    (*p as usize)
                        .checked_sub(1)
                        .and_then(|i| self.articles.get(article)?.get(i).copied())
                };
                *from >= 1
                    && from < to
                    && match paragraph {
                        Some(p) => items(p).is_some_and(|n| *to <= n),
                        None => self
                            .articles
                            .get(article)
                            .is_some_and(|ps| ps.iter().any(|n| to <= n)),
                    }
            }
            Target::Division {
                part,
                chapter,
                section,
            } => {
                // A level the text does not number (a code's part cut out on its own) cannot be
                // checked: it is not taken for missing.
                let numbered = |level: fn(&Division) -> Option<u32>| {
                    self.divisions.iter().any(|d| level(d).is_some())
                };
                if part.is_some() && !numbered(|d| d.part)
                    || chapter.is_some() && !numbered(|d| d.chapter)
                    || section.is_some() && !numbered(|d| d.section)
                {
                    return true;
                }
                (part.is_some() || chapter.is_some() || section.is_some())
                    && self.divisions.contains(&Division {
                        part: *part,
                        chapter: *chapter,
                        section: *section,
                    })
            }
        }
    }
}
