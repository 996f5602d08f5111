//! Token-bounded chunks inside one semantic block at a time, so a chunk never spans two articles
//! or sections.
//!
//! Sizing approximates the multilingual-e5 (XLM-R sentencepiece) tokenizer without loading it:
//! counting with the real 17 MB tokenizer costs seconds per MB, more than parsing itself.
//! - CJK characters (ideographs, kana, hangul, CJK and full-width punctuation): 0.55 tokens each,
//!   the ratio measured on the Chinese corpus.
//! - A run of letters/digits (a Latin word, a number): 1.3 tokens, plus 0.25 per character beyond
//!   six, since long words split into several pieces.
//! - Any other visible character (ASCII punctuation, symbols): 1 token. Whitespace: free.
//!
//! Every cost is an integer in hundredths, so the sums are exact and the splits deterministic.

use sha2::{Digest, Sha256};

use crate::error::ParseError;
use crate::model::{
    push_padded, thousands, ChunkConfig, ParsedDocument, SemanticBlock, VectorChunk,
};
use crate::normalize::is_cjk;

const CJK_COST: u32 = 55;
const WORD_COST: u32 = 130;
const LONG_WORD_EXTRA: u32 = 25;
const SYMBOL_COST: u32 = 100;

/// Approximate e5 token count of `text` (see the module notes).
pub fn estimate_tokens(text: &str) -> u32 {
    let mut word_len = 0usize;
    let total: u32 = text.chars().map(|c| cost(c, &mut word_len)).sum();
    total.div_ceil(100)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() && !is_cjk(c)
}

/// Cost of one character, in hundredths of a token; `word_len` carries the length of the
/// letter/digit run it continues.
fn cost(c: char, word_len: &mut usize) -> u32 {
    if is_cjk(c) && !c.is_whitespace() && c != '\u{3000}' {
        *word_len = 0;
        CJK_COST
    } else if is_word_char(c) {
        *word_len += 1;
        if *word_len == 1 {
            WORD_COST
        } else if *word_len > 6 {
            LONG_WORD_EXTRA
        } else {
            0
        }
    } else {
        *word_len = 0;
        if c.is_whitespace() || c == '\u{3000}' {
            0
        } else {
            SYMBOL_COST
        }
    }
}

/// Split points ranked by preference: after a sentence end or a line break (2), after a clause
/// separator or a space (1).
fn boundary_strength(chars: &[char], i: usize) -> u8 {
    // `i` is the index just past the candidate split.
    let c = chars[i - 1];
    let next = chars.get(i).copied();
    match c {
        '\n' | '。' | '！' | '？' | '；' => 2,
        '.' | '!' | '?' | ';' if next.is_none_or(char::is_whitespace) => 2,
        '，' | '、' | '：' | ',' | ':' | ' ' | '\t' | '\u{3000}' => 1,
        _ => 0,
    }
}

pub fn chunk(doc: &ParsedDocument, cfg: &ChunkConfig) -> Vec<VectorChunk> {
    let mut out = Vec::new();
    let mut scratch = Scratch::default();
    for block in &doc.semantic_blocks {
        chunk_block_into(block, cfg, &mut scratch, &mut out);
    }
    out
}

