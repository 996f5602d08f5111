//! Every hostile or unusual PDF in the corpus, with the outcome derived from looking at the file.

mod common;

use common::{corpus, parse_rel, require_pdfium};

enum Expect {
    Fails(&'static str),
    /// Parses with this many pages and this text somewhere in it.
    Pages(u32, &'static str),
}
use Expect::*;

fn check(rel: &str, expect: &Expect) -> Result<(), String> {
    let got = parse_rel(rel);
    match (expect, &got) {
        (Fails(kind), Err(e)) if e.kind() == *kind => {
            if e.to_string().len() < 20 {
                return Err(format!("{rel}: message too terse: {e}"));
            }
            Ok(())
        }
        (Pages(n, snippet), Ok(doc)) if doc.page_count == *n => {
            if common::all_text(doc).contains(snippet) {
                Ok(())
            } else {
                Err(format!("{rel}: text lacks {snippet:?}"))
            }
        }
        (Fails(kind), _) => Err(format!("{rel}: expected {kind}, got {}", describe(&got))),
        (Pages(n, _), _) => Err(format!("{rel}: expected {n} pages, got {}", describe(&got))),
    }
}

fn describe(r: &Result<docpipe_parse::ParsedDocument, docpipe_parse::ParseError>) -> String {
    match r {
        Ok(d) => format!("Ok({} pages via {})", d.page_count, d.parser_name),
        Err(e) => format!("Err({}: {e})", e.kind()),
    }
}

fn run_table(dir: &str, table: &[(&str, Expect)]) {
    require_pdfium();
    let listed: Vec<String> = std::fs::read_dir(corpus().join(dir))
        .expect("corpus dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for name in &listed {
        assert!(
            table.iter().any(|(n, _)| n == name),
            "{dir}/{name} has no stated expectation: add it to the table"
        );
    }
    let failures: Vec<String> = table
        .iter()
        .filter_map(|(name, e)| check(&format!("{dir}/{name}"), e).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn malformed_files_fail_cleanly_or_are_repaired() {
    run_table(
        "malformed",
        &[
            // Only startxref is wrong: the objects and xref table are intact, pdfium repairs it.
            ("bad_startxref.pdf", Pages(5, "第四十四条")),
            // Flate streams damaged: pdfium opens it but no page has decodable content.
            ("corrupt_streams.pdf", Fails("corrupt")),
            ("deep_dict_nesting.pdf", Fails("too_large")),
            ("deep_nesting.pdf", Fails("too_large")),
            ("empty.pdf", Fails("empty")),
            // A header followed by random bytes.
            ("header_garbage.pdf", Fails("corrupt")),
            // One page dictionary with no content stream (and a broken MediaBox): nothing on it.
            ("page_dict_mediabox_bracket_order.bin", Fails("empty")),
            ("page_dict_resources_char_boundary.bin", Fails("empty")),
            ("pdfparse_03-invalid.pdf", Fails("corrupt")),
            // No %PDF- header anywhere: random bytes under a .pdf name.
            ("random64k.pdf", Fails("mismatch")),
            ("trunc50.pdf", Fails("corrupt")),
            ("trunc95.pdf", Fails("corrupt")),
            // Cut inside the trailer: lopdf rebuilds the xref and recovers all five pages.
            ("trunc_no_trailer.pdf", Pages(5, "第四十四条")),
            // A header inside garbage with no objects behind it.
            ("xref_catalog_scan_char_boundary.bin", Fails("corrupt")),
        ],
    );
}

#[test]
fn sample_pdfs() {
    run_table(
        "sample-pdfs",
        &[
            (
                "002-trivial-libre-office-writer.pdf",
                Pages(1, "Lorem ipsum"),
            ),
            ("annotated_pdf.pdf", Pages(1, "Some text.")),
            ("crazyones-pdfa.pdf", Pages(1, "The Crazy Ones")),
            ("google-doc-document.pdf", Pages(1, "Example document")),
            ("habibi.pdf", Pages(1, "habibi")),
            ("libre-office-link.pdf", Pages(1, "This is a link")),
            // Open password "openpassword": no password is configured, so it is refused.
            ("libreoffice-writer-password.pdf", Fails("encrypted")),
            ("minimal-document.pdf", Pages(1, "Lorem ipsum")),
            ("pdfkit.pdf", Pages(1, "Header")),
            ("pdflatex-4-pages.pdf", Pages(4, "Hello, here is some text")),
            ("pdflatex-outline.pdf", Pages(4, "Foo")),
        ],
    );
}

#[test]
fn external_pdfs() {
    run_table(
        "external",
        &[
            ("03-invalid.pdf", Fails("corrupt")),
            ("04-valid.pdf", Pages(5, "Acute effect of speed exercise")),
            ("05-versions-space.pdf", Pages(1, "v.0.01")),
            ("Japan1-fd0-full-h-fallback.pdf", Pages(1, "AB")),
            ("Japan1-fd0-full-h-unicode.pdf", Pages(1, "XY")),
            ("udhr_chinese.pdf", Pages(7, "人人生而自由")),
            ("udhr_japanese.pdf", Pages(9, "世界人権宣言")),
        ],
    );
}
