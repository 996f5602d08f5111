//! Feature hashing of character and word n-grams: deterministic, no model, no files.
//!
//! Chinese and Japanese have no spaces, so runs of CJK characters give character 1-, 2- and
//! 3-grams; other scripts give word unigrams and bigrams. Each feature is hashed to one of `dim`
//! buckets with a hashed sign (so collisions cancel out on average instead of piling up), and the
//! vector is L2-normalised. It knows no synonyms: it is for tests of plumbing, and good enough that
//! a sentence copied from a chunk finds that chunk.

use crate::{check_query, check_texts, l2_normalize, EmbedError, Embedder};

pub(crate) const MODEL_ID: &str = "hash-ngram-v1";
pub(crate) const DEFAULT_DIM: usize = 384;

// Unigrams of common characters (的, 和, 法) match everywhere; the 2- and 3-grams carry the
// specific content, so they weigh more.
const W_CJK_1: f32 = 0.4;
const W_CJK_2: f32 = 1.0;
const W_CJK_3: f32 = 1.0;
const W_WORD_1: f32 = 1.0;
const W_WORD_2: f32 = 0.7;

// Distinct seeds keep a CJK bigram from landing where the word with the same code points would.
const SEED_CJK_1: u64 = 0x9E37_79B9_7F4A_7C15;
const SEED_CJK_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const SEED_CJK_3: u64 = 0x1656_67B1_9E37_79F9;
const SEED_WORD_1: u64 = 0x27D4_EB2F_1656_67C5;
const SEED_WORD_2: u64 = 0x85EB_CA77_C2B2_AE63;
const SEED_OTHER: u64 = 0xFF51_AFD7_ED55_8CCD;

#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dim: usize,
    drill: Drill,
}

/// What the liveness drills make the test embedder do, so that a pipeline test can have index work
/// that takes time, an invocation that never ends on its own, or poison documents
/// (`DOCPIPE_HASH_DELAY_MS`, `DOCPIPE_HASH_HANG_ONCE`, `DOCPIPE_HASH_HANG_ON`,
/// `DOCPIPE_HASH_BALLOON_ON`). Off unless set; only the hashing embedder has them.
#[derive(Debug, Clone, Default)]
pub struct Drill {
    /// Time each passage takes, as a slow embedder's would.
    pub delay_per_passage: std::time::Duration,
    /// The first call in any process that finds no file at this path creates it and then blocks
    /// its thread for an hour: only killing the process stops it.
    pub hang_once: Option<std::path::PathBuf>,
    /// A batch with a passage containing this text blocks its thread for an hour, every time: a
    /// document no attempt can finish.
    pub hang_on: Option<String>,
    /// A batch with a passage containing this text allocates memory without end (64 MiB at a
    /// time, touched): a document that runs its function out of memory.
    pub balloon_on: Option<String>,
}

impl HashEmbedder {
    pub fn new(dim: usize) -> Result<Self, EmbedError> {
        if dim == 0 || dim > 65_536 {
            return Err(EmbedError::config(
                "DOCPIPE_EMBED_DIM",
                format!("{dim} is not a usable dimension for the hashing embedder"),
            ));
        }
        Ok(HashEmbedder {
            dim,
            drill: Drill::default(),
        })
    }

    pub fn with_drill(mut self, drill: Drill) -> Self {
        self.drill = drill;
        self
    }

    /// Embeds one text synchronously (it takes microseconds, so no blocking thread is needed).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let mut acc = Acc { v: &mut v, n: 0 };
        featurize(text, &mut acc);
        if acc.n == 0 {
            // Only punctuation or symbols: hash them, so the vector is not all zeros.
            for c in text.chars().filter(|c| !c.is_whitespace()) {
                acc.add(mix(SEED_OTHER, c as u64), 1.0);
            }
        }
        l2_normalize(&mut v);
        v
    }
}

impl Default for HashEmbedder {
    fn default() -> Self {
        HashEmbedder {
            dim: DEFAULT_DIM,
            drill: Drill::default(),
        }
    }
}

