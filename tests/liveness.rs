//! Queued is not stuck: the liveness model on the template's clock (scaled), against the real stack.
//! A backlog waits and is never failed or re-driven; a lost job is re-driven; a job that fails on
//! every delivery backs off, reaches the DLQ after exactly `MaxReceiveCount` deliveries and fails
//! with its real error; an invocation past its timeout is stopped and the document still ends right.

use docpipe_core::model::{DocStatus, RunStatus, Stage};
use docpipe_pipeline::handlers::sqs::BatchReport;
use docpipe_pipeline::stages::index::IndexOutcome;
use docpipe_pipeline::stages::parse::ParseOutcome;
use docpipe_pipeline::upkeep::sweep::{sweep, SweepDeps, Swept};
use docpipe_vector::VectorIndex;
use helpers::{
    law_paths, read_law, run_event_kinds, stored, vector_outage, wait_terminal, DevRunner,
    HookedVectorIndex, Pipeline, TestAws,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn sweep_deps<'a>(
    p: &'a Pipeline,
    queue: &'a dyn docpipe_pipeline::adapters::JobQueue,
) -> SweepDeps<'a> {
    SweepDeps {
        db: &p.db.db,
        queue,
        vectors: p.milvus.as_ref(),
        parse_queue_url: &p.aws.parse_queue,
        index_queue_url: &p.aws.index_queue,
        clock: &p.aws.clock,
    }
}

/// One sweep over the pipeline's queues, on its clock.
async fn sweep_once(p: &Pipeline) -> docpipe_pipeline::upkeep::sweep::SweepReport {
    sweep(&sweep_deps(p, p.parse.queue.as_ref()), 100)
        .await
        .expect("sweep")
}

async fn run(p: &Pipeline, run_id: i64) -> docpipe_db::runs::Run {
    docpipe_db::runs::get(&**p.db.client().await, run_id)
        .await
        .unwrap()
        .expect("the run")
}

/// One receive of `queue` into `handle`, as the dev runner's poller does it.
async fn pump<O, F, Fut>(p: &Pipeline, queue: &str, handle: F) -> Option<BatchReport<O>>
where
    F: FnOnce(aws_lambda_events::event::sqs::SqsEvent) -> Fut,
    Fut: std::future::Future<Output = BatchReport<O>>,
{
    docpipe_cli::dev_runner::pump_once(
        &p.aws.clients.sqs,
        queue,
        &p.aws.region,
        1,
        1,
        Duration::ZERO,
        handle,
    )
    .await
    .expect("poll")
}

#[tokio::test]
async fn a_run_queued_behind_others_is_left_alone_however_long_it_waits() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = read_law(&law_paths()[0]);
    let key = format!("uploads/{name}");
    p.aws.put(&key, text.as_bytes()).await;
    docpipe_pipeline::handlers::store::handle_notification(
        &p.store,
        &helpers::s3_put_event(&p.aws.bucket, &key),
    )
    .await
    .expect("store");
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, &key);
    let run_id = p.doc(&doc_id).await.unwrap().current_run_id.unwrap();
    // Its parse job is on the queue (not drained). It has waited half an hour: far past the grace,
    // any lease, and the deadline the old sweeper failed it at (900 s, or 9 s on this clock), but
    // within the queue's retention. That is a backlog, not a lost job.
    p.db.client()
        .await
        .execute_typed(
            "UPDATE document_processing_runs SET queued_at = NOW() - interval '30 minutes',
                    deadline_at = NOW() - interval '30 minutes' WHERE run_id = $1",
            &[(&run_id, docpipe_db::Type::INT8)],
        )
        .await
        .unwrap();
    let report = sweep_once(&p).await;
    assert!(report.actions.is_empty(), "{:?}", report.actions);
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Stored, "{}", doc.error_message);
    assert_eq!(run(&p, run_id).await.redrives, 0);
    assert_eq!(
        p.aws.drain(&p.aws.parse_queue, 10).await.len(),
        1,
        "its one message is still there, and no second one was sent"
    );

    // Waiting out a backoff is not lost either, even with the queue empty.
    p.db.client()
        .await
        .execute_typed(
            "UPDATE document_processing_runs SET visible_at = NOW() + interval '1 minute' WHERE run_id = $1",
            &[(&run_id, docpipe_db::Type::INT8)],
        )
        .await
        .unwrap();
    let report = sweep_once(&p).await;
    assert!(report.actions.is_empty(), "{:?}", report.actions);
    p.cleanup().await;
}

