//! Shared test helpers: where the corpus is, and insisting on pdfium.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Once;

use docpipe_parse::{parse, Hint, Limits, ParseError, ParsedDocument};

/// `$DOCPIPE_CORPUS`, else the repository's `corpus/`.
pub fn corpus() -> PathBuf {
    if let Some(dir) = std::env::var_os("DOCPIPE_CORPUS").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus")
}

pub fn corpus_file(rel: &str) -> PathBuf {
    let p = corpus().join(rel);
    assert!(
        p.exists(),
        "corpus file missing: {} (set DOCPIPE_CORPUS)",
        p.display()
    );
    p
}

pub fn files_in(rel: &str, ext: &str) -> Vec<PathBuf> {
    files_with(&corpus().join(rel), ext)
}

/// Every file of `dir`, in name order.
pub fn files_in_dir(dir: &Path) -> Vec<PathBuf> {
    files_with(dir, "")
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let dir = dir.to_path_buf();
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (set DOCPIPE_CORPUS)", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| ext.is_empty() || p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

/// Tests that exercise PDFs need the real engine, not the fallback: bind it from
/// `$DOCPIPE_PDFIUM_LIB`, else `<workspace>/.local/lib/libpdfium.so`, and fail loudly if absent.
pub fn require_pdfium() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        if std::env::var_os(docpipe_parse::PDFIUM_ENV).is_none() {
            let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.local/lib/libpdfium.so");
            if local.exists() {
                // Safe: runs once, before any test thread reads the environment through pdfium.
                std::env::set_var(docpipe_parse::PDFIUM_ENV, local);
            }
        }
    });
    if let Err(e) = docpipe_parse::pdfium_status() {
        panic!(
            "pdfium is required by this test but could not be loaded: {e}. \
             Fetch it with scripts/fetch-pdfium.sh (into .local/lib) or set {}",
            docpipe_parse::PDFIUM_ENV
        );
    }
}

pub fn parse_path(path: &Path) -> Result<ParsedDocument, ParseError> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    parse(&bytes, &Hint::new(name, ""), &Limits::default())
}

pub fn parse_rel(rel: &str) -> Result<ParsedDocument, ParseError> {
    parse_path(&corpus_file(rel))
}

pub fn titles(doc: &ParsedDocument, sub_type: &str) -> Vec<String> {
    doc.structure_nodes
        .iter()
        .filter(|n| n.sub_type == sub_type)
        .map(|n| n.title.clone())
        .collect()
}

/// The article number part of a title ("第十条 立法目的" → "第十条").
pub fn article_number(title: &str) -> String {
    title.split(' ').next().unwrap_or("").to_string()
}

pub fn all_text(doc: &ParsedDocument) -> String {
    doc.layouts
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tests of OCR need the engine too: `$DOCPIPE_OCR_DIR`, else `<workspace>/.local/ocr`.
pub fn require_ocr() {
    require_pdfium();
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        if std::env::var_os(docpipe_parse::ocr::OCR_DIR_ENV).is_none() {
            let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.local/ocr");
            if local.exists() {
                // Safe: runs once, before the engine is loaded by any test.
                std::env::set_var(docpipe_parse::ocr::OCR_DIR_ENV, local);
            }
        }
    });
    if let Err(e) = docpipe_parse::ocr::ocr_status() {
        panic!(
            "OCR is required by this test but could not be loaded: {e}. Fetch it with \
             scripts/fetch-ocr.sh (into .local/ocr) or set {}",
            docpipe_parse::ocr::OCR_DIR_ENV
        );
    }
}

/// A PDF of `objects` (object 1 is the catalog), with a correct cross-reference table.
pub fn raw_pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out: Vec<u8> = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for o in &offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// A stream object with `dict` entries and `data`.
pub fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut s = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
    s.extend_from_slice(data);
    s.extend_from_slice(b"\nendstream");
    s
}
