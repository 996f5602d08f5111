//! Fault injection: PostgreSQL, PgBouncer, Milvus and moto are killed, stopped or frozen at chosen
//! points of a stage, then brought back. After each, every document ends `indexed` (after the
//! redelivery SQS would make) or `failed` with a reason; no run is duplicated; no object or vector
//! is orphaned. These tests stop shared services, so `make test` runs them alone, one at a time.

use async_trait::async_trait;
use docpipe_core::model::{DocStatus, JobMessage, RunStatus};
use docpipe_pipeline::adapters::{JobQueue, QueueError};
use docpipe_pipeline::stages::index::{index_job, IndexOutcome};
use docpipe_pipeline::stages::parse::{parse_job, ParseOutcome};
use docpipe_vector::VectorIndex;
use helpers::{law_paths, read_law};
use helpers::{s3_put_event, sqs_batch, stack, HookedObjectStore, HookedVectorIndex, Pipeline};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn law(i: usize) -> (String, String) {
    read_law(&law_paths()[i])
}

/// Uploads a law under `dir`; returns its key and the doc id the store derives from it.
async fn upload(p: &Pipeline, dir: &str, i: usize) -> (String, String) {
    let (name, text) = law(i);
    let key = format!("{dir}/{name}");
    p.aws.put(&key, text.as_bytes()).await;
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, &key);
    (key, doc_id)
}

/// Uploads and stores a law; returns its current job.
async fn stored(p: &Pipeline, i: usize) -> JobMessage {
    let (key, doc_id) = upload(p, "uploads", i).await;
    docpipe_pipeline::handlers::store::handle_notification(
        &p.store,
        &s3_put_event(&p.aws.bucket, &key),
    )
    .await
    .expect("store");
    let run = p.doc(&doc_id).await.unwrap().current_run_id.unwrap();
    JobMessage::new(doc_id, run)
}

/// What every scenario must leave: a terminal document with one run, a failure with a reason, the
/// vectors of exactly its indexed run, and artifacts that all have rows.
async fn assert_consistent(p: &Pipeline, doc_id: &str) {
    let doc = p.doc(doc_id).await.expect("the document exists");
    assert!(
        doc.status.is_terminal(),
        "{doc_id} is stuck in {}",
        doc.status
    );
    let runs = docpipe_db::runs::list_for_doc(&**p.db.client().await, doc_id)
        .await
        .unwrap();
    assert_eq!(runs.len(), 1, "one run, not duplicated: {runs:?}");
    assert!(runs.iter().all(|r| r.run_status != RunStatus::Running));
    let vectors = p.milvus.count(doc_id, None).await.unwrap();
    match doc.status {
        DocStatus::Indexed => {
            assert_eq!(
                vectors, doc.chunk_count as usize,
                "exactly one set of vectors"
            );
            assert_eq!(
                p.milvus.count(doc_id, doc.current_run_id).await.unwrap(),
                vectors
            );
        }
        _ => {
            assert!(!doc.error_message.is_empty(), "a failure says why");
            assert!(!runs[0].failure_stage.is_empty());
        }
    }
    let keys = p.aws.keys(&format!("artifacts/{doc_id}/")).await;
    let rows: Vec<String> =
        p.db.column_for_doc(
            "SELECT object_name FROM document_artifacts WHERE doc_id = $1 ORDER BY object_name",
            doc_id,
        )
        .await;
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, rows, "every artifact object has its row and no more");
    helpers::assert_outcomes_announced(p, &[doc_id.to_string()]).await;
}

/// Runs `fault` once, the first time a key ending with `suffix` has been written.
fn fault_after_put(
    inner: Arc<dyn docpipe_pipeline::adapters::ObjectStore>,
    suffix: &'static str,
    fault: impl Fn() + Send + Sync + 'static,
) -> HookedObjectStore {
    let fired = AtomicBool::new(false);
    let mut hooked = HookedObjectStore::new(inner);
    hooked.after_put = Box::new(move |key| {
        if key.ends_with(suffix) && !fired.swap(true, Ordering::SeqCst) {
            fault();
        }
        Ok(())
    });
    hooked
}

/// Runs `fault` right after the `n`-th insert.
fn fault_after_insert(
    inner: Arc<dyn VectorIndex>,
    n: usize,
    fault: impl Fn() + Send + Sync + 'static,
) -> HookedVectorIndex {
    let mut hooked = HookedVectorIndex::new(inner);
    hooked.after_insert = Box::new(move |i| {
        if i == n {
            fault();
        }
        Ok(())
    });
    hooked
}

