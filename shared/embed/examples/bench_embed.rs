//! Embedding throughput and memory of the local embedders on ~200-character chunks of the Chinese
//! laws in the corpus, and single-query latency on the corpus's real questions (train.jsonl, one
//! `embed_query` at a time, as the search API sends them). Run through `scripts/bench-embed.sh`.
//!
//!   bench_embed [--chunks N] [--queries N]   # every local embedder, one child process each
//!   bench_embed --embedder hash [--chunks N] # one row, no header (what the children run)
//!
//! Each embedder runs in its own process so that its peak RSS (VmHWM) is its own. `e5-small-ref`
//! is e5-small on upstream's path (weights re-expanded on every call,
//! `DOCPIPE_E5_KERNEL=reference`), `e5-small-avx2` the resident kernel without AVX512-VNNI (what
//! a host without it runs), so one run shows before and after.

#[path = "../src/testdata.rs"]
mod testdata;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use docpipe_embed::{cosine, Embedder, HashEmbedder};

const CHUNK_CHARS: usize = 200;
/// Texts per embed_passages call, as an index stage would send them.
const CALL_BATCH: usize = 32;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let chunks: usize = flag("--chunks")
        .map(|v| v.parse().expect("--chunks takes a number"))
        .unwrap_or(100);
    let queries: usize = flag("--queries")
        .map(|v| v.parse().expect("--queries takes a number"))
        .unwrap_or(200);
    match flag("--embedder") {
        Some(name) => println!("{}", run_one(&name, chunks, queries)),
        None => run_all(chunks, queries),
    }
}

fn local_embedders() -> Vec<&'static str> {
    let mut v = vec!["hash"];
    if cfg!(feature = "e5") {
        v.push("e5-small-ref");
        v.push("e5-small-avx2");
        v.push("e5-small");
    }
    v
}

/// What a child reports besides its row, for the before/after ratios.
struct Stats {
    name: String,
    chunks_per_s: f64,
    query_p50_ms: f64,
    query_p99_ms: f64,
    rss_mb: f64,
}

