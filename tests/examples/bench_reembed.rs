//! Re-embedding measured (`make bench` runs it): the laws of `corpus/questions/laws` indexed with
//! the `hash` embedder into a database and a collection of the run's own, then `POST /index/rebuild`
//! to e5-small (switch manual) through the API's router, the index function's handler fed the
//! index queue in process, while a client searches throughout (dense, one question after another).
//!
//! It prints a Markdown table and, last, one JSON line: the rebuild's time and chunks/s, search p50
//! and p99 before the rebuild and during it (and the ratio), recall@10 (dense) of both collections
//! on the questions before the switch, and the searches that failed or came back empty before,
//! during and across the switch (each must be 0).
//!
//!     bench_reembed [--questions N]   # recall on the first N questions (default all)

use anyhow::Result as AnyResult;
use docpipe_db::generations::{self, State};
use docpipe_pipeline::handlers::sqs::Handled;
use helpers::{corpus_dir, sqs_batch, Pipeline, TestAws, TestDb};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn main() -> AnyResult<()> {
    let mut questions = usize::MAX;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--questions" => questions = args.next().unwrap_or_default().parse()?,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(questions))
}

#[derive(Default)]
struct Searches {
    latencies_ms: Vec<f64>,
    failed: usize,
    empty: usize,
}

impl Searches {
    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.latencies_ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            return 0.0;
        }
        v[((v.len() - 1) as f64 * q).round() as usize]
    }
}

async fn ask(http: &reqwest::Client, base: &str, body: &Value) -> (f64, Option<Value>) {
    let t = Instant::now();
    let answer = http.post(format!("{base}/search")).json(body).send().await;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    match answer {
        Ok(a) if a.status() == 200 => (ms, a.json().await.ok()),
        _ => (ms, None),
    }
}

fn record(s: &mut Searches, ms: f64, answer: &Option<Value>) {
    s.latencies_ms.push(ms);
    match answer {
        None => s.failed += 1,
        Some(v) if v["hits"].as_array().is_none_or(|h| h.is_empty()) => s.empty += 1,
        Some(_) => {}
    }
}