/// The pieces [`chunk`] cuts one block's text into, without their metadata: what search shows of
/// an article it found by keyword.
pub fn chunk_text(text: &str, cfg: &ChunkConfig) -> Vec<String> {
    let block = SemanticBlock {
        semantic_id: String::new(),
        block_type: String::new(),
        page_start: 0,
        page_end: 0,
        section_path: Vec::new(),
        section_level: 0,
        section_title: String::new(),
        source_ids: Vec::new(),
        text: text.to_string(),
    };
    chunk_block(&block, cfg)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

fn chunk_block(block: &SemanticBlock, cfg: &ChunkConfig) -> Vec<VectorChunk> {
    let mut out = Vec::new();
    chunk_block_into(block, cfg, &mut Scratch::default(), &mut out);
    out
}

/// Per-character working arrays, reused from one block to the next.
#[derive(Default)]
struct Scratch {
    chars: Vec<char>,
    byte_at: Vec<usize>,
    prefix: Vec<u64>,
    ranges: Vec<(usize, usize, u64)>,
    /// Characters examined by the scans that look for a cut (word-run ends, the budget inside a
    /// word, the best boundary, the overlap): the chunker's work beyond the one pass that costs
    /// the text. It must stay proportional to the text, so tests count it.
    scanned: usize,
}

fn chunk_block_into(
    block: &SemanticBlock,
    cfg: &ChunkConfig,
    scratch: &mut Scratch,
    out: &mut Vec<VectorChunk>,
) {
    cut_block(block, cfg, scratch);
    emit(block, scratch, out);
}

/// Every block cut into chunks, as [`chunk`] does, unless the document makes more than
/// `max_chunks`: then it is refused, saying how many it makes. Past the limit only the cuts are
/// counted; no chunk is built.
pub fn chunk_within(
    doc: &ParsedDocument,
    cfg: &ChunkConfig,
    max_chunks: u32,
) -> Result<Vec<VectorChunk>, ParseError> {
    let max = max_chunks as usize;
    let mut out = Vec::new();
    let mut scratch = Scratch::default();
    let mut total = 0usize;
    for block in &doc.semantic_blocks {
        cut_block(block, cfg, &mut scratch);
        total += scratch.ranges.len();
        if total <= max {
            emit(block, &scratch, &mut out);
        }
    }
    if total > max {
        return Err(ParseError::TooLarge(format!(
            "the document makes {} chunks; at most {} are indexed per document (DOCPIPE_MAX_CHUNKS)",
            thousands(total as u64),
            thousands(max as u64)
        )));
    }
    Ok(out)
}

/// The chunks' ranges of one block (`scratch.ranges`, in characters, with their cost).
fn cut_block(block: &SemanticBlock, cfg: &ChunkConfig, scratch: &mut Scratch) {
    let Scratch {
        chars,
        byte_at,
        prefix,
        ranges,
        scanned,
    } = scratch;
    measure(&block.text, chars, byte_at, prefix);
    ranges.clear();
    let mut cutter = Cutter {
        chars,
        prefix,
        budget: u64::from(cfg.max_tokens.max(1)) * 100,
        overlap: u64::from(cfg.overlap_tokens.min(cfg.max_tokens / 2)) * 100,
        known_run: (0, 0),
        scanned,
    };
    let chars = cutter.chars;
    let mut start = skip_space(chars, 0, chars.len());
    while start < chars.len() {
        let word_end = cutter.run_end(start);
        let end = cutter.furthest_end(start, word_end);
        let cut = if end == chars.len() {
            end
        } else {
            best_cut(
                chars,
                start,
                end,
                cutter.prefix,
                cutter.budget,
                cutter.scanned,
            )
        };
        let trimmed_end = trim_end(chars, start, cut);
        if trimmed_end > start {
            ranges.push((
                start,
                trimmed_end,
                cutter.alone(start, word_end, trimmed_end),
            ));
        }
        if cut >= chars.len() {
            break;
        }
        let next = cutter.overlap_start(start, cut);
        start = skip_space(chars, next, chars.len());
    }
}

/// Fills the per-character arrays in one pass: each character's byte offset (a chunk's text is a
/// slice of the block's, never rebuilt character by character) and the running cost.
fn measure(text: &str, chars: &mut Vec<char>, byte_at: &mut Vec<usize>, prefix: &mut Vec<u64>) {
    chars.clear();
    byte_at.clear();
    prefix.clear();
    chars.extend(text.chars());
    let (mut offset, mut total, mut word_len) = (0usize, 0u64, 0usize);
    prefix.push(0u64);
    for &c in chars.iter() {
        byte_at.push(offset);
        offset += c.len_utf8();
        total += u64::from(cost(c, &mut word_len));
        prefix.push(total);
    }
    byte_at.push(offset);
}

/// One block's text being cut: its characters, running costs and the limits of a chunk.
struct Cutter<'a> {
    chars: &'a [char],
    prefix: &'a [u64],
    /// A chunk's most cost, in hundredths of a token.
    budget: u64,
    /// How far a chunk may reach back into the previous one, in hundredths of a token.
    overlap: u64,
    /// `chars[known_run.0..known_run.1]` is one word run's tail.
    known_run: (usize, usize),
    scanned: &'a mut usize,
}

