//! A stale index worker never touches the current run: a worker paused mid-insert (by a hook on the
//! real Milvus index) while its lease runs out and another delivery commits, or while its run is
//! superseded by a new upload whose run commits. Each ends with exactly `chunk_count` vectors of the
//! current run, counted with Strong consistency. A delete that races store or index wins, and
//! what a racing stage left behind is removed even when its own clean-up failed.

use docpipe_core::events::{decode_notification, Notification};
use docpipe_core::model::DocStatus;
use docpipe_pipeline::stages::index::{index_job, IndexOutcome};
use docpipe_vector::VectorIndex;
use helpers::{
    law_paths, read_law, s3_put_event, DevRunner, HookedObjectStore, HookedVectorIndex, Pipeline,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A vector index that stops its first worker right after that worker's first insert, until the
/// test lets it go.
struct Pause {
    paused: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
}

/// An insert hook that stops the worker at its `at`-th insert, once, until the test lets it go.
#[allow(clippy::type_complexity)]
fn pause_at(
    at: usize,
) -> (
    Box<dyn Fn(usize) -> Result<(), docpipe_vector::VectorError> + Send + Sync>,
    Pause,
) {
    let (paused_tx, paused) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel::<()>();
    let once = Mutex::new(Some((paused_tx, resume_rx)));
    let hook = Box::new(move |n| {
        if n == at {
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
    (hook, Pause { paused, resume })
}

fn pausing_index(inner: Arc<dyn VectorIndex>) -> (HookedVectorIndex, Pause) {
    let mut hooked = HookedVectorIndex::new(inner);
    let (hook, pause) = pause_at(1);
    hooked.after_insert = hook;
    (hooked, pause)
}

/// Starts indexing `job` with the pausing index and returns once the worker is frozen after its
/// first insert: its task, and the sender that lets it go on.
async fn index_until_paused(
    p: &Arc<Pipeline>,
    job: &docpipe_core::model::JobMessage,
) -> (
    tokio::task::JoinHandle<Result<IndexOutcome, docpipe_pipeline::error::StageError>>,
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
            &[(&run_id, docpipe_db::Type::INT8)],
        )
        .await
        .unwrap();
}

/// A delete that commits while store is between its hash and its insert wins: the late store
/// finds the tombstone and drops its event, so the document does not come back. An upload made
/// after the delete, with the very same content, is a new document.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_while_store_hashes_wins_and_a_later_upload_is_a_new_document() {
    use docpipe_pipeline::stages::store::{store_object, StoreOutcome};
    let p = Arc::new(Pipeline::new(Pipeline::hash()).await);
    let key = "race/delete-while-hashing.md";
    let (_, v1) = read_law(&law_paths()[3]);
    let doc_id = p.ingest(key, v1.as_bytes()).await;
    assert!(p.milvus.count(&doc_id, None).await.unwrap() > 0);

    // New content lands; its store stops right after hashing it.
    let v2 = format!("{v1}\n\n第九百九十九条 新增的条款。\n");
    p.aws.put(key, v2.as_bytes()).await;
    let event = s3_put_event(&p.aws.bucket, key);
    let (hashed_tx, hashed) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let gate = Mutex::new(Some((hashed_tx, go_rx)));
    let mut hooked = HookedObjectStore::new(p.store.objects.clone());
    hooked.after_sha256 = Box::new(move |_| {
        if let Some((hashed, go)) = gate.lock().unwrap().take() {
            hashed.send(()).unwrap();
            tokio::task::block_in_place(|| go.recv_timeout(Duration::from_secs(120)).unwrap());
        }
    });
    let store = {
        let p = p.clone();
        tokio::spawn(async move {
            let mut deps = p.store.deps();
            deps.objects = &hooked;
            let Notification::Created(objects) = decode_notification(&event).unwrap() else {
                panic!("an upload event")
            };
            store_object(&deps, &objects[0]).await
        })
    };
    tokio::task::spawn_blocking(move || hashed.recv().unwrap())
        .await
        .unwrap();
    docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &doc_id)
        .await
        .expect("delete");
    go.send(()).unwrap();
    let outcome = store.await.unwrap().expect("store");
    assert!(
        matches!(outcome, StoreOutcome::Stale { .. }),
        "the delete wins: {outcome:?}"
    );
    assert!(p.doc(&doc_id).await.is_none(), "the document stays deleted");
    assert!(p.aws.keys(key).await.is_empty(), "no original");
    assert!(p
        .aws
        .keys(&docpipe_core::artifacts::doc_prefix(&doc_id))
        .await
        .is_empty());
    assert_eq!(p.milvus.count(&doc_id, None).await.unwrap(), 0);
    assert!(
        p.aws.drain(&p.aws.parse_queue, 10).await.is_empty(),
        "no parse job for what was deleted"
    );

    // The same bytes uploaded again after the delete: a new document, indexed.
    p.aws.put(key, v2.as_bytes()).await;
    let outcome = docpipe_pipeline::handlers::store::handle_notification(
        &p.store,
        &s3_put_event(&p.aws.bucket, key),
    )
    .await
    .expect("store");
    assert!(
        matches!(
            outcome.only(),
            docpipe_pipeline::stages::store::StoreOutcome::Stored { .. }
        ),
        "{outcome}"
    );
    p.drive(&doc_id).await;
    assert_current_vectors(&p, &doc_id).await;
    p.cleanup().await;
}

/// A delete races an index worker that inserts after the delete removed the vectors; the worker's
/// clean-up finds Milvus down. The outbox keeps the removal, and the sweeper, on the template's
/// schedule in a dev runner, carries it out: nobody runs a command.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vectors_left_by_a_racing_delete_while_milvus_was_down_are_removed_by_the_sweeper() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    let job = p
        .parsed(
            "race/cleanup-outbox.md",
            read_law(&law_paths()[7]).1.as_bytes(),
        )
        .await;
    let p = Arc::new(p);
    let milvus_down = Arc::new(AtomicBool::new(false));
    let mut hooked = HookedVectorIndex::new(p.milvus.clone());
    // The worker stops just before its second insert (its lease confirmed), until let go.
    let (hook, Pause { paused, resume }) = pause_at(2);
    hooked.before_insert = hook;
    let down = milvus_down.clone();
    hooked.before_delete = Box::new(move |_| {
        if down.load(Ordering::SeqCst) {
            Err(helpers::vector_outage("delete"))
        } else {
            Ok(())
        }
    });
    let worker = {
        let (p, job) = (p.clone(), job.clone());
        tokio::spawn(async move {
            let mut deps = p.index.deps();
            deps.vectors = &hooked;
            index_job(&deps, &job).await
        })
    };
    tokio::task::spawn_blocking(move || paused.recv().unwrap())
        .await
        .unwrap();
    docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &job.doc_id)
        .await
        .expect("delete");
    milvus_down.store(true, Ordering::SeqCst);
    resume.send(()).unwrap();
    let outcome = worker.await.unwrap();
    assert!(
        matches!(outcome, Ok(IndexOutcome::Stale { .. })),
        "the lost run is done with its message: {outcome:?}"
    );
    let orphans = p.milvus.count(&job.doc_id, None).await.unwrap();
    assert!(orphans > 0, "the insert after the delete left vectors");
    assert_eq!(pending_cleanups(&p, &job.doc_id).await, 1);

    let runner = DevRunner::spawn(&p, helpers::TEST_TIME_SCALE, &[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while p.milvus.count(&job.doc_id, None).await.unwrap() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweeper never removed the orphans: {}",
            runner.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    while pending_cleanups(&p, &job.doc_id).await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the outbox row stayed: {}",
            runner.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(p.doc(&job.doc_id).await.is_none());
    drop(runner);
    p.cleanup().await;
}

async fn pending_cleanups(p: &Pipeline, doc_id: &str) -> i64 {
    docpipe_db::cleanups::pending(&**p.db.client().await, doc_id)
        .await
        .unwrap()
}

/// A delete that removes the original, then finds Milvus down: it stays pending, for the
/// sweeper's outbox to finish.
async fn delete_while_milvus_is_down(p: &Pipeline, doc_id: &str) {
    let mut down = HookedVectorIndex::new(p.milvus.clone());
    down.before_delete = Box::new(|_| Err(helpers::vector_outage("delete")));
    let mut deps = p.delete_deps();
    deps.vectors = &down;
    docpipe_pipeline::stages::delete::delete(&deps, doc_id)
        .await
        .expect_err("Milvus is down");
}

/// A delete removes the original, then finds Milvus down; the user uploads to the same key again;
/// when the delete is finished later, the new upload is left alone (the document recorded other
/// content, and the new object is newer than the delete), and it becomes a new document.
#[tokio::test]
async fn a_delete_finished_late_leaves_a_reupload_to_the_same_key_alone() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let key = "race/reupload-after-delete.md";
    let (_, v1) = read_law(&law_paths()[3]);
    let doc_id = p.ingest(key, v1.as_bytes()).await;

    delete_while_milvus_is_down(&p, &doc_id).await;
    assert!(p.aws.keys(key).await.is_empty(), "the original went first");

    // S3 counts whole seconds: the new upload is in a later second than the delete.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let v2 = format!("{v1}\n\n第九百九十九条 重新上传的版本。\n");
    p.aws.put(key, v2.as_bytes()).await;

    // The sweeper's outbox finishes the delete once Milvus is back.
    docpipe_pipeline::stages::delete::finish(&p.delete_deps(), &doc_id)
        .await
        .expect("the delete finishes");
    assert!(p.doc(&doc_id).await.is_none());
    assert_eq!(
        p.aws.get(key).await,
        v2.as_bytes(),
        "the re-upload is still there"
    );

    let outcome = docpipe_pipeline::handlers::store::handle_notification(
        &p.store,
        &s3_put_event(&p.aws.bucket, key),
    )
    .await
    .expect("store");
    assert!(
        matches!(
            outcome.only(),
            docpipe_pipeline::stages::store::StoreOutcome::Stored { .. }
        ),
        "{outcome}"
    );
    p.drive(&doc_id).await;
    assert_current_vectors(&p, &doc_id).await;
    p.cleanup().await;
}

