//! The keyword analyzer: how an article and a query become the terms that the keyword index
//! (`db::keyword`) scores with BM25.
//!
//! Each choice was measured on the tune part of `corpus/questions` (scripts/retrieval/README.md,
//! "Variants"), against the rank_bm25 baseline: jieba's search-mode tokens plus overlapping
//! character bigrams (the bigrams catch words the dictionary splits differently in a question and
//! in a statute), the law's title and the article's headings in front of its text (an article
//! rarely repeats the name of its law), punctuation and function words dropped on both sides, and
//! question words dropped from the query only. Tokens are counted with repetition on both sides.
//!
//! The analyzer has a version, [`ANALYZER`]; every indexed document records the one that indexed
//! it, and `docpipe reindex-keywords` re-analyses the documents of an older one from
//! `semantic_blocks` without parsing or embedding anything.

use jieba_rs::Jieba;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// Bump when anything below changes what terms a text yields or how they are weighted.
pub const ANALYZER: &str = "jieba-search+bigram/v1";
/// BM25 term-frequency saturation, tuned on the tune part (k1 1.2, b 0.9).
pub const K1: f64 = 1.2;
/// BM25 length normalisation.
pub const B: f64 = 0.9;
/// The length a block is normalised against. Lucene divides by the live average; a fixed pivot
/// lets each posting carry its final weight, so a query reads the best postings of a term first
/// and can stop early. It is about the average article of the corpus's laws (158 terms).
pub(crate) const PIVOT_LENGTH: f64 = 160.0;

const STOP_WORDS: &str = include_str!("stopwords.txt");
const QUESTION_WORDS: &str = include_str!("particles.txt");

/// A term as the index stores it: FNV-1a of its UTF-8 bytes. 64 bits keep collisions out of reach
/// (about 1 in 10^8 for a million distinct terms), and the index stays integer-keyed.
pub type TermId = i64;

pub(crate) fn term_id(term: &str) -> TermId {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in term.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash as i64
}

/// A block's terms: each distinct term with its count, and the block's length in terms.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockTerms {
    pub terms: Vec<(TermId, u32)>,
    pub length: u32,
}

impl BlockTerms {
    /// BM25's term-frequency part for one term of this block, with the fixed pivot.
    pub fn impact(&self, tf: u32) -> f64 {
        let tf = f64::from(tf);
        let norm = K1 * (1.0 - B + B * f64::from(self.length) / PIVOT_LENGTH);
        tf * (K1 + 1.0) / (tf + norm)
    }
}

pub struct Analyzer {
    jieba: Jieba,
    stop: HashSet<&'static str>,
    question: HashSet<&'static str>,
}

fn word_list(text: &'static str) -> HashSet<&'static str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Letters, digits and CJK: a token without any is punctuation or space.
fn is_wordy(token: &str) -> bool {
    token.chars().any(|c| c.is_alphanumeric() || c == '_')
}

impl Analyzer {
    /// Loading jieba's dictionary takes ~0.4 s: once per process.
    pub fn shared() -> &'static Analyzer {
        static SHARED: OnceLock<Analyzer> = OnceLock::new();
        SHARED.get_or_init(|| Analyzer {
            jieba: Jieba::new(),
            stop: word_list(STOP_WORDS),
            question: word_list(QUESTION_WORDS),
        })
    }

    fn tokens<'t>(&self, text: &'t str, out: &mut Vec<&'t str>) {
        out.extend(
            self.jieba
                .cut_for_search(text, true)
                .into_iter()
                .map(|t| t.word),
        );
        bigrams(text, out);
    }

    /// The terms of one block, as indexed: its law's title, its headings, its text.
    pub fn block_terms(&self, title: &str, section_path: &[String], text: &str) -> BlockTerms {
        let mut head = String::with_capacity(title.len() + 64);
        head.push_str(title);
        for part in section_path {
            head.push('\n');
            head.push_str(part);
        }
        let lowered_head = head.to_lowercase();
        let lowered_text = text.to_lowercase();
        let mut tokens = Vec::new();
        self.tokens(&lowered_head, &mut tokens);
        self.tokens(&lowered_text, &mut tokens);
        let mut counts: HashMap<TermId, u32> = HashMap::new();
        let mut length = 0;
        for t in tokens {
            if is_wordy(t) && !self.stop.contains(t) {
                *counts.entry(term_id(t)).or_default() += 1;
                length += 1;
            }
        }
        let mut terms: Vec<(TermId, u32)> = counts.into_iter().collect();
        terms.sort_unstable();
        BlockTerms { terms, length }
    }

    /// The query's words (jieba's, before bigrams), for showing which passage matched.
    pub fn query_words(&self, query: &str) -> Vec<String> {
        let lowered = query.to_lowercase();
        self.jieba
            .cut(&lowered, true)
            .into_iter()
            .map(|t| t.word)
            .filter(|t| is_wordy(t) && !self.stop.contains(t) && !self.question.contains(t))
            .map(String::from)
            .collect()
    }

    /// The terms of a query with their counts, sorted by term.
    pub fn query_terms(&self, query: &str) -> Vec<(TermId, u32)> {
        let lowered = query.to_lowercase();
        let mut tokens = Vec::new();
        self.tokens(&lowered, &mut tokens);
        let mut counts: HashMap<TermId, u32> = HashMap::new();
        for t in tokens {
            if is_wordy(t) && !self.stop.contains(t) && !self.question.contains(t) {
                *counts.entry(term_id(t)).or_default() += 1;
            }
        }
        let mut terms: Vec<(TermId, u32)> = counts.into_iter().collect();
        terms.sort_unstable();
        terms
    }
}

