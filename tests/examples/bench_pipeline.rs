//! The pipeline's benchmarks, each measured against a named baseline in the same run, on the real
//! local stack (`make up`). `scripts/bench.sh` (what `make bench` runs) builds this in release,
//! runs every subcommand and prints the Markdown table; each subcommand prints one JSON object per
//! line on stdout. Nothing here asserts a timing.
//!
//! ```text
//! bench_pipeline snapshot [--nodes 5000] [--blocks 5000] [--repeat 5]
//!     UNNEST snapshot writes (db::snapshot::replace) against one execute_typed per row, both in
//!     one transaction through PgBouncer, on a database of its own
//! bench_pipeline index-search --embedder hash|e5-small [--chunks 400] [--queries 200]
//!     stores and parses laws until they hold --chunks chunks, times index_job on each, then
//!     MilvusIndex::insert of as many precomputed vectors (the ceiling); then --queries searches
//!     through docpipe_search::search (authority check included) against raw Milvus searches
//! bench_pipeline versions-search [--queries 200] [--as-of 2015-01-01]
//!     indexes every version of corpus/versions (each law in two or more versions, hash
//!     embedder), then times the same queries three ways, interleaved: no `as_of` (the default:
//!     today, in force), `as_of` a past day, and `versions: all` (every version, placed)
//! bench_pipeline init --bin-dir DIR [--starts 5] NAME...
//!     spawns each function binary with AWS_LAMBDA_RUNTIME_API pointing here; init time is spawn
//!     to its first GET /2018-06-01/runtime/invocation/next
//! bench_pipeline rss FILE [--embedder hash]
//!     store, parse and index of FILE, each stage in a child process of its own (`stage-rss`)
//!     that reports its VmHWM; `stage-rss idle` is the same process with no stage run
//! ```