/// An upload whose object is gone when its event is handled, with no run to fail and no delete
/// to explain it, is recorded as an intake failure; a late event of an object a delete removed
/// is not.
#[tokio::test]
async fn an_upload_that_finds_its_object_gone_is_recorded() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let gone = p.deliver("race/never-there.md").await;
    assert!(
        matches!(
            gone,
            docpipe_pipeline::stages::store::StoreOutcome::ObjectMissing {
                failed_run: None,
                ..
            }
        ),
        "{gone:?}"
    );
    let recorded = |key: &'static str| {
        let p = &p;
        async move {
            p.count_for(
                "SELECT count(*) FROM intake_failures WHERE object_name = $1",
                key,
            )
            .await
        }
    };
    assert_eq!(recorded("race/never-there.md").await, 1);

    let key = "race/deleted-then-late-event.md";
    let doc_id = p.ingest(key, read_law(&law_paths()[3]).1.as_bytes()).await;
    // A duplicate of the upload's own event, delivered after the delete.
    let late = s3_put_event(&p.aws.bucket, key);
    tokio::time::sleep(Duration::from_millis(50)).await;
    docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &doc_id)
        .await
        .unwrap();
    docpipe_pipeline::handlers::store::handle_notification(&p.store, &late)
        .await
        .expect("store");
    assert_eq!(
        recorded(key).await,
        0,
        "a deleted object's late event is stale"
    );
    p.cleanup().await;
}

