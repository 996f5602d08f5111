//! The store stage end to end, against PostgreSQL through PgBouncer, moto's S3 and SQS (with real
//! bucket notifications) and the same handler the Lambda binary runs.

use docpipe_core::model::{DocStatus, JobMessage, RunStatus};
use docpipe_db::documents;
use docpipe_pipeline::error::StageError;
use docpipe_pipeline::handlers::sqs::Handled;
use docpipe_pipeline::handlers::store::{handle_notification, handle_sqs, Notified};
use docpipe_pipeline::services::StoreService;
use docpipe_pipeline::stages::store::{store_object, StoreOutcome};
use helpers::{s3_put_event, sha256_hex, sqs_batch, FlakyQueue, Pipeline};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX: u64 = docpipe_core::config::DEFAULT_MAX_BYTES;

/// A store message dropped as refused, for a reason that says `why`.
fn refused_because(handled: &Handled<Notified>, why: &str) -> bool {
    matches!(handled.dropped(), Some(StageError::Failed { reason, .. }) if reason.contains(why))
}

async fn fixture(max_bytes: u64) -> Pipeline {
    Pipeline::with_max_bytes(max_bytes).await
}

#[tokio::test]
async fn a_real_upload_reaches_the_handler_through_the_notification_and_is_stored() {
    let f = fixture(MAX).await;
    let key = "uploads/法规 2026+final.md";
    let body = "# 中华人民共和国测试法\n\n第一条 为了测试，制定本法。\n".as_bytes();
    f.aws.put(key, body).await;

    // Pump the store-events queue the way the dev runner does, until the upload is stored (moto
    // first delivers the s3:TestEvent that configuring the notification produces).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while f
        .doc_at(key)
        .await
        .is_none_or(|d| d.status != DocStatus::Stored)
    {
        assert!(
            Instant::now() < deadline,
            "upload never stored; saw {lines:?}"
        );
        let report = docpipe_cli::dev_runner::pump_once(
            &f.aws.clients.sqs,
            &f.aws.store_queue,
            &f.aws.region,
            2,
            10,
            Duration::ZERO,
            |event| handle_sqs(&f.store, event),
        )
        .await
        .expect("poll");
        if let Some(report) = report {
            assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
            lines.extend(report.lines);
        }
    }

    let doc = f.doc_at(key).await.unwrap();
    assert_eq!(doc.file_name, "法规 2026+final.md");
    assert_eq!(doc.object_name, key);
    assert_eq!(doc.source_bucket, f.aws.bucket);
    assert_eq!(doc.size_bytes, body.len() as i64);
    assert_eq!(doc.content_sha256, sha256_hex(body));
    assert_eq!(doc.content_type, "text/plain");
    let runs = f.runs(&doc.doc_id).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].trigger_type, "upload");
    assert_eq!(runs[0].run_status, RunStatus::Running);
    assert!(runs[0].stored_at.is_some());
    assert_eq!(doc.current_run_id, Some(runs[0].run_id));
    assert_eq!(f.history(&doc.doc_id).await, [">pending", "pending>stored"]);
    assert_eq!(
        f.parse_jobs().await,
        [JobMessage::new(doc.doc_id.clone(), runs[0].run_id)]
    );
    // The messages that were handled are gone from the queue.
    assert!(f.aws.drain(&f.aws.store_queue, 10).await.is_empty());
}

#[tokio::test]
async fn the_same_event_twice_leaves_one_document_and_one_run() {
    let f = fixture(MAX).await;
    let key = "uploads/twice.txt";
    f.aws.put(key, b"same event, delivered twice").await;
    let first = f.deliver(key).await;
    let second = f.deliver(key).await;
    assert!(matches!(first, StoreOutcome::Stored { .. }), "{first:?}");
    assert!(
        matches!(second, StoreOutcome::Duplicate { .. }),
        "{second:?}"
    );
    let doc = f.doc_at(key).await.unwrap();
    assert_eq!(f.runs(&doc.doc_id).await.len(), 1);
    assert_eq!(f.history(&doc.doc_id).await, [">pending", "pending>stored"]);
    // The duplicate re-queues the parse of the run still waiting for it: harmless, since parse
    // compares-and-sets, and it heals a first delivery that stored but failed to send.
    let jobs = f.parse_jobs().await;
    assert!(jobs.iter().all(|j| j.run_id == doc.current_run_id.unwrap()));
}

