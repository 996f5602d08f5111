//! The retrieval benchmark of `make bench` (scripts/bench.sh runs it): the laws of
//! `corpus/questions/laws` indexed through the stages (store, parse, index) into a database and a
//! Milvus collection that outlive the run, so a second run embeds nothing; then every question of
//! `train.jsonl` asked in each mode through `docpipe_search::search` (the authority check
//! included), and a sample of them over HTTP through the API's router.
//!
//!     bench_retrieval --out DIR [--http-queries N] [--modes dense,keyword,hybrid]
//!
//! It writes `DIR/articles.jsonl` (every block searched: its law, article number and text, which
//! the Python baseline indexes too), `DIR/rankings.jsonl` (per question and mode, the distinct
//! articles returned and the latency), `DIR/candidates.jsonl` (per question both rankings before
//! fusion, as block ids with their scores) and `DIR/ingest.json`. scripts/retrieval/score.py scores
//! them and the baseline side by side. Progress goes to stderr, one line per law.

use anyhow::Result as AnyResult;
use docpipe_core::filters::Filters;
use docpipe_embed::Embedder;
use docpipe_parse::article_ref::article_number;
use docpipe_search::{rankings, search, Graph, Mode, Query, SearchCache, SearchDeps};
use docpipe_vector::{MilvusIndex, VectorIndex};
use helpers::{corpus_dir, sha256_hex, Pipeline, TestAws, TestDb};
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

struct Args {
    out: PathBuf,
    http_queries: usize,
    modes: Vec<Mode>,
}