/// A gate that stops the worker the first time it is passed, until the test lets it go, then
/// answers `then`; later passes answer `Ok`.
#[allow(clippy::type_complexity)]
fn pause_once(
    then: impl Fn() -> Result<(), docpipe_vector::VectorError> + Send + Sync + 'static,
) -> (
    Arc<dyn Fn() -> Result<(), docpipe_vector::VectorError> + Send + Sync>,
    Pause,
) {
    let (paused_tx, paused) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel::<()>();
    let once = Mutex::new(Some((paused_tx, resume_rx)));
    let gate = Arc::new(move || {
        if let Some((paused, resume)) = once.lock().unwrap().take() {
            paused.send(()).unwrap();
            tokio::task::block_in_place(|| resume.recv_timeout(Duration::from_secs(120)).unwrap());
            return then();
        }
        Ok(())
    });
    (gate, Pause { paused, resume })
}

/// Run 2 commits and is slow to prune the older runs' vectors; meanwhile run 3 commits. Run 2's
/// prune must take only runs older than itself, never run 3's vectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_prune_never_removes_a_newer_runs_vectors() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let key = "uploads/race-prune.md";
    let (_, v1) = read_law(&law_paths()[6]);
    let doc_id = p.ingest(key, v1.as_bytes()).await;
    let run2 = p
        .parsed(key, format!("{v1}\n\n第九百九十八条 第二版。\n").as_bytes())
        .await;
    let p = Arc::new(p);
    let mut hooked = HookedVectorIndex::new(p.milvus.clone());
    // Its first attempt deletes nothing before it inserts: the first delete is the prune.
    let (gate, Pause { paused, resume }) = pause_once(|| Ok(()));
    hooked.before_delete = Box::new(move |_| gate());
    let worker = {
        let (p, job) = (p.clone(), run2.clone());
        tokio::spawn(async move {
            let mut deps = p.index.deps();
            deps.vectors = &hooked;
            index_job(&deps, &job).await
        })
    };
    tokio::task::spawn_blocking(move || paused.recv().unwrap())
        .await
        .unwrap();
    assert_eq!(
        p.doc(&doc_id).await.unwrap().current_run_id,
        Some(run2.run_id),
        "run 2 committed before its prune"
    );
    let run3 = p
        .parsed(key, format!("{v1}\n\n第九百九十九条 第三版。\n").as_bytes())
        .await;
    let done = index_job(&p.index.deps(), &run3).await.expect("run 3");
    assert!(matches!(done, IndexOutcome::Indexed { .. }), "{done:?}");
    resume.send(()).unwrap();
    let run2_outcome = worker.await.unwrap().expect("run 2");
    assert!(
        matches!(run2_outcome, IndexOutcome::Indexed { .. }),
        "{run2_outcome:?}"
    );
    assert_eq!(
        p.doc(&doc_id).await.unwrap().current_run_id,
        Some(run3.run_id)
    );
    assert_current_vectors(&p, &doc_id).await;
    p.cleanup().await;
}