impl Cutter<'_> {
    /// What `chars[a..b]` costs by the block's running costs.
    fn span(&self, a: usize, b: usize) -> u64 {
        self.prefix[b] - self.prefix[a]
    }

    /// Whether a chunk starting at `a` would start inside a word.
    fn mid_word(&self, a: usize) -> bool {
        a > 0 && is_word_char(self.chars[a - 1]) && is_word_char(self.chars[a])
    }

    /// What `chars[a..b]` costs on its own, as `estimate_tokens` of the chunk's text counts it.
    fn alone(&self, a: usize, run_end: usize, b: usize) -> u64 {
        // A chunk that starts inside a word (a hard cut, an overlap) starts that word afresh,
        // which the block's running costs do not. `run_end` is where the word run starting at
        // `a` ends.
        if !self.mid_word(a) {
            return self.span(a, b);
        }
        let n = run_end.min(b) - a;
        let fresh = u64::from(WORD_COST) + u64::from(LONG_WORD_EXTRA) * n.saturating_sub(6) as u64;
        self.span(a, b) - self.span(a, a + n) + fresh
    }

    /// Where the word run that `a` is in ends, each run scanned once however many chunks it is
    /// cut into.
    fn run_end(&mut self, a: usize) -> usize {
        // Chunks start further on each time, so the end found for one start holds for every
        // later start inside the same run: without this one long run without a break was
        // quadratic.
        if (self.known_run.0..self.known_run.1).contains(&a) {
            return self.known_run.1;
        }
        let mut e = a;
        while e < self.chars.len() && is_word_char(self.chars[e]) {
            e += 1;
        }
        *self.scanned += e - a;
        self.known_run = (a, e);
        e
    }

    /// The furthest end within budget for a chunk at `start`, at least one character on so
    /// that cutting always progresses.
    fn furthest_end(&mut self, start: usize, word_end: usize) -> usize {
        // The running cost only grows, so outside a word it is a binary search.
        let mut end = start + 1;
        if self.mid_word(start) {
            while end < self.chars.len() && self.alone(start, word_end, end + 1) <= self.budget {
                end += 1;
            }
            *self.scanned += end - start;
        } else if end < self.chars.len() {
            let base = self.prefix[start];
            end += self.prefix[end + 1..].partition_point(|&p| p - base <= self.budget);
        }
        end
    }

    /// Where the chunk after `start..cut` begins: up to `overlap` back into this one, at a
    /// boundary if one is there, but always forward of `start`.
    fn overlap_start(&mut self, start: usize, cut: usize) -> usize {
        if self.overlap == 0 {
            return cut;
        }
        let mut back = cut;
        let mut best = None;
        while back > start + 1 && self.span(back - 1, cut) <= self.overlap {
            back -= 1;
            if boundary_strength(self.chars, back) > 0 {
                best = Some(back);
            }
        }
        *self.scanned += cut - back;
        best.unwrap_or(back).max(start + 1)
    }
}

