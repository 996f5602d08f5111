//! What docpipe tells the systems downstream, end to end on the real stack: each outcome recorded
//! in the transaction of the change it announces, published to the test's own EventBridge bus
//! (moto), delivered to a consumer's queue, once, under a stable id, in its schema.

use crate::versions::{ingest, secrets_law, version_of};
use docpipe_db::outbox::{self, EventType};
use docpipe_db::Type;
use docpipe_pipeline::adapters::event_bus::{BusEntry, BusError, EventBridgeBus, EventBus};
use docpipe_pipeline::publish::Publisher;
use helpers::{corpus_dir, event_ids, sqs_batch, EventSchemas, Pipeline};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn version_id_of(p: &Pipeline, doc_id: &str) -> i64 {
    p.db.client()
        .await
        .query_typed_one(
            "SELECT version_id FROM version_documents WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await
        .unwrap()
        .get("version_id")
}

/// Every event the outbox holds, with whether it was sent.
async fn recorded(p: &Pipeline) -> Vec<outbox::Recorded> {
    outbox::recorded_after(&**p.db.client().await, 0, 10_000)
        .await
        .unwrap()
}

fn of_type(events: &[Value], kind: EventType) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["detail-type"] == kind.as_str())
        .collect()
}

#[tokio::test]
async fn every_outcome_reaches_the_bus_once_with_a_stable_id_and_in_its_schema() {
    use docpipe_db::works::{self, Released, Repealed};
    let p = Pipeline::new(Pipeline::hash()).await;
    let schemas = EventSchemas::load();
    let (_, [older, newer]) = secrets_law();
    let old_doc = ingest(&p, &older, b"").await;
    let new_doc = ingest(&p, &newer, b"").await;
    let (work, _, _) = version_of(&p, &old_doc).await;
    let (old_version, new_version) = (
        version_id_of(&p, &old_doc).await,
        version_id_of(&p, &new_doc).await,
    );
    let broken = p
        .ingest(
            "uploads/broken.pdf",
            &std::fs::read(corpus_dir().join("malformed/random64k.pdf")).unwrap(),
        )
        .await;
    assert_eq!(p.doc(&broken).await.unwrap().status.as_str(), "failed");
    let note = p
        .ingest_indexed(
            "uploads/note.md",
            "# 备忘\n\n一份将被删除的说明。\n".as_bytes(),
        )
        .await
        .doc_id;
    let deps = docpipe_pipeline::stages::delete::DeleteDeps {
        db: &p.db.db,
        objects: p.store.objects.as_ref(),
        vectors: p.milvus.as_ref(),
        artifacts_bucket: &p.aws.bucket,
    };
    docpipe_pipeline::stages::delete::delete(&deps, &note)
        .await
        .unwrap();
    assert_eq!(
        works::repeal(&**p.db.client().await, work, Some("2030-01-01"), None)
            .await
            .unwrap(),
        Repealed::Done
    );

    // Published as a function publishes after its batch: a (stale) index job for a document
    // already indexed changes nothing, and the batch's end sends what is due.
    let stale = docpipe_core::model::JobMessage::new(&old_doc, 1);
    docpipe_pipeline::handlers::index::handle_sqs(&p.index, sqs_batch(&[stale.encode()])).await;
    let delivered = p.aws.delivered_events(Duration::from_secs(2)).await;
    schemas.assert_valid(&delivered);

    let outbox = recorded(&p).await;
    assert!(outbox.iter().all(|r| r.sent), "every event was sent");
    let recorded_ids: BTreeSet<String> =
        outbox.iter().map(|r| r.outgoing.event_id.clone()).collect();
    let delivered_ids = event_ids(&delivered);
    assert_eq!(
        delivered_ids.len(),
        recorded_ids.len(),
        "each event delivered once: {delivered_ids:?}"
    );
    assert_eq!(
        delivered_ids.into_iter().collect::<BTreeSet<_>>(),
        recorded_ids
    );
    for kind in EventType::ALL {
        assert!(
            !of_type(&delivered, kind).is_empty(),
            "no {} among {:?}",
            kind.as_str(),
            event_ids(&delivered)
        );
    }

    let indexed: BTreeSet<&str> = of_type(&delivered, EventType::DocumentIndexed)
        .iter()
        .map(|e| e["detail"]["doc_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        indexed,
        BTreeSet::from([old_doc.as_str(), new_doc.as_str(), note.as_str()])
    );
    let failed = of_type(&delivered, EventType::DocumentFailed);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["detail"]["doc_id"], broken);
    assert_eq!(failed[0]["detail"]["stage"], "parse");
    assert!(!failed[0]["detail"]["reason"].as_str().unwrap().is_empty());
    let deleted = of_type(&delivered, EventType::DocumentDeleted);
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0]["detail"]["doc_id"], note);

    let superseded = of_type(&delivered, EventType::VersionSuperseded);
    assert_eq!(superseded.len(), 1, "{superseded:?}");
    assert_eq!(superseded[0]["detail"]["version_id"], old_version);
    assert_eq!(
        superseded[0]["detail"]["superseded_by_version_id"],
        new_version
    );
    assert_eq!(of_type(&delivered, EventType::VersionReleased).len(), 2);
    assert_eq!(of_type(&delivered, EventType::VersionIndexed).len(), 2);

    // The article changes are the diff route's, between the two versions.
    let changed = of_type(&delivered, EventType::ArticlesChanged);
    assert_eq!(changed.len(), 1);
    let detail = &changed[0]["detail"];
    assert_eq!(detail["from_version_id"], old_version);
    assert_eq!(detail["to_version_id"], new_version);
    let pipeline = &p;
    let articles = |v: i64| async move {
        works::version_articles(&**pipeline.db.client().await, v)
            .await
            .unwrap()
            .unwrap()
            .into_iter()
            .map(docpipe_search::diff::Article::from_block)
            .collect::<Vec<_>>()
    };
    let diff =
        docpipe_search::diff::diff(&articles(old_version).await, &articles(new_version).await);
    assert_eq!(
        detail["counts"],
        serde_json::to_value(&diff.counts).unwrap()
    );
    assert!(
        diff.counts.modified + diff.counts.added + diff.counts.removed > 0,
        "the two versions differ: {:?}",
        diff.counts
    );
    assert_eq!(
        detail["modified"].as_array().unwrap().len(),
        diff.counts.modified.min(docpipe_db::announce::MAX_LISTED)
    );
    let repealed = of_type(&delivered, EventType::WorkRepealed);
    assert_eq!(repealed.len(), 1);
    assert_eq!(repealed[0]["detail"]["work_id"], work);
    assert_eq!(repealed[0]["detail"]["repealed_on"], "2030-01-01");

    // Announcing the same thing again is no new event.
    assert!(matches!(
        works::release(
            &**p.db.client().await,
            work,
            &new_doc,
            "test:reviewer",
            None
        )
        .await
        .unwrap(),
        Released::Already { .. }
    ));
    assert_eq!(recorded(&p).await.len(), outbox.len());

    // At least once: sent again (a publisher that died before recording its send), every event
    // carries the id it had, so a consumer deduplicates on it.
    p.db.client()
        .await
        .batch_execute("UPDATE event_outbox SET sent_at = NULL, next_attempt_at = NOW()")
        .await
        .unwrap();
    p.index
        .events
        .flush(&p.db.db, &p.aws.clock, docpipe_pipeline::publish::PER_SWEEP)
        .await;
    let again = p.aws.delivered_events(Duration::from_secs(2)).await;
    assert_eq!(
        event_ids(&again).into_iter().collect::<BTreeSet<_>>(),
        recorded_ids
    );
    for first in &delivered {
        let same = again
            .iter()
            .find(|e| e["detail"]["event_id"] == first["detail"]["event_id"])
            .unwrap();
        assert_eq!(
            same["detail"], first["detail"],
            "a re-sent event is the same event"
        );
    }
    p.cleanup().await;
}