/// A worker stalls after an insert past its lease; a second delivery takes the run over and
/// commits it. The stalled worker then meets an error that would fail the run: it must not remove
/// the run's vectors, which are now the second delivery's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_lost_its_lease_never_fails_the_run_it_lost() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    let job = p
        .parsed(
            "uploads/race-fail.md",
            read_law(&law_paths()[5]).1.as_bytes(),
        )
        .await;
    let p = Arc::new(p);
    let mut hooked = HookedVectorIndex::new(p.milvus.clone());
    let (gate, Pause { paused, resume }) = pause_once(|| {
        Err(docpipe_vector::VectorError::Rejected {
            op: "insert",
            message: "injected: a record the store refuses".into(),
            source: None,
        })
    });
    hooked.after_insert = Box::new(move |_| gate());
    let first = {
        let (p, job) = (p.clone(), job.clone());
        tokio::spawn(async move {
            let mut deps = p.index.deps();
            deps.vectors = &hooked;
            index_job(&deps, &job).await
        })
    };
    tokio::task::spawn_blocking(move || paused.recv().unwrap())
        .await
        .unwrap();
    expire_lease(&p, job.run_id).await;
    let second = index_job(&p.index.deps(), &job)
        .await
        .expect("second delivery");
    assert!(matches!(second, IndexOutcome::Indexed { .. }), "{second:?}");
    resume.send(()).unwrap();
    let first = first.await.unwrap();
    assert!(
        matches!(first, Ok(IndexOutcome::Stale { .. })),
        "the stalled worker leaves the run to its new holder: {first:?}"
    );
    assert_current_vectors(&p, &job.doc_id).await;
    p.cleanup().await;
}