/// The chunks of `scratch.ranges`, cut from `block`, appended to `out`.
fn emit(block: &SemanticBlock, scratch: &Scratch, out: &mut Vec<VectorChunk>) {
    let Scratch {
        byte_at, ranges, ..
    } = scratch;
    out.extend(ranges.iter().enumerate().map(|(index, &(a, b, cost))| {
        let text = block.text[byte_at[a]..byte_at[b]].to_string();
        let hash = Sha256::digest(text.as_bytes());
        // `{semantic_id}-{index:04}-{first 16 hex digits of the text's sha256}`
        let mut chunk_key = String::with_capacity(block.semantic_id.len() + 22);
        chunk_key.push_str(&block.semantic_id);
        push_padded(&mut chunk_key, "-", index, 4);
        chunk_key.push('-');
        let mut digits = [0u8; 16];
        hex::encode_to_slice(&hash[..8], &mut digits).expect("16 digits for 8 bytes");
        chunk_key.push_str(std::str::from_utf8(&digits).expect("hex digits are ASCII"));
        VectorChunk {
            chunk_key,
            chunk_index: index as u32,
            semantic_id: block.semantic_id.clone(),
            section_path: block.section_path.clone(),
            section_title: block.section_title.clone(),
            page_start: block.page_start,
            page_end: block.page_end,
            char_start: a as u32,
            char_end: b as u32,
            token_estimate: cost.div_ceil(100) as u32,
            text,
        }
    }));
}

/// The latest strong boundary in the second half of the window, else the latest weak one there,
/// else a hard cut at the budget.
fn best_cut(
    chars: &[char],
    start: usize,
    end: usize,
    prefix: &[u64],
    budget: u64,
    scanned: &mut usize,
) -> usize {
    // The first `i` whose window `start..=i` reaches half the budget (prefix only grows).
    let first_half = prefix[start + 1..=end].partition_point(|&p| p - prefix[start] < budget / 2);
    let found = if first_half < end - start {
        first_half
    } else {
        0
    };
    let half = start + found.max(1);
    for strength in [2u8, 1] {
        if let Some(i) = (half..=end)
            .rev()
            .find(|&i| i > start && boundary_strength(chars, i) >= strength)
        {
            *scanned += end + 1 - i;
            return i;
        }
        *scanned += end + 1 - half;
    }
    end
}

fn skip_space(chars: &[char], mut i: usize, n: usize) -> usize {
    while i < n && (chars[i].is_whitespace() || chars[i] == '\u{3000}') {
        i += 1;
    }
    i
}

