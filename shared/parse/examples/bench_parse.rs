//! Parse + chunk throughput on a fixed file set, for scripts/bench-parse.sh.
//!
//! usage: bench_parse {pdf|md|md-refs|pdf-floor|md-floor} FILE...   (prints one JSON object)
//!
//! `md-refs` is `md` with the references between articles read too, as the parse stage does:
//! the two rows' ratio is what reference extraction costs.
//!
//! `pdf-floor` does only what any pdfium-based extractor must: open each document, load each
//! page and its text page, and read the page's text in one call. No clean-up, no structure, no
//! chunks. Its time is the floor under the `pdf` figure, so python's time over it is the highest
//! ratio a pdfium parser could reach on these files. `md-floor` is the same for Markdown: UTF-8
//! validation and pulldown-cmark's event stream, nothing else.
//!
//! Each set runs in its own process so that the peak RSS (VmHWM) belongs to that set alone.
//! Files are read one at a time, outside the clock, as the Python baseline does: the figure is
//! parsing and chunking, and the peak is what one document costs, not the whole set in memory.

use std::time::{Duration, Instant};

use docpipe_parse::{chunk, parse, ChunkConfig, Hint, Limits};
use sha2::{Digest, Sha256};

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let set = args.next().unwrap_or_else(|| "pdf".into());
    let files: Vec<String> = args.collect();
    let total_bytes: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    if set == "pdf-floor" {
        return pdfium_floor(&files, total_bytes);
    }
    if set == "md-floor" {
        return markdown_floor(&files, total_bytes);
    }
    let limits = Limits::default();
    let cfg = ChunkConfig::default();
    // Bind pdfium before the clock starts (once per process in production too): a cold start
    // cost, not a per-document one. It is reported separately.
    let bind = Instant::now();
    let pdfium = docpipe_parse::pdfium_status();
    let bind_ms = bind.elapsed().as_secs_f64() * 1e3;

    let with_references = set.ends_with("-refs");
    let mut references = 0u64;
    let mut clock = Duration::ZERO;
    let (mut pages, mut chunks, mut failures) = (0u64, 0u64, 0u64);
    // BENCH_PER_FILE=1 prints each file's time to stderr, to find where the time goes.
    let per_file = std::env::var_os("BENCH_PER_FILE").is_some();
    // BENCH_DIGEST=1 hashes every output (document and chunks, as JSON) into one sha256, printed
    // to stderr: a speed change must leave it as it was. Outside the clock's purpose, so opt-in.
    let mut digest = std::env::var_os("BENCH_DIGEST").map(|_| Sha256::new());
    for path in &files {
        let bytes = read(path);
        let file_start = Instant::now();
        let name = std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match parse(&bytes, &Hint::new(name, ""), &limits) {
            Ok(doc) => {
                pages += u64::from(doc.page_count);
                let doc_chunks = chunk(&doc, &cfg);
                chunks += doc_chunks.len() as u64;
                if with_references {
                    references +=
                        docpipe_parse::references::extract(&doc.semantic_blocks).len() as u64;
                }
                if let Some(d) = digest.as_mut() {
                    d.update(serde_json::to_vec(&(&doc, &doc_chunks)).unwrap_or_default());
                }
            }
            Err(e) => {
                eprintln!("{path}: {e}");
                failures += 1;
            }
        }
        let took = file_start.elapsed();
        clock += took;
        if per_file {
            eprintln!(
                "{:8.2} ms  {:9} bytes  {path}",
                took.as_secs_f64() * 1e3,
                bytes.len()
            );
        }
    }
    let seconds = clock.as_secs_f64();
    if let Some(d) = digest {
        eprintln!("output digest: {}", hex::encode(d.finalize()));
    }
    println!(
        "{{\"engine\":\"rust docpipe-parse\",\"set\":\"{set}\",\"references\":{references},\"files\":{},\"bytes\":{total_bytes},\"pages\":{pages},\"chunks\":{chunks},\"failures\":{failures},\"seconds\":{seconds},\"mb_per_s\":{},\"pages_per_s\":{},\"peak_rss_mb\":{},\"pdfium_bind_ms\":{bind_ms},\"pdfium\":{}}}",
        files.len(),
        total_bytes as f64 / 1e6 / seconds,
        pages as f64 / seconds,
        peak_rss_mb(),
        pdfium.is_ok()
    );
}

fn pdfium_floor(files: &[String], total_bytes: u64) {
    // The pdfium docpipe runs (no host fonts), so the floor is measured as docpipe's own PDF time is.
    let bind = Instant::now();
    let pdfium = docpipe_parse::process_pdfium().unwrap_or_else(|e| panic!("pdfium: {e}"));
    let bind_ms = bind.elapsed().as_secs_f64() * 1e3;

    let mut clock = Duration::ZERO;
    let (mut pages, mut chars, mut failures) = (0u64, 0u64, 0u64);
    for path in files {
        let bytes = read(path);
        let start = Instant::now();
        let doc = match pdfium.load_pdf_from_byte_slice(&bytes, None) {
            Ok(doc) => doc,
            Err(e) => {
                eprintln!("{path}: {e}");
                failures += 1;
                clock += start.elapsed();
                continue;
            }
        };
        for page in doc.pages().iter() {
            pages += 1;
            if let Ok(text) = page.text() {
                chars += text.all().chars().count() as u64;
            }
        }
        drop(doc);
        clock += start.elapsed();
    }
    let seconds = clock.as_secs_f64();
    println!(
        "{{\"engine\":\"pdfium text layer only (floor)\",\"set\":\"pdf\",\"files\":{},\"bytes\":{total_bytes},\"pages\":{pages},\"chunks\":0,\"chars\":{chars},\"failures\":{failures},\"seconds\":{seconds},\"mb_per_s\":{},\"pages_per_s\":{},\"peak_rss_mb\":{},\"pdfium_bind_ms\":{bind_ms}}}",
        files.len(),
        total_bytes as f64 / 1e6 / seconds,
        pages as f64 / seconds,
        peak_rss_mb(),
    );
}

fn markdown_floor(files: &[String], total_bytes: u64) {
    let mut clock = Duration::ZERO;
    let (mut events, mut failures) = (0u64, 0u64);
    for path in files {
        let bytes = read(path);
        let start = Instant::now();
        let Ok(text) = std::str::from_utf8(&bytes) else {
            eprintln!("{path}: not UTF-8");
            failures += 1;
            clock += start.elapsed();
            continue;
        };
        events += pulldown_cmark::Parser::new(text).count() as u64;
        clock += start.elapsed();
    }
    let seconds = clock.as_secs_f64();
    println!(
        "{{\"engine\":\"pulldown-cmark events only (floor)\",\"set\":\"md\",\"files\":{},\"bytes\":{total_bytes},\"pages\":{},\"chunks\":0,\"events\":{events},\"failures\":{failures},\"seconds\":{seconds},\"mb_per_s\":{},\"pages_per_s\":{},\"peak_rss_mb\":{}}}",
        files.len(),
        files.len(),
        total_bytes as f64 / 1e6 / seconds,
        files.len() as f64 / seconds,
        peak_rss_mb(),
    );
}