fn run_all(chunks: usize, queries: usize) {
    let exe = std::env::current_exe().expect("own path");
    println!(
        "{chunks} chunks of ~{CHUNK_CHARS} Chinese characters from {}, {queries} questions one at a \
         time, {} CPUs\n",
        corpus_dir()
            .join("laws")
            .canonicalize()
            .unwrap_or_else(|_| corpus_dir().join("laws"))
            .display(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "| embedder | model id | dim | chunks/s | chunks per CPU-s | query p50 ms | query p99 ms | load ms | peak RSS MB | questions top-1 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut stats = Vec::new();
    for name in local_embedders() {
        let out = std::process::Command::new(&exe)
            .args(["--embedder", name, "--chunks", &chunks.to_string()])
            .args(["--queries", &queries.to_string()])
            .output()
            .expect("run the child benchmark");
        if !out.status.success() {
            eprintln!("{name}: {}", String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            match line.strip_prefix("#stats ") {
                Some(rest) => {
                    let f: Vec<f64> = rest.split(' ').filter_map(|x| x.parse().ok()).collect();
                    stats.push(Stats {
                        name: name.to_owned(),
                        chunks_per_s: f[0],
                        query_p50_ms: f[1],
                        query_p99_ms: f[2],
                        rss_mb: f[3],
                    });
                }
                None => println!("{line}"),
            }
        }
    }
    let find = |n: &str| stats.iter().find(|s| s.name == n);
    for new in ["e5-small-avx2", "e5-small"] {
        if let (Some(old), Some(new)) = (find("e5-small-ref"), find(new)) {
            println!(
                "\n{} vs {}: query p50 {:.2}x faster, p99 {:.2}x, chunks/s {:.2}x, peak RSS {:+.0} MB",
                new.name,
                old.name,
                old.query_p50_ms / new.query_p50_ms,
                old.query_p99_ms / new.query_p99_ms,
                new.chunks_per_s / old.chunks_per_s,
                new.rss_mb - old.rss_mb
            );
        }
    }
    if !cfg!(feature = "e5") {
        println!("\n(e5-small not built: run scripts/fetch-e5.sh, then this with --features e5)");
    }
}

fn run_one(name: &str, n: usize, n_queries: usize) -> String {
    let texts = load_chunks(n);
    let questions = load_questions(n_queries);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let t0 = Instant::now();
    let embedder: Box<dyn Embedder> = match name {
        "hash" => Box::new(HashEmbedder::default()),
        #[cfg(feature = "e5")]
        "e5-small" | "e5-small-avx2" | "e5-small-ref" => {
            let path = match std::env::var_os("DOCPIPE_E5_MODEL") {
                Some(p) => PathBuf::from(p),
                None => docpipe_embed::e5::default_model_path().expect("e5 model"),
            };
            let threads = std::env::var("DOCPIPE_E5_THREADS")
                .ok()
                .map(|v| v.parse().unwrap());
            let kernel = match name {
                "e5-small" => docpipe_embed::e5::Kernel::Auto,
                "e5-small-avx2" => docpipe_embed::e5::Kernel::Avx2,
                _ => docpipe_embed::e5::Kernel::Reference,
            };
            let mut e =
                docpipe_embed::E5Embedder::load_with(&path, threads, kernel).expect("load e5");
            if let Ok(n) = std::env::var("DOCPIPE_E5_BATCH") {
                e = e.with_texts_per_call(n.parse().unwrap()).unwrap();
            }
            Box::new(e)
        }
        other => panic!("unknown local embedder {other}"),
    };
    let load = t0.elapsed();

    // Fast embedders repeat the set until the clock has something to measure.
    let min_time = Duration::from_millis(500);
    let (mut done, t1, cpu1) = (0usize, Instant::now(), cpu_seconds());
    loop {
        for batch in texts.chunks(CALL_BATCH) {
            let v = rt.block_on(embedder.embed_passages(batch)).expect("embed");
            assert_eq!(v.len(), batch.len());
            done += batch.len();
        }
        if t1.elapsed() >= min_time {
            break;
        }
    }
    let secs = t1.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu1;

    // One query at a time, as the search API embeds them (after a few warm-up calls).
    for q in questions.iter().take(5) {
        rt.block_on(embedder.embed_query(q)).expect("embed query");
    }
    let mut lat: Vec<f64> = questions
        .iter()
        .map(|q| {
            let t = Instant::now();
            rt.block_on(embedder.embed_query(q)).expect("embed query");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
    let (p50, p99) = (pct(0.50), pct(0.99));

    let quality = rt.block_on(paraphrase_top1(embedder.as_ref()));
    let (cps, rss) = (done as f64 / secs, peak_rss_mb());
    format!(
        "| {name} | {} | {} | {cps:.1} | {:.1} | {p50:.2} | {p99:.2} | {:.0} | {rss:.0} | {quality} |\n\
         #stats {cps} {p50} {p99} {rss}",
        embedder.model_id(),
        embedder.dimension(),
        done as f64 / cpu,
        load.as_secs_f64() * 1e3,
    )
}

/// The questions of the corpus's train.jsonl (10-40 Chinese characters each), in file order.
fn load_questions(n: usize) -> Vec<String> {
    let path = corpus_dir().join("questions/train.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "questions not found at {} ({e}); set DOCPIPE_CORPUS",
            path.display()
        )
    });
    let qs: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["question"].as_str().map(str::to_owned))
        .take(n)
        .collect();
    assert!(!qs.is_empty(), "no questions in {}", path.display());
    qs
}

/// How many of the fixture questions (paraphrases, zh and en) find their paragraph first.
async fn paraphrase_top1(e: &dyn Embedder) -> String {
    let docs: Vec<String> = testdata::PARAGRAPHS
        .iter()
        .map(|(_, p)| p.to_string())
        .collect();
    let dv = e.embed_passages(&docs).await.expect("embed paragraphs");
    let mut hits = 0;
    for (q, want) in testdata::PARAPHRASES {
        let qv = e.embed_query(q).await.expect("embed question");
        let best = (0..dv.len())
            .max_by(|&a, &b| cosine(&qv, &dv[a]).total_cmp(&cosine(&qv, &dv[b])))
            .unwrap();
        hits += usize::from(best == *want);
    }
    format!("{hits}/{}", testdata::PARAPHRASES.len())
}

fn corpus_dir() -> PathBuf {
    std::env::var_os("DOCPIPE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus"))
}

/// Body text of the laws (headings and metadata lines dropped), cut every 200 characters.
fn load_chunks(n: usize) -> Vec<String> {
    let dir = corpus_dir().join("laws");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "corpus not found at {} ({e}); set DOCPIPE_CORPUS",
                dir.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let mut chunks = Vec::with_capacity(n);
    let mut cur = String::new();
    let mut cur_chars = 0;
    'files: for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with("<!--") {
                continue;
            }
            for c in line.chars() {
                cur.push(c);
                cur_chars += 1;
                if cur_chars == CHUNK_CHARS {
                    chunks.push(std::mem::take(&mut cur));
                    cur_chars = 0;
                    if chunks.len() == n {
                        break 'files;
                    }
                }
            }
        }
    }
    assert_eq!(
        chunks.len(),
        n,
        "the corpus gave only {} chunks",
        chunks.len()
    );
    chunks
}

/// User + system CPU time of this process. On a shared machine wall-clock throughput depends on
/// the neighbours; throughput per CPU-second much less.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the ")" that closes the command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    // Linux reports these in USER_HZ, which is 100 on every mainstream build.
    f.iter().sum::<f64>() / 100.0
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