/// Two uploads to one key, A then B: A's store hashes A's bytes and stops; B is uploaded and
/// stored; then A's store goes on. It must give way, so the document names B's content, not
/// A's digest over B's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overwrite_stored_out_of_order_gives_way_to_the_newer_upload() {
    use docpipe_pipeline::stages::store::{store_object, StoreOutcome};
    let p = Arc::new(Pipeline::new(Pipeline::hash()).await);
    let key = "race/overwrite-order.md";
    let (_, law) = read_law(&law_paths()[3]);
    let a = format!("{law}\n\n第九百九十七条 甲版。\n");
    let b = format!("{law}\n\n第九百九十八条 乙版。\n");
    p.aws.put(key, a.as_bytes()).await;
    let event_a = s3_put_event(&p.aws.bucket, key);
    let (hashed_tx, hashed) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let gate = Mutex::new(Some((hashed_tx, go_rx)));
    let mut hooked = HookedObjectStore::new(p.store.objects.clone());
    hooked.after_sha256 = Box::new(move |_| {
        if let Some((hashed, go)) = gate.lock().unwrap().take() {
            hashed.send(()).unwrap();
            tokio::task::block_in_place(|| go.recv_timeout(Duration::from_secs(120)).unwrap());
        }
    });
    let store_a = {
        let p = p.clone();
        tokio::spawn(async move {
            let mut deps = p.store.deps();
            deps.objects = &hooked;
            let Notification::Created(objects) = decode_notification(&event_a).unwrap() else {
                panic!("an upload event")
            };
            store_object(&deps, &objects[0]).await
        })
    };
    tokio::task::spawn_blocking(move || hashed.recv().unwrap())
        .await
        .unwrap();
    // S3 counts whole seconds; B is a later upload.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    p.aws.put(key, b.as_bytes()).await;
    let stored_b = p.deliver(key).await;
    assert!(
        matches!(stored_b, StoreOutcome::Stored { .. }),
        "{stored_b:?}"
    );
    go.send(()).unwrap();
    let outcome_a = store_a.await.unwrap().expect("store A");
    assert!(
        matches!(outcome_a, StoreOutcome::Stale { .. }),
        "A gives way: {outcome_a:?}"
    );
    let doc = p.doc_at(key).await.unwrap();
    assert_eq!(doc.content_sha256, helpers::sha256_hex(b.as_bytes()));
    p.drive(&doc.doc_id).await;
    assert_current_vectors(&p, &doc.doc_id).await;
    p.cleanup().await;
}

/// The key is overwritten after its run was stored and before the parse, and the overwrite's
/// event has not been stored yet: the parse must not read the new bytes under the old digest.
#[tokio::test]
async fn a_parse_never_reads_another_uploads_bytes_under_its_runs_digest() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let key = "race/overwrite-before-parse.md";
    let (_, law) = read_law(&law_paths()[3]);
    let job = helpers::stored(&p.db, &p.aws, &p.store, key, law.as_bytes()).await;
    p.aws
        .put(key, format!("{law}\n\n第九百九十九条 覆盖。\n").as_bytes())
        .await;
    let err = docpipe_pipeline::stages::parse::parse_job(&p.parse.deps(), &job)
        .await
        .expect_err("the bytes are not the run's");
    assert!(err.is_retryable(), "{err}");
    assert!(
        err.to_string().contains("the original changed after run"),
        "{err}"
    );
    assert_eq!(p.doc(&job.doc_id).await.unwrap().status, DocStatus::Stored);
    // The overwrite's own event is stored: the old run's message is then stale, the new run parses.
    p.deliver(key).await;
    let stale = docpipe_pipeline::stages::parse::parse_job(&p.parse.deps(), &job)
        .await
        .expect("stale");
    assert!(
        matches!(
            stale,
            docpipe_pipeline::stages::parse::ParseOutcome::Stale { .. }
        ),
        "{stale:?}"
    );
    p.cleanup().await;
}