/// The test's real bus behind a switch: down, every call fails as an unreachable endpoint does.
struct SwitchedBus {
    inner: EventBridgeBus,
    down: AtomicBool,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl EventBus for SwitchedBus {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn put(&self, entries: &[BusEntry]) -> Result<Vec<Option<String>>, BusError> {
        self.calls.fetch_add(1, SeqCst);
        if self.down.load(SeqCst) {
            return Err(BusError {
                bus: self.name().to_string(),
                source: "connection refused (the bus is down in this drill)".into(),
            });
        }
        self.inner.put(entries).await
    }
}

#[tokio::test]
async fn an_event_bridge_outage_loses_no_event_and_the_outbox_drains_after() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    let schemas = EventSchemas::load();
    let bus = Arc::new(SwitchedBus {
        inner: EventBridgeBus::new(p.aws.eventbridge.clone(), p.aws.events_bus.clone()),
        down: AtomicBool::new(true),
        calls: AtomicUsize::new(0),
    });
    let publisher = Publisher::new(bus.clone());
    p.store.events = publisher.clone();
    p.parse.events = publisher.clone();
    p.index.events = publisher.clone();
    let mut docs = Vec::new();
    for i in 0..3 {
        let body = format!("# 第{i}号通知\n\n第一条 本通知自发布之日起施行。编号{i}。\n");
        docs.push(
            p.ingest_indexed(&format!("uploads/outage-{i}.md"), body.as_bytes())
                .await
                .doc_id,
        );
    }
    // The functions try after their batch, and the bus is down.
    let stale = docpipe_core::model::JobMessage::new(&docs[0], 1);
    docpipe_pipeline::handlers::index::handle_sqs(&p.index, sqs_batch(&[stale.encode()])).await;
    assert!(bus.calls.load(SeqCst) >= 1, "the batch tried to publish");
    let held = recorded(&p).await;
    assert!(held.len() >= 3, "{held:?}");
    assert!(
        held.iter().all(|r| !r.sent),
        "nothing was sent while the bus was down"
    );
    let why: Vec<String> =
        p.db.client()
            .await
            .query("SELECT last_error FROM event_outbox", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
    assert!(why.iter().all(|w| w.contains("bus is down")), "{why:?}");
    assert!(p
        .aws
        .delivered_events(Duration::from_secs(1))
        .await
        .is_empty());

    // The bus is back: the sweeper, on the template's period, drains the outbox; a failed event
    // waits its backoff, never forever.
    bus.down.store(false, SeqCst);
    let mut sweeper = p.sweeper();
    sweeper.events = publisher.clone();
    let deadline = Instant::now() + p.aws.clock.backoff_max + p.aws.clock.sweep_period * 4;
    loop {
        sweeper.run_once().await.unwrap();
        let backlog = outbox::backlog(&**p.db.client().await).await.unwrap();
        if backlog.unsent == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the outbox still holds {} events after the bus came back",
            backlog.unsent
        );
        tokio::time::sleep(p.aws.clock.sweep_period).await;
    }
    let delivered = p.aws.delivered_events(Duration::from_secs(2)).await;
    schemas.assert_valid(&delivered);
    let ids = event_ids(&delivered);
    let recorded_ids: BTreeSet<String> = recorded(&p)
        .await
        .into_iter()
        .map(|r| r.outgoing.event_id)
        .collect();
    assert_eq!(ids.len(), recorded_ids.len(), "each once: {ids:?}");
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), recorded_ids);
    for doc in &docs {
        assert!(
            of_type(&delivered, EventType::DocumentIndexed)
                .iter()
                .any(|e| e["detail"]["doc_id"] == *doc),
            "{doc} indexed during the outage was announced after it"
        );
    }
    p.cleanup().await;
}

