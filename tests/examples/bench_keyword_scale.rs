//! The keyword index at a million articles (`make bench`, issue 13): the real keyword rows of the
//! retrieval benchmark's laws (bench_retrieval's database) copied into a database of their own and
//! repeated until it holds `--articles` blocks, then the questions of `corpus/questions` asked
//! through `db::keyword::search` (the live-document check included) at 1× and at full size, with
//! each term's postings bounded (the default) and unbounded, and bounded with the version window
//! of a search in force today. Prints one JSON line.
//!
//! With `--articles-jsonl` (bench_retrieval's `articles.jsonl`: each block's article key), it also
//! scores both against the questions' cited articles: recall@10 over the first ten distinct
//! articles, as scripts/retrieval/score.py counts it, so the bound's cost in recall is read beside
//! its gain in time (a copy's block is its original's article).
//!
//!     bench_keyword_scale --source bench_retrieval_<model> [--articles 1000000] [--queries 300]
//!                         [--articles-jsonl DIR/articles.jsonl]
//!                         [--keep]    # leave the copy for a later --reuse
//!                         [--reuse]   # measure the copy a previous --keep left

use anyhow::Result as AnyResult;
use docpipe_core::analyzer::Analyzer;
use docpipe_core::filters::Filters;
use docpipe_db::keyword;
use docpipe_search::{CANDIDATES, MAX_QUERY_TERMS, POSTINGS_PER_TERM};
use docpipe_vector::VersionWindow::{self, Any};
use helpers::{corpus_dir, database_url, TestDb};
use serde_json::json;
use std::time::Instant;

const SCALE_DB: &str = "bench_keyword_scale";
const INDEX: &str = "ALTER TABLE keyword_postings ADD PRIMARY KEY (term, block_id);
    CREATE INDEX idx_keyword_postings_organ_term_impact
        ON keyword_postings(organ_id, term, impact DESC) INCLUDE (block_id);
    ANALYZE;";

fn main() -> AnyResult<()> {
    let mut source = String::new();
    let (mut articles, mut queries) = (1_000_000i64, 300usize);
    let (mut reuse, mut keep) = (false, false);
    let mut keys_file: Option<std::path::PathBuf> = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--reuse" => {
                reuse = true;
                continue;
            }
            "--keep" => {
                keep = true;
                continue;
            }
            _ => {}
        }
        let v = it
            .next()
            .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--source" => source = v,
            "--articles" => articles = v.parse()?,
            "--queries" => queries = v.parse()?,
            "--articles-jsonl" => keys_file = Some(v.into()),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    anyhow::ensure!(!source.is_empty(), "--source DATABASE is required");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(&source, articles, queries, reuse, keep, keys_file))
}

/// What recall is scored by: each original block's article key, and each question's cited ones.
struct Gold {
    key_of_block: std::collections::HashMap<i64, String>,
    relevant: Vec<Vec<String>>,
}

/// `民法典第五十四条` as bench_retrieval keys it: `民法典第54条`.
fn ref_key(reference: &str) -> Option<String> {
    let at = reference.rfind('第')?;
    let number = docpipe_parse::article_ref::article_number(&reference[at..])?;
    Some(format!("{}第{number}条", &reference[..at]))
}