fn args() -> AnyResult<Args> {
    let mut a = Args {
        out: PathBuf::from(".local/bench/retrieval"),
        http_queries: 200,
        modes: vec![Mode::Dense, Mode::Keyword, Mode::Hybrid],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--out" => a.out = PathBuf::from(value),
            "--http-queries" => a.http_queries = value.parse()?,
            "--modes" => {
                a.modes = value
                    .split(',')
                    .map(|m| serde_json::from_value(json!(m)))
                    .collect::<Result<_, _>>()?
            }
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

fn emit_progress(line: &str) {
    eprintln!("[retrieval] {line}");
}

/// Database and collection names for this embedder: its vectors are only comparable to its own.
fn store_name(model: &str) -> String {
    let clean: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("bench_retrieval_{clean}")
}

struct Law {
    file: String,
    law: String,
    body: Vec<u8>,
}

fn laws(dir: &std::path::Path) -> AnyResult<Vec<Law>> {
    let index = std::fs::read_to_string(dir.join("INDEX.tsv"))?;
    let mut out = Vec::new();
    for line in index.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 2 {
            continue;
        }
        out.push(Law {
            file: f[0].to_string(),
            law: f[1].to_string(),
            body: std::fs::read(dir.join(f[0]))?,
        });
    }
    Ok(out)
}

fn main() -> AnyResult<()> {
    let args = args()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: Args) -> AnyResult<()> {
    std::fs::create_dir_all(&args.out)?;
    let questions_dir = corpus_dir().join("questions");
    let embedder: Arc<dyn Embedder> = docpipe_embed::from_env()?;
    let name = store_name(embedder.model_id());
    let p = Pipeline::with(
        TestDb::persistent(&name).await,
        TestAws::new().await,
        embedder.clone(),
        &name,
    )
    .await;
    p.milvus
        .ensure_collection(embedder.dimension(), embedder.model_id())
        .await?;
    let (db, milvus) = (&p.db, p.milvus.clone());

    // 1. The laws, each indexed once per embedder: a file already indexed with the same bytes is
    //    reused, so a second run embeds nothing.
    let laws = laws(&questions_dir.join("laws"))?;
    let started = Instant::now();
    let (mut reused, mut indexed, mut chunks_embedded) = (0usize, 0usize, 0usize);
    let mut law_of_doc: HashMap<String, String> = HashMap::new();
    for (i, law) in laws.iter().enumerate() {
        let sha = sha256_hex(&law.body);
        let existing = db
            .client()
            .await
            .query_opt(
                "SELECT doc_id FROM documents WHERE file_name = $1 AND content_sha256 = $2
                 AND status = 'indexed' AND deleting_at IS NULL LIMIT 1",
                &[&law.file, &sha],
            )
            .await?;
        if let Some(row) = existing {
            law_of_doc.insert(row.get(0), law.law.clone());
            reused += 1;
            continue;
        }
        let t = Instant::now();
        let doc_id = p
            .ingest(&format!("uploads/questions/{}", law.file), &law.body)
            .await;
        // A long law takes the index stage more than one invocation's time (the template's
        // timeout, scaled down): each invocation goes on where the last one stopped.
        for _ in 0..100 {
            match p.doc(&doc_id).await {
                Some(d) if d.status == docpipe_core::model::DocStatus::Parsed => {
                    p.drive(&doc_id).await
                }
                _ => break,
            }
        }
        let doc = p
            .doc(&doc_id)
            .await
            .ok_or_else(|| anyhow::anyhow!("{}: no document", law.file))?;
        anyhow::ensure!(
            doc.status == docpipe_core::model::DocStatus::Indexed,
            "{}: {} ({})",
            law.file,
            doc.status,
            doc.error_message
        );
        let chunks = doc.chunk_count as usize;
        law_of_doc.insert(doc_id, law.law.clone());
        indexed += 1;
        chunks_embedded += chunks;
        emit_progress(&format!(
            "{}/{} {} ({}) indexed: {chunks} chunks in {:.1} s",
            i + 1,
            laws.len(),
            law.file,
            law.law,
            t.elapsed().as_secs_f64()
        ));
    }
    let ingest_secs = started.elapsed().as_secs_f64();
    // An analyzer change re-analyses from PostgreSQL; nothing is embedded for it.
    let t = Instant::now();
    let rekeyed = docpipe_pipeline::stages::keywords::reindex(&db.db, 100_000).await?;
    let rekey_secs = t.elapsed().as_secs_f64();
    // Laws indexed before the article graph existed get their references from their stored blocks.
    let t = Instant::now();
    let reread = docpipe_pipeline::stages::references::reread(&db.db, 100_000).await?;
    let reread_secs = t.elapsed().as_secs_f64();
    let edges: i64 = db
        .client()
        .await
        .query_one("SELECT count(*) FROM article_references", &[])
        .await?
        .get(0);
    emit_progress(&format!(
        "laws: {indexed} indexed ({chunks_embedded} chunks embedded), {reused} reused; \
         keyword rows rebuilt for {} documents; references read for {} ({} references, \
         {edges} in the graph)",
        rekeyed.documents, reread.documents, reread.references
    ));
    std::fs::write(
        args.out.join("ingest.json"),
        serde_json::to_vec_pretty(&json!({
            "embedder": embedder.model_id(),
            "database": name,
            "laws": laws.len(),
            "indexed": indexed,
            "reused": reused,
            "chunks_embedded": chunks_embedded,
            "ingest_secs": ingest_secs,
            "keyword_reindexed_documents": rekeyed.documents,
            "keyword_reindexed_blocks": rekeyed.blocks,
            "keyword_reindex_secs": rekey_secs,
            "references_reread_documents": reread.documents,
            "references_reread_secs": reread_secs,
            "references": edges,
        }))?,
    )?;

    // 2. The articles searched, with the key a cited article is scored by: (law, number).
    let rows = db
        .client()
        .await
        .query(
            "SELECT sb.id, sb.doc_id, sb.section_path, sb.text, sb.semantic_id
             FROM semantic_blocks sb
             JOIN documents d ON d.doc_id = sb.doc_id
             WHERE d.status = 'indexed' AND d.deleting_at IS NULL ORDER BY sb.id",
            &[],
        )
        .await?;
    let mut key_of_hit: HashMap<(String, String), String> = HashMap::new();
    let mut articles =
        std::io::BufWriter::new(std::fs::File::create(args.out.join("articles.jsonl"))?);
    for r in &rows {
        let (id, doc_id): (i64, String) = (r.get(0), r.get(1));
        let Some(law) = law_of_doc.get(&doc_id) else {
            continue;
        };
        let path: Vec<String> = serde_json::from_value(r.get(2)).unwrap_or_default();
        let number = path.iter().rev().find_map(|p| article_number(p));
        let key = match number {
            Some(n) => format!("{law}第{n}条"),
            None => format!("{law}#{id}"),
        };
        key_of_hit.insert((doc_id.clone(), r.get(4)), key.clone());
        let text: String = r.get(3);
        writeln!(
            articles,
            "{}",
            json!({"block_id": id, "law": law, "article": number, "key": key, "text": text})
        )?;
    }
    articles.flush()?;
    // The article graph at block level, as search follows it: how many of the articles search
    // misses it could reach at all (score.py).
    let block_ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    let edges = docpipe_db::references::edges_from(
        &**db.client().await,
        &block_ids,
        docpipe_search::graph::MAX_SPAN,
        docpipe_search::graph::PER_REFERENCE,
        1_000_000,
        &[],
    )
    .await?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(args.out.join("edges.jsonl"))?);
    for e in &edges {
        writeln!(out, "{}", json!([e.seed, e.target, e.kind]))?;
    }
    out.flush()?;
    // 3. Every question, in each mode, in process.
    let questions: Vec<serde_json::Value> =
        std::fs::read_to_string(questions_dir.join("train.jsonl"))?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
    let cache = SearchCache::default();
    let deps = SearchDeps {
        db: &db.db,
        embedder: embedder.as_ref(),
        vectors: milvus.as_ref(),
        cache: &cache,
    };
    // The same searches with the model's own query vectors, beside the adapted ones in one run:
    // the adapter is fitted on the tune part, so its gain is read on the check part.
    let plain_embedder = match embedder.query_adapter() {
        Some(_) => Some(docpipe_embed::from_vars(|k| match k {
            "DOCPIPE_E5_QUERY_ADAPTER" => Some("none".to_string()),
            _ => std::env::var(k).ok(),
        })?),
        None => None,
    };
    let plain_deps = plain_embedder.as_ref().map(|e| SearchDeps {
        embedder: e.as_ref(),
        ..deps
    });
    let mut runs: Vec<(String, Mode, &SearchDeps, Graph)> = args
        .modes
        .iter()
        .map(|m| (m.as_str().to_string(), *m, &deps, Graph::OFF))
        .collect();
    if let Some(plain) = &plain_deps {
        for m in args.modes.iter().filter(|m| **m != Mode::Keyword) {
            runs.push((
                format!("{} (no adapter)", m.as_str()),
                *m,
                plain,
                Graph::OFF,
            ));
        }
    }
    // The article graph over hybrid: a small grid, chosen on the tune part (score.py).
    if args.modes.contains(&Mode::Hybrid) {
        for seeds in GRAPH_SEEDS {
            for weight in GRAPH_WEIGHTS {
                let graph = Graph { seeds, weight };
                runs.push((graph_label(&graph), Mode::Hybrid, &deps, graph));
            }
        }
    }
    let filters = Filters::default();
    let mut out = std::io::BufWriter::new(std::fs::File::create(args.out.join("rankings.jsonl"))?);
    for (label, mode, deps, graph) in &runs {
        // Warm: the analyzer's dictionary, the caches, Milvus's loaded segments.
        for q in questions.iter().take(5) {
            let text = q["question"].as_str().unwrap_or_default();
            search(deps, &query(text, *mode, &filters, *graph)).await?;
        }
        let t_mode = Instant::now();
        for (i, q) in questions.iter().enumerate() {
            let text = q["question"].as_str().unwrap_or_default();
            let t = Instant::now();
            let result = search(deps, &query(text, *mode, &filters, *graph)).await?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let mut ranked: Vec<&str> = Vec::new();
            for h in &result.hits {
                let Some(key) = key_of_hit.get(&(h.doc_id.clone(), h.semantic_id.clone())) else {
                    continue;
                };
                if !ranked.contains(&key.as_str()) {
                    ranked.push(key);
                }
            }
            writeln!(
                out,
                "{}",
                json!({"id": q["id"], "mode": label, "ms": ms, "ranked": ranked,
                       "dense": result.hits.iter().map(|h| h.dense_rank).collect::<Vec<_>>(),
                       "keyword": result.hits.iter().map(|h| h.keyword_rank).collect::<Vec<_>>()})
            )?;
            if (i + 1) % 250 == 0 {
                emit_progress(&format!(
                    "{label}: {}/{} questions, {:.0} s",
                    i + 1,
                    questions.len(),
                    t_mode.elapsed().as_secs_f64()
                ));
            }
        }
    }
    out.flush()?;

    // 3b. Both rankings before fusion, with their scores: what the fusion is tuned on.
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(args.out.join("candidates.jsonl"))?);
    for q in &questions {
        let text = q["question"].as_str().unwrap_or_default();
        let r = rankings(&deps, &query(text, Mode::Hybrid, &filters, Graph::OFF)).await?;
        let pairs = |b: &[docpipe_db::keyword::ScoredBlock]| {
            b.iter()
                .map(|s| json!([s.block_id, s.score]))
                .collect::<Vec<_>>()
        };
        let dense = r.dense.as_ref().map(|d| d.blocks.as_slice()).unwrap_or(&[]);
        writeln!(
            out,
            "{}",
            json!({"id": q["id"], "dense": pairs(dense), "keyword": pairs(&r.keyword)})
        )?;
    }
    out.flush()?;

    // 4. Over HTTP: the API's router on a local port, as the dev runner serves it.
    let http = http_latency(
        db,
        &p.aws,
        embedder.clone(),
        milvus.clone(),
        &questions,
        args.http_queries,
    )
    .await?;
    std::fs::write(
        args.out.join("http.json"),
        serde_json::to_vec_pretty(&http)?,
    )?;
    emit_progress("done");
    Ok(())
}

