//! What changed between two versions of a law, article by article.
//!
//! Articles are aligned by their text, not their numbers, so that a revision that inserts an
//! article near the front (and renumbers every one after it) still pairs each article with itself:
//!
//! 1. Articles whose text (spaces aside) is identical in both are paired first, in order: the same
//!    number is `unchanged`, another number `renumbered`. These pairs are anchors.
//! 2. Between two anchors, the articles left on each side are paired by similarity (character
//!    bigrams, Dice coefficient at least [`MIN_SIMILARITY`]) in order, within a band of
//!    [`BAND`] positions of the diagonal, so the similarities computed are linear in the number
//!    of articles (the alignment table itself is one cell per pair of a gap's articles, a few bytes
//!    each: about 14 MB for a gap as long as the Civil Code): those pairs are `modified`, with the
//!    spans that changed.
//! 3. What is left is `removed` (only in the old version) or `added` (only in the new one).
//!
//! An article paired with itself whose chapter differs has also `moved`. An article whose text is
//! identical in both versions is never reported as modified, added or removed.

use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Articles closer than this are the same article, changed.
pub const MIN_SIMILARITY: f64 = 0.5;
/// How far from the diagonal of a gap an article looks for its partner.
pub const BAND: usize = 24;
/// Characters of either text the span diff compares at most; past it, the whole text is the span.
pub const MAX_SPAN_CHARS: usize = 4_000;

/// One article of a version, in the order of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Article {
    /// As written: 第十条, 第十条之一.
    pub number: String,
    /// The chapter (and section) it stands in, as a path of titles; empty when none.
    pub chapter: String,
    /// The text without its number.
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Unchanged,
    Renumbered,
    Modified,
    Added,
    Removed,
}

/// A run of text that differs: what the old version says there and what the new one says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArticleChange {
    pub change: Change,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_number: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_number: Option<String>,
    /// Its chapter changed.
    pub moved: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_chapter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_chapter: Option<String>,
    /// For a modified article, how alike the two texts are (0–1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// For a modified article, what changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<Span>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub old_articles: usize,
    pub new_articles: usize,
    pub unchanged: usize,
    pub renumbered: usize,
    pub modified: usize,
    pub added: usize,
    pub removed: usize,
    pub moved: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub counts: Counts,
    /// In the new version's order, each removed article after the one it followed.
    pub articles: Vec<ArticleChange>,
}

impl Article {
    /// An article block as (section title, section path, text): its number, its chapter (the
    /// path between the law's title and the article) and its text without the number.
    pub fn from_block((title, path, text): (String, Vec<String>, String)) -> Article {
        let chapter = match path.len() {
            0..=2 => String::new(),
            n => path[1..n - 1].join(" > "),
        };
        let number = title
            .split_whitespace()
            .next()
            .unwrap_or(&title)
            .to_string();
        let body = text
            .strip_prefix(number.as_str())
            .map(|rest| rest.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{3000}'))
            .unwrap_or(&text)
            .to_string();
        Article {
            number,
            chapter,
            text: body,
        }
    }
}

/// Whether `article` changed in the version whose articles are `later`: not if its text is there
/// under any number (it may have been renumbered), yes if its number is there with another text,
/// unknown (none) if neither.
pub fn changed_in(later: &[Article], article: &Article) -> Option<bool> {
    let key = squeezed(&article.text);
    if later.iter().any(|a| squeezed(&a.text) == key) {
        return Some(false);
    }
    later
        .iter()
        .any(|a| a.number == article.number)
        .then_some(true)
}

/// The text with every kind of space removed: what "identical" compares.
fn squeezed(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '\u{3000}')
        .collect()
}

pub fn diff(old: &[Article], new: &[Article]) -> Diff {
    let old_keys: Vec<String> = old.iter().map(|a| squeezed(&a.text)).collect();
    let new_keys: Vec<String> = new.iter().map(|a| squeezed(&a.text)).collect();
    let mut pair_of_new: Vec<Option<usize>> = vec![None; new.len()];
    let anchors = identical_anchors(&old_keys, &new_keys);
    let mut taken_old = vec![false; old.len()];
    for &(i, j) in &anchors {
        pair_of_new[j] = Some(i);
        taken_old[i] = true;
    }
    // Identical text out of order (two articles that swapped places) is still the same article:
    // paired too, though not an anchor.
    let mut unpaired: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, key) in old_keys.iter().enumerate().rev() {
        if !taken_old[i] && !key.is_empty() {
            unpaired.entry(key.as_str()).or_default().push(i);
        }
    }
    for (j, key) in new_keys.iter().enumerate() {
        if pair_of_new[j].is_none() {
            if let Some(i) = unpaired.get_mut(key.as_str()).and_then(Vec::pop) {
                taken_old[i] = true;
                pair_of_new[j] = Some(i);
            }
        }
    }
    // Between anchors: pair what is left by similarity.
    let mut similar: HashMap<usize, (usize, f64)> = HashMap::new();
    let mut gap_start = (0usize, 0usize);
    let end = (old.len(), new.len());
    for &(ai, aj) in anchors.iter().chain(std::iter::once(&end)) {
        let olds: Vec<usize> = (gap_start.0..ai).filter(|&i| !taken_old[i]).collect();
        let news: Vec<usize> = (gap_start.1..aj)
            .filter(|&j| pair_of_new[j].is_none())
            .collect();
        for (i, j, s) in align_gap(&old_keys, &new_keys, &olds, &news) {
            similar.insert(j, (i, s));
        }
        gap_start = (ai + 1, aj + 1);
    }
    assemble(old, new, &old_keys, &new_keys, &pair_of_new, &similar)
}

