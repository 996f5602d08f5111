//! The sensitive-data scan on the labelled set of `tests/fixtures/sensitive`: precision and recall
//! per kind, and its cost per MB beside parse's on the same documents (both in this run, release).
//!
//!   cargo run --release -p docpipe-parse --example bench_scan
//!
//! Prints a Markdown table.

use docpipe_parse::sensitive;
use docpipe_parse::{Hint, Limits};
use std::time::{Duration, Instant};

fn main() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sensitive");
    let labels: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("labels.json")).expect("labels.json"),
    )
    .expect("labels.json is JSON");
    let set: Vec<(String, Vec<(String, String)>)> = labels
        .as_array()
        .expect("an array")
        .iter()
        .map(|doc| {
            let file = doc["file"].as_str().expect("file");
            let text = std::fs::read_to_string(dir.join("docs").join(file)).expect("a document");
            let planted = doc["planted"]
                .as_array()
                .expect("planted")
                .iter()
                .map(|p| {
                    (
                        p["kind"].as_str().unwrap_or_default().to_string(),
                        p["value"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            (text, planted)
        })
        .collect();
    let bytes: usize = set.iter().map(|(t, _)| t.len()).sum();
    let mb = bytes as f64 / 1e6;

    let scores = sensitive::score(set.iter().map(|(t, p)| (t.as_str(), p.as_slice())));
    println!(
        "Sensitive-data scan, {} documents, {:.2} MB (tests/fixtures/sensitive)\n",
        set.len(),
        mb
    );
    println!("| kind | planted | found | correct | precision | recall |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (kind, s) in &scores {
        println!(
            "| {kind} | {} | {} | {} | {:.4} | {:.4} |",
            s.planted,
            s.found,
            s.correct,
            s.precision(),
            s.recall()
        );
    }

    // Cost: the same documents scanned and parsed, several rounds each, best round kept.
    let rounds = 5;
    let best = |f: &dyn Fn()| {
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .min()
            .unwrap_or(Duration::ZERO)
    };
    let scan_time = best(&|| {
        for (text, _) in &set {
            std::hint::black_box(sensitive::scan(text, &[]));
        }
    });
    let hint = Hint::new("doc.md".to_string(), "text/markdown".to_string());
    let limits = Limits::default();
    let parse_time = best(&|| {
        for (text, _) in &set {
            std::hint::black_box(docpipe_parse::parse(text.as_bytes(), &hint, &limits).ok());
        }
    });
    let per_mb = |d: Duration| d.as_secs_f64() * 1e3 / mb;
    println!("\n| step (baseline: parse) | ms per MB | MB/s | × parse |");
    println!("| --- | ---: | ---: | ---: |");
    for (name, d) in [
        ("parse (Markdown)", parse_time),
        ("sensitive-data scan", scan_time),
    ] {
        println!(
            "| {name} | {:.2} | {:.1} | {:.3} |",
            per_mb(d),
            mb / d.as_secs_f64(),
            d.as_secs_f64() / parse_time.as_secs_f64()
        );
    }
}