async fn run(sample: usize) -> AnyResult<()> {
    let dir = corpus_dir().join("questions");
    let questions: Vec<Value> = std::fs::read_to_string(dir.join("train.jsonl"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let p = Pipeline::with(
        TestDb::new().await,
        TestAws::new().await,
        Pipeline::hash(),
        &helpers::unique("bench_reembed_"),
    )
    .await;

    // 1. The library, with the hash embedder.
    let t = Instant::now();
    let index = std::fs::read_to_string(dir.join("laws/INDEX.tsv"))?;
    let files: Vec<&str> = index
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next())
        .collect();
    for (i, file) in files.iter().enumerate() {
        let body = std::fs::read(dir.join("laws").join(file))?;
        let doc_id = p.ingest(&format!("uploads/{file}"), &body).await;
        for _ in 0..100 {
            match p.doc(&doc_id).await {
                Some(d) if d.status == docpipe_core::model::DocStatus::Parsed => {
                    p.drive(&doc_id).await
                }
                _ => break,
            }
        }
        eprintln!("[bench_reembed] indexed {}/{} {file}", i + 1, files.len());
    }
    let ingest_s = t.elapsed().as_secs_f64();
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();

    // 2. Search before: one question after another.
    let mut before = Searches::default();
    for q in questions.iter().take(200) {
        let (ms, answer) = ask(
            &http,
            &base,
            &json!({ "query": q["question"], "mode": "dense" }),
        )
        .await;
        record(&mut before, ms, &answer);
    }

    // 3. The rebuild, with a client searching throughout.
    let during = Arc::new(Mutex::new(Searches::default()));
    let across = Arc::new(Mutex::new(Searches::default()));
    let switching = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let searcher = {
        let (base, questions) = (base.clone(), questions.clone());
        let (during, across, switching, stop) = (
            during.clone(),
            across.clone(),
            switching.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            for q in questions.iter().cycle() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let (ms, answer) = ask(
                    &http,
                    &base,
                    &json!({ "query": q["question"], "mode": "dense" }),
                )
                .await;
                let target = if switching.load(Ordering::SeqCst) {
                    &across
                } else {
                    &during
                };
                record(&mut target.lock().unwrap(), ms, &answer);
            }
        })
    };
    let started = Instant::now();
    let answer = http
        .post(format!("{base}/index/rebuild"))
        .header("x-docpipe-role", "reviewer")
        .json(&json!({ "embedder": "e5-small", "switch": "manual", "grace_secs": 60 }))
        .send()
        .await?;
    anyhow::ensure!(answer.status() == 202, "rebuild: {}", answer.text().await?);
    let id = answer.json::<Value>().await?["generation"]
        .as_i64()
        .unwrap_or_default();
    let mut last = Instant::now();
    let g = loop {
        let g = generations::get(&**p.db.client().await, id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no generation {id}"))?;
        if g.state != State::Building {
            break g;
        }
        if last.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "[bench_reembed] rebuild {id}: {} of {} chunks, step {}",
                g.chunks_done, g.chunks_total, g.step
            );
            last = Instant::now();
        }
        let bodies = p.aws.drain(&p.aws.index_queue, 10).await;
        if bodies.is_empty() {
            continue;
        }
        let report =
            docpipe_pipeline::handlers::index::handle_sqs(&p.index, sqs_batch(&bodies)).await;
        for (body, outcome) in bodies.iter().zip(&report.outcomes) {
            if !matches!(outcome, Handled::Done(_)) {
                helpers::return_after_backoff(&p.aws, &p.aws.index_queue, body).await;
            }
        }
    };
    let rebuild_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(g.state == State::Ready, "the rebuild ended {g:?}");
    let during = std::mem::take(&mut *during.lock().unwrap());

    // 4. Recall of both collections, before the switch.
    let asked: Vec<Value> = questions.iter().take(sample).cloned().collect();
    let cli = docpipe_cli::client::Conn {
        api_url: base.clone(),
        auth: docpipe_cli::auth::AuthMode::None,
        token: None,
        json: false,
        tenant: None,
    }
    .client()?;
    let (recall_hash, recall_e5) = docpipe_cli::commands::recall_at_10(&cli, &asked).await?;

    // 5. The switch, with the client still searching, then a while after it.
    switching.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let answer = http
        .post(format!("{base}/index/switch"))
        .header("x-docpipe-role", "reviewer")
        .json(&json!({ "generation": id }))
        .send()
        .await?;
    anyhow::ensure!(answer.status() == 200, "switch: {}", answer.text().await?);
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop.store(true, Ordering::SeqCst);
    searcher.await?;
    let across = std::mem::take(&mut *across.lock().unwrap());

    let rate = g.chunks_total as f64 / rebuild_s;
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| library | {} laws, {} chunks (hash indexed in {ingest_s:.0} s) |",
        files.len(),
        g.chunks_total
    );
    println!(
        "| rebuild hash → e5-small | {rebuild_s:.1} s, {rate:.1} chunks/s, {} steps |",
        g.step
    );
    println!(
        "| dense search p50 / p99 before | {:.1} / {:.1} ms ({} searches) |",
        before.quantile(0.5),
        before.quantile(0.99),
        before.latencies_ms.len()
    );
    println!(
        "| dense search p50 / p99 during the rebuild | {:.1} / {:.1} ms ({} searches), p50 {:.2}× before |",
        during.quantile(0.5),
        during.quantile(0.99),
        during.latencies_ms.len(),
        during.quantile(0.5) / before.quantile(0.5).max(0.001)
    );
    println!(
        "| recall@10 dense on {} questions | hash {recall_hash:.4} → e5-small {recall_e5:.4} |",
        asked.len()
    );
    println!(
        "| failed / empty searches | before {}/{}, during {}/{}, across the switch {}/{} of {} |",
        before.failed,
        before.empty,
        during.failed,
        during.empty,
        across.failed,
        across.empty,
        across.latencies_ms.len()
    );
    println!(
        "{}",
        json!({
            "laws": files.len(),
            "chunks": g.chunks_total,
            "rebuild_s": (rebuild_s * 10.0).round() / 10.0,
            "chunks_per_s": (rate * 10.0).round() / 10.0,
            "steps": g.step,
            "p50_ms": { "before": before.quantile(0.5), "during": during.quantile(0.5) },
            "p99_ms": { "before": before.quantile(0.99), "during": during.quantile(0.99) },
            "p50_during_over_before": during.quantile(0.5) / before.quantile(0.5).max(0.001),
            "recall_at_10_dense": { "questions": asked.len(), "hash": recall_hash, "e5_small": recall_e5 },
            "searches": { "during": during.latencies_ms.len(), "across_switch": across.latencies_ms.len() },
            "failed": { "before": before.failed, "during": during.failed, "across_switch": across.failed },
            "empty": { "before": before.empty, "during": during.empty, "across_switch": across.empty },
        })
    );
    let collection = g.collection.clone();
    p.cleanup().await;
    let _ = docpipe_vector::VectorIndex::drop_collection(
        &docpipe_vector::MilvusIndex::connect(&helpers::milvus_url(), None, &collection).await?,
    )
    .await;
    Ok(())
}
