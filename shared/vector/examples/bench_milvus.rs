//! The raw Milvus ceiling the pipeline's own benchmark compares against: insert N precomputed
//! random unit vectors through `MilvusIndex::insert`, then time single-vector searches.
//!
//! ```text
//! cargo run --release -p docpipe-vector --example bench_milvus -- [rows] [queries]
//! ```
//! Uses `MILVUS_URL` (default http://127.0.0.1:19530) and `MILVUS_TOKEN`; creates and drops
//! its own collection.

use std::time::{Duration, Instant};

use docpipe_vector::{
    ChunkRecord, MilvusIndex, MilvusOptions, ReadConsistency, SearchFilters, VectorIndex,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIM: usize = 384;
const TOP_K: usize = 10;

fn unit_vector(rng: &mut StdRng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);
    let queries: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(500);
    let url = std::env::var("MILVUS_URL").unwrap_or_else(|_| "http://127.0.0.1:19530".into());
    let token = std::env::var("MILVUS_TOKEN").ok();
    let collection = format!("dpv_bench_{:08x}", rand::rng().random::<u32>());

    let batch_rows: usize = match std::env::var("BATCH_ROWS") {
        Ok(v) => v.parse()?,
        Err(_) => MilvusOptions::default().batch_max_rows,
    };
    let options = MilvusOptions {
        batch_max_rows: batch_rows,
        ..MilvusOptions::default()
    };
    // The API searches with Bounded consistency (the default); Strong is measured apart,
    // because it waits for the server's next time tick on every query.
    let bounded =
        MilvusIndex::connect_with(&url, token.clone(), &collection, options.clone()).await?;
    let strong = MilvusIndex::connect_with(
        &url,
        token,
        &collection,
        MilvusOptions {
            search_consistency: ReadConsistency::Strong,
            ..options
        },
    )
    .await?;
    let result = run(&bounded, &strong, rows, queries, batch_rows).await;
    bounded.drop_collection().await?;
    result
}

/// What one run measured.
struct Figures {
    rows: usize,
    batch_rows: usize,
    queries: usize,
    ensure: Duration,
    insert: Duration,
    settle: Duration,
    counted: usize,
    latencies: Vec<Duration>,
    filtered_latencies: Vec<Duration>,
    strong_latencies: Vec<Duration>,
}

async fn run(
    index: &MilvusIndex,
    strong: &MilvusIndex,
    rows: usize,
    queries: usize,
    batch_rows: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = StdRng::seed_from_u64(42);
    let records = records(&mut rng, rows);
    let query_vectors: Vec<Vec<f32>> = (0..queries).map(|_| unit_vector(&mut rng)).collect();

    let started = Instant::now();
    index.ensure_collection(DIM, "bench-random-384").await?;
    let ensure = started.elapsed();

    let started = Instant::now();
    index.insert(&records).await?;
    let insert = started.elapsed();

    // The first Strong search waits until every insert is searchable; after it, Bounded
    // searches see all rows too, and that wait stays out of the latency figures.
    let started = Instant::now();
    let first = strong
        .search(&query_vectors[0], TOP_K, &SearchFilters::default())
        .await?;
    let settle = started.elapsed();
    assert_eq!(first.len(), TOP_K, "search sees the inserted rows");
    let counted = strong.count("bench-doc-0", None).await?;

    let latencies = time_searches(index, &query_vectors, &SearchFilters::default()).await?;
    let filtered = SearchFilters {
        doc_ids: vec!["bench-doc-3".into(), "bench-doc-7".into()],
        ..Default::default()
    };
    let few = (queries / 5).max(1);
    let filtered_latencies = time_searches(index, &query_vectors[..few], &filtered).await?;
    let strong_latencies = time_searches(
        strong,
        &query_vectors[..few.min(25)],
        &SearchFilters::default(),
    )
    .await?;
    print_table(&Figures {
        rows,
        batch_rows,
        queries,
        ensure,
        insert,
        settle,
        counted,
        latencies,
        filtered_latencies,
        strong_latencies,
    });
    Ok(())
}

/// Chunk-sized rows (~500 CJK characters ≈ 1.5 KB of text), so that the request size resembles
/// the pipeline's.
fn records(rng: &mut StdRng, rows: usize) -> Vec<ChunkRecord> {
    let text = "第一条 为了规范文件处理流程，制定本办法。".repeat(25);
    (0..rows)
        .map(|i| ChunkRecord {
            chunk_id: format!("bench:{}:{i}", i / 100),
            organ_id: "default".into(),
            doc_id: format!("bench-doc-{}", i / 100),
            run_id: 1,
            chunk_index: (i % 100) as i64,
            doc_name: "bench.pdf".into(),
            regulation_type: "law".into(),
            version: "v1".into(),
            section_path: "第一章 总则 > 第一条".into(),
            section_title: "第一条".into(),
            page_start: 1,
            page_end: 1,
            text: text.clone(),
            tags: vec!["bench".into()],
            embedding: unit_vector(rng),
            projection: docpipe_vector::Projection::ALWAYS,
        })
        .collect()
}

/// Each search's latency, one after another, sorted.
async fn time_searches(
    index: &MilvusIndex,
    vectors: &[Vec<f32>],
    filters: &SearchFilters,
) -> Result<Vec<Duration>, docpipe_vector::VectorError> {
    let mut latencies = Vec::with_capacity(vectors.len());
    for vector in vectors {
        let started = Instant::now();
        let hits = index.search(vector, TOP_K, filters).await?;
        latencies.push(started.elapsed());
        assert!(!hits.is_empty());
    }
    latencies.sort();
    Ok(latencies)
}

fn print_table(f: &Figures) {
    let (rows, batch_rows, queries) = (f.rows, f.batch_rows, f.queries);
    println!("## Milvus raw ceiling ({DIM}-dim, HNSW M=16 efConstruction=200, COSINE)\n");
    println!("| measure | value |");
    println!("| --- | --- |");
    println!("| rows inserted | {rows} (batches of ≤ {batch_rows}, ~1.5 KB text each) |");
    println!(
        "| ensure_collection (create + index + load) | {:.0} ms |",
        ms(f.ensure)
    );
    println!(
        "| insert throughput | {:.0} rows/s ({:.2} s) |",
        rows as f64 / f.insert.as_secs_f64(),
        f.insert.as_secs_f64()
    );
    println!(
        "| first Strong search after insert | {:.0} ms |",
        ms(f.settle)
    );
    println!("| count(doc) sanity | {} |", f.counted);
    let row = |label: String, lat: &[Duration]| {
        println!(
            "| {label} | {:.2} ms / {:.2} ms |",
            ms(percentile(lat, 0.50)),
            ms(percentile(lat, 0.99))
        )
    };
    row(
        format!("search p50 / p99, Bounded (top_k {TOP_K}, {queries} queries)"),
        &f.latencies,
    );
    row(
        format!(
            "search p50 / p99, Bounded, doc_id in [2 docs] ({} queries)",
            f.filtered_latencies.len()
        ),
        &f.filtered_latencies,
    );
    row(
        format!(
            "search p50 / p99, Strong ({} queries)",
            f.strong_latencies.len()
        ),
        &f.strong_latencies,
    );
    println!(
        "| search throughput, Bounded, sequential | {:.0} queries/s |",
        f.latencies.len() as f64 / f.latencies.iter().sum::<Duration>().as_secs_f64()
    );
}
