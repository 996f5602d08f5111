//! Embedding throughput and memory of the local embedders on ~200-character chunks of the Chinese
//! laws in the corpus. Run through `scripts/bench-embed.sh`.
//!
//!   bench_embed [--chunks N]                 # every local embedder, one child process each
//!   bench_embed --embedder hash [--chunks N] # one row, no header (what the children run)
//!
//! Each embedder runs in its own process so that its peak RSS (VmHWM) is its own.

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
    match flag("--embedder") {
        Some(name) => println!("{}", run_one(&name, chunks)),
        None => run_all(chunks),
    }
}

fn local_embedders() -> Vec<&'static str> {
    let mut v = vec!["hash"];
    if cfg!(feature = "e5") {
        v.push("e5-small");
    }
    v
}

fn run_all(chunks: usize) {
    let exe = std::env::current_exe().expect("own path");
    println!(
        "{chunks} chunks of ~{CHUNK_CHARS} Chinese characters from {}, {} CPUs\n",
        corpus_dir()
            .join("laws")
            .canonicalize()
            .unwrap_or_else(|_| corpus_dir().join("laws"))
            .display(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "| embedder | model id | dim | chunks/s | chunks per CPU-s | load ms | peak RSS MB | questions top-1 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for name in local_embedders() {
        let out = std::process::Command::new(&exe)
            .args(["--embedder", name, "--chunks", &chunks.to_string()])
            .output()
            .expect("run the child benchmark");
        if !out.status.success() {
            eprintln!("{name}: {}", String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        }
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    if !cfg!(feature = "e5") {
        println!("\n(e5-small not built: run scripts/fetch-e5.sh, then this with --features e5)");
    }
}

fn run_one(name: &str, n: usize) -> String {
    let texts = load_chunks(n);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let t0 = Instant::now();
    let embedder: Box<dyn Embedder> = match name {
        "hash" => Box::new(HashEmbedder::default()),
        #[cfg(feature = "e5")]
        "e5-small" => {
            let path = match std::env::var_os("DOCPIPE_E5_MODEL") {
                Some(p) => PathBuf::from(p),
                None => docpipe_embed::e5::default_model_path().expect("e5 model"),
            };
            let threads = std::env::var("DOCPIPE_E5_THREADS")
                .ok()
                .map(|v| v.parse().unwrap());
            let mut e = docpipe_embed::E5Embedder::load(&path, threads).expect("load e5");
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
    let quality = rt.block_on(paraphrase_top1(embedder.as_ref()));
    format!(
        "| {name} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {quality} |",
        embedder.model_id(),
        embedder.dimension(),
        done as f64 / secs,
        done as f64 / cpu,
        load.as_secs_f64() * 1e3,
        peak_rss_mb()
    )
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
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"))
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