/// Pairs of identical texts, in order on both sides (the longest such chain, greedy: each new
/// article takes the first unused identical old one after the last pair).
fn identical_anchors(old: &[String], new: &[String]) -> Vec<(usize, usize)> {
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, k) in old.iter().enumerate() {
        positions.entry(k.as_str()).or_default().push(i);
    }
    let mut used = HashSet::new();
    let mut pairs = Vec::new();
    let mut after = 0usize;
    for (j, k) in new.iter().enumerate() {
        if k.is_empty() {
            continue;
        }
        let Some(candidates) = positions.get(k.as_str()) else {
            continue;
        };
        if let Some(&i) = candidates
            .iter()
            .find(|&&i| i >= after && !used.contains(&i))
        {
            used.insert(i);
            pairs.push((i, j));
            after = i + 1;
        }
    }
    pairs
}

fn bigrams(s: &str) -> HashMap<(char, char), u32> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = HashMap::new();
    for w in chars.windows(2) {
        *out.entry((w[0], w[1])).or_insert(0) += 1;
    }
    if chars.len() == 1 {
        out.insert((chars[0], chars[0]), 1);
    }
    out
}

/// Dice coefficient of the two texts' character bigrams.
pub fn similarity(a: &str, b: &str) -> f64 {
    dice(&bigrams(a), &bigrams(b))
}

/// Dice coefficient of two bigram counts: the gap aligner counts each article's bigrams once and
/// compares them many times.
fn dice(x: &HashMap<(char, char), u32>, y: &HashMap<(char, char), u32>) -> f64 {
    let (nx, ny): (u32, u32) = (x.values().sum(), y.values().sum());
    if nx + ny == 0 {
        return 0.0;
    }
    let common: u32 = x
        .iter()
        .map(|(k, n)| (*n).min(*y.get(k).unwrap_or(&0)))
        .sum();
    2.0 * f64::from(common) / f64::from(nx + ny)
}

/// Pairs within one gap by similarity, in order: dynamic programming over the band around the
/// gap's diagonal, maximising the summed similarity of the pairs taken.
fn align_gap(
    old: &[String],
    new: &[String],
    olds: &[usize],
    news: &[usize],
) -> Vec<(usize, usize, f64)> {
    let (n, m) = (olds.len(), news.len());
    if n == 0 || m == 0 {
        return Vec::new();
    }
    let grams_old: Vec<_> = olds.iter().map(|&i| bigrams(&old[i])).collect();
    let grams_new: Vec<_> = news.iter().map(|&j| bigrams(&new[j])).collect();
    let sim = |a: usize, b: usize| dice(&grams_old[a], &grams_new[b]);
    // Only cells within BAND of the diagonal (scaled to the gap's shape) are considered.
    let near = |a: usize, b: usize| {
        let expected = a * m / n;
        expected.abs_diff(b) <= BAND
    };
    let mut score = vec![vec![0f64; m + 1]; n + 1];
    let mut took = vec![vec![0u8; m + 1]; n + 1];
    let mut sims: HashMap<(usize, usize), f64> = HashMap::new();
    for a in 1..=n {
        for b in 1..=m {
            let mut best = (score[a - 1][b], 1u8);
            if score[a][b - 1] > best.0 {
                best = (score[a][b - 1], 2);
            }
            if near(a - 1, b - 1) {
                let s = sim(a - 1, b - 1);
                if s >= MIN_SIMILARITY && score[a - 1][b - 1] + s > best.0 {
                    best = (score[a - 1][b - 1] + s, 3);
                    sims.insert((a - 1, b - 1), s);
                }
            }
            score[a][b] = best.0;
            took[a][b] = best.1;
        }
    }
    let (mut a, mut b) = (n, m);
    let mut pairs = Vec::new();
    while a > 0 && b > 0 {
        match took[a][b] {
            3 => {
                pairs.push((olds[a - 1], news[b - 1], sims[&(a - 1, b - 1)]));
                a -= 1;
                b -= 1;
            }
            2 => b -= 1,
            _ => a -= 1,
        }
    }
    pairs.reverse();
    pairs
}