#[tokio::test]
async fn a_lost_parse_job_and_a_lost_index_job_are_redriven_and_the_document_ends_indexed() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = read_law(&law_paths()[1]);
    // `stored` drains the parse queue: the parse job is lost.
    let job = stored(
        &p.db,
        &p.aws,
        &p.store,
        &format!("uploads/{name}"),
        text.as_bytes(),
    )
    .await;
    let grace = p.aws.clock.lost_job_grace + Duration::from_millis(500);

    // Within the grace an empty queue proves nothing (SQS's counts lag).
    let report = sweep_once(&p).await;
    assert!(report.actions.is_empty(), "{:?}", report.actions);

    tokio::time::sleep(grace).await;
    let report = sweep_once(&p).await;
    assert!(
        matches!(&report.actions[..], [Swept::Redriven { stage: Stage::Parse, reason, .. }] if reason.contains("holds no message")),
        "{:?}",
        report.actions
    );
    let report = pump(&p, &p.aws.parse_queue, |e| {
        docpipe_pipeline::handlers::parse::handle_sqs(&p.parse, e)
    })
    .await
    .expect("the re-driven parse job is on the queue");
    assert!(
        matches!(report.done()[..], [Some(ParseOutcome::Parsed { .. })]),
        "{:?}",
        report.lines
    );

    // Now the index job is lost.
    assert_eq!(p.aws.drain(&p.aws.index_queue, 10).await.len(), 1);
    tokio::time::sleep(grace).await;
    let report = sweep_once(&p).await;
    assert!(
        matches!(
            &report.actions[..],
            [Swept::Redriven {
                stage: Stage::Index,
                ..
            }]
        ),
        "{:?}",
        report.actions
    );
    let report = pump(&p, &p.aws.index_queue, |e| {
        docpipe_pipeline::handlers::index::handle_sqs(&p.index, e)
    })
    .await
    .expect("the re-driven index job is on the queue");
    assert!(
        matches!(report.done()[..], [Some(IndexOutcome::Indexed { .. })]),
        "{:?}",
        report.lines
    );

    let doc = p.doc(&job.doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Indexed);
    assert_eq!(
        p.milvus.count(&job.doc_id, Some(job.run_id)).await.unwrap(),
        doc.chunk_count as usize
    );
    assert_eq!(run(&p, job.run_id).await.redrives, 2);
    let kinds = run_event_kinds(&p.db, &job.doc_id).await;
    let redrives: Vec<&str> = kinds
        .iter()
        .filter(|(_, k)| k == "redrive")
        .map(|(s, _)| s.as_str())
        .collect();
    assert_eq!(redrives, ["parse", "index"], "{kinds:?}");
    p.cleanup().await;
}

#[tokio::test]
async fn a_job_past_the_queues_retention_with_its_redrives_used_up_fails_and_says_why() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let job = p
        .parsed("uploads/lost.md", read_law(&law_paths()[2]).1.as_bytes())
        .await;
    let limit = p.aws.clock.redrive_limit as i32;
    let retention = p.aws.clock.retention.as_secs_f64() + 60.0;
    p.db.client()
        .await
        .execute_typed(
            "UPDATE document_processing_runs SET redrives = $2,
                    queued_at = NOW() - make_interval(secs => $3) WHERE run_id = $1",
            &[
                (&job.run_id, docpipe_db::Type::INT8),
                (&limit, docpipe_db::Type::INT4),
                (&retention, docpipe_db::Type::FLOAT8),
            ],
        )
        .await
        .unwrap();
    let report = sweep_once(&p).await;
    assert!(
        matches!(&report.actions[..], [Swept::Failed { .. }]),
        "{:?}",
        report.actions
    );
    let doc = p.doc(&job.doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    assert!(
        doc.error_message.contains("no progress in the index stage")
            && doc
                .error_message
                .contains("longer than the queue keeps a message")
            && doc
                .error_message
                .contains(&format!("re-driven {limit} time(s)")),
        "{}",
        doc.error_message
    );
    assert_eq!(p.milvus.count(&job.doc_id, None).await.unwrap(), 0);
    p.cleanup().await;
}

/// The tests' clock squeezed further, so that its deliveries and their backoffs take seconds.
const POISON_SCALE: f64 = 0.001;