fn trim_end(chars: &[char], start: usize, mut end: usize) -> usize {
    while end > start && (chars[end - 1].is_whitespace() || chars[end - 1] == '\u{3000}') {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str) -> SemanticBlock {
        SemanticBlock {
            semantic_id: "S00001".into(),
            block_type: "article".into(),
            page_start: 1,
            page_end: 1,
            section_path: vec!["第一章".into()],
            section_level: 1,
            section_title: "第一章".into(),
            source_ids: vec![],
            text: text.into(),
        }
    }

    #[test]
    fn estimates() {
        assert_eq!(estimate_tokens("数据安全"), 3);
        assert_eq!(estimate_tokens("the quick brown fox"), 6);
        assert_eq!(estimate_tokens(""), 0);
    }

    #[test]
    fn splits_at_sentences_with_overlap() {
        let text = "第一条　本条例适用于本市。".repeat(60);
        let cfg = ChunkConfig {
            max_tokens: 64,
            overlap_tokens: 8,
        };
        let chunks = chunk_block(&block(&text), &cfg);
        assert!(chunks.len() > 3);
        let chars: Vec<char> = text.chars().collect();
        for c in &chunks {
            assert!(c.token_estimate <= 64, "{}", c.token_estimate);
            assert!(c.text.ends_with('。'), "{:?}", c.text);
            let slice: String = chars[c.char_start as usize..c.char_end as usize]
                .iter()
                .collect();
            assert_eq!(slice, c.text);
        }
        for w in chunks.windows(2) {
            assert!(w[1].char_start < w[0].char_end, "overlap expected");
            assert!(w[1].char_start > w[0].char_start);
        }
    }

    /// Issue 29: a 30 MB upload of one line of hex digits kept parse busy for minutes, because
    /// the end of the word run was looked for again, from each chunk's start to the end of the
    /// run, for every chunk cut from it. The work is counted, not timed: every character the
    /// cut-finding scans examine.
    #[test]
    fn one_run_without_a_break_is_scanned_in_proportion_to_its_length() {
        for (text, cfg) in [
            ("0123456789abcdef".repeat(25_000), ChunkConfig::default()),
            (
                "0123456789abcdef".repeat(2_500),
                ChunkConfig {
                    max_tokens: 16,
                    overlap_tokens: 4,
                },
            ),
        ] {
            let n = text.chars().count();
            let mut scratch = Scratch::default();
            let mut chunks = Vec::new();
            chunk_block_into(&block(&text), &cfg, &mut scratch, &mut chunks);
            assert!(
                scratch.scanned <= 6 * n,
                "{cfg:?}: {} characters examined for {n} ({} chunks)",
                scratch.scanned,
                chunks.len()
            );
            // Still a cover of the text, each chunk within the budget and costed as its own text.
            assert_eq!(chunks.first().map(|c| c.char_start), Some(0));
            assert_eq!(chunks.last().map(|c| c.char_end as usize), Some(n));
            for c in &chunks {
                assert_eq!(c.token_estimate, estimate_tokens(&c.text));
                assert!(c.token_estimate <= cfg.max_tokens);
            }
            for w in chunks.windows(2) {
                assert!(w[0].char_start < w[1].char_start && w[1].char_start <= w[0].char_end);
            }
        }
    }

    /// A law's text is scanned in proportion too (its cuts are at sentence ends, mostly).
    #[test]
    fn ordinary_text_is_scanned_in_proportion_to_its_length() {
        let text =
            "第一条　本条例所称数据处理，包括数据的收集、存储、使用、加工、传输、提供、公开等。"
                .repeat(2_000);
        let n = text.chars().count();
        let mut scratch = Scratch::default();
        let mut chunks = Vec::new();
        chunk_block_into(
            &block(&text),
            &ChunkConfig::default(),
            &mut scratch,
            &mut chunks,
        );
        assert!(scratch.scanned <= 6 * n, "{} for {n}", scratch.scanned);
    }

    fn doc_of(blocks: Vec<SemanticBlock>) -> ParsedDocument {
        ParsedDocument {
            format: crate::model::Format::Text,
            parser_name: "test".into(),
            page_count: 1,
            layouts: Vec::new(),
            structure_nodes: Vec::new(),
            semantic_blocks: blocks,
            warnings: Vec::new(),
            ocr: None,
        }
    }

    #[test]
    fn a_document_over_the_chunk_limit_is_refused_saying_how_many_it_makes() {
        let text = "第一条　本条例适用于本市。".repeat(60);
        let blocks: Vec<SemanticBlock> = (1..=5)
            .map(|i| SemanticBlock {
                semantic_id: format!("S{i:05}"),
                ..block(&text)
            })
            .collect();
        let doc = doc_of(blocks);
        let cfg = ChunkConfig {
            max_tokens: 64,
            overlap_tokens: 8,
        };
        let all = chunk(&doc, &cfg);
        let n = all.len() as u32;
        assert!(n > 10);
        // At the limit: exactly what `chunk` makes.
        assert_eq!(chunk_within(&doc, &cfg, n).unwrap(), all);
        // One under: refused, with the count and the limit.
        let err = chunk_within(&doc, &cfg, n - 1).unwrap_err();
        assert_eq!(err.kind(), "too_large");
        assert_eq!(
            err.to_string(),
            format!(
                "document too large: the document makes {n} chunks; at most {} are indexed per \
                 document (DOCPIPE_MAX_CHUNKS)",
                n - 1
            )
        );
        let err = chunk_within(&doc, &cfg, 3).unwrap_err();
        assert!(err
            .to_string()
            .contains(&format!("makes {n} chunks; at most 3 are")));
    }

    #[test]
    fn hard_splits_text_without_boundaries() {
        let text = "字".repeat(2000);
        let chunks = chunk_block(&block(&text), &ChunkConfig::default());
        assert!(chunks.iter().all(|c| c.token_estimate <= 256));
        assert_eq!(chunks.last().map(|c| c.char_end), Some(2000));
    }
}
