//! Issue 29: every parser step is bounded by its input. Hostile PDFs made here byte by byte (a
//! cyclic outline, pages too large to render), the corpus's laws against the block limit, and
//! the corpus's broken files against error messages that read as sentences.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{files_in, parse_path, raw_pdf, require_ocr, require_pdfium, stream};
use docpipe_parse::{parse, Hint, Limits, ParseError, ParsedDocument, MAX_BLOCK_CHARS};

/// Parses on a thread of its own and gives up waiting after `patience`: a parse that never ends
/// fails the test instead of hanging it (the thread is left behind; the test process ends).
fn parse_or_hang(bytes: Vec<u8>, patience: Duration) -> Result<ParsedDocument, ParseError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(parse(
            &bytes,
            &Hint::new("hostile.pdf", "application/pdf"),
            &Limits::default(),
        ));
    });
    rx.recv_timeout(patience)
        .unwrap_or_else(|_| panic!("parse did not finish within {patience:?}"))
}

/// One page showing `line` in Helvetica, then the outline entries `outline` (objects 5 on; the
/// outline dictionary is object 5, its entries 6, 7, …).
fn pdf_with_outline(line: &str, entries: &[&str]) -> Vec<u8> {
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R /Outlines 5 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R \
           /Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
            .to_vec(),
        stream("", format!("BT /F1 12 Tf 10 50 Td ({line}) Tj ET").as_bytes()),
        format!("<< /Type /Outlines /First 6 0 R /Count {} >>", entries.len()).into_bytes(),
    ];
    objects.extend(entries.iter().map(|e| e.as_bytes().to_vec()));
    raw_pdf(&objects)
}

/// The probe of issue 29: outline entries with empty titles that point at each other through
/// /Next. The walk counted titled entries only, so it never reached its cap and never ended
/// (the process grew past 1.8 GB).
#[test]
fn an_outline_whose_untitled_entries_form_a_cycle_is_walked_once() {
    require_pdfium();
    let pdf = pdf_with_outline(
        "Article 1 applies here.",
        &[
            "<< /Title () /Parent 5 0 R /Next 7 0 R >>",
            // /Next back to the first entry, and a child that is its own parent's sibling.
            "<< /Title () /Parent 5 0 R /Prev 6 0 R /Next 6 0 R /First 6 0 R /Count 1 >>",
        ],
    );
    assert!(pdf.len() < 1500, "{} bytes", pdf.len());
    let doc = parse_or_hang(pdf, Duration::from_secs(60)).expect("the page's text parses");
    assert!(
        common::all_text(&doc).contains("Article 1 applies here."),
        "{doc:?}"
    );
}

/// The same cycle with titles: it ended at the cap before; now each entry is read once, so the
/// outline holds two headings, not 10,001.
#[test]
fn an_outline_whose_titled_entries_form_a_cycle_yields_each_heading_once() {
    require_pdfium();
    let pdf = pdf_with_outline(
        "Chapter One",
        &[
            "<< /Title (Chapter One) /Parent 5 0 R /Next 7 0 R >>",
            "<< /Title (Chapter Two) /Parent 5 0 R /Prev 6 0 R /Next 6 0 R >>",
        ],
    );
    let doc = parse_or_hang(pdf, Duration::from_secs(60)).unwrap();
    let headings: Vec<_> = doc
        .layouts
        .iter()
        .filter(|l| l.heading_level.is_some())
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(headings, ["Chapter One"]);
}

/// A page `width × height` pt showing one grey image over the whole page and nothing else: it
/// has no text layer, so OCR must render it.
fn image_page(width: u32, height: u32) -> Vec<Vec<u8>> {
    vec![
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width} {height}] /Contents 5 0 R \
             /Resources << /XObject << /Im0 6 0 R >> >> >>"
        )
        .into_bytes(),
        stream(
            "",
            format!("q {width} 0 0 {height} 0 0 cm /Im0 Do Q").as_bytes(),
        ),
        stream(
            "/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray \
             /BitsPerComponent 8",
            &[0xff, 0xe0, 0xe0, 0xff],
        ),
    ]
}

/// Issue 29: an image-only page of 10,000 × 10,000 pt failed as "corrupt document: pdfium
/// cannot render a page for OCR: PdfiumLibraryInternalError(\n Unknown,\n)": 27,778 px square
/// at 200 dpi. It fails before rendering, permanently, saying why.
#[test]
fn a_page_too_large_to_render_fails_with_its_size_and_the_pixel_limit() {
    require_ocr();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>".to_vec(),
        b"<< >>".to_vec(),
    ];
    objects.extend(image_page(10_000, 10_000));
    let err = parse(
        &raw_pdf(&objects),
        &Hint::new("poster.pdf", ""),
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), "too_large", "{err}");
    assert_eq!(
        err.to_string(),
        "document too large: page 1 is 10,000 × 10,000 pt; OCR renders at most 25 megapixels a \
         page, which at that size is 36 dpi, under the 100 dpi it needs to read text"
    );
}

/// A page over the pixel limit at 200 dpi but not at 100 is rendered at the highest resolution
/// within it, and the document says so.
#[test]
fn a_large_page_is_rendered_for_ocr_at_a_lower_dpi() {
    require_ocr();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 7 0 R \
           /Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
            .to_vec(),
    ];
    objects.extend(image_page(3_000, 3_000));
    objects.push(stream(
        "",
        b"BT /F1 12 Tf 10 50 Td (Article 1 applies here.) Tj ET",
    ));
    let doc = parse(
        &raw_pdf(&objects),
        &Hint::new("poster.pdf", ""),
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(doc.ocr.as_ref().map(|o| o.pages.clone()), Some(vec![2]));
    assert!(
        doc.warnings.iter().any(|w| w
            == "page 2 is 3,000 × 3,000 pt: rendered for OCR at 120 dpi, not 200, to stay \
                within 25 megapixels"),
        "{:?}",
        doc.warnings
    );
}

/// Issue 29: no library's `Debug` in a message. Every broken file of the corpus fails with a
/// sentence: one line, no variant names ("FormatError"), no `[2, 3]` lists.
#[test]
fn failures_of_broken_files_read_as_sentences() {
    require_pdfium();
    let camel = regex::Regex::new(r"\b[A-Z][a-z]+[A-Z][A-Za-z]*\b").unwrap();
    let mut checked = 0;
    let mut files = files_in("malformed", "");
    files.extend(files_in("external", "pdf"));
    for path in files {
        let Err(e) = parse_path(&path) else { continue };
        let message = e.to_string();
        checked += 1;
        assert!(
            !message.contains(['\n', '[', '{']) && !camel.is_match(&message),
            "{}: {message}",
            path.display()
        );
    }
    assert!(checked >= 10, "{checked}");
}

/// The block limit cuts text without headings, never an article of a law: every block of the
/// corpus's 378 laws is under half of it.
#[test]
fn no_block_of_a_law_comes_near_the_block_limit() {
    let mut longest = (0, String::new());
    for path in files_in("laws", "md") {
        let doc = parse_path(&path).unwrap();
        for b in &doc.semantic_blocks {
            let n = b.text.chars().count();
            if n > longest.0 {
                longest = (n, format!("{} {}", path.display(), b.semantic_id));
            }
        }
    }
    assert!(longest.0 < MAX_BLOCK_CHARS / 2, "{longest:?}");
}