#[tokio::test]
async fn a_poison_job_backs_off_reaches_the_dlq_after_max_receive_count_deliveries_and_fails_with_its_error(
) {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    let aws = TestAws::with_scale(POISON_SCALE).await;
    p.index.config.clock = aws.clock.clone();
    p.index.config.index_queue_url = aws.index_queue.clone();
    p.index.config.embed_batch = 4;
    let clock = aws.clock.clone();
    let job = p
        .parsed("uploads/poison.md", read_law(&law_paths()[3]).1.as_bytes())
        .await;
    // The index job goes to the squeezed queue, whose redrive policy leads to its DLQ.
    p.index
        .queue
        .send(&aws.index_queue, job.encode())
        .await
        .unwrap();
    // The first insert succeeds, every later one fails: the first attempt leaves vectors behind.
    let down = failing_after_one_insert(&p);
    let mut deliveries: Vec<Instant> = Vec::new();
    let started = Instant::now();
    let dead = loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never dead-lettered"
        );
        let report = docpipe_cli::dev_runner::pump_once(
            &aws.clients.sqs,
            &aws.index_queue,
            &aws.region,
            1,
            1,
            Duration::ZERO,
            |e| docpipe_pipeline::handlers::index::handle_sqs(&down, e),
        )
        .await
        .unwrap();
        if let Some(report) = report {
            deliveries.push(Instant::now());
            assert_eq!(report.failed_ids().len(), 1, "{:?}", report.lines);
        }
        let dead = aws.drain(&aws.index_dlq, 1).await;
        if !dead.is_empty() {
            break dead;
        }
    };
    assert_eq!(deliveries.len() as u32, clock.max_receive_count);
    // Never sooner than the backoff the clock gives (SQS rounds to whole seconds).
    for (n, pair) in deliveries.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        let backoff = clock.backoff(n as u32 + 1);
        assert!(
            gap + Duration::from_millis(300) >= backoff,
            "delivery {} came {gap:?} after the one before, under its backoff {backoff:?}",
            n + 2
        );
    }

    assert_given_up(&p, &job, &dead, &clock).await;
    p.cleanup().await;
}

/// The pipeline's index service over a Milvus whose first insert succeeds and every later one
/// fails.
fn failing_after_one_insert(p: &Pipeline) -> docpipe_pipeline::services::IndexService {
    let vectors: Arc<dyn docpipe_vector::VectorIndex> = Arc::new({
        let mut down = HookedVectorIndex::new(p.milvus.clone());
        down.before_insert = Box::new(|n| {
            if n > 1 {
                Err(vector_outage("insert"))
            } else {
                Ok(())
            }
        });
        down
    });
    docpipe_pipeline::services::IndexService {
        db: p.db.db.clone(),
        objects: p.index.objects.clone(),
        queue: p.index.queue.clone(),
        embedder: p.index.embedder.clone(),
        generations: p.generations_over(vectors.clone()),
        vectors,
        config: p.index.config.clone(),
        events: p.index.events.clone(),
    }
}

