//! Re-embedding, blue/green: `POST /index/rebuild` fills a new collection from the stored chunks
//! through the index queue while search answers from the old one; documents indexed and deleted
//! meanwhile reach both; one compare-and-set switches search; one rebuild at a time; a cancel
//! drops the new collection; a step that dies is taken up again once its lease ran out.

use docpipe_db::generations::{self, Generation, State};
use docpipe_pipeline::handlers::sqs::Handled;
use docpipe_pipeline::services::IndexService;
use docpipe_vector::VectorIndex;
use helpers::{sqs_batch, Pipeline};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hash embedder of another dimension: another model as far as the collection can tell, one the
/// local stack runs without a model file. A delay per passage makes the copy take several steps
/// on the template's clock.
fn other_embedder(delay_ms: u64) -> Value {
    json!({
        "DOCPIPE_EMBEDDER": "hash",
        "DOCPIPE_EMBED_DIM": "256",
        "DOCPIPE_HASH_DELAY_MS": delay_ms.to_string(),
    })
}

fn law(name: &str, n: usize) -> String {
    let mut text = format!("# {name}\n\n## 第一章 总则\n\n");
    for i in 1..=n {
        text.push_str(&format!(
            "第{i}条 {name}第{i}条规定，用人单位应当依法订立书面合同并按时支付劳动报酬，编号{i}。\n\n"
        ));
    }
    text
}

async fn generation(p: &Pipeline, id: i64) -> Generation {
    generations::get(&**p.db.client().await, id)
        .await
        .unwrap()
        .expect("the generation")
}

/// Delivers the index queue to `service` until `done` holds of the generation; a message that
/// failed comes back after the template's first backoff, as the index function's hold-back
/// returns it.
async fn pump_until(
    p: &Pipeline,
    service: &IndexService,
    id: i64,
    done: impl Fn(&Generation) -> bool,
) -> Generation {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let g = generation(p, id).await;
        if done(&g) {
            return g;
        }
        assert!(
            Instant::now() < deadline,
            "the rebuild did not get there: {g:?}"
        );
        let bodies = p.aws.drain(&p.aws.index_queue, 10).await;
        if bodies.is_empty() {
            continue;
        }
        let report =
            docpipe_pipeline::handlers::index::handle_sqs(service, sqs_batch(&bodies)).await;
        for (body, outcome) in bodies.iter().zip(&report.outcomes) {
            if !matches!(outcome, Handled::Done(_)) {
                helpers::return_after_backoff(&p.aws, &p.aws.index_queue, body).await;
            }
        }
    }
}

/// A POST as a reviewer (the index's routes are a reviewer's acts).
async fn send_step(p: &Pipeline, id: i64, step: i64) {
    send_step_body(
        p,
        &docpipe_pipeline::stages::rebuild::RebuildMessage::new(id, step).encode(),
    )
    .await;
}

