//! Inputs that `scripts/fuzz.sh` found breaking an invariant, kept so they stay fixed. Each test
//! feeds the input to `parse` and `chunk` as the fuzz targets do and checks the same things
//! (see fuzz/src/lib.rs).

mod common;

use docpipe_parse::{chunk, estimate_tokens, parse, ChunkConfig, Hint, Limits, ParsedDocument};

/// A chunk's `token_estimate` is the estimate of its own text, and that is within the budget.
fn check_chunks(doc: &ParsedDocument, cfg: &ChunkConfig) -> Result<(), String> {
    for c in chunk(doc, cfg) {
        let alone = estimate_tokens(&c.text);
        if c.token_estimate != alone || alone > cfg.max_tokens {
            return Err(format!(
                "chunk {} ({:?}): token_estimate {}, its text alone {alone}, budget {}",
                c.chunk_key, c.text, c.token_estimate, cfg.max_tokens
            ));
        }
    }
    Ok(())
}

const SMALL: ChunkConfig = ChunkConfig {
    max_tokens: 16,
    overlap_tokens: 4,
};

/// Found by `parse_pdf` on the seed `sample-pdfs/crazyones-pdfa.pdf`: a chunk that began inside a
/// word (the overlap stepped back into "troublemakers") was costed with the word's earlier
/// characters, so its `token_estimate` said 13 while its text alone is 14 tokens; with a budget
/// of 8 the chunk's own text came to 9, over the budget. The same text, reduced:
#[test]
fn a_chunk_that_starts_inside_a_word_is_costed_as_its_own_text() {
    let text = "Here's to the crazy ones. The misfits. The rebels. The troublemakers. ".repeat(3);
    let doc = parse(
        text.as_bytes(),
        &Hint::new("crazy.txt", "text/plain"),
        &Limits::default(),
    )
    .expect("plain text parses");
    for cfg in [
        ChunkConfig {
            max_tokens: 8,
            overlap_tokens: 4,
        },
        SMALL,
        ChunkConfig::default(),
    ] {
        check_chunks(&doc, &cfg).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    }
    // Words longer than a whole chunk are cut hard; every piece is still within the budget.
    for text in [
        "a".repeat(200),
        format!("x {}", "abcdefghijklmnopqrstuvwxyz".repeat(12)),
        "word ".repeat(40) + &"longwordwithoutend".repeat(9),
    ] {
        let doc = parse(text.as_bytes(), &Hint::new("w.txt", ""), &Limits::default()).unwrap();
        for max_tokens in [2, 3, 8, 16] {
            let cfg = ChunkConfig {
                max_tokens,
                overlap_tokens: max_tokens / 2,
            };
            check_chunks(&doc, &cfg).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
        }
    }
}

/// The input exactly as the fuzzer saved it (a seed from the shared corpus).
#[test]
fn the_crazyones_pdf_chunks_within_budget() {
    common::require_pdfium();
    let pdf = std::fs::read(common::corpus_file("sample-pdfs/crazyones-pdfa.pdf")).unwrap();
    let doc = parse(
        &pdf,
        &Hint::new("report.pdf", "application/pdf"),
        &Limits::default(),
    )
    .expect("the PDF parses");
    for cfg in [SMALL, ChunkConfig::default()] {
        check_chunks(&doc, &cfg).unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    }
}