/// The same bytes put to the same key while its document's delete waits for Milvus: the upload is
/// not the document about to go. Its event waits for the delete (a transient error, redelivered),
/// then it becomes a new indexed document. Before, the ETag check acknowledged it as a duplicate
/// of the deleted document, and it vanished with no record.
#[tokio::test]
async fn the_same_bytes_uploaded_during_a_pending_delete_become_a_new_document() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let key = "race/same-bytes-during-delete.md";
    let (_, v1) = read_law(&law_paths()[3]);
    let doc_id = p.ingest(key, v1.as_bytes()).await;

    delete_while_milvus_is_down(&p, &doc_id).await;

    // S3 counts whole seconds: the upload is in a later second than the delete.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    p.aws.put(key, v1.as_bytes()).await;
    let event = s3_put_event(&p.aws.bucket, key);
    let during = docpipe_pipeline::handlers::store::handle_notification(&p.store, &event).await;
    assert!(
        during.is_err(),
        "while the delete is pending the upload waits (retried), it is not a duplicate: {:?}",
        during.map(|o| o.to_string())
    );

    docpipe_pipeline::stages::delete::finish(&p.delete_deps(), &doc_id)
        .await
        .expect("the delete finishes");
    assert!(p.doc(&doc_id).await.is_none());
    assert_eq!(
        p.aws.get(key).await,
        v1.as_bytes(),
        "the upload is still there"
    );

    // The redelivery, once the delete is done.
    let outcome = docpipe_pipeline::handlers::store::handle_notification(&p.store, &event)
        .await
        .expect("store");
    assert!(
        matches!(
            outcome.only(),
            docpipe_pipeline::stages::store::StoreOutcome::Stored { .. }
        ),
        "{outcome}"
    );
    p.drive(&doc_id).await;
    assert_current_vectors(&p, &doc_id).await;
    p.cleanup().await;
}

/// A dead attempt is counted once when the sweeper's re-drive and a redelivered worker's takeover
/// both record its expired lease (they race on it: the sweeper's event committed after the
/// takeover's snapshot, the lease still the dead worker's). Before, it counted twice, and a poison
/// document failed after "4 times" of 3 under load.
#[tokio::test]
async fn a_dead_attempt_recorded_by_both_the_sweeper_and_a_takeover_counts_once() {
    use docpipe_core::model::Stage;
    use docpipe_db::transitions::start_attempt;
    let p = Pipeline::new(Pipeline::hash()).await;
    let key = "race/dead-attempt.md";
    p.aws.put(key, read_law(&law_paths()[3]).1.as_bytes()).await;
    p.deliver(key).await;
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    let run_id = p.doc(&doc_id).await.unwrap().current_run_id.unwrap();
    let client = p.db.client().await;
    let first = start_attempt(&**client, run_id, Stage::Index, "worker-a", 60.0)
        .await
        .unwrap()
        .expect("the first attempt");
    assert_eq!(first.abandoned, 0);
    // worker-a dies: its lease runs out; the sweeper records that, as the takeover is about to.
    client
        .execute_typed(
            "UPDATE document_processing_runs SET lease_expires_at = NOW() - interval '1 second'
             WHERE run_id = $1",
            &[(&run_id, docpipe_db::Type::INT8)],
        )
        .await
        .unwrap();
    client
        .execute_typed(
            "INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message)
             VALUES ($1, $2, 'index', 'lease_expired', $3, 'the sweeper saw it')",
            &[
                (&doc_id, docpipe_db::Type::VARCHAR),
                (&run_id, docpipe_db::Type::INT8),
                (&first.attempt, docpipe_db::Type::INT4),
            ],
        )
        .await
        .unwrap();
    let second = start_attempt(&**client, run_id, Stage::Index, "worker-b", 60.0)
        .await
        .unwrap()
        .expect("the takeover");
    assert_eq!(second.abandoned, 1, "one dead attempt, counted twice");
    p.cleanup().await;
}
