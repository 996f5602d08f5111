//! Duplicate storms: S3 and SQS deliver at least once. Every S3 event delivered five times at
//! once, and every SQS message redelivered after partial processing, leave the same rows, objects
//! and vectors as one delivery.

use docpipe_core::model::{JobMessage, Stage};
use docpipe_pipeline::adapters::StorageError;
use docpipe_pipeline::error::StageError;
use docpipe_pipeline::stages::index::{index_job, IndexOutcome};
use docpipe_pipeline::stages::parse::parse_job;
use docpipe_vector::VectorIndex;
use helpers::{law_paths, read_law};
use helpers::{
    s3_put_event, vector_outage, FlakyQueue, HookedObjectStore, HookedVectorIndex, Pipeline,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn laws(n: usize) -> Vec<(String, String)> {
    law_paths()
        .iter()
        .skip(20)
        .take(n)
        .map(|p| {
            let (name, text) = read_law(p);
            (format!("uploads/{name}"), text)
        })
        .collect()
}

/// Everything a delivery leaves behind, without the ids that differ between two databases.
#[derive(Debug, PartialEq)]
struct Footprint {
    status: String,
    runs: i64,
    history: Vec<String>,
    nodes: Vec<(String, i32, i32)>,
    blocks: Vec<(String, String)>,
    artifacts: Vec<(String, i64)>,
    artifact_objects: usize,
    vectors: usize,
    chunk_count: i32,
}

async fn footprint(p: &Pipeline, key: &str) -> Footprint {
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    let c = p.db.client().await;
    let doc_ref: &(dyn tokio_postgres::types::ToSql + Sync) = &doc_id;
    let id = || (doc_ref, docpipe_db::Type::VARCHAR);
    let doc = c
        .query_typed_one(
            "SELECT status, chunk_count FROM documents WHERE doc_id = $1",
            &[id()],
        )
        .await
        .unwrap();
    let runs: i64 = c
        .query_typed_one(
            "SELECT count(*) FROM document_processing_runs WHERE doc_id = $1",
            &[id()],
        )
        .await
        .unwrap()
        .get(0);
    let history = c
        .query_typed("SELECT from_status || '>' || to_status FROM document_status_history WHERE doc_id = $1 ORDER BY event_id", &[id()])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let nodes = c
        .query_typed(
            "SELECT title, level, idx FROM structure_nodes WHERE doc_id = $1 ORDER BY idx",
            &[id()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let blocks = c
        .query_typed(
            "SELECT semantic_id, text FROM semantic_blocks WHERE doc_id = $1 ORDER BY semantic_id",
            &[id()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    // Sizes, not checksums: the envelope names the run, whose id depends on the database.
    let artifacts = c
        .query_typed("SELECT artifact_type, byte_size - length(run_id::text) FROM document_artifacts WHERE doc_id = $1 ORDER BY artifact_type", &[id()])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    Footprint {
        status: doc.get(0),
        chunk_count: doc.get(1),
        runs,
        history,
        nodes,
        blocks,
        artifacts,
        artifact_objects: p.aws.keys(&format!("artifacts/{doc_id}/")).await.len(),
        vectors: p.milvus.count(&doc_id, None).await.unwrap(),
    }
}

/// The single, clean delivery every storm is compared with.
async fn once(docs: &[(String, String)]) -> Vec<Footprint> {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut out = Vec::new();
    for (key, text) in docs {
        p.ingest(key, text.as_bytes()).await;
        out.push(footprint(&p, key).await);
    }
    p.cleanup().await;
    out
}

/// Runs a stage job until it stops asking to be retried (another delivery holds the lease), each
/// redelivery after the backoff the function would set on the message.
async fn until_settled<F, Fut, T>(clock: &docpipe_core::clock::Clock, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StageError>>,
{
    for receive_count in 1..=20 {
        match f().await {
            Ok(v) => return v,
            Err(e) if e.is_retryable() => tokio::time::sleep(clock.backoff(receive_count)).await,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("never settled")
}

#[tokio::test]
async fn every_message_delivered_five_times_at_once_leaves_what_one_delivery_leaves() {
    let docs = laws(4);
    let baseline = once(&docs).await;

    let p = Pipeline::new(Pipeline::hash()).await;
    let others: Vec<docpipe_pipeline::services::StoreService> = (0..5)
        .map(|_| {
            docpipe_pipeline::services::StoreService::new(
                p.db.another_pool(2),
                &p.aws.clients,
                p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
            )
        })
        .collect();
    for (key, text) in &docs {
        p.aws.put(key, text.as_bytes()).await;
    }
    // Five deliveries of every S3 event, all at once, through five "containers".
    let event_storm = docs.iter().flat_map(|(key, _)| {
        let event = s3_put_event(&p.aws.bucket, key);
        others.iter().map(move |s| {
            let event = event.clone();
            async move { docpipe_pipeline::handlers::store::handle_notification(s, &event).await }
        })
    });
    for r in futures::future::join_all(event_storm).await {
        r.expect("no delivery fails");
    }
    // Each stored document's parse job, then index job, delivered five times at once.
    for (key, _) in &docs {
        let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
        let job = JobMessage::new(
            &doc_id,
            p.doc(&doc_id).await.unwrap().current_run_id.unwrap(),
        );
        let deps = p.parse.deps();
        let parses = (0..5).map(|_| until_settled(&p.aws.clock, || parse_job(&deps, &job)));
        futures::future::join_all(parses).await;
        let deps = p.index.deps();
        let indexes = (0..5).map(|_| until_settled(&p.aws.clock, || index_job(&deps, &job)));
        let outcomes = futures::future::join_all(indexes).await;
        let indexed = outcomes
            .iter()
            .filter(|o| matches!(o, IndexOutcome::Indexed { .. }))
            .count();
        assert_eq!(indexed, 1, "{outcomes:?}");
    }
    for ((key, _), want) in docs.iter().zip(&baseline) {
        assert_eq!(&footprint(&p, key).await, want, "{key}");
    }
    p.cleanup().await;
}

#[tokio::test]
async fn every_message_redelivered_after_partial_processing_leaves_what_one_delivery_leaves() {
    let docs = laws(3);
    let baseline = once(&docs).await;
    let p = Pipeline::new(Pipeline::hash()).await;
    for (key, text) in &docs {
        p.aws.put(key, text.as_bytes()).await;
        let job = store_redelivered_after_the_send_failed(&p, key).await;
        parse_redelivered_after_two_artifacts(&p, &job).await;
        index_redelivered_after_one_batch(&p, &job, key).await;
    }
    for ((key, _), want) in docs.iter().zip(&baseline) {
        assert_eq!(&footprint(&p, key).await, want, "{key}");
    }
    p.cleanup().await;
}

/// Store: committed, then the parse job could not be sent; redelivered, it opens the run's job.
async fn store_redelivered_after_the_send_failed(p: &Pipeline, key: &str) -> JobMessage {
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    let event = s3_put_event(&p.aws.bucket, key);
    let flaky = Arc::new(FlakyQueue {
        inner: p.store.queue.clone(),
        failing: true.into(),
    });
    let store = docpipe_pipeline::services::StoreService {
        db: p.db.db.clone(),
        objects: p.store.objects.clone(),
        queue: flaky,
        config: p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
        events: p.store.events.clone(),
    };
    let err = docpipe_pipeline::handlers::store::handle_notification(&store, &event)
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    docpipe_pipeline::handlers::store::handle_notification(&p.store, &event)
        .await
        .unwrap();
    JobMessage::new(
        &doc_id,
        p.doc(&doc_id).await.unwrap().current_run_id.unwrap(),
    )
}

/// Parse: two of four artifacts written, then the invocation died; the redelivery parses.
async fn parse_redelivered_after_two_artifacts(p: &Pipeline, job: &JobMessage) {
    let died = AtomicBool::new(false);
    let mut dying = HookedObjectStore::new(p.parse.objects.clone());
    dying.after_put = Box::new(move |key| {
        if key.ends_with("structure_nodes.json") && !died.swap(true, Ordering::SeqCst) {
            return Err(StorageError::Unavailable {
                operation: "PutObject",
                source: "injected: the invocation died here".into(),
            });
        }
        Ok(())
    });
    let mut deps = p.parse.deps();
    deps.objects = &dying;
    let err = parse_job(&deps, job).await.unwrap_err();
    assert!(
        matches!(
            err,
            StageError::Transient {
                stage: Stage::ArtifactPersist,
                ..
            }
        ),
        "{err}"
    );
    parse_job(&p.parse.deps(), job).await.unwrap();
}

/// Index: one batch of vectors inserted, then the invocation died (its lease released).
async fn index_redelivered_after_one_batch(p: &Pipeline, job: &JobMessage, key: &str) {
    let mut dying = HookedVectorIndex::new(p.milvus.clone());
    dying.after_insert = Box::new(|n| match n {
        1 => Err(vector_outage("insert")),
        _ => Ok(()),
    });
    let mut deps = p.index.deps();
    deps.vectors = &dying;
    assert!(index_job(&deps, job).await.unwrap_err().is_retryable());
    let outcome = index_job(&p.index.deps(), job).await.unwrap();
    assert!(
        matches!(outcome, IndexOutcome::Indexed { .. }),
        "{outcome:?}"
    );
    // The redelivery knew it was a retry: it cleared the dead attempt's batch and read back.
    let attempts: Vec<i32> =
        p.db.column_for_doc(
            "SELECT index_attempts FROM document_processing_runs WHERE doc_id = $1",
            &job.doc_id,
        )
        .await;
    assert_eq!(attempts, vec![2], "{key}");
}
