//! The corpus of laws (`corpus/`, or `$DOCPIPE_CORPUS`), and the probes a test searches them with.

use crate::*;
use std::path::PathBuf;

/// Points the parser at the stack's `libpdfium.so` and OCR files when the environment does not
/// (`make env` does).
pub fn ensure_pdfium_env() {
    // Tests call this before they start any thread that reads the environment.
    if std::env::var_os("DOCPIPE_PDFIUM_LIB").is_none() {
        let lib = workspace_root().join(".local/lib/libpdfium.so");
        std::env::set_var("DOCPIPE_PDFIUM_LIB", lib);
    }
    if std::env::var_os("DOCPIPE_OCR_DIR").is_none() {
        std::env::set_var("DOCPIPE_OCR_DIR", workspace_root().join(".local/ocr"));
    }
}

pub fn corpus_dir() -> PathBuf {
    std::env::var("DOCPIPE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("corpus"))
}

/// The Markdown laws of the corpus (`laws/*.md`), in file-name order.
pub fn law_paths() -> Vec<PathBuf> {
    let dir = corpus_dir().join("laws");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    paths
}

/// A law's file name and text.
pub fn read_law(path: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (
        path.file_name().unwrap().to_string_lossy().into_owned(),
        text,
    )
}

static ARTICLE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^第[一二三四五六七八九十百千零〇两\d]+条").expect("static regex")
});

/// A law's article lines (those that open with 第X条), trimmed.
pub fn article_lines(law: &str) -> Vec<&str> {
    law.lines()
        .map(str::trim)
        .filter(|l| ARTICLE.is_match(l))
        .collect()
}

/// The longest sentence of a law's middle article: what a person would paste to find the law.
pub fn law_probe(law: &str) -> String {
    let articles = article_lines(law);
    let middle = articles
        .get(articles.len() / 2)
        .unwrap_or_else(|| panic!("a law with articles: {:.80}", law));
    article_probe(middle).expect("an article has a sentence")
}

/// The longest sentence of an article's body: what a person would paste to find the law.
pub fn article_probe(article: &str) -> Option<String> {
    let body = article
        .split_once(char::is_whitespace)
        .map_or(article, |(_, b)| b);
    body.split(['。', '；'])
        .max_by_key(|s| s.chars().count())
        .map(|s| s.trim().to_string())
}