async fn send_step_body(p: &Pipeline, body: &str) {
    p.aws
        .clients
        .sqs
        .send_message()
        .queue_url(&p.aws.index_queue)
        .message_body(body)
        .send()
        .await
        .unwrap();
}

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-docpipe-role", "reviewer")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// Runs `docpipe ARGS… --api-url BASE` as the binary does; what it printed.
async fn cli(base: &str, args: &[&str]) -> String {
    let mut argv = vec!["docpipe"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--api-url", base]);
    let cmd = docpipe_cli::parse(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let mut out = Vec::new();
    if let Err(e) = docpipe_cli::run(cmd, &mut out).await {
        panic!("{argv:?}: {}", docpipe_cli::error_line(&e));
    }
    String::from_utf8(out).unwrap()
}

async fn get_index(base: &str) -> Value {
    reqwest::get(format!("{base}/index"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn collection(name: &str) -> docpipe_vector::MilvusIndex {
    docpipe_vector::MilvusIndex::connect(&helpers::milvus_url(), None, name)
        .await
        .unwrap()
}

/// The vectors one document holds in a collection, read at Strong consistency.
async fn held(name: &str, doc_id: &str) -> usize {
    collection(name).await.count(doc_id, None).await.unwrap()
}

/// A rebuild's collection outlives the test's own (which `cleanup` drops).
async fn drop_collection(name: &str) {
    let _ = collection(name).await.drop_collection().await;
}

#[tokio::test]
async fn a_rebuild_fills_a_new_collection_while_search_answers_and_switches_in_one_step() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut docs = Vec::new();
    for i in 0..4 {
        let doc = p
            .ingest_indexed(
                &format!("uploads/law{i}.md"),
                law(&format!("第{i}号条例"), 6).as_bytes(),
            )
            .await;
        docs.push(doc);
    }
    // One law longer than a step's batch: copied in parts, across steps.
    let long = p
        .ingest_indexed("uploads/long.md", law("长条例", 80).as_bytes())
        .await;
    assert!(
        long.chunk_count as usize > 2 * p.index.config.embed_batch,
        "{}",
        long.chunk_count
    );
    docs.push(long);
    for d in &docs {
        p.wait_searchable(&d.doc_id).await;
    }
    let base = helpers::serve_api(&p).await;
    let old = p.milvus.collection().to_string();

    // A client searching throughout: not one search may fail or come back empty.
    let stop = Arc::new(AtomicBool::new(false));
    let (searches, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let searcher = {
        let (base, stop, searches, failures) = (
            base.clone(),
            stop.clone(),
            searches.clone(),
            failures.clone(),
        );
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            while !stop.load(Ordering::SeqCst) {
                let answer = http
                    .post(format!("{base}/search"))
                    .json(&json!({ "query": "用人单位应当依法订立书面合同", "mode": "dense" }))
                    .send()
                    .await;
                let hits = match answer {
                    Ok(a) if a.status() == 200 => a
                        .json::<Value>()
                        .await
                        .ok()
                        .and_then(|v| v["hits"].as_array().map(Vec::len))
                        .unwrap_or(0),
                    _ => 0,
                };
                searches.fetch_add(1, Ordering::SeqCst);
                if hits == 0 {
                    failures.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let (status, started) = post(
        &base,
        "/index/rebuild",
        json!({ "embedder": other_embedder(30), "grace_secs": 0 }),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id = started["generation"].as_i64().unwrap();
    let new = started["collection"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    // One at a time.
    let (status, busy) = post(&base, "/index/rebuild", json!({ "embedder": "hash" })).await;
    assert_eq!(status, 409, "{busy}");
    assert!(busy.to_string().contains("rebuild-running"), "{busy}");

    // A first step, then a document indexed and one deleted while the rebuild runs.
    let g = pump_until(&p, &p.index, id, |g| g.step >= 1).await;
    assert!(
        !g.walked,
        "one step did it all; the test needs several: {g:?}"
    );
    let progress = get_index(&base).await;
    assert_eq!(progress["rebuild"]["generation"], id);
    assert!(
        progress["rebuild"]["progress"]["chunks_done"]
            .as_i64()
            .unwrap()
            > 0,
        "{progress}"
    );
    assert!(
        progress["rebuild"]["progress"]["chunks_total"]
            .as_i64()
            .unwrap()
            >= 24,
        "{progress}"
    );
    let late = p
        .ingest_indexed("uploads/late.md", law("迟到条例", 3).as_bytes())
        .await;
    let gone = &docs[0];
    let deleted = reqwest::Client::new()
        .delete(format!("{base}/documents/{}", gone.doc_id))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    // The test's own ingest drained the index queue, the rebuild's next step with it: sent again
    // as it stands (the sweeper does so for a quiet rebuild; see the faults drill).
    let g = generation(&p, id).await;
    send_step(&p, id, g.step).await;

    let parted = std::cell::Cell::new(false);
    let g = pump_until(&p, &p.index, id, |g| {
        parted.set(parted.get() || g.partial.is_some());
        g.state == State::Active
    })
    .await;
    assert!(
        parted.get(),
        "the long law was never left in part by a step"
    );
    stop.store(true, Ordering::SeqCst);
    searcher.await.unwrap();
    let report = g.check_report.clone().expect("the check's report");
    assert_eq!(report["missing"], 0, "{report}");
    assert_eq!(
        report["docs"], 5,
        "four left of the first five, and the late one: {report}"
    );

    // Everything live is in the new collection, with the new dimension; the deleted document in
    // neither.
    for d in docs.iter().skip(1).chain(std::iter::once(&late)) {
        let d = p.doc(&d.doc_id).await.unwrap();
        assert_eq!(
            held(&new, &d.doc_id).await,
            d.chunk_count as usize,
            "{}",
            d.doc_id
        );
    }
    assert_eq!(held(&new, &gone.doc_id).await, 0);
    assert_eq!(held(&old, &gone.doc_id).await, 0);
    let index = get_index(&base).await;
    assert_eq!(index["active"]["generation"], id, "{index}");
    assert_eq!(index["active"]["dimension"], 256, "{index}");
    assert!(index["rebuild"].is_null(), "{index}");

    // Search now reads the new collection, with its embedder.
    tokio::time::sleep(docpipe_pipeline::adapters::generations::STALE_AFTER).await;
    let (status, found) = post(
        &base,
        "/search",
        json!({ "query": "迟到条例第2条", "mode": "dense" }),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert!(!found["hits"].as_array().unwrap().is_empty(), "{found}");
    let n = searches.load(Ordering::SeqCst);
    assert!(n >= 10, "the client searched {n} times");
    assert_eq!(
        failures.load(Ordering::SeqCst),
        0,
        "of {n} searches, some failed or were empty"
    );

    // A document indexed after the switch goes to the new collection. The stage run with the
    // configured collection, which search no longer reads, cannot commit; the index function,
    // which reads the generations, writes the new one.
    let job = p
        .parsed("uploads/after.md", law("之后条例", 2).as_bytes())
        .await;
    let stale = docpipe_pipeline::stages::index::index_job(&p.index.deps(), &job).await;
    assert!(
        stale
            .as_ref()
            .is_err_and(|e| e.is_retryable() && e.to_string().contains("switched")),
        "{stale:?}"
    );
    let outcome = p.index.run_job(&job).await;
    assert!(
        matches!(
            outcome,
            Ok(docpipe_pipeline::stages::index::IndexOutcome::Indexed { .. })
        ),
        "{outcome:?}"
    );
    assert!(held(&new, &job.doc_id).await > 0);

    // The retired collection goes at the first sweep after its grace (at least
    // `generations::MIN_GRACE_SECS`, so no reader's snapshot outlives it).
    let drop_after = generations::recent(&**p.db.client().await, 10)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.collection == old)
        .and_then(|r| r.drop_after)
        .expect("the retired collection's drop time");
    let wait = (drop_after - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(200)).await;
    p.sweeper().run_once().await.unwrap();
    let retired = generations::recent(&**p.db.client().await, 10)
        .await
        .unwrap();
    let old_row = retired.iter().find(|r| r.collection == old).unwrap();
    assert_eq!(old_row.state, State::Dropped, "{old_row:?}");
    p.cleanup().await;
    drop_collection(&new).await;
}

#[tokio::test]
async fn a_rebuild_is_cancelled_and_a_manual_one_waits_for_its_switch() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let doc = p
        .ingest_indexed("uploads/one.md", law("一号条例", 3).as_bytes())
        .await;
    let base = helpers::serve_api(&p).await;
    let anyone = reqwest::Client::new()
        .post(format!("{base}/index/rebuild"))
        .json(&json!({ "embedder": "hash" }))
        .send()
        .await
        .unwrap();
    assert_eq!(anyone.status(), 403, "a rebuild is a reviewer's act");
    // Junk is refused with a reason.
    for (body, field) in [
        (json!({ "embedder": 7 }), "embedder"),
        (
            json!({ "embedder": { "DOCPIPE_OPENAI_API_KEY": "x", "DOCPIPE_EMBEDDER": "openai" } }),
            "embedder",
        ),
        (json!({ "embedder": "no-such-model" }), "embedder"),
        (
            json!({ "embedder": "hash", "switch": "sometime" }),
            "switch",
        ),
        (
            json!({ "embedder": "hash", "collection": "bad-name" }),
            "collection",
        ),
        (
            json!({ "embedder": "hash", "grace_secs": -1 }),
            "grace_secs",
        ),
    ] {
        let (status, problem) = post(&base, "/index/rebuild", body.clone()).await;
        assert_eq!(status, 422, "{body}: {problem}");
        assert!(problem.to_string().contains(field), "{body}: {problem}");
    }
    let (status, _) = post(
        &base,
        "/index/rebuild",
        json!({ "embedder": "hash", "extra": 1 }),
    )
    .await;
    assert_eq!(status, 422, "an unknown field");

    let (status, started) = post(
        &base,
        "/index/rebuild",
        json!({ "embedder": other_embedder(0) }),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id = started["generation"].as_i64().unwrap();
    let (status, cancelled) =
        post(&base, "/index/rebuild/cancel", json!({ "generation": id })).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled");
    // Its step finds it cancelled and does nothing.
    let bodies = p.aws.drain(&p.aws.index_queue, 10).await;
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let report = docpipe_pipeline::handlers::index::handle_sqs(&p.index, sqs_batch(&bodies)).await;
    assert!(report.lines[0].contains("cancelled"), "{:?}", report.lines);
    assert_eq!(generation(&p, id).await.step, 0);
    let (status, _) = post(&base, "/index/rebuild/cancel", json!({ "generation": id })).await;
    assert_eq!(status, 409);

    // A manual one, through the CLI: complete, checked, waiting; `index: next` reads it before
    // the switch.
    let started = cli(
        &base,
        &[
            "reindex",
            "--embedder",
            "hash",
            "--set",
            "DOCPIPE_EMBED_DIM=256",
            "--manual",
            "--keep-old",
            "--no-wait",
        ],
    )
    .await;
    assert!(started.starts_with("rebuild "), "{started}");
    let id: i64 = started.split_whitespace().nth(1).unwrap().parse().unwrap();
    let g = pump_until(&p, &p.index, id, |g| g.state == State::Ready).await;
    assert_eq!(g.check_report.as_ref().unwrap()["missing"], 0);
    assert_eq!(
        get_index(&base).await["active"]["generation"]
            .as_i64()
            .map(|a| a != id),
        Some(true)
    );
    let next = g.collection.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, found) = post(
            &base,
            "/search",
            json!({ "query": "一号条例第1条", "mode": "dense", "index": "next" }),
        )
        .await;
        assert_eq!(status, 200, "{found}");
        if !found["hits"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the next collection never answered"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let shown = cli(&base, &["index"]).await;
    assert!(shown.contains(&format!("rebuild {id}  ready")), "{shown}");
    let switched = cli(&base, &["reindex", "--switch", &id.to_string()]).await;
    assert!(
        switched.contains(&format!("search reads {next} now")),
        "{switched}"
    );
    let (status, _) = post(&base, "/index/switch", json!({ "generation": id })).await;
    assert_eq!(status, 409, "a second switch of the same generation");
    // Kept: the sweeper leaves it.
    p.sweeper().run_once().await.unwrap();
    assert!(held(p.milvus.collection(), &doc.doc_id).await > 0);
    assert!(held(&next, &doc.doc_id).await > 0);
    p.cleanup().await;
    drop_collection(&next).await;
}

/// A step whose embedder batches are slow starts no batch that would end past its share of the
/// function's timeout. A step that only checked the clock before each batch started its second
/// batch just before its share ran out; on a slower machine that batch ran past the timeout, the
/// step was killed with nothing recorded, and every redelivery did the same: the rebuild stayed at
/// its step for good (a Milvus restart drill caught it).
#[tokio::test]
async fn a_rebuild_step_starts_no_batch_it_cannot_finish_in_its_time() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let batch = p.index.config.embed_batch;
    let long = p
        .ingest_indexed("uploads/long.md", law("长条例", 200).as_bytes())
        .await;
    assert!(
        long.chunk_count as usize > 4 * batch,
        "{}",
        long.chunk_count
    );
    let base = helpers::serve_api(&p).await;
    // One batch takes 0.45 of the function's timeout (the template's, scaled): the first fits in
    // the step's share, a second would end near the timeout, past the share.
    let timeout = p.index.config.clock.index.function_timeout;
    let delay_ms = (timeout.as_secs_f64() * 0.45 * 1000.0 / batch as f64).ceil() as u64;
    // The template's chunk budget for a step, unscaled (as the dev runner and AWS run it): time
    // alone ends this step, as it ends a step of a slow embedder there.
    let index = docpipe_pipeline::services::IndexService {
        db: p.index.db.clone(),
        objects: p.index.objects.clone(),
        queue: p.index.queue.clone(),
        embedder: p.index.embedder.clone(),
        vectors: p.index.vectors.clone(),
        generations: p.index.generations.clone(),
        config: docpipe_core::config::IndexConfig {
            rebuild_batch: docpipe_core::config::DEFAULT_REBUILD_BATCH_CHUNKS,
            ..p.index.config.clone()
        },
        events: p.index.events.clone(),
    };
    let (status, started) = post(
        &base,
        "/index/rebuild",
        json!({ "embedder": other_embedder(delay_ms), "grace_secs": 0 }),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id = started["generation"].as_i64().unwrap();
    // The first step also creates the new collection; the second is all copying.
    let first = pump_until(&p, &index, id, |g| g.step >= 1).await;
    let g = pump_until(&p, &index, id, |g| g.step >= 2).await;
    assert_eq!(
        g.chunks_done - first.chunks_done,
        batch as i64,
        "one batch of {delay_ms} ms a passage fits in a step, not two: {first:?} → {g:?}"
    );
    assert_eq!(
        g.partial.as_ref().map(|part| part.from as i64),
        Some(g.chunks_done),
        "{g:?}"
    );
    let (status, cancelled) =
        post(&base, "/index/rebuild/cancel", json!({ "generation": id })).await;
    assert_eq!(status, 200, "{cancelled}");
    p.cleanup().await;
    drop_collection(&g.collection).await;
}

/// A rebuild whose next step was lost (sent by nobody: a worker died between its commit and its
/// send) is sent on by the sweeper once it has been quiet longer than any step can take, from the
/// step PostgreSQL records; one that is not quiet yet is left alone.
#[tokio::test]
async fn the_sweeper_sends_a_quiet_rebuild_on() {
    let p = Pipeline::new(Pipeline::hash()).await;
    p.ingest_indexed("uploads/q.md", law("静默条例", 2).as_bytes())
        .await;
    let base = helpers::serve_api(&p).await;
    let (status, started) = post(
        &base,
        "/index/rebuild",
        json!({ "embedder": other_embedder(0) }),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id = started["generation"].as_i64().unwrap();
    assert_eq!(
        p.aws.drain(&p.aws.index_queue, 10).await.len(),
        1,
        "the first step, lost"
    );
    p.sweeper().run_once().await.unwrap();
    assert!(
        p.aws.drain(&p.aws.index_queue, 10).await.is_empty(),
        "not quiet yet: nothing sent"
    );
    let clock = &p.aws.clock;
    let quiet = clock.index.visibility + clock.backoff_max + clock.index.function_timeout;
    p.db.client()
        .await
        .execute_typed(
            "UPDATE vector_generations SET updated_at = NOW() - make_interval(secs => $2)
              WHERE generation_id = $1",
            &[
                (&id, docpipe_db::Type::INT8),
                (&(quiet.as_secs_f64() + 1.0), docpipe_db::Type::FLOAT8),
            ],
        )
        .await
        .unwrap();
    p.sweeper().run_once().await.unwrap();
    let sent = p.aws.drain(&p.aws.index_queue, 10).await;
    assert_eq!(
        sent,
        vec![docpipe_pipeline::stages::rebuild::RebuildMessage::new(id, 0).encode()]
    );
    for body in &sent {
        send_step_body(&p, body).await;
    }
    let g = pump_until(&p, &p.index, id, |g| g.state == State::Active).await;
    assert_eq!(g.check_report.unwrap()["missing"], 0);
    p.cleanup().await;
    drop_collection(&g.collection).await;
}

/// A rebuild step that reached the index queue's dead-letter queue (a long outage) is no document
/// to fail and no upload to record: the DLQ function acknowledges it, and the sweeper sends the
/// quiet rebuild on.
#[tokio::test]
async fn a_dead_lettered_rebuild_step_is_acknowledged_with_nothing_to_record() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let body = docpipe_pipeline::stages::rebuild::RebuildMessage::new(7, 3).encode();
    let report =
        docpipe_pipeline::handlers::dlq::handle_sqs(&p.dead_letters(), sqs_batch(&[body])).await;
    assert!(
        matches!(report.outcomes[0], Handled::Done(_)),
        "{:?}",
        report.lines
    );
    assert!(report.response.batch_item_failures.is_empty());
    let failures: i64 =
        p.db.client()
            .await
            .query_typed_one("SELECT count(*) FROM intake_failures", &[])
            .await
            .unwrap()
            .get(0);
    assert_eq!(failures, 0, "a rebuild step is no upload");
    p.cleanup().await;
}
