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

/// The input exactly as the fuzzer saved it (a seed from the corpus).
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

/// The seeds of `fuzz/seeds/` (issue 29's unbounded inputs): each parses, or fails with a
/// message, within a minute, as its fuzz target would see it (the file name's extension as the
/// hint), and what parses chunks within budget.
#[test]
fn the_seeds_kept_with_the_fuzz_targets_parse_or_fail_cleanly() {
    common::require_pdfium();
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let mut checked = 0;
    for target in ["parse_pdf", "parse_text", "parse_html"] {
        for path in common::files_in_dir(&seeds.join(target)) {
            let bytes = std::fs::read(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let (tx, rx) = std::sync::mpsc::channel();
            let hint = Hint::new(name.clone(), "");
            std::thread::spawn(move || {
                let _ = tx.send(parse(&bytes, &hint, &Limits::default()));
            });
            let parsed = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{name}: parse did not finish within a minute"));
            match parsed {
                Ok(doc) => {
                    for cfg in [SMALL, ChunkConfig::default()] {
                        check_chunks(&doc, &cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
                    }
                }
                Err(e) => {
                    assert_ne!(e.kind(), "parser_panic", "{name}: {e}");
                    assert!(!e.to_string().contains('\n'), "{name}: {e}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 9, "{checked} seeds");
}