fn gold(keys_file: &std::path::Path, queries: usize) -> AnyResult<Gold> {
    let mut key_of_block = std::collections::HashMap::new();
    for line in std::fs::read_to_string(keys_file)?.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if let (Some(id), Some(key)) = (v["block_id"].as_i64(), v["key"].as_str()) {
            key_of_block.insert(id, key.to_string());
        }
    }
    let relevant = questions(queries)?
        .into_iter()
        .map(|q| {
            q["relevant"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(|x| x.as_str().and_then(ref_key))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    Ok(Gold {
        key_of_block,
        relevant,
    })
}

/// Recall@10 of rankings of block ids (copies folded onto their originals by `span`).
fn recall_at_10(gold: &Gold, tops: &[Vec<i64>], span: i64) -> f64 {
    let mut sum = 0.0;
    let mut asked = 0usize;
    for (ranked, relevant) in tops.iter().zip(&gold.relevant) {
        if relevant.is_empty() {
            continue;
        }
        asked += 1;
        let mut first: Vec<&String> = Vec::new();
        for id in ranked {
            let Some(key) = gold.key_of_block.get(&(id % span)) else {
                continue;
            };
            if !first.contains(&key) {
                first.push(key);
                if first.len() == 10 {
                    break;
                }
            }
        }
        let found = relevant.iter().filter(|r| first.contains(r)).count();
        sum += found as f64 / relevant.len() as f64;
    }
    sum / asked.max(1) as f64
}

fn log(line: &str) {
    eprintln!("[keyword-scale] {line}");
}

async fn run(
    source: &str,
    target: i64,
    queries: usize,
    reuse: bool,
    keep: bool,
    keys_file: Option<std::path::PathBuf>,
) -> AnyResult<()> {
    let (admin, conn) = tokio_postgres::connect(&database_url(), tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let terms = question_terms(queries)?;
    let gold = keys_file.map(|f| gold(&f, queries)).transpose()?;
    let gold = gold.as_ref();
    if reuse {
        let src = TestDb::persistent(source).await;
        let base_blocks = keyword::block_count(&**src.client().await, &[]).await?;
        let span: i64 = src
            .client()
            .await
            .query_one(
                "SELECT COALESCE(max(block_id), 0) + 1 FROM keyword_blocks",
                &[],
            )
            .await?
            .get(0);
        let small = measure(&src, &terms, base_blocks, gold, span).await?;
        let dst = TestDb::persistent(SCALE_DB).await;
        dst.client()
            .await
            .batch_execute("VACUUM (ANALYZE) keyword_postings")
            .await?;
        return report(&dst, &terms, base_blocks, small, gold, span).await;
    }
    admin
        .simple_query(&format!("DROP DATABASE IF EXISTS {SCALE_DB} WITH (FORCE)"))
        .await?;
    let src = TestDb::persistent(source).await;
    let dst = TestDb::persistent(SCALE_DB).await;
    let s = src.client().await;
    let d = dst.client().await;
    // The copy keeps only what the keyword query reads: no snapshot rows behind the blocks.
    d.batch_execute(
        "ALTER TABLE keyword_blocks DROP CONSTRAINT IF EXISTS keyword_blocks_block_id_fkey;
         DROP INDEX IF EXISTS idx_keyword_postings_organ_term_impact;
         ALTER TABLE keyword_postings DROP CONSTRAINT IF EXISTS keyword_postings_pkey;",
    )
    .await?;

    let t = Instant::now();
    let docs = s
        .query(
            "SELECT kd.doc_id, kd.run_id, kd.title, kd.title_key, kd.block_count
             FROM keyword_documents kd JOIN documents d ON d.doc_id = kd.doc_id
             WHERE d.status = 'indexed' AND d.current_run_id = kd.run_id",
            &[],
        )
        .await?;
    let ids: Vec<String> = docs.iter().map(|r| r.get(0)).collect();
    let runs: Vec<i64> = docs.iter().map(|r| r.get(1)).collect();
    let titles: Vec<String> = docs.iter().map(|r| r.get(2)).collect();
    let keys: Vec<String> = docs.iter().map(|r| r.get(3)).collect();
    let counts: Vec<i32> = docs.iter().map(|r| r.get(4)).collect();
    d.execute(
        "INSERT INTO documents (doc_id, status, current_run_id)
         SELECT u.id, 'indexed', u.run FROM UNNEST($1::varchar[], $2::int8[]) AS u(id, run)",
        &[&ids, &runs],
    )
    .await?;
    d.execute(
        "INSERT INTO keyword_documents (doc_id, run_id, analyzer, title, title_key, block_count)
         SELECT u.id, u.run, 'copy', u.t, u.k, u.n
         FROM UNNEST($1::varchar[], $2::int8[], $3::text[], $4::text[], $5::int4[]) AS u(id, run, t, k, n)",
        &[&ids, &runs, &titles, &keys, &counts],
    )
    .await?;
    let blocks = s
        .query(
            "SELECT block_id, doc_id, length, terms::text FROM keyword_blocks",
            &[],
        )
        .await?;
    let b_ids: Vec<i64> = blocks.iter().map(|r| r.get(0)).collect();
    let b_docs: Vec<String> = blocks.iter().map(|r| r.get(1)).collect();
    let b_len: Vec<i32> = blocks.iter().map(|r| r.get(2)).collect();
    let b_terms: Vec<String> = blocks.iter().map(|r| r.get(3)).collect();
    d.execute(
        "INSERT INTO keyword_blocks (block_id, doc_id, length, terms)
         SELECT u.id, u.doc, u.len, u.terms::int8[]
         FROM UNNEST($1::int8[], $2::varchar[], $3::int4[], $4::text[]) AS u(id, doc, len, terms)",
        &[&b_ids, &b_docs, &b_len, &b_terms],
    )
    .await?;
    let base_blocks = b_ids.len() as i64;
    let span = b_ids.iter().max().copied().unwrap_or(0) + 1;
    let postings = s
        .query(
            "SELECT term, block_id, tf, impact FROM keyword_postings",
            &[],
        )
        .await?;
    for chunk in postings.chunks(200_000) {
        let terms: Vec<i64> = chunk.iter().map(|r| r.get(0)).collect();
        let ids: Vec<i64> = chunk.iter().map(|r| r.get(1)).collect();
        let tfs: Vec<i16> = chunk.iter().map(|r| r.get(2)).collect();
        let impacts: Vec<f32> = chunk.iter().map(|r| r.get(3)).collect();
        d.execute(
            "INSERT INTO keyword_postings SELECT * FROM UNNEST($1::int8[], $2::int8[], $3::int2[], $4::float4[])",
            &[&terms, &ids, &tfs, &impacts],
        )
        .await?;
    }
    d.batch_execute(
        "INSERT INTO keyword_terms (term, df) SELECT term, count(*) FROM keyword_postings GROUP BY term",
    )
    .await?;
    log(&format!(
        "copied {} documents, {base_blocks} blocks, {} postings in {:.0} s",
        ids.len(),
        postings.len(),
        t.elapsed().as_secs_f64()
    ));

    d.batch_execute(INDEX).await?;
    // Without the visibility map every index-only read of a posting visits the heap.
    d.batch_execute("VACUUM (ANALYZE) keyword_postings").await?;
    let small = measure(&dst, &terms, base_blocks, gold, span).await?;
    log(&format!("1x ({base_blocks} blocks): {small}"));

    // Repeat the corpus: replica r's blocks are the originals shifted by r * span, in documents
    // of their own, with the same terms (so document frequencies grow with it).
    let replicas = ((target + base_blocks - 1) / base_blocks - 1).max(0);
    let t = Instant::now();
    d.batch_execute(
        "ALTER TABLE keyword_postings DROP CONSTRAINT keyword_postings_pkey;
         DROP INDEX idx_keyword_postings_organ_term_impact;",
    )
    .await?;
    for r in 1..=replicas {
        let tx_sql = format!(
            "INSERT INTO documents (doc_id, status, current_run_id)
               SELECT doc_id || '~{r}', status, current_run_id FROM documents WHERE doc_id NOT LIKE '%~%';
             INSERT INTO keyword_documents (doc_id, run_id, analyzer, title, title_key, block_count)
               SELECT doc_id || '~{r}', run_id, analyzer, title, title_key, block_count
               FROM keyword_documents WHERE doc_id NOT LIKE '%~%';
             INSERT INTO keyword_blocks (block_id, doc_id, length, terms)
               SELECT block_id + {r} * {span}, doc_id || '~{r}', length, terms
               FROM keyword_blocks WHERE block_id < {span};
             INSERT INTO keyword_postings (term, block_id, tf, impact)
               SELECT term, block_id + {r} * {span}, tf, impact
               FROM keyword_postings WHERE block_id < {span};"
        );
        d.batch_execute(&tx_sql).await?;
        if r % 10 == 0 || r == replicas {
            log(&format!(
                "replica {r}/{replicas} written, {:.0} s",
                t.elapsed().as_secs_f64()
            ));
        }
    }
    d.batch_execute(&format!(
        "UPDATE keyword_terms SET df = df * {}",
        replicas + 1
    ))
    .await?;
    d.batch_execute(INDEX).await?;
    d.batch_execute("VACUUM (ANALYZE) keyword_postings").await?;
    log(&format!("indexed in {:.0} s", t.elapsed().as_secs_f64()));
    report(&dst, &terms, base_blocks, small, gold, span).await?;
    drop(d);
    drop(s);
    if !keep {
        admin
            .simple_query(&format!("DROP DATABASE IF EXISTS {SCALE_DB} WITH (FORCE)"))
            .await?;
    }
    Ok(())
}

/// The first `queries` questions of corpus/questions, in file order.
fn questions(queries: usize) -> AnyResult<Vec<serde_json::Value>> {
    Ok(
        std::fs::read_to_string(corpus_dir().join("questions").join("train.jsonl"))?
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["question"].is_string())
            .take(queries)
            .collect(),
    )
}

fn question_terms(queries: usize) -> AnyResult<Vec<Vec<(i64, u32)>>> {
    let analyzer = Analyzer::shared();
    Ok(questions(queries)?
        .iter()
        .map(|q| analyzer.query_terms(q["question"].as_str().unwrap_or_default()))
        .collect())
}

/// Measures the scaled copy and prints the JSON line.
async fn report(
    dst: &TestDb,
    terms: &[Vec<(i64, u32)>],
    base_blocks: i64,
    small: serde_json::Value,
    gold: Option<&Gold>,
    span: i64,
) -> AnyResult<()> {
    let d = dst.client().await;
    let total_blocks = keyword::block_count(&**d, &[]).await?;
    let total_postings: i64 = d
        .query_one("SELECT count(*) FROM keyword_postings", &[])
        .await?
        .get(0);
    let size: String = d
        .query_one(
            "SELECT pg_size_pretty(pg_total_relation_size('keyword_postings'))",
            &[],
        )
        .await?
        .get(0);
    drop(d);
    log(&format!(
        "{total_blocks} blocks, {total_postings} postings ({size})"
    ));
    let large = measure(dst, terms, total_blocks, gold, span).await?;
    log(&format!("{total_blocks} blocks: {large}"));
    println!(
        "{}",
        json!({
            "bench": "keyword-scale",
            "queries": terms.len(),
            "base_blocks": base_blocks,
            "blocks": total_blocks,
            "postings": total_postings,
            "postings_size": size,
            "postings_per_term": POSTINGS_PER_TERM,
            "max_query_terms": MAX_QUERY_TERMS,
            "base": small,
            "scaled": large,
        })
    );
    Ok(())
}

/// p50/p99 of the keyword query with each term bounded and unbounded, and how often the two give
/// the same top ten.
async fn measure(
    db: &TestDb,
    terms: &[Vec<(i64, u32)>],
    blocks: i64,
    gold: Option<&Gold>,
    span: i64,
) -> AnyResult<serde_json::Value> {
    let client = db.client().await;
    let filters = Filters::default();
    let mut out = serde_json::Map::new();
    let mut tops: Vec<Vec<Vec<i64>>> = Vec::new();
    // In force today: the window is checked on the scored candidates (at most
    // `WINDOW_OVERFETCH` per result), as every search without `as_of` asks.
    let today = docpipe_db::projection::day_number(&docpipe_search::today())
        .ok_or_else(|| anyhow::anyhow!("today is not a day"))?;
    for (name, per_term, max_terms, window) in [
        ("bounded", POSTINGS_PER_TERM, MAX_QUERY_TERMS, Any),
        ("unbounded", i64::MAX, i64::MAX, Any),
        (
            "bounded_in_force",
            POSTINGS_PER_TERM,
            MAX_QUERY_TERMS,
            VersionWindow::InForceOn(today),
        ),
    ] {
        let limit = CANDIDATES as i64;
        for q in terms.iter().take(5) {
            keyword::search(
                &**client, q, blocks, per_term, max_terms, limit, &filters, window,
            )
            .await?;
        }
        let mut ms = Vec::new();
        let mut top = Vec::new();
        for q in terms {
            let t = Instant::now();
            let hits = keyword::search(
                &**client, q, blocks, per_term, max_terms, limit, &filters, window,
            )
            .await?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            top.push(hits.iter().map(|h| h.block_id).collect::<Vec<_>>());
        }
        ms.sort_by(f64::total_cmp);
        let at = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
        let mut row = json!({"p50_ms": at(0.5), "p99_ms": at(0.99)});
        if let Some(gold) = gold {
            row["recall@10"] = json!(recall_at_10(gold, &top, span));
        }
        out.insert(name.into(), row);
        for t in &mut top {
            t.truncate(10);
        }
        tops.push(top);
    }
    let overlap: f64 = tops[0]
        .iter()
        .zip(&tops[1])
        .map(|(a, b)| {
            if b.is_empty() {
                1.0
            } else {
                a.iter().filter(|x| b.contains(x)).count() as f64 / b.len() as f64
            }
        })
        .sum::<f64>()
        / terms.len().max(1) as f64;
    out.insert("top10_overlap_bounded_vs_unbounded".into(), json!(overlap));
    Ok(serde_json::Value::Object(out))
}