#[tokio::test]
async fn an_api_write_publishes_its_events_before_it_answers() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, [older, _]) = secrets_law();
    let law = ingest(&p, &older, b"").await;
    let (work, _, _) = version_of(&p, &law).await;
    let note = p
        .ingest_indexed(
            "uploads/api-note.md",
            "# 说明\n\n一份经由接口删除的说明。\n".as_bytes(),
        )
        .await
        .doc_id;
    // What the ingest recorded goes first, so that only the API's own events are left.
    p.index
        .events
        .flush(&p.db.db, &p.aws.clock, docpipe_pipeline::publish::PER_SWEEP)
        .await;
    p.aws.delivered_events(Duration::from_secs(1)).await;

    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let repeal = http
        .post(format!("{base}/works/{work}/repeal"))
        .header("x-docpipe-role", "reviewer")
        .json(&serde_json::json!({ "repealed_on": "2031-01-01" }))
        .send()
        .await
        .unwrap();
    assert_eq!(repeal.status(), 200);
    let delete = http
        .delete(format!("{base}/documents/{note}"))
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 204);
    // No sweeper and no flush here: the API published them itself.
    let delivered = p.aws.delivered_events(Duration::from_secs(2)).await;
    EventSchemas::load().assert_valid(&delivered);
    let kinds: BTreeSet<&str> = delivered
        .iter()
        .map(|e| e["detail-type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["WorkRepealed", "DocumentDeleted"]),
        "{delivered:?}"
    );
    let unsent = outbox::backlog(&**p.db.client().await).await.unwrap();
    assert_eq!(unsent.unsent, 0);
    p.cleanup().await;
}

#[tokio::test]
async fn a_search_is_a_read_and_publishes_nothing_though_it_is_a_post() {
    let p = Pipeline::new(Pipeline::hash()).await;
    p.ingest_indexed(
        "uploads/read.md",
        "# 说明\n\n第一条 只读的查询不发布事件。\n".as_bytes(),
    )
    .await;
    // Ingested through the stages, not a batch: its events are due and unsent.
    let before = outbox::backlog(&**p.db.client().await).await.unwrap();
    assert!(before.unsent >= 1);
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    for (path, body) in [
        (
            "/search",
            serde_json::json!({ "query": "只读的查询", "mode": "keyword" }),
        ),
        (
            "/citations/verify",
            serde_json::json!({ "passage": "依照《中华人民共和国民法典》第一条。" }),
        ),
    ] {
        let answer = http
            .post(format!("{base}{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
    }
    let after = outbox::backlog(&**p.db.client().await).await.unwrap();
    assert_eq!(
        after.unsent, before.unsent,
        "a read leaves the outbox to the writers"
    );
    assert!(p
        .aws
        .delivered_events(Duration::from_secs(1))
        .await
        .is_empty());
    p.cleanup().await;
}