/// The diff in the new version's order: each new article with its partner (identical, or similar
/// within a gap) or as added, and each old article left unpaired as removed where it stood.
fn assemble(
    old: &[Article],
    new: &[Article],
    old_keys: &[String],
    new_keys: &[String],
    identical: &[Option<usize>],
    similar: &HashMap<usize, (usize, f64)>,
) -> Diff {
    let mut paired_old = vec![false; old.len()];
    for i in identical.iter().flatten() {
        paired_old[*i] = true;
    }
    for (i, _) in similar.values() {
        paired_old[*i] = true;
    }
    let mut out = Assembly {
        old,
        paired_old,
        next_old: 0,
        articles: Vec::with_capacity(new.len()),
        counts: Counts {
            old_articles: old.len(),
            new_articles: new.len(),
            ..Counts::default()
        },
    };
    for (j, b) in new.iter().enumerate() {
        let partner = identical[j]
            .map(|i| (i, None))
            .or_else(|| similar.get(&j).map(|(i, s)| (*i, Some(*s))));
        match partner {
            Some((i, s)) => {
                let spans = match s {
                    Some(_) => spans(&old_keys[i], &new_keys[j]),
                    None => Vec::new(),
                };
                out.paired(i, b, s, spans);
            }
            None => out.added(b),
        }
    }
    out.removed_until(old.len());
    Diff {
        counts: out.counts,
        articles: out.articles,
    }
}

/// The diff as it is written, new article by new article.
struct Assembly<'a> {
    old: &'a [Article],
    paired_old: Vec<bool>,
    /// The first old article not yet written.
    next_old: usize,
    articles: Vec<ArticleChange>,
    counts: Counts,
}

impl Assembly<'_> {
    /// Old articles before `upto` that nothing pairs with, written as removed where they stood.
    fn removed_until(&mut self, upto: usize) {
        while self.next_old < upto {
            if !self.paired_old[self.next_old] {
                let a = &self.old[self.next_old];
                self.counts.removed += 1;
                self.articles.push(ArticleChange {
                    change: Change::Removed,
                    old_number: Some(a.number.clone()),
                    new_number: None,
                    moved: false,
                    old_chapter: Some(a.chapter.clone()),
                    new_chapter: None,
                    similarity: None,
                    spans: Vec::new(),
                });
            }
            self.next_old += 1;
        }
    }

    /// A new article and its old partner: unchanged or renumbered when identical, modified when
    /// only similar (`similarity` is then its score).
    fn paired(&mut self, i: usize, b: &Article, similarity: Option<f64>, spans: Vec<Span>) {
        self.removed_until(i);
        self.next_old = self.next_old.max(i + 1);
        let a = &self.old[i];
        let moved = a.chapter != b.chapter;
        self.counts.moved += usize::from(moved);
        let change = match similarity {
            None if a.number == b.number => Change::Unchanged,
            None => Change::Renumbered,
            Some(_) => Change::Modified,
        };
        match change {
            Change::Unchanged => self.counts.unchanged += 1,
            Change::Renumbered => self.counts.renumbered += 1,
            _ => self.counts.modified += 1,
        }
        self.articles.push(ArticleChange {
            change,
            old_number: Some(a.number.clone()),
            new_number: Some(b.number.clone()),
            moved,
            old_chapter: moved.then(|| a.chapter.clone()),
            new_chapter: moved.then(|| b.chapter.clone()),
            similarity: similarity.map(|s| (s * 1000.0).round() / 1000.0),
            spans,
        });
    }

    fn added(&mut self, b: &Article) {
        self.counts.added += 1;
        self.articles.push(ArticleChange {
            change: Change::Added,
            old_number: None,
            new_number: Some(b.number.clone()),
            moved: false,
            old_chapter: None,
            new_chapter: Some(b.chapter.clone()),
            similarity: None,
            spans: Vec::new(),
        });
    }
}