/// The dead letter, handled: the run failed with the queue's count and its last error, no vectors
/// left, and one attempt and one backoff per delivery, then the give-up, in its events.
async fn assert_given_up(
    p: &Pipeline,
    job: &docpipe_core::model::JobMessage,
    dead: &[String],
    clock: &docpipe_core::clock::Clock,
) {
    let service = p.dead_letters();
    let mut batch = helpers::sqs_batch(dead);
    batch.records[0]
        .attributes
        .insert("ApproximateReceiveCount".into(), "9".into());
    let report = docpipe_pipeline::handlers::dlq::handle_sqs(&service, batch).await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    let doc = p.doc(&job.doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    let expected = format!("gave up after {} attempts: ", clock.max_receive_count);
    assert!(
        doc.error_message.starts_with(&expected) && doc.error_message.contains("injected"),
        "{}",
        doc.error_message
    );
    let r = run(p, job.run_id).await;
    assert_eq!(r.run_status, RunStatus::Failed);
    assert_eq!(r.index_attempts as u32, clock.max_receive_count);
    assert_eq!(
        p.milvus.count(&job.doc_id, None).await.unwrap(),
        0,
        "no vectors left"
    );
    let kinds = run_event_kinds(&p.db, &job.doc_id).await;
    let count = |kind: &str| {
        kinds
            .iter()
            .filter(|(s, k)| s == "index" && k == kind)
            .count() as u32
    };
    assert_eq!(count("attempt"), clock.max_receive_count, "{kinds:?}");
    assert_eq!(count("backoff"), clock.max_receive_count, "{kinds:?}");
    assert_eq!(count("gave_up"), 1, "{kinds:?}");
    helpers::assert_outcomes_announced(p, std::slice::from_ref(&job.doc_id)).await;
}

/// Every document of the batch ends `indexed`, each history shows it queued and then running.
async fn assert_all_indexed(p: &Pipeline, doc_ids: &[String], limit: Duration) {
    let statuses = wait_terminal(&p.db, doc_ids, limit).await;
    let not_indexed: Vec<_> = statuses
        .iter()
        .filter(|(_, s)| **s != DocStatus::Indexed)
        .collect();
    assert_eq!(
        statuses.len(),
        doc_ids.len(),
        "every upload became a document"
    );
    assert!(not_indexed.is_empty(), "not indexed: {not_indexed:?}");
    helpers::assert_outcomes_announced(p, doc_ids).await;
}

#[tokio::test]
async fn a_backlog_of_150_documents_waits_longer_than_any_lease_and_all_end_indexed() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // Index work that takes time, as e5 on two cores does: the last documents wait in the index
    // queue for many leases and grace periods.
    let runner = DevRunner::spawn(
        &p,
        helpers::TEST_TIME_SCALE,
        &[("DOCPIPE_HASH_DELAY_MS", "12".into())],
    );
    let mut doc_ids = Vec::new();
    for path in law_paths().iter().take(150) {
        let (name, text) = read_law(path);
        let key = format!("uploads/backlog/{name}");
        p.aws.put(&key, text.as_bytes()).await;
        doc_ids.push(docpipe_core::ids::derived_doc_id(&p.aws.bucket, &key));
    }
    assert_all_indexed(&p, &doc_ids, Duration::from_secs(600)).await;

    let lease = p.aws.clock.lease;
    let client = p.db.client().await;
    let waits: Vec<f64> = client
        .query_typed(
            "SELECT EXTRACT(EPOCH FROM (a.occurred_at - q.occurred_at))::float8
             FROM run_events q JOIN run_events a ON a.run_id = q.run_id
             WHERE q.kind = 'queued' AND q.stage = 'index' AND a.kind = 'attempt' AND a.stage = 'index'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(waits.len(), doc_ids.len(), "one index attempt each");
    let longest = waits.iter().cloned().fold(0.0, f64::max);
    assert!(
        longest > 3.0 * lease.as_secs_f64(),
        "the backlog must make documents wait several leases ({lease:?}); the longest wait was {longest:.1} s"
    );
    let redrives: i64 = client
        .query_typed_one(
            "SELECT COUNT(*) FROM run_events WHERE kind = 'redrive'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(redrives, 0, "a backlog is never re-driven");
    drop(client);
    for doc_id in &doc_ids {
        let kinds = run_event_kinds(&p.db, doc_id).await;
        let queued = kinds
            .iter()
            .position(|k| k == &("index".into(), "queued".into()));
        let running = kinds
            .iter()
            .position(|k| k == &("index".into(), "attempt".into()));
        assert!(
            matches!((queued, running), (Some(q), Some(r)) if q < r),
            "{doc_id}: {kinds:?}"
        );
    }
    for doc_id in doc_ids.iter().step_by(15) {
        let doc = p.doc(doc_id).await.unwrap();
        assert_eq!(
            p.milvus.count(doc_id, doc.current_run_id).await.unwrap(),
            doc.chunk_count as usize,
            "{doc_id}"
        );
    }
    drop(runner);
    p.cleanup().await;
}

#[tokio::test]
async fn an_invocation_past_its_timeout_is_stopped_and_the_document_still_ends_indexed() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let marker = std::env::temp_dir().join(helpers::unique("docpipe-hang-"));
    // The floor this test needs: a small law with the hashing embedder indexes in well under a
    // second in a debug build.
    let floor = 5.0;
    // The first index call blocks its thread for an hour: only killing the process ends it.
    let runner = DevRunner::spawn(
        &p,
        helpers::TEST_TIME_SCALE,
        &[
            ("DOCPIPE_HASH_HANG_ONCE", marker.display().to_string()),
            ("DOCPIPE_TIMEOUT_FLOOR_SECS", floor.to_string()),
        ],
    );
    // The dev runner's clock: the template's, scaled, with this floor. The index function's
    // timeout is the one it cuts the invocation off at.
    let mut vars: std::collections::HashMap<_, _> = helpers::clock_env(helpers::TEST_TIME_SCALE)
        .into_iter()
        .collect();
    vars.insert("DOCPIPE_TIMEOUT_FLOOR_SECS".into(), floor.to_string());
    let timeout = helpers::clock_from(vars).index.function_timeout;
    assert!(
        timeout.as_secs_f64() > floor,
        "the scaled timeout ({timeout:?}), not the floor, is what applies"
    );
    let (name, text) = read_law(&law_paths()[4]);
    let key = format!("uploads/{name}");
    p.aws.put(&key, text.as_bytes()).await;
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, &key);
    assert_all_indexed(&p, std::slice::from_ref(&doc_id), Duration::from_secs(180)).await;
    assert!(marker.exists(), "the hang fired");
    let log = runner.log_text();
    let cut_off = format!("[index] timed out after {:.1} s", timeout.as_secs_f64());
    assert!(
        log.contains(&cut_off),
        "the invocation was cut off at the index function's timeout ({cut_off:?}): {log}"
    );
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(
        p.milvus.count(&doc_id, None).await.unwrap(),
        doc.chunk_count as usize,
        "exactly one set of vectors"
    );
    let r = run(&p, doc.current_run_id.unwrap()).await;
    assert!(r.index_attempts >= 2, "{}", r.index_attempts);
    let kinds = run_event_kinds(&p.db, &doc_id).await;
    // The killed attempt's lease ran out: either the sweeper saw it first and re-drove the job,
    // or the message came back and the next attempt took the lease over; the history says which.
    let events = docpipe_db::run_events::list_for_doc(&**p.db.client().await, &doc_id)
        .await
        .unwrap();
    assert!(
        events.iter().any(|e| e.stage == "index"
            && ((e.kind == "redrive" && e.message.contains("lease of attempt 1 ran out"))
                || e.kind == "lease_expired")),
        "{kinds:?}"
    );
    let _ = std::fs::remove_file(&marker);
    drop(runner);
    p.cleanup().await;
}