async fn index_until_done(p: &Pipeline, job: &JobMessage) {
    // The redelivery: SQS brings the message back until it is acknowledged.
    for receive_count in 1..=20 {
        match index_job(&p.index.deps(), job).await {
            Ok(IndexOutcome::Indexed { .. }) | Ok(IndexOutcome::Stale { .. }) => return,
            // The job went on in a fresh message: delivered again at once.
            Ok(IndexOutcome::Continued { .. }) => {}
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) if e.is_retryable() => {
                tokio::time::sleep(p.aws.clock.backoff(receive_count)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("index never completed");
}

#[tokio::test]
async fn postgres_killed_after_the_artifact_write_and_before_the_commit() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let job = stored(&p, 0).await;
    let faulty = fault_after_put(p.parse.objects.clone(), "vector_chunks.json", || {
        stack("kill", "postgres")
    });
    let mut deps = p.parse.deps();
    deps.objects = &faulty;
    let err = parse_job(&deps, &job)
        .await
        .expect_err("the commit cannot happen");
    assert!(err.is_retryable(), "{err}");
    stack("up", "");

    let outcome = parse_job(&p.parse.deps(), &job)
        .await
        .expect("the redelivery parses");
    assert!(
        matches!(outcome, ParseOutcome::Parsed { .. }),
        "{outcome:?}"
    );
    index_until_done(&p, &job).await;
    assert_eq!(p.doc(&job.doc_id).await.unwrap().status, DocStatus::Indexed);
    assert_consistent(&p, &job.doc_id).await;
    p.cleanup().await;
}

#[tokio::test]
async fn pgbouncer_killed_after_the_milvus_insert_and_before_the_status_update() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // The template's lease, at the tests' scale: what the index stage takes.
    let lease = p.index.config.clock.lease;
    let job = stored(&p, 1).await;
    parse_job(&p.parse.deps(), &job).await.unwrap();
    let faulty = fault_after_insert(p.milvus.clone(), 1, || stack("kill", "pgbouncer"));
    let mut deps = p.index.deps();
    deps.vectors = &faulty;
    let err = index_job(&deps, &job)
        .await
        .expect_err("the status update cannot happen");
    assert!(err.is_retryable(), "{err}");
    stack("up", "");
    // The dead worker's lease runs out (it holds it until then: the worker died renewing
    // nothing); the redelivery takes over and replaces the partial vectors.
    let left: Option<f64> =
        p.db.client()
            .await
            .query_typed_one(
                "SELECT EXTRACT(EPOCH FROM lease_expires_at - NOW())::float8
             FROM document_processing_runs WHERE run_id = $1",
                &[(&job.run_id, docpipe_db::Type::INT8)],
            )
            .await
            .unwrap()
            .get(0);
    let left = left.unwrap_or_default();
    assert!(
        left <= lease.as_secs_f64(),
        "the lease runs {left:.2} s more, at most the clock's {lease:?}"
    );
    tokio::time::sleep(Duration::from_secs_f64(left.max(0.0)) + lease / 10).await;
    index_until_done(&p, &job).await;
    assert_eq!(p.doc(&job.doc_id).await.unwrap().status, DocStatus::Indexed);
    assert_consistent(&p, &job.doc_id).await;
    p.cleanup().await;
}

#[tokio::test]
async fn milvus_stopped_in_the_middle_of_a_batch_of_inserts() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    let job = stored(&p, 2).await;
    parse_job(&p.parse.deps(), &job).await.unwrap();
    let chunks = docpipe_db::runs::get(&**p.db.client().await, job.run_id)
        .await
        .unwrap()
        .unwrap()
        .vector_chunk_count;
    assert!(chunks > 8, "the law has several batches ({chunks} chunks)");
    let faulty = fault_after_insert(p.milvus.clone(), 2, || stack("stop", "milvus"));
    let mut deps = p.index.deps();
    deps.vectors = &faulty;
    let outcome = index_job(&deps, &job).await;
    // Milvus takes a while to stop, and the hook waits for it: the delivery may reach its
    // deadline first and stop there, to go on in a fresh message. Either way the third batch is
    // not inserted and the job goes on later.
    let gone_on = match &outcome {
        Err(err) => err.is_retryable(),
        Ok(IndexOutcome::Continued { done, total, .. }) => done < total,
        Ok(_) => false,
    };
    stack("up", "");
    assert!(gone_on, "the third batch cannot be inserted: {outcome:?}");
    index_until_done(&p, &job).await;
    assert_eq!(p.doc(&job.doc_id).await.unwrap().status, DocStatus::Indexed);
    assert_consistent(&p, &job.doc_id).await;
    p.cleanup().await;
}