/// Overlapping character bigrams of each run of letters, digits and CJK; a one-character run is
/// its own term.
fn bigrams<'t>(text: &'t str, out: &mut Vec<&'t str>) {
    let mut run: Vec<usize> = Vec::new();
    let flush = |run: &mut Vec<usize>, end: usize, out: &mut Vec<&'t str>| {
        match run.len() {
            0 => {}
            1 => out.push(&text[run[0]..end]),
            n => {
                for i in 0..n - 1 {
                    let stop = if i + 2 < n { run[i + 2] } else { end };
                    out.push(&text[run[i]..stop]);
                }
            }
        }
        run.clear();
    };
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() || c == '_' {
            run.push(i);
        } else {
            flush(&mut run, i, out);
        }
    }
    flush(&mut run, text.len(), out);
}

/// BM25's inverse document frequency, Lucene's form: never negative, so a term in most blocks
/// still counts a little instead of pushing its blocks down.
pub fn idf(blocks: i64, df: i64) -> f64 {
    let (n, df) = (blocks.max(df) as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigrams_cover_each_run_and_skip_punctuation() {
        let mut out = Vec::new();
        bigrams("劳动合同，法", &mut out);
        assert_eq!(out, vec!["劳动", "动合", "合同", "法"]);
        out.clear();
        bigrams("第39条", &mut out);
        assert_eq!(out, vec!["第3", "39", "9条"]);
    }

    #[test]
    fn query_words_and_punctuation_are_dropped() {
        let a = Analyzer::shared();
        let with = a.query_terms("公司不给交社保怎么办？");
        let has = |w: &str| with.iter().any(|(t, _)| *t == term_id(w));
        assert!(!has("怎么办"));
        assert!(!has("？"));
        assert!(has("社保") && has("公司"));
    }

    #[test]
    fn a_block_counts_its_terms_with_repetition_and_its_title() {
        let a = Analyzer::shared();
        let b = a.block_terms(
            "中华人民共和国劳动合同法",
            &["第三十九条".to_string()],
            "用人单位可以解除劳动合同。劳动合同",
        );
        let tf = |w: &str| {
            b.terms
                .iter()
                .find(|(t, _)| *t == term_id(w))
                .map(|(_, n)| *n)
        };
        assert!(tf("合同").unwrap() >= 3, "title and twice in the text");
        assert_eq!(tf("的"), None);
        assert!(b.length as usize >= b.terms.len());
        assert!(b.impact(3) > b.impact(1));
        assert!(b.impact(100) < K1 + 1.0, "saturates");
    }

    #[test]
    fn idf_falls_with_document_frequency_and_stays_positive() {
        assert!(idf(1000, 1) > idf(1000, 100));
        assert!(idf(1000, 1000) > 0.0);
        assert_ne!(term_id("合同"), term_id("同合"));
    }
}