#[tokio::test]
async fn the_templates_clock_is_consistent_and_reaches_every_resource() {
    let template =
        docpipe_cli::template::Template::load(&helpers::workspace_root().join("template.yaml"))
            .unwrap();
    // The deployed values, unscaled, pass the rules every function checks at start.
    let clock = helpers::template_clock(1.0);
    assert!(clock.problems().is_empty(), "{:?}", clock.problems());
    // Each queue and function takes its value from the same parameter the environment carries.
    let env: std::collections::HashMap<_, _> = template.clock_env().unwrap().into_iter().collect();
    for (queue, visibility, function, timeout) in [
        (
            "StoreEventsQueue",
            "DOCPIPE_STORE_VISIBILITY_SECS",
            "StoreFunction",
            "DOCPIPE_STORE_TIMEOUT_SECS",
        ),
        (
            "ParseQueue",
            "DOCPIPE_PARSE_VISIBILITY_SECS",
            "ParseFunction",
            "DOCPIPE_PARSE_TIMEOUT_SECS",
        ),
        (
            "IndexQueue",
            "DOCPIPE_INDEX_VISIBILITY_SECS",
            "IndexFunction",
            "DOCPIPE_INDEX_TIMEOUT_SECS",
        ),
    ] {
        assert_eq!(
            template.queue_property(queue, "VisibilityTimeout").unwrap(),
            env.get(visibility).cloned(),
            "{queue}"
        );
        assert_eq!(
            template
                .queue_property(queue, "MessageRetentionPeriod")
                .unwrap(),
            env.get("DOCPIPE_QUEUE_RETENTION_SECS").cloned(),
            "{queue}"
        );
        assert_eq!(
            template.max_receive_count(queue).unwrap(),
            env.get("DOCPIPE_MAX_RECEIVE_COUNT").cloned(),
            "{queue}"
        );
        assert_eq!(
            template.function_timeout(function).unwrap(),
            env.get(timeout).cloned(),
            "{function}"
        );
        let source = template.event_source(queue).unwrap();
        assert_eq!(source.function, function);
        assert!(
            source.max_concurrency.is_some(),
            "{queue} sets MaximumConcurrency"
        );
    }
    // A job that fails transiently is retried for longer than two index visibility periods, so an
    // outage that long ends in `indexed`, not in the DLQ.
    let budget: Duration = (1..clock.max_receive_count).map(|n| clock.backoff(n)).sum();
    assert!(
        budget > clock.index.visibility * 2,
        "the retry budget {budget:?} does not outlast two index visibility periods"
    );
    // And a set that breaks a rule is refused, with the reason.
    let mut vars: std::collections::HashMap<String, String> = env.into_iter().collect();
    vars.insert("DOCPIPE_LEASE_SECS".into(), "4000".into());
    let mut reader = docpipe_core::env::EnvReader::with_lookup(move |k| vars.get(k).cloned());
    let _ = docpipe_core::clock::Clock::read(&mut reader);
    let err = reader.finish().unwrap_err().to_string();
    assert!(
        err.contains("lease (4000 s) is longer than the parse queue's visibility"),
        "{err}"
    );
}

