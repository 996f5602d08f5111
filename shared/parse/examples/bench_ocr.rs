//! OCR on scanned PDFs as the parse stage runs it (render, recognise, assemble, heading tree),
//! for `scripts/bench-ocr.sh`: one JSON line per file with its time and the text of each page,
//! then one with the process's peak RSS. The engine is loaded before the clock starts.
//!
//!   cargo run --release -p docpipe-parse --example bench_ocr -- FILE.pdf...
use std::time::Instant;

use docpipe_parse::{parse, Hint, Limits};

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    let loading = Instant::now();
    if let Err(why) = docpipe_parse::ocr::ocr_status() {
        eprintln!("OCR not available: {why}");
        std::process::exit(2);
    }
    let load_ms = loading.elapsed().as_secs_f64() * 1000.0;
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let started = Instant::now();
        let doc = parse(&bytes, &Hint::new(file.as_str(), ""), &Limits::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let mut texts = vec![String::new(); doc.page_count as usize];
        for block in &doc.layouts {
            let page = &mut texts[block.page as usize - 1];
            page.push_str(&block.text);
            page.push('\n');
        }
        let ocr = doc.ocr.as_ref().expect("a scan is OCR'd");
        let line = serde_json::json!({
            "file": file, "pages": ocr.pages.len(), "ms": ms, "texts": texts,
            "mean_confidence": ocr.mean_confidence,
        });
        println!("{line}");
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    println!(
        "{}",
        serde_json::json!({ "peak_rss_kb": hwm_kb, "engine_load_ms": load_ms })
    );
}