use docpipe_core::config::{DbConfig, IndexConfig, ParseConfig, Secret, StoreConfig};
use docpipe_core::filters::Filters;
use docpipe_core::model::{DocStatus, JobMessage};
use docpipe_db::{Db, Type};
use docpipe_embed::Embedder;
use docpipe_parse::{SemanticBlock, StructureNode, VectorChunk};
use docpipe_pipeline::services::{AwsClients, IndexService, ParseService, StoreService};
use docpipe_pipeline::stages::index::{index_job, IndexOutcome};
use docpipe_pipeline::stages::parse::{parse_job, ParseOutcome};
use docpipe_search::{search, Mode, Query, SearchCache, SearchDeps};
use docpipe_vector::{ChunkRecord, MilvusIndex, SearchFilters, VectorIndex};
use helpers::{article_lines, article_probe, law_paths, read_law};
use helpers::{
    aws_config, corpus_dir, ensure_pdfium_env, milvus_url, s3_put_event, unique, Pipeline, TestAws,
    TestDb,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

type AnyResult<T> = anyhow::Result<T>;

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first().cloned() else {
        anyhow::bail!("usage: bench_pipeline snapshot|index-search|init|rss|stage-rss …");
    };
    let rest = Args(args[1..].to_vec());
    // Off unless asked: DOCPIPE_LOG=docpipe_search=debug shows each search's parts.
    if std::env::var_os("DOCPIPE_LOG").is_some() {
        docpipe_core::telemetry::init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match command.as_str() {
        "snapshot" => runtime.block_on(snapshot(rest)),
        "index-search" => runtime.block_on(index_search(rest)),
        "versions-search" => runtime.block_on(versions_search(rest)),
        "verify" => runtime.block_on(verify(rest)),
        "init" => init(rest),
        "rss" => runtime.block_on(rss(rest)),
        "stage-rss" => runtime.block_on(stage_rss(rest)),
        other => anyhow::bail!("unknown subcommand {other:?}"),
    }
}

/// `--name value` options and positional arguments.
struct Args(Vec<String>);

impl Args {
    fn opt(&self, name: &str) -> Option<String> {
        let flag = format!("--{name}");
        self.0
            .iter()
            .position(|a| *a == flag)
            .and_then(|i| self.0.get(i + 1).cloned())
    }
    fn num(&self, name: &str, default: usize) -> AnyResult<usize> {
        match self.opt(name) {
            Some(v) => Ok(v.parse()?),
            None => Ok(default),
        }
    }
    /// Arguments that are neither flags nor flag values.
    fn positional(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut skip = false;
        for a in &self.0 {
            if skip {
                skip = false;
            } else if a.starts_with("--") {
                skip = true;
            } else {
                out.push(a.clone());
            }
        }
        out
    }
}

fn emit(value: Value) {
    println!("{value}");
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn median(values: &[f64]) -> f64 {
    percentile(values, 0.5)
}

/// Linear interpolation between closest ranks (what PostgreSQL's percentile_cont does).
fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = p * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

// ---------------------------------------------------------------------------------------------
// Cleanup: the benchmark's own database, bucket, queues and collections go when it is done.

async fn drop_database(name: &str) {
    let Ok(url) = std::env::var("DATABASE_DIRECT_URL") else {
        eprintln!("DATABASE_DIRECT_URL is not set: database {name} is left behind");
        return;
    };
    match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok((client, conn)) => {
            tokio::spawn(conn);
            if let Err(e) = client
                .simple_query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await
            {
                eprintln!("dropping database {name}: {e}");
            }
        }
        Err(e) => eprintln!("dropping database {name}: {e}"),
    }
}

async fn drop_aws(aws: &TestAws) {
    let s3 = &aws.clients.s3;
    let mut token = None;
    loop {
        let Ok(page) = s3
            .list_objects_v2()
            .bucket(&aws.bucket)
            .set_continuation_token(token.clone())
            .send()
            .await
        else {
            break;
        };
        for o in page.contents() {
            if let Some(key) = o.key() {
                let _ = s3.delete_object().bucket(&aws.bucket).key(key).send().await;
            }
        }
        token = page.next_continuation_token().map(String::from);
        if token.is_none() {
            break;
        }
    }
    let _ = s3.delete_bucket().bucket(&aws.bucket).send().await;
    for q in [
        &aws.store_queue,
        &aws.parse_queue,
        &aws.index_queue,
        &aws.store_dlq,
        &aws.parse_dlq,
        &aws.index_dlq,
    ] {
        let _ = aws.clients.sqs.delete_queue().queue_url(q).send().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Snapshot writes: UNNEST (one statement per table) against one INSERT per row.

/// Article lines of the laws: realistic titles and texts for the synthetic snapshot.
fn article_texts(limit: usize) -> AnyResult<Vec<String>> {
    let mut out = Vec::new();
    for p in law_paths() {
        let (_, text) = read_law(&p);
        out.extend(article_lines(&text).into_iter().map(String::from));
        if out.len() >= limit {
            break;
        }
    }
    anyhow::ensure!(!out.is_empty(), "no article lines under {:?}", corpus_dir());
    Ok(out)
}

fn synthetic_snapshot(
    nodes: usize,
    blocks: usize,
) -> AnyResult<(Vec<StructureNode>, Vec<SemanticBlock>)> {
    let texts = article_texts(nodes.max(blocks))?;
    let title_of = |t: &str| t.split_whitespace().next().unwrap_or(t).to_string();
    let structure = (0..nodes)
        .map(|i| {
            let text = &texts[i % texts.len()];
            StructureNode {
                unique_id: format!("n{i:06}"),
                page: (i / 40) as i32 + 1,
                idx: i as i32,
                level: if i % 20 == 0 { 1 } else { 2 },
                title: title_of(text),
                node_type: if i % 20 == 0 { "heading" } else { "article" }.into(),
                sub_type: if i % 20 == 0 { "chapter" } else { "article" }.into(),
                parent_idx: (i % 20 != 0).then_some((i - i % 20) as i32),
            }
        })
        .collect();
    let semantic = (0..blocks)
        .map(|i| {
            let text = &texts[i % texts.len()];
            SemanticBlock {
                semantic_id: format!("b{i:06}"),
                block_type: "article".into(),
                page_start: (i / 40) as u32 + 1,
                page_end: (i / 40) as u32 + 1,
                section_path: vec![
                    "中华人民共和国基准测试法".into(),
                    format!("第{}章", i / 20 + 1),
                    title_of(text),
                ],
                section_level: 2,
                section_title: title_of(text),
                source_ids: vec![format!("n{i:06}")],
                text: text.clone(),
            }
        })
        .collect();
    Ok((structure, semantic))
}

/// The row-by-row baseline: the same rows and casts as `snapshot::replace`, one `execute_typed`
/// per row, in the caller's transaction.
async fn replace_row_by_row(
    c: &impl tokio_postgres::GenericClient,
    doc_id: &str,
    nodes: &[StructureNode],
    blocks: &[SemanticBlock],
) -> AnyResult<()> {
    c.execute_typed(
        "DELETE FROM structure_nodes WHERE doc_id = $1",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    c.execute_typed(
        "DELETE FROM semantic_blocks WHERE doc_id = $1",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    for n in nodes {
        c.execute_typed(
            "INSERT INTO structure_nodes (doc_id, unique_id, page, idx, level, title, type, sub_type)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                (&doc_id, Type::VARCHAR),
                (&n.unique_id, Type::VARCHAR),
                (&n.page, Type::INT4),
                (&n.idx, Type::INT4),
                (&n.level, Type::INT4),
                (&n.title, Type::TEXT),
                (&n.node_type, Type::VARCHAR),
                (&n.sub_type, Type::VARCHAR),
            ],
        )
        .await?;
    }
    for b in blocks {
        let path = serde_json::to_string(&b.section_path)?;
        let sources = serde_json::to_string(&b.source_ids)?;
        let (start, end) = (b.page_start as i32, b.page_end as i32);
        c.execute_typed(
            "INSERT INTO semantic_blocks (doc_id, semantic_id, block_type, page_start, page_end,
                                          section_path, section_level, section_title, source_ids, text)
             VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9::text::jsonb, $10)",
            &[
                (&doc_id, Type::VARCHAR),
                (&b.semantic_id, Type::VARCHAR),
                (&b.block_type, Type::VARCHAR),
                (&start, Type::INT4),
                (&end, Type::INT4),
                (&path, Type::TEXT),
                (&b.section_level, Type::INT4),
                (&b.section_title, Type::VARCHAR),
                (&sources, Type::TEXT),
                (&b.text, Type::TEXT),
            ],
        )
        .await?;
    }
    Ok(())
}

async fn snapshot(args: Args) -> AnyResult<()> {
    let nodes_n = args.num("nodes", 5000)?;
    let blocks_n = args.num("blocks", 5000)?;
    let repeat = args.num("repeat", 5)?.max(1);
    let (nodes, blocks) = synthetic_snapshot(nodes_n, blocks_n)?;
    let rows = (nodes.len() + blocks.len()) as f64;
    let db = TestDb::new().await;
    let result = async {
        let doc_id = "doc_bench_snapshot";
        db.client()
            .await
            .execute_typed(
                "INSERT INTO documents (doc_id, doc_name, status) VALUES ($1, 'bench', 'parsed')",
                &[(&doc_id, Type::VARCHAR)],
            )
            .await?;
        let (mut unnest, mut row_by_row) = (Vec::new(), Vec::new());
        // Alternate the two, so that whatever else the machine does disturbs both alike.
        for _ in 0..repeat {
            let mut client = db.client().await;
            let t = Instant::now();
            let tx = client.transaction().await?;
            docpipe_db::snapshot::replace(&*tx, doc_id, 0, &nodes, &blocks, &[]).await?;
            tx.commit().await?;
            unnest.push(secs(t.elapsed()));

            let t = Instant::now();
            let tx = client.transaction().await?;
            replace_row_by_row(&*tx, doc_id, &nodes, &blocks).await?;
            tx.commit().await?;
            row_by_row.push(secs(t.elapsed()));
        }
        let counted: i64 = db
            .client()
            .await
            .query_typed(
                "SELECT (SELECT count(*) FROM structure_nodes) + (SELECT count(*) FROM semantic_blocks)",
                &[],
            )
            .await?[0]
            .get(0);
        anyhow::ensure!(counted as f64 == rows, "{counted} rows written, expected {rows}");
        emit(json!({
            "bench": "snapshot",
            "nodes": nodes.len(),
            "blocks": blocks.len(),
            "repeat": repeat,
            "unnest_s": unnest,
            "row_by_row_s": row_by_row,
            "unnest_rows_per_s": rows / median(&unnest),
            "row_by_row_rows_per_s": rows / median(&row_by_row),
        }));
        Ok::<(), anyhow::Error>(())
    }
    .await;
    drop_database(&db.name).await;
    result
}

// ---------------------------------------------------------------------------------------------
// Embed + index against the raw Milvus insert ceiling; search against raw Milvus search.

fn embedder_named(name: &str) -> AnyResult<Arc<dyn Embedder>> {
    let name = name.to_string();
    Ok(docpipe_embed::from_vars(move |key| {
        if key == "DOCPIPE_EMBEDDER" {
            Some(name.clone())
        } else {
            std::env::var(key).ok()
        }
    })?)
}

/// Laws with at least three articles, in file-name order, and a probe sentence from each article.
fn laws_with_articles() -> Vec<(String, String)> {
    law_paths()
        .iter()
        .map(|p| read_law(p))
        .filter(|(_, text)| article_lines(text).len() >= 3)
        .collect()
}

/// The longest sentence of each article: what a person would paste to find the law.
fn probe_sentences(law: &str) -> Vec<String> {
    article_lines(law)
        .into_iter()
        .filter_map(article_probe)
        .filter(|s| s.chars().count() >= 8)
        .collect()
}

/// The pipeline over a database and collection of the benchmark's own.
async fn bench_pipeline(embedder: Arc<dyn Embedder>) -> Pipeline {
    Pipeline::with(
        TestDb::new().await,
        TestAws::new().await,
        embedder,
        &unique("bench_chunks_"),
    )
    .await
}

/// Upload, store and parse; returns (doc_id, run_id, chunks).
async fn store_and_parse(p: &Pipeline, key: &str, body: &[u8]) -> AnyResult<(String, i64, usize)> {
    let job = p.stored(key, body).await;
    match parse_job(&p.parse.deps(), &job).await? {
        ParseOutcome::Parsed { chunks, .. } => Ok((job.doc_id, job.run_id, chunks)),
        other => anyhow::bail!("{key}: parse gave {other:?}"),
    }
}

/// Drops the benchmark's collection, bucket, queues and database.
async fn cleanup(p: &Pipeline) {
    p.cleanup().await;
    drop_aws(&p.aws).await;
    drop_database(&p.db.name).await;
}

async fn index_search(args: Args) -> AnyResult<()> {
    let embedder_name = args.opt("embedder").unwrap_or_else(|| "hash".into());
    let target_chunks = args.num("chunks", 400)?;
    let queries_n = args.num("queries", 200)?;
    let raw_repeat = args.num("repeat", 3)?.max(1);
    let embedder = embedder_named(&embedder_name)?;
    let bench = bench_pipeline(embedder.clone()).await;
    let raw = Arc::new(MilvusIndex::connect(&milvus_url(), None, &unique("bench_raw_")).await?);
    let result = run_index_search(
        &bench,
        &raw,
        &embedder_name,
        target_chunks,
        queries_n,
        raw_repeat,
    )
    .await;
    let _ = raw.drop_collection().await;
    cleanup(&bench).await;
    result
}

async fn run_index_search(
    bench: &Pipeline,
    raw: &MilvusIndex,
    embedder_name: &str,
    target_chunks: usize,
    queries_n: usize,
    raw_repeat: usize,
) -> AnyResult<()> {
    let embedder = bench.index.embedder.clone();
    // Store and parse laws until they hold the wanted number of chunks.
    let mut parsed = Vec::new();
    let mut total_chunks = 0;
    let mut probes: Vec<(String, String)> = Vec::new();
    for (name, text) in laws_with_articles() {
        if total_chunks >= target_chunks {
            break;
        }
        let (doc_id, run_id, chunks) =
            store_and_parse(bench, &format!("uploads/bench/{name}"), text.as_bytes()).await?;
        total_chunks += chunks;
        probes.extend(
            probe_sentences(&text)
                .into_iter()
                .map(|s| (doc_id.clone(), s)),
        );
        parsed.push((doc_id, run_id, chunks));
    }
    // A warm container has its collection: creating and loading it is not the stage's work.
    bench
        .milvus
        .ensure_collection(embedder.dimension(), embedder.model_id())
        .await?;

    // The index stage, document by document, as the index queue would drive it.
    let deps = bench.index.deps();
    let mut index_secs = 0.0;
    for (doc_id, run_id, _) in &parsed {
        let t = Instant::now();
        let outcome = index_job(&deps, &JobMessage::new(doc_id, *run_id)).await?;
        index_secs += secs(t.elapsed());
        anyhow::ensure!(
            matches!(outcome, IndexOutcome::Indexed { .. }),
            "{doc_id}: {outcome:?}"
        );
    }

    // Where the stage's time went, from what each run recorded: embedding, inserts, and the
    // clean-up and read-back (zero on first attempts).
    let mut stage_ms = [0u64; 3];
    let client = bench.db.client().await;
    for (_, run_id, _) in &parsed {
        let row = client
            .query_typed_one(
                "SELECT metadata->'index' FROM document_processing_runs WHERE run_id = $1",
                &[(run_id, docpipe_db::Type::INT8)],
            )
            .await?;
        let index: serde_json::Value = row.get(0);
        for (slot, key) in stage_ms
            .iter_mut()
            .zip(["embed_ms", "insert_ms", "checks_ms"])
        {
            *slot += index[key].as_u64().unwrap_or(0);
        }
    }
    drop(client);

    // The ceiling: the same chunks, their vectors computed beforehand, inserted straight into
    // Milvus with MilvusIndex::insert (a fresh collection; fresh ids on every repeat).
    let mut chunks: Vec<VectorChunk> = Vec::new();
    for (doc_id, run_id, _) in &parsed {
        let key = format!(
            "{}vector_chunks.json",
            docpipe_core::artifacts::run_prefix(doc_id, *run_id)
        );
        let body = bench.aws.get(&key).await;
        chunks.extend(
            docpipe_core::artifacts::decode_items::<VectorChunk>(&body)
                .map_err(anyhow::Error::msg)?,
        );
    }
    anyhow::ensure!(
        chunks.len() == total_chunks,
        "artifact chunks {} vs {total_chunks}",
        chunks.len()
    );
    let texts: Vec<String> = chunks
        .iter()
        .map(docpipe_pipeline::stages::index::embedding_text)
        .collect();
    let hash = docpipe_embed::HashEmbedder::new(embedder.dimension())?;
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(256) {
        vectors.extend(hash.embed_passages(batch).await?);
    }
    raw.ensure_collection(embedder.dimension(), "bench-precomputed")
        .await?;
    let mut raw_secs = Vec::new();
    for r in 0..raw_repeat {
        let records: Vec<ChunkRecord> = chunks
            .iter()
            .zip(&vectors)
            .enumerate()
            .map(|(i, (c, v))| ChunkRecord {
                chunk_id: format!("raw{r}:{i}"),
                organ_id: "default".into(),
                doc_id: format!("raw-doc-{r}-{}", i / 100),
                run_id: 1,
                chunk_index: i as i64,
                doc_name: "bench.md".into(),
                regulation_type: String::new(),
                version: String::new(),
                section_path: c.section_path.join(" > "),
                section_title: c.section_title.clone(),
                page_start: c.page_start as i64,
                page_end: c.page_end as i64,
                text: c.text.clone(),
                tags: Vec::new(),
                embedding: v.clone(),
                projection: docpipe_vector::Projection::ALWAYS,
            })
            .collect();
        let t = Instant::now();
        raw.insert(&records).await?;
        raw_secs.push(secs(t.elapsed()));
    }
    emit(json!({
        "bench": "index",
        "embedder": embedder_name,
        "model_id": embedder.model_id(),
        "documents": parsed.len(),
        "chunks": total_chunks,
        "index_s": index_secs,
        "index_chunks_per_s": total_chunks as f64 / index_secs,
        "embed_s": stage_ms[0] as f64 / 1e3,
        "insert_s": stage_ms[1] as f64 / 1e3,
        "checks_s": stage_ms[2] as f64 / 1e3,
        "raw_insert_s": raw_secs,
        "raw_insert_chunks_per_s": total_chunks as f64 / median(&raw_secs),
    }));

    // Search: 200+ queries over the collection just indexed, the authority check included,
    // against a raw Milvus search with the query vectors computed beforehand.
    let mut queries: Vec<(String, String)> = Vec::new();
    // Spread the queries over the documents: one probe from each in turn.
    let mut by_doc: Vec<Vec<(String, String)>> = parsed
        .iter()
        .map(|(d, _, _)| probes.iter().filter(|(p, _)| p == d).cloned().collect())
        .collect();
    while queries.len() < queries_n && by_doc.iter().any(|v| !v.is_empty()) {
        for v in by_doc.iter_mut() {
            if let Some(q) = v.pop() {
                queries.push(q);
            }
        }
    }
    while queries.len() < queries_n {
        queries.push(queries[queries.len() % probes.len().max(1)].clone());
    }
    queries.truncate(queries_n);
    let top_k = 5;
    let filters = Filters::default();
    let cache = SearchCache::default();
    let deps = SearchDeps {
        db: &bench.db.db,
        embedder: embedder.as_ref(),
        vectors: bench.milvus.as_ref(),
        cache: &cache,
    };
    fn ask<'q>(text: &'q str, mode: Mode, top_k: usize, filters: &'q Filters) -> Query<'q> {
        Query {
            text,
            top_k,
            mode,
            filters,
            as_of: None,
            versions: docpipe_search::Versions::InForce,
            graph: docpipe_search::Graph::DEFAULT,
        }
    }
    for (_, q) in queries.iter().take(5) {
        search(&deps, &ask(q, Mode::Hybrid, top_k, &filters)).await?;
    }
    let mut full_ms = Vec::new();
    let mut dense_ms = Vec::new();
    let mut keyword_ms = Vec::new();
    let mut found = 0usize;
    for (doc_id, q) in &queries {
        let t = Instant::now();
        let result = search(&deps, &ask(q, Mode::Hybrid, top_k, &filters)).await?;
        full_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if result.hits.iter().any(|h| &h.doc_id == doc_id) {
            found += 1;
        }
        let t = Instant::now();
        search(&deps, &ask(q, Mode::Dense, top_k, &filters)).await?;
        dense_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        search(&deps, &ask(q, Mode::Keyword, top_k, &filters)).await?;
        keyword_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut embed_ms = Vec::new();
    let mut query_vectors = Vec::new();
    for (_, q) in &queries {
        let t = Instant::now();
        query_vectors.push(embedder.embed_query(q).await?);
        embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // As many chunks as search() asks Milvus for.
    let wanted = docpipe_search::DENSE_CHUNKS;
    let mut raw_ms = Vec::new();
    let mut raw_hits = Vec::new();
    for v in &query_vectors {
        let t = Instant::now();
        let hits = bench
            .milvus
            .search(v, wanted, &SearchFilters::default())
            .await?;
        raw_ms.push(t.elapsed().as_secs_f64() * 1e3);
        raw_hits.push(hits);
    }
    // The dense side's PostgreSQL step on its own: a pool checkout and the one statement that
    // vouches for the chunks and maps them to their articles.
    let mut authority_ms = Vec::new();
    for hits in &raw_hits {
        let places: Vec<docpipe_db::articles::ChunkPlace> = hits
            .iter()
            .map(docpipe_db::articles::ChunkPlace::of)
            .collect();
        let t = Instant::now();
        let client = bench.db.db.client().await?;
        docpipe_db::articles::live_blocks_of_chunks(&**client, &places).await?;
        drop(client);
        authority_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    emit(json!({
        "bench": "search",
        "embedder": embedder_name,
        "collection_chunks": total_chunks,
        "documents": parsed.len(),
        "queries": queries.len(),
        "top_k": top_k,
        "found_own_law_top5": found,
        "search_p50_ms": percentile(&full_ms, 0.5),
        "search_p99_ms": percentile(&full_ms, 0.99),
        "dense_search_p50_ms": percentile(&dense_ms, 0.5),
        "keyword_search_p50_ms": percentile(&keyword_ms, 0.5),
        "embed_query_p50_ms": percentile(&embed_ms, 0.5),
        "raw_milvus_p50_ms": percentile(&raw_ms, 0.5),
        "raw_milvus_p99_ms": percentile(&raw_ms, 0.99),
        "authority_check_p50_ms": percentile(&authority_ms, 0.5),
    }));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Time travel: search as of a date against search without one, on a corpus of versions.

async fn versions_search(args: Args) -> AnyResult<()> {
    let queries_n = args.num("queries", 200)?;
    let as_of = args.opt("as-of").unwrap_or_else(|| "2015-01-01".into());
    let embedder = embedder_named("hash")?;
    let bench = bench_pipeline(embedder).await;
    let result = run_versions_search(&bench, queries_n, &as_of).await;
    cleanup(&bench).await;
    result
}

async fn run_versions_search(bench: &Pipeline, queries_n: usize, as_of: &str) -> AnyResult<()> {
    let dir = corpus_dir().join("versions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    let mut probes: Vec<Vec<String>> = Vec::new();
    for (i, path) in files.iter().enumerate() {
        let text = std::fs::read_to_string(path)?;
        let (doc_id, run_id, _) =
            store_and_parse(bench, &format!("uploads/versions/{i}.md"), text.as_bytes()).await?;
        let outcome = index_job(&bench.index.deps(), &JobMessage::new(&doc_id, run_id)).await?;
        anyhow::ensure!(
            matches!(outcome, IndexOutcome::Indexed { .. }),
            "{}: {outcome:?}",
            path.display()
        );
        probes.push(probe_sentences(&text));
    }
    let works = bench.count("SELECT count(*) FROM works").await;
    let versions = bench.count("SELECT count(*) FROM work_versions").await;
    // One probe from each version in turn.
    let mut queries = Vec::new();
    while queries.len() < queries_n && probes.iter().any(|p| !p.is_empty()) {
        for p in probes.iter_mut() {
            if let Some(q) = p.pop() {
                queries.push(q);
            }
        }
    }
    queries.truncate(queries_n);
    let filters = Filters::default();
    let cache = SearchCache::default();
    let deps = SearchDeps {
        db: &bench.db.db,
        embedder: bench.index.embedder.as_ref(),
        vectors: bench.milvus.as_ref(),
        cache: &cache,
    };
    let asks: [Ask; 3] = [
        ("no_as_of", None, docpipe_search::Versions::InForce),
        ("as_of", Some(as_of), docpipe_search::Versions::InForce),
        ("all_versions", None, docpipe_search::Versions::All),
    ];
    type Ask<'a> = (&'a str, Option<&'a str>, docpipe_search::Versions);
    fn query<'q>(text: &'q str, mode: Mode, ask: Ask<'q>, filters: &'q Filters) -> Query<'q> {
        Query {
            text,
            top_k: 5,
            mode,
            filters,
            as_of: ask.1,
            versions: ask.2,
            graph: docpipe_search::Graph::DEFAULT,
        }
    }
    for q in queries.iter().take(5) {
        for ask in asks {
            search(&deps, &query(q, Mode::Hybrid, ask, &filters)).await?;
        }
    }
    for mode in [Mode::Hybrid, Mode::Keyword] {
        let mut ms: Vec<Vec<f64>> = vec![Vec::new(); asks.len()];
        // Interleaved, and each query's order rotated, so that no way is always first or last.
        for (n, q) in queries.iter().enumerate() {
            for k in 0..asks.len() {
                let i = (n + k) % asks.len();
                let t = Instant::now();
                search(&deps, &query(q, mode, asks[i], &filters)).await?;
                ms[i].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let p50: Vec<f64> = ms.iter().map(|m| percentile(m, 0.5)).collect();
        emit(json!({
            "bench": "versions_search",
            "mode": format!("{mode:?}").to_lowercase(),
            "works": works,
            "versions": versions,
            "queries": queries.len(),
            "as_of": as_of,
            "no_as_of_p50_ms": p50[0],
            "as_of_p50_ms": p50[1],
            "all_versions_p50_ms": p50[2],
            "as_of_p99_ms": percentile(&ms[1], 0.99),
            "no_as_of_p99_ms": percentile(&ms[0], 0.99),
            "as_of_over_no_as_of": p50[1] / p50[0],
            "as_of_over_all_versions": p50[1] / p50[2],
        }));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Citation checks: verify on a 2,000-character passage, beside a keyword search of it.

async fn verify(args: Args) -> AnyResult<()> {
    let rounds = args.num("rounds", 50)?;
    let bench = bench_pipeline(embedder_named("hash")?).await;
    let result = run_verify(&bench, rounds).await;
    cleanup(&bench).await;
    result
}

/// Eight laws indexed; a passage of about 2,000 characters citing their articles (and a few that
/// do not exist); `verify` of it against a keyword search of the same text, interleaved.
async fn run_verify(bench: &Pipeline, rounds: usize) -> AnyResult<()> {
    let laws = [
        "law-ff6c19d6",
        "law-0d9d5de3",
        "law-2a92ee90",
        "law-85cadca3",
        "law-19c3ec0e",
        "law-3e25cdef",
        "law-6d844c46",
        "law-ccdf0e0c",
    ];
    let mut titles = Vec::new();
    for (i, law) in laws.iter().enumerate() {
        let text = std::fs::read_to_string(corpus_dir().join(format!("laws/{law}.md")))?;
        let (doc_id, run_id, _) =
            store_and_parse(bench, &format!("uploads/verify/{i}.md"), text.as_bytes()).await?;
        index_job(&bench.index.deps(), &JobMessage::new(&doc_id, run_id)).await?;
        let title = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches('#')
            .trim();
        titles.push(title.trim_start_matches("中华人民共和国").to_string());
    }
    let mut passage = String::new();
    let mut k = 0usize;
    while passage.chars().count() < 2000 {
        let law = &titles[k % titles.len()];
        passage.push_str(&format!(
            "根据《{law}》第{}条第1款的规定，当事人应当依法履行义务，行政机关应当依照法定程序作出决定并说明理由。",
            1 + (k * 7) % 60
        ));
        k += 1;
    }
    let citations = docpipe_parse::references::citations(&passage).len();
    let as_of = docpipe_search::today();
    let check = |passage: &str| {
        let found = docpipe_parse::references::citations(passage);
        let db = &bench.db.db;
        let as_of = as_of.clone();
        async move {
            // A cache of its own each time: the cost of a check with nothing shared.
            let cache = docpipe_search::SearchCache::default();
            let mut checker =
                docpipe_search::citations::Checker::new(db, &cache, &as_of, &[]).await?;
            for c in &found {
                checker.check(c).await?;
            }
            Ok::<_, docpipe_db::DbError>(found.len())
        }
    };
    let filters = Filters::default();
    let cache = SearchCache::default();
    let deps = SearchDeps {
        db: &bench.db.db,
        embedder: bench.index.embedder.as_ref(),
        vectors: bench.milvus.as_ref(),
        cache: &cache,
    };
    let keyword = Query {
        text: &passage,
        top_k: 10,
        mode: Mode::Keyword,
        filters: &filters,
        as_of: None,
        versions: docpipe_search::Versions::InForce,
        graph: docpipe_search::Graph::DEFAULT,
    };
    check(&passage).await?;
    search(&deps, &keyword).await?;
    let (mut verify_ms, mut search_ms) = (Vec::new(), Vec::new());
    for n in 0..rounds {
        for k in 0..2 {
            let t = Instant::now();
            if (n + k) % 2 == 0 {
                check(&passage).await?;
                verify_ms.push(t.elapsed().as_secs_f64() * 1e3);
            } else {
                search(&deps, &keyword).await?;
                search_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let (v, s) = (percentile(&verify_ms, 0.5), percentile(&search_ms, 0.5));
    emit(json!({
        "bench": "verify",
        "passage_chars": passage.chars().count(),
        "citations": citations,
        "rounds": rounds,
        "verify_p50_ms": v,
        "verify_p99_ms": percentile(&verify_ms, 0.99),
        "keyword_search_p50_ms": s,
        "verify_over_keyword_search": v / s,
    }));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Init time: spawn to the first request for an event.

/// Waits for the function's first request on `listener`; returns when it arrived and its line.
fn first_request(
    listener: &std::net::TcpListener,
    child: &mut std::process::Child,
    deadline: Instant,
) -> AnyResult<(Instant, String, std::net::TcpStream)> {
    use std::io::Read;
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let at = Instant::now();
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(Duration::from_secs(5)))?;
                let mut buf = Vec::new();
                let mut byte = [0u8; 1];
                while !buf.ends_with(b"\r\n") && buf.len() < 4096 {
                    if stream.read(&mut byte)? == 0 {
                        break;
                    }
                    buf.push(byte[0]);
                }
                return Ok((at, String::from_utf8_lossy(&buf).trim().to_string(), stream));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait()? {
                    anyhow::bail!("the function exited ({status}) before asking for an event");
                }
                if Instant::now() > deadline {
                    anyhow::bail!("no request for an event within the deadline");
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn init(args: Args) -> AnyResult<()> {
    let bin_dir = PathBuf::from(
        args.opt("bin-dir")
            .ok_or_else(|| anyhow::anyhow!("--bin-dir DIR"))?,
    );
    let starts = args.num("starts", 5)?.max(1);
    for name in args.positional() {
        let bin = bin_dir.join(&name);
        let size = std::fs::metadata(&bin)
            .map_err(|e| anyhow::anyhow!("{}: {e}", bin.display()))?
            .len();
        let mut times = Vec::new();
        let mut error = None;
        let mut first_line = String::new();
        for _ in 0..starts {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let port = listener.local_addr()?.port();
            let stderr_path = std::env::temp_dir().join(format!("bench-init-{name}-{port}.log"));
            let stderr = std::fs::File::create(&stderr_path)?;
            let spawned = Instant::now();
            let mut child = std::process::Command::new(&bin)
                .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
                .env("AWS_LAMBDA_FUNCTION_NAME", format!("docpipe-{name}"))
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
                .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
                .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
                .stdout(std::process::Stdio::null())
                .stderr(stderr)
                .spawn()?;
            let outcome = first_request(&listener, &mut child, spawned + Duration::from_secs(60));
            let _ = child.kill();
            let _ = child.wait();
            match outcome {
                Ok((at, line, _stream)) => {
                    times.push((at - spawned).as_secs_f64() * 1e3);
                    first_line = line;
                    let _ = std::fs::remove_file(&stderr_path);
                }
                Err(e) => {
                    let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                    let tail: String = log.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                    error = Some(format!("{e}: {tail}"));
                    let _ = std::fs::remove_file(&stderr_path);
                    break;
                }
            }
        }
        emit(json!({
            "bench": "init",
            "function": name,
            "binary_bytes": size,
            "starts": times.len(),
            "init_ms": times,
            "init_median_ms": if times.is_empty() { Value::Null } else { json!(median(&times)) },
            "first_request": first_line,
            "error": error,
        }));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Peak RSS per stage: each stage in a process of its own.

fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn rss(args: Args) -> AnyResult<()> {
    let file = PathBuf::from(
        args.positional()
            .first()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("rss FILE"))?,
    );
    let embedder = args.opt("embedder").unwrap_or_else(|| "hash".into());
    ensure_pdfium_env();
    let body = std::fs::read(&file)?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "file".into());
    let db = TestDb::new().await;
    let aws = TestAws::new().await;
    let collection = unique("bench_rss_");
    let key = format!("uploads/rss/{name}");
    aws.clients
        .s3
        .put_object()
        .bucket(&aws.bucket)
        .key(&key)
        .content_type(docpipe_cli::commands::content_type_of(&name))
        .body(body.clone().into())
        .send()
        .await?;
    let state = json!({
        "db_url": db.url,
        "bucket": aws.bucket,
        "parse_queue": aws.parse_queue,
        "index_queue": aws.index_queue,
        "collection": collection,
        "key": key,
        "embedder": embedder,
    })
    .to_string();
    let exe = std::env::current_exe()?;
    let mut result = Ok(());
    for stage in ["idle", "store", "parse", "index"] {
        let out = tokio::process::Command::new(&exe)
            .args(["stage-rss", stage, "--state", &state])
            .stderr(std::process::Stdio::inherit())
            .output()
            .await?;
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut value: Value = serde_json::from_str(line.lines().last().unwrap_or("{}"))
            .unwrap_or_else(|_| json!({ "stage": stage, "error": format!("no report: {line}") }));
        value["file"] = json!(file.display().to_string());
        value["file_bytes"] = json!(body.len());
        let failed = !out.status.success() || value.get("error").is_some_and(|e| !e.is_null());
        emit(value);
        if failed {
            result = Err(anyhow::anyhow!("stage {stage} failed"));
            break;
        }
    }
    if let Ok(m) = MilvusIndex::connect(&milvus_url(), None, &collection).await {
        let _ = m.drop_collection().await;
    }
    drop_aws(&aws).await;
    drop_database(&db.name).await;
    result
}

async fn stage_rss(args: Args) -> AnyResult<()> {
    let stage = args
        .positional()
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("stage-rss idle|store|parse|index --state JSON"))?;
    let state: HashMap<String, String> = serde_json::from_str(
        &args
            .opt("state")
            .ok_or_else(|| anyhow::anyhow!("--state JSON"))?,
    )?;
    let get = |k: &str| state.get(k).cloned().unwrap_or_default();
    ensure_pdfium_env();
    // What a function builds during init: the pool, the AWS clients (and for index, the
    // embedder and Milvus).
    let started = Instant::now();
    let db = Db::connect(&DbConfig {
        url: Secret::new(get("db_url")),
        pool_size: 2,
        secret_arn: None,
        ca_bundle: None,
    })?;
    let clients = AwsClients::new(&aws_config()).await;
    let (bucket, key) = (get("bucket"), get("key"));
    let doc_id = docpipe_core::ids::derived_doc_id(&bucket, &key);
    let current_job = |db: Db, doc_id: String| async move {
        let doc = docpipe_db::documents::get(&**db.client().await?, &doc_id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no document {doc_id}"))?;
        let run = doc
            .current_run_id
            .ok_or_else(|| anyhow::anyhow!("{doc_id} has no run"))?;
        Ok::<_, anyhow::Error>((JobMessage::new(&doc_id, run), doc.status))
    };
    let detail: Value = match stage.as_str() {
        "idle" => json!("clients built, no stage run"),
        "store" => {
            let service = StoreService::new(
                db.clone(),
                &clients,
                StoreConfig {
                    parse_queue_url: get("parse_queue"),
                    store_queue_url: None,
                    max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
                    stage_deadline_secs: 900,
                    clock: helpers::template_clock(1.0),
                },
            );
            docpipe_pipeline::handlers::store::handle_notification(
                &service,
                &s3_put_event(&bucket, &key),
            )
            .await?;
            let (_, status) = current_job(db.clone(), doc_id.clone()).await?;
            anyhow::ensure!(
                status == DocStatus::Stored,
                "store left the document {status}"
            );
            json!("stored")
        }
        "parse" => {
            let service = ParseService::new(
                db.clone(),
                &clients,
                ParseConfig {
                    bucket: bucket.clone(),
                    parse_queue_url: get("parse_queue"),
                    index_queue_url: get("index_queue"),
                    max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
                    chunk: Default::default(),
                    limits: Default::default(),
                    clock: helpers::template_clock(1.0),
                    scan: Default::default(),
                },
            );
            let (job, _) = current_job(db.clone(), doc_id.clone()).await?;
            match parse_job(&service.deps(), &job).await? {
                ParseOutcome::Parsed {
                    structure_nodes,
                    semantic_blocks,
                    chunks,
                    ..
                } => json!({
                    "structure_nodes": structure_nodes,
                    "semantic_blocks": semantic_blocks,
                    "chunks": chunks,
                }),
                other => anyhow::bail!("parse gave {other:?}"),
            }
        }
        "index" => {
            let embedder = embedder_named(&get("embedder"))?;
            let milvus =
                Arc::new(MilvusIndex::connect(&milvus_url(), None, &get("collection")).await?);
            let service = IndexService {
                db: db.clone(),
                objects: Arc::new(docpipe_pipeline::adapters::S3ObjectStore::new(
                    clients.s3.clone(),
                )),
                queue: Arc::new(docpipe_pipeline::adapters::SqsJobQueue::new(
                    clients.sqs.clone(),
                )),
                generations: Arc::new(docpipe_pipeline::adapters::generations::Generations::new(
                    db.clone(),
                    milvus.clone(),
                    embedder.clone(),
                    helpers::open_collection(),
                    docpipe_pipeline::adapters::generations::Generations::embedders_from_env(),
                )),
                embedder,
                vectors: milvus,
                config: IndexConfig {
                    bucket: bucket.clone(),
                    index_queue_url: get("index_queue"),
                    embed_batch: 32,
                    clock: helpers::template_clock(1.0),
                    release: Default::default(),
                    rebuild_batch: docpipe_core::config::DEFAULT_REBUILD_BATCH_CHUNKS,
                },
                events: clients.events.clone(),
            };
            let (job, _) = current_job(db.clone(), doc_id.clone()).await?;
            match index_job(&service.deps(), &job).await? {
                IndexOutcome::Indexed { chunks, .. } => json!({ "chunks": chunks }),
                other => anyhow::bail!("index gave {other:?}"),
            }
        }
        other => anyhow::bail!("unknown stage {other:?}"),
    };
    emit(json!({
        "bench": "rss",
        "stage": stage,
        "embedder": if stage == "index" { json!(get("embedder")) } else { Value::Null },
        "vm_hwm_kb": vm_hwm_kb(),
        "seconds": secs(started.elapsed()),
        "detail": detail,
    }));
    Ok(())
}