/// The runs where two texts differ, by a character LCS; one span of the whole texts past
/// [`MAX_SPAN_CHARS`].
pub fn spans(old: &str, new: &str) -> Vec<Span> {
    let (a, b): (Vec<char>, Vec<char>) = (old.chars().collect(), new.chars().collect());
    if a.len() > MAX_SPAN_CHARS || b.len() > MAX_SPAN_CHARS {
        return vec![Span {
            old: old.to_string(),
            new: new.to_string(),
        }];
    }
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the LCS of a[i..] and b[j..].
    let mut lcs = vec![0u16; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if a[i] == b[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    let mut cur = Span {
        old: String::new(),
        new: String::new(),
    };
    let flush = |cur: &mut Span, out: &mut Vec<Span>| {
        if !cur.old.is_empty() || !cur.new.is_empty() {
            out.push(std::mem::replace(
                cur,
                Span {
                    old: String::new(),
                    new: String::new(),
                },
            ));
        }
    };
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            flush(&mut cur, &mut out);
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[at(i, j + 1)] >= lcs[at(i + 1, j)]) {
            cur.new.push(b[j]);
            j += 1;
        } else {
            cur.old.push(a[i]);
            i += 1;
        }
    }
    flush(&mut cur, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn art(number: &str, chapter: &str, text: &str) -> Article {
        Article {
            number: number.into(),
            chapter: chapter.into(),
            text: text.into(),
        }
    }

    #[test]
    fn an_insertion_near_the_front_renumbers_without_changing() {
        let old = vec![
            art("第一条", "第一章", "为了规范数据处理活动，制定本法。"),
            art(
                "第二条",
                "第一章",
                "在中华人民共和国境内开展数据处理活动，适用本法。",
            ),
            art("第三条", "第二章", "国家建立数据分类分级保护制度。"),
            art("第四条", "第二章", "违反本法规定的，依法承担法律责任。"),
        ];
        let new = vec![
            art("第一条", "第一章", "为了规范数据处理活动，制定本法。"),
            art(
                "第二条",
                "第一章",
                "数据处理者应当依法履行数据安全保护义务。",
            ),
            art(
                "第三条",
                "第一章",
                "在中华人民共和国境内开展数据处理活动，适用本法。",
            ),
            art(
                "第四条",
                "第二章",
                "国家建立数据分类分级保护制度，并定期更新目录。",
            ),
            art("第五条", "第三章", "违反本法规定的，依法承担法律责任。"),
        ];
        let d = diff(&old, &new);
        let changes: Vec<Change> = d.articles.iter().map(|a| a.change).collect();
        assert_eq!(
            changes,
            [
                Change::Unchanged,
                Change::Added,
                Change::Renumbered,
                Change::Modified,
                Change::Renumbered
            ]
        );
        assert!(d.articles[4].moved);
        assert_eq!(d.counts.moved, 1);
        assert_eq!(
            d.articles[3].spans,
            [Span {
                old: String::new(),
                new: "，并定期更新目录".into()
            }]
        );
        assert_eq!((d.counts.added, d.counts.removed), (1, 0));
    }

    #[test]
    fn identical_text_is_never_modified_added_or_removed_and_removals_keep_their_place() {
        let old = vec![
            art("第一条", "", "甲。"),
            art("第二条", "", "乙条文的内容。"),
            art("第三条", "", "丙。"),
        ];
        let new = vec![art("第一条", "", "甲。"), art("第二条", "", "丙。")];
        let d = diff(&old, &new);
        let got: Vec<(Change, Option<&str>)> = d
            .articles
            .iter()
            .map(|a| (a.change, a.old_number.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Change::Unchanged, Some("第一条")),
                (Change::Removed, Some("第二条")),
                (Change::Renumbered, Some("第三条")),
            ]
        );
    }

    #[test]
    fn two_identical_articles_that_swapped_places_are_both_renumbered() {
        let old = vec![
            art("第一条", "", "甲条的内容。"),
            art("第二条", "", "乙条的内容。"),
        ];
        let new = vec![
            art("第一条", "", "乙条的内容。"),
            art("第二条", "", "甲条的内容。"),
        ];
        let d = diff(&old, &new);
        assert_eq!(d.counts.renumbered, 2, "{:?}", d.counts);
        assert_eq!(d.counts.added + d.counts.removed + d.counts.modified, 0);
    }

    #[test]
    fn a_renumbered_article_did_not_change_and_a_rewritten_one_did() {
        let later = vec![
            art("第一条", "", "新增的条文。"),
            art("第二条", "", "原来的第一条。"),
        ];
        assert_eq!(
            changed_in(&later, &art("第一条", "", "原来的第一条。")),
            Some(false)
        );
        assert_eq!(
            changed_in(&later, &art("第二条", "", "删去的条文。")),
            Some(true)
        );
        assert_eq!(changed_in(&later, &art("第九条", "", "删去的条文。")), None);
        let block = Article::from_block((
            "第十条".into(),
            vec!["某法".into(), "第二章 管理".into(), "第十条".into()],
            "第十条　条文。".into(),
        ));
        assert_eq!(
            (block.chapter.as_str(), block.text.as_str()),
            ("第二章 管理", "条文。")
        );
    }

    #[test]
    fn spans_are_the_runs_that_differ() {
        assert_eq!(
            spans("处五万元以下罚款", "处十万元以下罚款"),
            [Span {
                old: "五".into(),
                new: "十".into()
            }]
        );
        assert!(spans("相同", "相同").is_empty());
        assert!(similarity("国家秘密", "国家秘密") > 0.99);
        assert!(similarity("国家秘密", "数据安全") < 0.01);
    }
}