#[async_trait::async_trait]
impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_texts(texts)?;
        if let Some(marker) = &self.drill.hang_once {
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(marker)
                .is_ok()
            {
                // Blocks the thread, not just this future: as CPU-bound work would.
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        let has = |marker: &Option<String>| {
            marker
                .as_deref()
                .is_some_and(|m| texts.iter().any(|t| t.contains(m)))
        };
        if has(&self.drill.hang_on) {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        if has(&self.drill.balloon_on) {
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                held.push(vec![1u8; 64 << 20]);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        if !self.drill.delay_per_passage.is_zero() {
            tokio::time::sleep(self.drill.delay_per_passage * texts.len() as u32).await;
        }
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        check_query(text)?;
        Ok(self.embed(text))
    }
}

struct Acc<'a> {
    v: &'a mut [f32],
    n: usize,
}

impl Acc<'_> {
    #[inline]
    fn add(&mut self, h: u64, w: f32) {
        // Lemire's multiply-shift maps the high bits to [0, dim) without a division.
        let idx = ((h >> 32) * self.v.len() as u64) >> 32;
        let sign = if h & 1 == 0 { w } else { -w };
        self.v[idx as usize] += sign;
        self.n += 1;
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Cjk,
    Word,
    Space,
    Punct,
}

fn classify(c: char) -> Class {
    let u = c as u32;
    if matches!(u,
        0x3040..=0x30FF        // Hiragana, Katakana
        | 0x3400..=0x4DBF      // CJK Extension A
        | 0x4E00..=0x9FFF      // CJK Unified Ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK Compatibility Ideographs
        | 0x20000..=0x3134F)
    // Extensions B–G (GB18030's 4-byte characters)
    {
        Class::Cjk
    } else if c.is_alphanumeric() {
        Class::Word
    } else if c.is_whitespace() {
        Class::Space
    } else {
        Class::Punct
    }
}

/// Full-width ASCII (ＡＢＣ１２３, common in Chinese documents) folds to ASCII, and letters to
/// lower case, so "ＧＤＰ" and "gdp" are one word.
#[inline]
fn fold(c: char) -> char {
    let u = c as u32;
    let c = if (0xFF01..=0xFF5E).contains(&u) {
        char::from_u32(u - 0xFEE0).unwrap_or(c)
    } else if u == 0x3000 {
        ' '
    } else {
        c
    };
    if c.is_ascii() {
        c.to_ascii_lowercase()
    } else if c.is_uppercase() {
        c.to_lowercase().next().unwrap_or(c)
    } else {
        c
    }
}

#[inline]
fn mix(seed: u64, x: u64) -> u64 {
    // splitmix64's finaliser: cheap, and every input bit reaches every output bit.
    let mut z = seed ^ x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn featurize(text: &str, acc: &mut Acc<'_>) {
    // Last two CJK characters of the current run (0 = none).
    let (mut c1, mut c2) = (0u64, 0u64);
    // Hash of the word being read, and of the previous word within the same clause.
    let mut word: u64 = 0;
    let mut in_word = false;
    let mut prev_word: Option<u64> = None;

    let end_word = |word: &mut u64, in_word: &mut bool, prev: &mut Option<u64>, acc: &mut Acc| {
        if *in_word {
            acc.add(mix(SEED_WORD_1, *word), W_WORD_1);
            if let Some(p) = *prev {
                acc.add(mix(SEED_WORD_2, p.rotate_left(17) ^ *word), W_WORD_2);
            }
            *prev = Some(*word);
            *word = 0;
            *in_word = false;
        }
    };

    for c in text.chars().map(fold) {
        match classify(c) {
            Class::Cjk => {
                end_word(&mut word, &mut in_word, &mut prev_word, acc);
                prev_word = None;
                let x = c as u64;
                acc.add(mix(SEED_CJK_1, x), W_CJK_1);
                if c1 != 0 {
                    acc.add(mix(SEED_CJK_2, (c1 << 21) | x), W_CJK_2);
                    if c2 != 0 {
                        acc.add(mix(SEED_CJK_3, (c2 << 42) | (c1 << 21) | x), W_CJK_3);
                    }
                }
                c2 = c1;
                c1 = x;
            }
            Class::Word => {
                c1 = 0;
                c2 = 0;
                word = (word.rotate_left(21) ^ c as u64).wrapping_mul(0x100_0000_01B3);
                in_word = true;
            }
            Class::Space => {
                // A space ends a word but keeps the clause (word bigrams span it); between CJK
                // characters it is usually letter-spacing from a PDF, so the run goes on.
                end_word(&mut word, &mut in_word, &mut prev_word, acc);
            }
            Class::Punct => {
                end_word(&mut word, &mut in_word, &mut prev_word, acc);
                prev_word = None;
                c1 = 0;
                c2 = 0;
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut prev_word, acc);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosine;

    #[test]
    fn deterministic_normalised_and_sized() {
        let e = HashEmbedder::default();
        let a = e.embed("第一条 为了保护个人信息权益，规范个人信息处理活动。");
        assert_eq!(a.len(), 384);
        assert_eq!(
            a,
            e.embed("第一条 为了保护个人信息权益，规范个人信息处理活动。")
        );
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
        let p = e.embed("……！！");
        assert!((cosine(&p, &p) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn full_width_and_case_fold() {
        let e = HashEmbedder::default();
        let a = e.embed("ＧＤＰ　Growth");
        let b = e.embed("gdp growth");
        assert!(cosine(&a, &b) > 0.999);
    }

    #[test]
    fn letter_spaced_pdf_text_still_matches() {
        let e = HashEmbedder::default();
        let a = e.embed("第一条 为了规范养犬行为");
        let b = e.embed("第 一 条 为 了 规 范 养 犬 行 为");
        assert!(cosine(&a, &b) > 0.99, "{}", cosine(&a, &b));
    }

    #[tokio::test]
    async fn empty_text_is_a_permanent_error() {
        let e = HashEmbedder::default();
        let err = e
            .embed_passages(&["ok".into(), "  ".into()])
            .await
            .unwrap_err();
        assert!(matches!(err, EmbedError::EmptyInput { index: 1 }));
        assert!(err.is_permanent());
        assert!(e.embed_passages(&[]).await.unwrap().is_empty());
    }

    #[test]
    fn sentence_finds_its_own_paragraph() {
        let e = HashEmbedder::default();
        let paras = crate::testdata::PARAGRAPHS;
        let pv: Vec<Vec<f32>> = paras.iter().map(|(_, p)| e.embed(p)).collect();
        for (i, (_, p)) in paras.iter().enumerate() {
            for sentence in p.split_inclusive('。').filter(|s| s.chars().count() >= 12) {
                let q = e.embed(sentence);
                let best = (0..pv.len())
                    .max_by(|&a, &b| cosine(&q, &pv[a]).total_cmp(&cosine(&q, &pv[b])))
                    .unwrap();
                assert_eq!(best, i, "{sentence:?} retrieved paragraph {best}");
            }
        }
    }
}