/// A queue that freezes moto (S3 and SQS hang) on its second send, and thaws it later: longer than
/// the SDK's attempts (3 × 5 s in the tests) can wait, so the call fails as an outage would.
struct FreezeOnSecondSend {
    inner: Arc<dyn JobQueue>,
    sends: AtomicUsize,
}

#[async_trait]
impl JobQueue for FreezeOnSecondSend {
    async fn send(&self, url: &str, body: String) -> Result<(), QueueError> {
        if self.sends.fetch_add(1, Ordering::SeqCst) == 1 {
            stack("pause", "moto");
            std::thread::spawn(|| {
                std::thread::sleep(Duration::from_secs(25));
                stack("resume", "moto");
            });
        }
        self.inner.send(url, body).await
    }
    async fn hold_back(&self, url: &str, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.inner.hold_back(url, receipt, delay).await
    }
    async fn depth(&self, url: &str) -> Result<docpipe_pipeline::adapters::QueueDepth, QueueError> {
        self.inner.depth(url).await
    }
}

#[tokio::test]
async fn moto_frozen_in_the_middle_of_a_store_batch() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut keys = Vec::new();
    for i in 3..6 {
        keys.push(upload(&p, "uploads", i).await.0);
    }
    let queue = Arc::new(FreezeOnSecondSend {
        inner: p.store.queue.clone(),
        sends: AtomicUsize::new(0),
    });
    let service = docpipe_pipeline::services::StoreService {
        db: p.db.db.clone(),
        objects: p.store.objects.clone(),
        queue,
        config: p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
        events: p.store.events.clone(),
    };
    let bodies: Vec<String> = keys
        .iter()
        .map(|k| s3_put_event(&p.aws.bucket, k).to_string())
        .collect();
    let report = docpipe_pipeline::handlers::store::handle_sqs(&service, sqs_batch(&bodies)).await;
    assert!(
        !report.failed_ids().is_empty(),
        "the frozen call fails its message: {:?}",
        report.lines
    );
    assert!(
        !report.failed_ids().contains(&"msg-0"),
        "the first message was done"
    );
    stack("resume", "moto");
    // The redelivery of what failed; the rest were acknowledged.
    let again: Vec<String> = report
        .failed_ids()
        .iter()
        .map(|id| bodies[id.trim_start_matches("msg-").parse::<usize>().unwrap()].clone())
        .collect();
    let report = docpipe_pipeline::handlers::store::handle_sqs(&p.store, sqs_batch(&again)).await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    for key in &keys {
        let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
        p.drive(&doc_id).await;
        assert_eq!(
            p.doc(&doc_id).await.unwrap().status,
            DocStatus::Indexed,
            "{key}"
        );
        assert_consistent(&p, &doc_id).await;
    }
    p.cleanup().await;
}