#[tokio::test]
async fn two_invocations_at_the_same_moment_leave_one_run() {
    let f = fixture(MAX).await;
    // Two "containers": separate pools, same database.
    let other = StoreService::new(
        f.db.another_pool(2),
        &f.aws.clients,
        f.aws.store_config(MAX),
    );
    for i in 0..5 {
        let key = format!("uploads/race-{i}.txt");
        f.aws.put(&key, format!("race {i}").as_bytes()).await;
        let event = s3_put_event(&f.aws.bucket, &key);
        let (a, b) = tokio::join!(
            handle_notification(&f.store, &event),
            handle_notification(&other, &event)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let stored = [&a, &b]
            .iter()
            .filter(|n| matches!(n.only(), StoreOutcome::Stored { .. }))
            .count();
        assert_eq!(stored, 1, "exactly one invocation stores: {a} | {b}");
        let doc = f.doc_at(&key).await.unwrap();
        assert_eq!(f.runs(&doc.doc_id).await.len(), 1, "{a} | {b}");
    }
    assert_eq!(documents::count(&**f.db.client().await).await.unwrap(), 5);
}

#[tokio::test]
async fn re_uploading_the_same_content_starts_no_new_run() {
    let f = fixture(MAX).await;
    let key = "uploads/same.txt";
    f.aws.put(key, b"unchanged content").await;
    f.deliver(key).await;
    f.aws.put(key, b"unchanged content").await;
    assert!(matches!(
        f.deliver(key).await,
        StoreOutcome::Duplicate { .. }
    ));

    // Without the ETag shortcut (say, a multipart re-upload has another ETag), the sha256 decides.
    let doc = f.doc_at(key).await.unwrap();
    f.db.client()
        .await
        .execute_typed(
            "UPDATE documents SET source_etag = 'other' WHERE doc_id = $1",
            &[(&doc.doc_id, docpipe_db::Type::VARCHAR)],
        )
        .await
        .unwrap();
    assert!(matches!(
        f.deliver(key).await,
        StoreOutcome::Duplicate { .. }
    ));
    assert_eq!(f.runs(&doc.doc_id).await.len(), 1);
}

#[tokio::test]
async fn new_content_under_the_same_key_supersedes_the_run_in_flight() {
    let f = fixture(MAX).await;
    let key = "uploads/changing.txt";
    f.aws.put(key, b"version one").await;
    f.deliver(key).await;
    let first_run = f.doc_at(key).await.unwrap().current_run_id.unwrap();
    f.aws.put(key, b"version two").await;
    f.deliver(key).await;

    let doc = f.doc_at(key).await.unwrap();
    let runs = f.runs(&doc.doc_id).await;
    assert_eq!(runs.len(), 2);
    let old = runs.iter().find(|r| r.run_id == first_run).unwrap();
    assert_eq!(old.run_status, RunStatus::Failed);
    assert!(
        old.error_message.contains("superseded"),
        "{}",
        old.error_message
    );
    assert!(old.finished_at.is_some());
    let new = runs.iter().find(|r| r.run_id != first_run).unwrap();
    assert_eq!(new.run_status, RunStatus::Running);
    assert_eq!(doc.current_run_id, Some(new.run_id));
    assert_eq!(doc.status, DocStatus::Stored);
    assert_eq!(doc.content_sha256, sha256_hex(b"version two"));
    assert_eq!(
        f.history(&doc.doc_id).await,
        [
            ">pending",
            "pending>stored",
            "stored>failed",
            "failed>pending",
            "pending>stored"
        ]
    );
}

#[tokio::test]
async fn an_event_for_an_object_that_no_longer_exists_is_a_clear_outcome() {
    let f = fixture(MAX).await;
    // Never existed: nothing is created.
    let outcome = f.deliver("uploads/ghost.txt").await;
    assert!(
        matches!(
            outcome,
            StoreOutcome::ObjectMissing {
                failed_run: None,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert!(f.doc_at("uploads/ghost.txt").await.is_none());

    // Existed, was deleted while its run was in flight: the run fails at store.
    let key = "uploads/vanishing.txt";
    f.aws.put(key, b"here for a moment").await;
    f.deliver(key).await;
    f.aws.delete(key).await;
    let outcome = f.deliver(key).await;
    assert!(
        matches!(
            outcome,
            StoreOutcome::ObjectMissing {
                failed_run: Some(_),
                ..
            }
        ),
        "{outcome:?}"
    );
    let doc = f.doc_at(key).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    let run = &f.runs(&doc.doc_id).await[0];
    assert_eq!(run.failure_stage, "store");
    assert!(
        run.error_message.contains("no longer exists"),
        "{}",
        run.error_message
    );
}

#[tokio::test]
async fn a_body_that_is_not_an_event_is_dropped_without_failing_its_batch() {
    let f = fixture(MAX).await;
    let key = "uploads/good.txt";
    f.aws.put(key, b"a good neighbour").await;
    let batch = sqs_batch(&[
        "this is not json".to_string(),
        r#"{"hello":"world"}"#.to_string(),
        s3_put_event(&f.aws.bucket, key).to_string(),
    ]);
    let report = handle_sqs(&f.store, batch).await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    assert!(
        refused_because(&report.outcomes[0], "not JSON"),
        "{:?}",
        report.lines
    );
    assert!(
        refused_because(&report.outcomes[1], "not an upload notification"),
        "{:?}",
        report.lines
    );
    assert!(matches!(
        report.done()[2].map(Notified::only),
        Some(StoreOutcome::Stored { .. })
    ));
    assert_eq!(f.doc_at(key).await.unwrap().status, DocStatus::Stored);
}

#[tokio::test]
async fn an_object_over_the_size_limit_fails_at_store_once() {
    let f = fixture(64).await;
    let key = "uploads/huge.bin";
    f.aws.put(key, &[7u8; 200]).await;
    let outcome = f.deliver(key).await;
    assert!(
        matches!(outcome, StoreOutcome::Rejected { .. }),
        "{outcome:?}"
    );
    let doc = f.doc_at(key).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    let runs = f.runs(&doc.doc_id).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].failure_stage, "store");
    assert!(
        runs[0]
            .error_message
            .contains("200 bytes, over the limit of 64"),
        "{}",
        runs[0].error_message
    );
    assert_eq!(doc.error_message, runs[0].error_message);
    // The same event again opens no second failed run, and nothing was queued for parsing.
    assert!(matches!(
        f.deliver(key).await,
        StoreOutcome::Duplicate { .. }
    ));
    assert_eq!(f.runs(&doc.doc_id).await.len(), 1);
    assert!(f.parse_jobs().await.is_empty());
}

#[tokio::test]
async fn a_queue_outage_returns_the_message_and_redelivery_heals_it() {
    let f = fixture(MAX).await;
    let flaky = Arc::new(FlakyQueue {
        inner: f.store.queue.clone(),
        failing: true.into(),
    });
    let service = StoreService {
        db: f.db.db.clone(),
        objects: f.store.objects.clone(),
        queue: flaky.clone(),
        config: f.aws.store_config(MAX),
        events: f.store.events.clone(),
    };
    let key = "uploads/outage.txt";
    f.aws.put(key, b"sent during an outage").await;
    let other_key = "uploads/bystander.txt";
    f.aws.put(other_key, b"bystander").await;
    let batch = sqs_batch(&[s3_put_event(&f.aws.bucket, key).to_string()]);
    let report = handle_sqs(&service, batch).await;
    assert_eq!(
        report.failed_ids(),
        ["msg-0"],
        "the message goes back to the queue"
    );
    assert!(f.parse_jobs().await.is_empty());

    flaky.failing.store(false, Ordering::SeqCst);
    let batch = sqs_batch(&[
        s3_put_event(&f.aws.bucket, key).to_string(),
        s3_put_event(&f.aws.bucket, other_key).to_string(),
    ]);
    let report = handle_sqs(&service, batch).await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    let doc = f.doc_at(key).await.unwrap();
    assert_eq!(
        f.runs(&doc.doc_id).await.len(),
        1,
        "redelivery opened no second run"
    );
    let jobs = f.parse_jobs().await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert!(jobs.contains(&JobMessage::new(
        doc.doc_id.clone(),
        doc.current_run_id.unwrap()
    )));
}

#[tokio::test]
async fn several_pools_through_pgbouncer_store_concurrently_without_statement_errors() {
    let f = fixture(MAX).await;
    let services: Vec<StoreService> = (0..6)
        .map(|_| {
            StoreService::new(
                f.db.another_pool(2),
                &f.aws.clients,
                f.aws.store_config(MAX),
            )
        })
        .collect();
    let mut keys = Vec::new();
    for i in 0..30 {
        let key = format!("uploads/many/{i}.txt");
        f.aws.put(&key, format!("document {i}").as_bytes()).await;
        keys.push(key);
    }
    let tasks = keys.iter().enumerate().map(|(i, key)| {
        let service = &services[i % services.len()];
        let object =
            docpipe_core::events::decode_notification(&s3_put_event(&f.aws.bucket, key)).unwrap();
        async move {
            let docpipe_core::events::Notification::Created(objects) = object else {
                unreachable!()
            };
            store_object(&service.deps(), &objects[0]).await
        }
    });
    let outcomes = futures::future::join_all(tasks).await;
    for o in &outcomes {
        assert!(matches!(o, Ok(StoreOutcome::Stored { .. })), "{o:?}");
    }
    let client = f.db.client().await;
    let row = client
        .query_typed_one(
            "SELECT count(*) FILTER (WHERE status = 'stored'), count(*) FROM documents",
            &[],
        )
        .await
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (30, 30));
    for s in &services {
        assert!(
            s.db.pool_status().size <= 2,
            "a pool never exceeds its bound"
        );
    }
}

#[tokio::test]
async fn failing_a_run_that_is_no_longer_current_writes_no_history_row() {
    use docpipe_core::model::{Stage, Trigger};
    use docpipe_db::transitions;
    let f = fixture(MAX).await;
    let key = "uploads/two-runs.txt";
    f.aws.put(key, b"version one").await;
    f.deliver(key).await;
    let doc = f.doc_at(key).await.unwrap();
    let old_run = doc.current_run_id.unwrap();
    // A second run opens while the first is still running. The schema's one-running-run index
    // forbids that today; it is dropped in this test's own database, so that fail_run's own guard
    // is what is tested, not the index that hides it.
    let client = f.db.client().await;
    client
        .batch_execute("DROP INDEX uq_runs_one_running_per_doc")
        .await
        .unwrap();
    let new_run = transitions::open_run(&**client, &doc.doc_id, Trigger::Retry, "test", 900)
        .await
        .unwrap();
    let before = f.history(&doc.doc_id).await;
    assert!(
        transitions::fail_run(
            &**client,
            &doc.doc_id,
            old_run,
            Stage::Parse,
            "late failure"
        )
        .await
        .unwrap(),
        "the old run itself fails"
    );
    assert_eq!(
        f.history(&doc.doc_id).await,
        before,
        "the document's history is about its current run"
    );
    let doc = f.doc_at(key).await.unwrap();
    assert_eq!(doc.current_run_id, Some(new_run));
    assert_eq!(doc.status, DocStatus::Pending);
}
