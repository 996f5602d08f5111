//! A stale index worker never touches the current run: a worker paused mid-insert (by a hook on the
//! real Milvus index) while its lease runs out and another delivery commits, or while its run is
//! superseded by a new upload whose run commits. Each ends with exactly `chunk_count` vectors of the
//! current run, counted with Strong consistency.

use docpipe::model::DocStatus;
use docpipe::stages::index::{index_job, IndexOutcome};
use docpipe_tests::{law_paths, read_law, HookedVectorIndex, Pipeline};
use docpipe_vector::VectorIndex;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A vector index that stops its first worker right after that worker's first insert, until the
/// test lets it go.
struct Pause {
    paused: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
}

fn pausing_index(inner: Arc<dyn VectorIndex>) -> (HookedVectorIndex, Pause) {
    let (paused_tx, paused) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel::<()>();
    let once = Mutex::new(Some((paused_tx, resume_rx)));
    let mut hooked = HookedVectorIndex::new(inner);
    hooked.after_insert = Box::new(move |n| {
        if n == 1 {
            if let Some((paused, resume)) = once.lock().unwrap().take() {
                paused.send(()).unwrap();
                // The worker's thread waits; the runtime hands its other tasks (the Milvus
                // client's connection among them) to the other threads meanwhile.
                tokio::task::block_in_place(|| {
                    resume.recv_timeout(Duration::from_secs(120)).unwrap()
                });
            }
        }
        Ok(())
    });
    (hooked, Pause { paused, resume })
}

/// Starts indexing `job` with the pausing index and returns once the worker is frozen after its
/// first insert: its task, and the sender that lets it go on.
async fn index_until_paused(
    p: &Arc<Pipeline>,
    job: &docpipe::model::JobMessage,
) -> (
    tokio::task::JoinHandle<Result<IndexOutcome, docpipe::StageError>>,
    mpsc::Sender<()>,
) {
    let (hooked, pause) = pausing_index(p.milvus.clone());
    let task = {
        let (p, job) = (p.clone(), job.clone());
        tokio::spawn(async move {
            let mut deps = p.index.deps();
            deps.vectors = &hooked;
            index_job(&deps, &job).await
        })
    };
    let Pause { paused, resume } = pause;
    tokio::task::spawn_blocking(move || paused.recv().unwrap())
        .await
        .unwrap();
    (task, resume)
}

async fn assert_current_vectors(p: &Pipeline, doc_id: &str) {
    let doc = p.doc(doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Indexed, "{}", doc.error_message);
    let all = p.milvus.count(doc_id, None).await.unwrap();
    let current = p.milvus.count(doc_id, doc.current_run_id).await.unwrap();
    assert_eq!(
        (all, current),
        (doc.chunk_count as usize, doc.chunk_count as usize),
        "exactly chunk_count vectors, all of the current run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_whose_lease_ran_out_mid_insert_never_writes_over_the_delivery_that_committed() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    let job = p
        .parsed("uploads/race-a.md", read_law(&law_paths()[5]).1.as_bytes())
        .await;
    let p = Arc::new(p);
    let (first, resume) = index_until_paused(&p, &job).await;
    // The first worker is frozen after its first insert: its lease runs out, as a stalled worker's
    // does, and the message's second delivery takes over and commits.
    expire_lease(&p, job.run_id).await;
    let second = index_job(&p.index.deps(), &job)
        .await
        .expect("second delivery");
    assert!(matches!(second, IndexOutcome::Indexed { .. }), "{second:?}");
    resume.send(()).unwrap();
    let first = first.await.unwrap();
    assert!(
        first.as_ref().is_err_and(|e| e.is_retryable())
            || matches!(first, Ok(IndexOutcome::Stale { .. })),
        "{first:?}"
    );
    assert_current_vectors(&p, &job.doc_id).await;
    p.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_superseded_retry_racing_its_successor_never_removes_the_successors_vectors() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    let key = "uploads/race-b.md";
    let (_, v1) = read_law(&law_paths()[6]);
    let doc_id = p.ingest(key, v1.as_bytes()).await;
    assert_current_vectors(&p, &doc_id).await;

    // New content: run 2, whose worker has older runs to prune, freezes after its first insert.
    let v2 = format!("{v1}\n\n第九百九十八条 新增的条款。\n");
    let run2 = p.parsed(key, v2.as_bytes()).await;
    let p = Arc::new(p);
    let (stale, resume) = index_until_paused(&p, &run2).await;
    // Meanwhile newer content supersedes run 2, and run 3 goes all the way.
    let v3 = format!("{v1}\n\n第九百九十九条 再次新增的条款。\n");
    let run3 = p.parsed(key, v3.as_bytes()).await;
    assert_ne!(run3.run_id, run2.run_id);
    let done = index_job(&p.index.deps(), &run3).await.expect("run 3");
    assert!(matches!(done, IndexOutcome::Indexed { .. }), "{done:?}");
    resume.send(()).unwrap();
    let stale = stale.await.unwrap();
    assert!(
        matches!(stale, Ok(IndexOutcome::Stale { .. }))
            || stale.as_ref().is_err_and(|e| e.is_retryable()),
        "{stale:?}"
    );
    assert_eq!(
        p.doc(&doc_id).await.unwrap().current_run_id,
        Some(run3.run_id)
    );
    assert_current_vectors(&p, &doc_id).await;
    assert_eq!(p.milvus.count(&doc_id, Some(run2.run_id)).await.unwrap(), 0);
    p.cleanup().await;
}

async fn expire_lease(p: &Pipeline, run_id: i64) {
    p.db.client()
        .await
        .execute_typed(
            "UPDATE document_processing_runs SET lease_expires_at = NOW() - interval '1 second' WHERE run_id = $1",
            &[(&run_id, docpipe::db::Type::INT8)],
        )
        .await
        .unwrap();
}