#[tokio::test]
async fn poison_documents_fail_with_their_reason_and_do_not_hold_back_a_healthy_one() {
    let p = Pipeline::new(Pipeline::hash()).await;
    const HANGS: &str = "毒丸甲：此条永不结束";
    const BALLOONS: &str = "毒丸乙：此条耗尽内存";
    let floor = 5.0;
    let runner = DevRunner::spawn(
        &p,
        helpers::TEST_TIME_SCALE,
        &[
            // Two poisons whose index call never returns, two whose index call grows past the
            // index function's MemorySize: killed at the timeout, and at the memory limit.
            ("DOCPIPE_HASH_HANG_ON", HANGS.into()),
            ("DOCPIPE_HASH_BALLOON_ON", BALLOONS.into()),
            ("DOCPIPE_TIMEOUT_FLOOR_SECS", floor.to_string()),
        ],
    );
    // The dev runner's clock: the template's, scaled, with this floor.
    let mut vars: std::collections::HashMap<_, _> = helpers::clock_env(helpers::TEST_TIME_SCALE)
        .into_iter()
        .collect();
    vars.insert("DOCPIPE_TIMEOUT_FLOOR_SECS".into(), floor.to_string());
    let clock = helpers::clock_from(vars);
    let (name, law) = read_law(&law_paths()[4]);
    let mut poisons = Vec::new();
    for (i, marker) in [HANGS, BALLOONS, HANGS, BALLOONS].iter().enumerate() {
        let key = format!("uploads/poison-{i}-{name}");
        let text = format!("{law}\n\n第九百条 {marker}（{i}）\n");
        p.aws.put(&key, text.as_bytes()).await;
        poisons.push(docpipe_core::ids::derived_doc_id(&p.aws.bucket, &key));
    }
    let healthy_key = format!("uploads/healthy-{name}");
    p.aws.put(&healthy_key, law.as_bytes()).await;
    let healthy = docpipe_core::ids::derived_doc_id(&p.aws.bucket, &healthy_key);

    // The index function has two workers and four poisons hold them: the healthy upload still
    // gets one once a poisoned invocation is stopped, within one delivery's clock.
    let one_delivery = clock.index.function_timeout + clock.lease + clock.backoff(1);
    let started = Instant::now();
    assert_all_indexed(
        &p,
        std::slice::from_ref(&healthy),
        one_delivery * 3 + Duration::from_secs(30),
    )
    .await;
    let healthy_after = started.elapsed();

    // Each poison ends failed with what happened, after the template's abandoned attempts, well
    // before its message's receive count runs out.
    let cycle = (1..=clock.max_abandoned_attempts)
        .map(|n| clock.index.function_timeout + clock.lease + clock.backoff(n))
        .sum::<Duration>();
    let statuses = wait_terminal(&p.db, &poisons, cycle * 4 + Duration::from_secs(60)).await;
    let log = runner.log_text();
    for doc_id in &poisons {
        assert_eq!(
            statuses.get(doc_id),
            Some(&DocStatus::Failed),
            "{doc_id}: {log}"
        );
        let doc = p.doc(doc_id).await.unwrap();
        let expected = format!(
            "index did not finish within {} s, {} times",
            clock.index.function_timeout.as_secs_f64(),
            clock.max_abandoned_attempts
        );
        assert!(
            doc.error_message.contains(&expected),
            "{doc_id}: {} (expected {expected})",
            doc.error_message
        );
        assert_eq!(
            p.milvus.count(doc_id, None).await.unwrap(),
            0,
            "a failed run leaves nothing searchable"
        );
    }
    assert!(log.contains("[index] timed out after"), "{log}");
    assert!(
        log.contains("[index] ran out of memory") && log.contains("over its MemorySize of 1024 MB"),
        "the dev runner stops a function over its template memory: {log}"
    );
    println!(
        "healthy indexed after {:.1} s; poisons failed after {:.1} s",
        healthy_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    drop(runner);
    p.cleanup().await;
}

/// A retry commits its run, then its send fails (the API answers 503). On a busy queue (never
/// empty) the sweeper still sends the job once the lost-job grace has passed, because the run
/// records that its job was never sent; the document ends indexed.
#[tokio::test]
async fn a_retry_whose_send_failed_is_sent_by_the_sweeper_even_on_a_busy_queue() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, law) = read_law(&law_paths()[4]);
    let doc_id = p.ingest(&format!("uploads/{name}"), law.as_bytes()).await;
    let flaky = helpers::FlakyQueue {
        inner: p.store.queue.clone(),
        failing: true.into(),
    };
    let deps = docpipe_pipeline::stages::retry::RetryDeps {
        db: &p.db.db,
        objects: p.store.objects.as_ref(),
        queue: &flaky,
        parse_queue_url: &p.aws.parse_queue,
        stage_deadline_secs: 900,
        max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
    };
    let err = docpipe_pipeline::stages::retry::retry(&deps, &doc_id)
        .await
        .expect_err("the send fails");
    assert!(
        matches!(err, docpipe_pipeline::stages::retry::RetryError::Queue(_)),
        "{err}"
    );
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Stored);
    let run_id = doc.current_run_id.unwrap();

    // A busy queue: other documents' jobs wait on it the whole time.
    for i in 0..3 {
        p.store
            .queue
            .send(
                &p.aws.parse_queue,
                docpipe_core::model::JobMessage::new(format!("other-{i}"), 1).encode(),
            )
            .await
            .unwrap();
    }
    // Within the grace nothing is re-driven; after it, the unsent job is.
    assert!(sweep_once(&p).await.actions.is_empty());
    tokio::time::sleep(p.aws.clock.lost_job_grace + Duration::from_secs(1)).await;
    let report = sweep_once(&p).await;
    assert!(
        report.actions.iter().any(|a| matches!(a,
            Swept::Redriven { run_id: r, reason, .. } if *r == run_id && reason.contains("never sent"))),
        "{:?} {:?}",
        report.actions,
        report.problems
    );
    let jobs = p.parse_jobs().await;
    assert!(
        jobs.iter().any(|j| j.run_id == run_id),
        "the job is on the queue: {jobs:?}"
    );
    assert!(
        !run(&p, run_id).await.job_unsent,
        "sent, and marked so: the next sweep leaves it"
    );
    p.drive(&doc_id).await;
    assert_eq!(p.doc(&doc_id).await.unwrap().status, DocStatus::Indexed);
    p.cleanup().await;
}