/// Milvus stopped while documents are indexing, for longer than two visibility periods of the index
/// queue, then started: on the template's clock (scaled) every delivery backs off, and the retry
/// budget outlasts the outage, so all end `indexed`, none "timed out", with their backoffs recorded.
#[tokio::test]
async fn milvus_down_for_two_visibility_periods_while_documents_index() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let runner = helpers::DevRunner::spawn(
        &p,
        helpers::TEST_TIME_SCALE,
        &[("DOCPIPE_HASH_DELAY_MS", "100".into())],
    );
    let mut doc_ids = Vec::new();
    for i in 10..14 {
        doc_ids.push(upload(&p, "uploads/outage", i).await.1);
    }
    // Wait until indexing is under way: a worker holds an index lease.
    let started = std::time::Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "indexing never started"
        );
        let holding: i64 = p
            .db
            .client()
            .await
            .query_typed_one(
                "SELECT COUNT(*) FROM document_processing_runs WHERE index_attempts > 0 AND run_status = 'running'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if holding > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The outage counts from the moment Milvus is told to stop (it takes its time to shut down)
    // until it serves again (it takes its time to start): a stack slower than the drill's margin
    // is reported as such, not as a document that gave up.
    let clock = &p.aws.clock;
    let outage = clock.index.visibility * 2 + Duration::from_secs(3);
    let down_at = std::time::Instant::now();
    stack("stop", "milvus");
    // Documents that arrive during the outage: the first ones can finish indexing while Milvus is
    // still shutting down, and then nothing would have met the outage.
    for i in 14..16 {
        doc_ids.push(upload(&p, "uploads/outage", i).await.1);
    }
    tokio::time::sleep(outage.saturating_sub(down_at.elapsed())).await;
    stack("up", "");
    let was_down = down_at.elapsed();
    assert!(
        was_down <= clock.outage_outlasted(),
        "Milvus was down {was_down:?} (stopping and starting it took {:?} of that), longer than the {:?} the clock's {} deliveries outlast: the stack is too slow for this drill",
        was_down.saturating_sub(outage),
        clock.outage_outlasted(),
        clock.max_receive_count
    );

    let statuses = helpers::wait_terminal(&p.db, &doc_ids, Duration::from_secs(300)).await;
    for doc_id in &doc_ids {
        let doc = p.doc(doc_id).await.unwrap();
        assert_eq!(
            statuses.get(doc_id),
            Some(&DocStatus::Indexed),
            "{doc_id}: {} ({})",
            doc.error_message,
            runner
                .log_text()
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_consistent(&p, doc_id).await;
    }
    let backoffs: Vec<String> =
        p.db.column_for_doc(
            "SELECT message FROM run_events WHERE kind = 'backoff' AND stage = 'index' AND doc_id <> $1",
            "",
        )
        .await;
    assert!(
        !backoffs.is_empty(),
        "the outage made index attempts fail and back off"
    );
    let timed_out: Vec<String> =
        p.db.column_for_doc(
            "SELECT message FROM document_status_history WHERE message LIKE '%timed out%' AND doc_id <> $1",
            "",
        )
        .await;
    assert!(timed_out.is_empty(), "{timed_out:?}");
    drop(runner);
    p.cleanup().await;
}

/// Starts a rebuild of the pipeline's documents with `embedder`; its generation.
async fn start_rebuild(base: &str, embedder: serde_json::Value) -> i64 {
    let answer = reqwest::Client::new()
        .post(format!("{base}/index/rebuild"))
        .header("x-docpipe-role", "reviewer")
        .json(&serde_json::json!({ "embedder": embedder, "grace_secs": 3600 }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    let started: serde_json::Value = answer.json().await.unwrap();
    started["generation"].as_i64().unwrap()
}

async fn generation_of(p: &Pipeline, id: i64) -> docpipe_db::generations::Generation {
    docpipe_db::generations::get(&**p.db.client().await, id)
        .await
        .unwrap()
        .unwrap()
}

/// Polls the generation until `done` holds of it, or `limit` passes (then fails, with the dev
/// runner's last lines).
async fn wait_generation(
    p: &Pipeline,
    id: i64,
    limit: Duration,
    runner: Option<&helpers::DevRunner>,
    done: impl Fn(&docpipe_db::generations::Generation) -> bool,
) -> docpipe_db::generations::Generation {
    let started = std::time::Instant::now();
    loop {
        let g = generation_of(p, id).await;
        if done(&g) {
            return g;
        }
        assert!(
            started.elapsed() < limit,
            "{g:?}\n{}",
            runner
                .map(|r| r
                    .log_text()
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .join("\n"))
                .unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The new collection holds exactly each live document's chunks, once: no copy doubled by a
/// redone step, none missing.
async fn assert_whole(p: &Pipeline, collection: &str, doc_ids: &[String]) {
    let index = docpipe_vector::MilvusIndex::connect(&helpers::milvus_url(), None, collection)
        .await
        .unwrap();
    for doc_id in doc_ids {
        let doc = p.doc(doc_id).await.unwrap();
        assert_eq!(
            index.count(doc_id, None).await.unwrap(),
            doc.chunk_count as usize,
            "{doc_id} in {collection}"
        );
    }
    let _ = index.drop_collection().await;
}

async fn indexed_laws(p: &Pipeline, n: usize) -> Vec<String> {
    let mut doc_ids = Vec::new();
    for i in 0..n {
        let (name, text) = law(i);
        let key = format!("uploads/{name}");
        doc_ids.push(p.ingest_indexed(&key, text.as_bytes()).await.doc_id);
    }
    doc_ids
}

/// The index function stops dead in the middle of a rebuild step: its embedder blocks its thread
/// (as CPU-bound work past the timeout would) and the dev runner kills the function process at
/// its timeout, as Lambda does. The step's message comes back after the backoff it was armed
/// with, the step's lease has run out by then, and the next process does the step again: the
/// rebuild ends active with every chunk once.
#[tokio::test]
async fn the_index_function_killed_in_the_middle_of_a_rebuild_step() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let doc_ids = indexed_laws(&p, 3).await;
    let base = helpers::serve_api(&p).await;
    // The first embedding call in a process that finds no file here blocks: present now, so the
    // rebuild runs; removed once a step is recorded, so the next call, inside a step, blocks.
    let marker = std::env::temp_dir().join(helpers::unique("rebuild-hang-"));
    std::fs::write(&marker, b"").unwrap();
    let runner = helpers::DevRunner::spawn(&p, helpers::TEST_TIME_SCALE, &[]);
    let id = start_rebuild(
        &base,
        serde_json::json!({
            "DOCPIPE_EMBEDDER": "hash",
            "DOCPIPE_EMBED_DIM": "256",
            "DOCPIPE_HASH_DELAY_MS": "100",
            "DOCPIPE_HASH_HANG_ONCE": marker.to_string_lossy(),
        }),
    )
    .await;
    let before = wait_generation(&p, id, Duration::from_secs(120), Some(&runner), |g| {
        g.step >= 1
    })
    .await;
    assert!(
        !before.walked,
        "one step did it all; the drill needs several: {before:?}"
    );
    std::fs::remove_file(&marker).unwrap();
    let g = wait_generation(&p, id, Duration::from_secs(300), Some(&runner), |g| {
        g.state == docpipe_db::generations::State::Active
    })
    .await;
    assert!(
        marker.exists(),
        "no embedding call blocked: the drill killed nothing"
    );
    let log = runner.log_text();
    assert!(
        log.contains("timed out after"),
        "the dev runner did not stop the blocked invocation"
    );
    assert!(g.step > before.step, "{before:?} → {g:?}");
    assert_eq!(g.check_report.as_ref().unwrap()["missing"], 0);
    assert_eq!(g.chunks_done, g.chunks_total, "{g:?}");
    drop(runner);
    let _ = std::fs::remove_file(&marker);
    assert_whole(&p, &g.collection, &doc_ids).await;
    p.cleanup().await;
}

/// Milvus stops in the middle of a rebuild: its steps fail, say why on the generation, and back
/// off on the template's clock instead of failing anything; once Milvus is back the rebuild goes
/// on from where it was and switches, whole.
#[tokio::test]
async fn milvus_stopped_in_the_middle_of_a_rebuild() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let doc_ids = indexed_laws(&p, 3).await;
    let base = helpers::serve_api(&p).await;
    let runner = helpers::DevRunner::spawn(&p, helpers::TEST_TIME_SCALE, &[]);
    // Slow enough (300 ms a passage, about 45 s in all) that Milvus is down before it is done.
    let id = start_rebuild(
        &base,
        serde_json::json!({
            "DOCPIPE_EMBEDDER": "hash",
            "DOCPIPE_EMBED_DIM": "256",
            "DOCPIPE_HASH_DELAY_MS": "300",
        }),
    )
    .await;
    let before = wait_generation(&p, id, Duration::from_secs(120), Some(&runner), |g| {
        g.step >= 1
    })
    .await;
    stack("stop", "milvus");
    let failed = wait_generation(&p, id, Duration::from_secs(120), Some(&runner), |g| {
        !g.last_error.is_empty()
    })
    .await;
    tokio::time::sleep(p.aws.clock.index.visibility).await;
    let during = generation_of(&p, id).await;
    stack("up", "");
    assert_eq!(during.state, docpipe_db::generations::State::Building);
    assert!(
        during.step <= failed.step + 1,
        "no step was recorded while Milvus was down: {failed:?} → {during:?}"
    );
    let g = wait_generation(&p, id, Duration::from_secs(300), Some(&runner), |g| {
        g.state == docpipe_db::generations::State::Active
    })
    .await;
    assert!(g.step > before.step);
    assert!(g.last_error.is_empty(), "{g:?}");
    assert_eq!(g.check_report.as_ref().unwrap()["missing"], 0);
    drop(runner);
    assert_whole(&p, &g.collection, &doc_ids).await;
    p.cleanup().await;
}