/// The graph settings tried: how many of the first fused hits are followed, and the share of a
/// citer's score its target gains.
const GRAPH_SEEDS: [usize; 2] = [3, 10];
const GRAPH_WEIGHTS: [f64; 3] = [0.25, 0.5, 1.0];

fn graph_label(g: &Graph) -> String {
    format!("hybrid (graph {} seeds, weight {})", g.seeds, g.weight)
}

fn query<'q>(text: &'q str, mode: Mode, filters: &'q Filters, graph: Graph) -> Query<'q> {
    Query {
        text,
        top_k: docpipe_search::MAX_TOP_K,
        mode,
        filters,
        as_of: None,
        versions: docpipe_search::Versions::InForce,
        graph,
    }
}

async fn http_latency(
    db: &TestDb,
    aws: &TestAws,
    embedder: Arc<dyn Embedder>,
    milvus: Arc<MilvusIndex>,
    questions: &[serde_json::Value],
    n: usize,
) -> AnyResult<serde_json::Value> {
    let state = Arc::new(docpipe_api_fn::ApiState::new(
        db.db.clone(),
        &aws.clients,
        embedder,
        milvus,
        aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
        docpipe_api_fn::ApiConfig {
            reviewer_scope: docpipe_api_fn::DEFAULT_REVIEWER_SCOPE.to_string(),
            dev_sigv4_keys: None,
            tenancy: Default::default(),
            bucket: aws.bucket.clone(),
            parse_queue_url: aws.parse_queue.clone(),
            index_queue_url: aws.index_queue.clone(),
            upload_url_ttl: std::time::Duration::from_secs(600),
            download_url_ttl: std::time::Duration::from_secs(300),
            webhook_token: None,
            webhook_token_secret_arn: None,
            stage_deadline_secs: 900,
            max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
            max_body_bytes: 64 * 1024,
            max_receive_count: Some(aws.clock.max_receive_count),
        },
        docpipe_api_fn::ActorSource::Local,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(docpipe_api_fn::serve(
        listener,
        state,
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    let mut by_mode = serde_json::Map::new();
    for mode in ["dense", "keyword", "hybrid"] {
        let mut ms = Vec::new();
        for (i, q) in questions.iter().take(n + 5).enumerate() {
            let t = Instant::now();
            let response = client
                .post(format!("{base}/search"))
                .json(&json!({"query": q["question"], "top_k": 10, "mode": mode}))
                .send()
                .await?;
            anyhow::ensure!(response.status().is_success(), "HTTP {}", response.status());
            response.bytes().await?;
            if i >= 5 {
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        if ms.is_empty() {
            // `--http-queries` 5 or fewer: warm-ups only, nothing timed.
            continue;
        }
        ms.sort_by(f64::total_cmp);
        let at = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
        by_mode.insert(
            mode.into(),
            json!({"queries": ms.len(), "p50_ms": at(0.5), "p99_ms": at(0.99)}),
        );
    }
    Ok(serde_json::Value::Object(by_mode))
}