/// An index attempt that failed after some of its batches goes on from what it recorded: the
/// next attempt inserts only the rest (a batch inserted but never recorded goes first), and the
/// run ends with exactly one vector per chunk.
#[tokio::test]
async fn a_retried_index_attempt_goes_on_from_what_the_last_one_recorded() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    let job = p
        .parsed("uploads/resume.md", largest_law().as_bytes())
        .await;
    // The third batch reaches Milvus, then the call "fails": in Milvus, but never recorded.
    let mut failing = helpers::HookedVectorIndex::new(p.milvus.clone());
    failing.after_insert = Box::new(|n| {
        if n == 3 {
            Err(helpers::vector_outage("insert"))
        } else {
            Ok(())
        }
    });
    let mut deps = p.index.deps();
    deps.vectors = &failing;
    let err = docpipe_pipeline::stages::index::index_job(&deps, &job)
        .await
        .expect_err("Milvus failed");
    assert!(err.is_retryable(), "{err}");
    assert_eq!(run(&p, job.run_id).await.index_progress, 8);

    let counting = helpers::HookedVectorIndex::new(p.milvus.clone());
    let mut deps = p.index.deps();
    deps.vectors = &counting;
    let done = docpipe_pipeline::stages::index::index_job(&deps, &job)
        .await
        .expect("second attempt");
    let IndexOutcome::Indexed { chunks, .. } = done else {
        panic!("{done:?}")
    };
    let inserts = counting.inserts.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        inserts,
        (chunks - 8).div_ceil(4),
        "only the rest of {chunks} chunks"
    );
    assert_eq!(run(&p, job.run_id).await.index_progress as usize, chunks);
    let doc = p.doc(&job.doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Indexed);
    assert_eq!(p.milvus.count(&job.doc_id, None).await.unwrap(), chunks);
    p.cleanup().await;
}

/// A document whose index work does not fit one invocation stops before its timeout, records how
/// far it got, and the next deliveries go on from there until it is indexed.
#[tokio::test]
async fn a_document_too_large_for_one_invocation_indexes_across_deliveries() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.embed_batch = 4;
    // Slow embedding (25 ms a passage) against a 2 s function: a few batches per delivery.
    p.index.config.clock.index.function_timeout = Duration::from_secs(2);
    p.index.embedder = Arc::new(docpipe_embed::HashEmbedder::new(384).unwrap().with_drill(
        docpipe_embed::hash::Drill {
            delay_per_passage: Duration::from_millis(25),
            ..Default::default()
        },
    ));
    let job = p.parsed("uploads/large.md", largest_law().as_bytes()).await;
    let mut deliveries = 0;
    let mut progress = Vec::new();
    let chunks = loop {
        deliveries += 1;
        assert!(deliveries <= 50, "no end in sight: {progress:?}");
        match docpipe_pipeline::stages::index::index_job(&p.index.deps(), &job).await {
            Ok(IndexOutcome::Indexed { chunks, .. }) => break chunks,
            Ok(IndexOutcome::Continued { done, .. }) => {
                let recorded = run(&p, job.run_id).await.index_progress;
                assert_eq!(recorded as usize, done, "the run records how far it got");
                progress.push(recorded);
            }
            other => panic!("{other:?}"),
        }
    };
    assert!(
        deliveries >= 2,
        "it did not need more than one delivery: {chunks} chunks"
    );
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert_eq!(p.milvus.count(&job.doc_id, None).await.unwrap(), chunks);
    assert_eq!(p.doc(&job.doc_id).await.unwrap().status, DocStatus::Indexed);
    println!("{chunks} chunks in {deliveries} deliveries: {progress:?}");
    p.cleanup().await;
}

/// A document that needs more deliveries than its queue's `MaxReceiveCount` still ends indexed:
/// a delivery that made progress sends the job on as a fresh message, so progress never spends the
/// receives after which SQS moves a message to the dead-letter queue. Through the dev runner, on
/// the template's clock (scaled), with the queue's redrive policy as the template sets it.
#[tokio::test]
async fn a_document_needing_more_deliveries_than_max_receive_count_ends_indexed() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // The floor a small debug build needs, so the index function's timeout is the scaled one.
    let floor = 5.0;
    let mut vars: std::collections::HashMap<_, _> = helpers::clock_env(helpers::TEST_TIME_SCALE)
        .into_iter()
        .collect();
    vars.insert("DOCPIPE_TIMEOUT_FLOOR_SECS".into(), floor.to_string());
    let clock = helpers::clock_from(vars);
    // Embedding slowed so that three batches of four passages fill a delivery's working time (four
    // fifths of the function's timeout): the longest law then needs many more deliveries than
    // the queue allows receives.
    let passage_ms = clock.index.function_timeout.mul_f64(0.8).as_millis() / 12;
    let runner = DevRunner::spawn(
        &p,
        helpers::TEST_TIME_SCALE,
        &[
            ("DOCPIPE_TIMEOUT_FLOOR_SECS", floor.to_string()),
            ("DOCPIPE_EMBED_BATCH", "4".into()),
            ("DOCPIPE_HASH_DELAY_MS", passage_ms.to_string()),
        ],
    );
    let key = "uploads/many-deliveries.md";
    p.aws.put(key, largest_law().as_bytes()).await;
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    assert_all_indexed(&p, std::slice::from_ref(&doc_id), Duration::from_secs(600)).await;

    let deliveries: i64 = p
        .db
        .client()
        .await
        .query_typed_one(
            "SELECT COUNT(*) FROM run_events e JOIN document_processing_runs r ON r.run_id = e.run_id
             WHERE r.doc_id = $1 AND e.kind = 'attempt' AND e.stage = 'index'",
            &[(&doc_id, tokio_postgres::types::Type::TEXT)],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        deliveries > i64::from(clock.max_receive_count),
        "the document needed {deliveries} deliveries, not more than MaxReceiveCount ({}): the test proves nothing",
        clock.max_receive_count
    );
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(
        p.milvus.count(&doc_id, doc.current_run_id).await.unwrap(),
        doc.chunk_count as usize
    );
    println!(
        "{} chunks in {deliveries} deliveries (MaxReceiveCount {})",
        doc.chunk_count, clock.max_receive_count
    );
    drop(runner);
    p.cleanup().await;
}

/// The corpus' longest law: many chunks.
fn largest_law() -> String {
    let path = law_paths()
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("laws");
    read_law(&path).1
}
