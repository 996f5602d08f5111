//! The HTTP API against the real stack, two ways: over HTTP against the router served on
//! 127.0.0.1 (as the dev runner serves it), and as API Gateway HTTP API (payload 2.0) events fed
//! to the same router (as lambda_http feeds it in Lambda). Each test has its own database, bucket,
//! queues and Milvus collection.

use axum::http::StatusCode;
use docpipe_api_fn::lazy_index::LazyMilvus;
use docpipe_api_fn::{ActorSource, ApiConfig, ApiState};
use docpipe_core::config::Secret;
use docpipe_core::model::{DocStatus, JobMessage};
use docpipe_db::Type;
use docpipe_vector::VectorIndex;
use helpers::{law_paths, law_probe, read_law};
use helpers::{sha256_hex, sqs_batch, workspace_root, Pipeline};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

const TOKEN: &str = "test-webhook-token-0123456789";
const PROBLEMS: &str = "https://docpipe.dev/problems/";
/// The doc id the sample events in `events/api-*.json` name.
const EVENT_DOC_ID: &str = "doc_0123456789abcdef0123456789abcdef";

struct Api {
    p: Pipeline,
    base: String,
    http: reqwest::Client,
    lambda: axum::Router,
    config: ApiConfig,
}

fn config_for(p: &Pipeline) -> ApiConfig {
    ApiConfig {
        reviewer_scope: docpipe_api_fn::DEFAULT_REVIEWER_SCOPE.to_string(),
        dev_sigv4_keys: None,
        tenancy: Default::default(),
        bucket: p.aws.bucket.clone(),
        parse_queue_url: p.aws.parse_queue.clone(),
        index_queue_url: p.aws.index_queue.clone(),
        upload_url_ttl: Duration::from_secs(600),
        download_url_ttl: Duration::from_secs(300),
        webhook_token: Some(Secret::new(TOKEN)),
        webhook_token_secret_arn: None,
        stage_deadline_secs: 900,
        max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
        max_body_bytes: 64 * 1024,
        max_receive_count: Some(p.aws.clock.max_receive_count),
    }
}

fn state_for(
    p: &Pipeline,
    config: ApiConfig,
    source: ActorSource,
    vectors: Arc<dyn VectorIndex>,
) -> Arc<ApiState> {
    Arc::new(ApiState::new(
        p.db.db.clone(),
        &p.aws.clients,
        p.index.embedder.clone(),
        vectors,
        p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
        config,
        source,
    ))
}

impl Api {
    async fn new() -> Api {
        let p = Pipeline::new(Pipeline::hash()).await;
        let config = config_for(&p);
        let base = helpers::serve_state(state_for(
            &p,
            config.clone(),
            ActorSource::Local,
            p.milvus.clone(),
        ))
        .await;
        // IAM callers name their tenant by their role's tag, read from the emulator's IAM.
        helpers::iam_role_with_tags(
            "docpipe-operator",
            &[(docpipe_api_fn::principal_tags::TENANT_TAG, "default")],
        )
        .await;
        let lambda = docpipe_api_fn::router(Arc::new(
            ApiState::new(
                p.db.db.clone(),
                &p.aws.clients,
                p.index.embedder.clone(),
                p.milvus.clone(),
                p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
                config.clone(),
                ActorSource::Lambda,
            )
            .with_principal_tags(helpers::principal_tags()),
        ));
        Api {
            p,
            base,
            http: reqwest::Client::new(),
            lambda,
            config,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        read(r).await.into()
    }

    /// As a reviewer (the dev API's role header): releasing and repealing are a reviewer's acts.
    async fn post_as_reviewer(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let r = self
            .http
            .post(self.url(path))
            .header("x-docpipe-role", "reviewer")
            .json(body)
            .send()
            .await
            .unwrap();
        read(r).await.into()
    }

    async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let r = self
            .http
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap();
        read(r).await.into()
    }

    async fn retry(&self, doc_id: &str, key: Option<&str>) -> Answer {
        let mut req = self
            .http
            .post(self.url(&format!("/documents/{doc_id}/retry")));
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        read(req.send().await.unwrap()).await
    }

    async fn delete(&self, doc_id: &str) -> Answer {
        let r = self
            .http
            .delete(self.url(&format!("/documents/{doc_id}")))
            .send()
            .await
            .unwrap();
        read(r).await
    }

    /// Registers through the API and returns the answer's body.
    async fn register(&self, body: Value) -> Value {
        let (status, answer) = self.post("/documents", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        answer
    }

    /// Feeds an API Gateway event (JSON text) to the Lambda-sourced router.
    async fn lambda(&self, event: &str) -> Answer {
        let request = lambda_http::request::from_str(event).expect("an HTTP API event");
        let response = self.lambda.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Answer {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
                .collect(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    async fn query_i64(&self, sql: &str, doc_id: &str) -> i64 {
        self.p
            .db
            .client()
            .await
            .query_typed_one(sql, &[(&doc_id, Type::VARCHAR)])
            .await
            .unwrap()
            .get(0)
    }
}

/// A status, its headers and its JSON body (Null when there is none).
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: std::collections::HashMap<String, String>,
    body: Value,
}

impl From<Answer> for (StatusCode, Value) {
    fn from(a: Answer) -> Self {
        (a.status, a.body)
    }
}

async fn read(r: reqwest::Response) -> Answer {
    let status = StatusCode::from_u16(r.status().as_u16()).unwrap();
    let headers = r
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let bytes = r.bytes().await.unwrap();
    Answer {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// An RFC 9457 problem of the given kind and status.
fn assert_problem(a: &Answer, status: u16, kind: &str, what: &str) {
    assert_eq!(a.status.as_u16(), status, "{what}: {:?}", a.body);
    assert_eq!(
        a.headers.get("content-type").map(String::as_str),
        Some("application/problem+json"),
        "{what}"
    );
    assert_eq!(
        a.body["type"],
        format!("{PROBLEMS}{kind}"),
        "{what}: {}",
        a.body
    );
    assert_eq!(a.body["status"], status, "{what}");
    assert!(
        a.body["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{what}"
    );
    assert!(
        a.body["detail"].as_str().is_some_and(|t| !t.is_empty()),
        "{what}"
    );
    assert!(a.headers.contains_key("x-request-id"), "{what}");
}

fn laws(n: usize) -> Vec<(String, String)> {
    law_paths().iter().take(n).map(|p| read_law(p)).collect()
}

async fn fetch(url: &str) -> Vec<u8> {
    let r = reqwest::get(url).await.unwrap();
    assert!(r.status().is_success(), "GET {url}: {}", r.status());
    r.bytes().await.unwrap().to_vec()
}

fn event(name: &str, doc_id: &str) -> String {
    std::fs::read_to_string(workspace_root().join("events").join(name))
        .unwrap()
        .replace(EVENT_DOC_ID, doc_id)
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_registered_upload_flows_through_the_pipeline_and_every_read_endpoint_shows_it() {
    let api = Api::new().await;
    let (_, text) = laws(1).remove(0);
    let r = api
        .http
        .post(api.url("/documents"))
        .header("X-Docpipe-Actor", "alice")
        .json(&json!({
            "doc_name": "民法典 (test)",
            "file_name": "law one.md",
            "content_type": "text/markdown",
            "regulation_type": "law",
            "version": "2020",
            "tags": ["civil", "prc"],
            "metadata": {"source": "test"}
        }))
        .send()
        .await
        .unwrap();
    let reg = read(r).await;
    assert_eq!(reg.status, StatusCode::CREATED, "{}", reg.body);
    let doc_id = reg.body["doc_id"].as_str().unwrap().to_string();
    assert!(docpipe_core::ids::is_valid_doc_id(&doc_id));
    assert_eq!(reg.headers["location"], format!("/documents/{doc_id}"));
    assert_eq!(reg.body["status"], "pending");
    assert_eq!(
        reg.body["object_name"],
        format!("uploads/default/{doc_id}/law one.md")
    );
    assert_eq!(reg.body["upload_headers"]["Content-Type"], "text/markdown");
    let run_id = reg.body["run_id"].as_i64().unwrap();

    upload_and_store(&api, &reg, &text, &doc_id, run_id).await;
    api.p.drive(&doc_id).await;
    let blocks_total = assert_document_view(&api, &doc_id, run_id, &text).await;
    assert_runs_history_and_artifacts(&api, &doc_id, run_id).await;
    assert_structure_nests(&api, &doc_id).await;
    assert_blocks_page_and_filter(&api, &doc_id, blocks_total).await;

    let (_, download) = api.get(&format!("/documents/{doc_id}/download")).await;
    assert_eq!(
        fetch(download["url"].as_str().unwrap()).await,
        text.as_bytes()
    );
    assert_eq!(download["content_sha256"], sha256_hex(text.as_bytes()));

    // The registration is in the audit log, with who asked and the request's id.
    let audit = docpipe_db::audit::for_target(&**api.p.db.client().await, "document", &doc_id)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].action, "register");
    assert_eq!(audit[0].result, "succeeded");
    assert_eq!(
        (audit[0].actor_type.as_str(), audit[0].actor_id.as_str()),
        ("local", "alice")
    );
    assert_eq!(audit[0].request_id, reg.headers["x-request-id"]);
    assert_eq!(audit[0].detail["run_id"], run_id);
    api.p.cleanup().await;
}

/// The client uploads with the presigned PUT; the bucket notification reaches the store stage,
/// which adopts the registration's waiting run.
async fn upload_and_store(api: &Api, reg: &Answer, text: &str, doc_id: &str, run_id: i64) {
    let put = reqwest::Client::new()
        .put(reg.body["upload_url"].as_str().unwrap())
        .header("Content-Type", "text/markdown")
        .body(text.to_string().into_bytes())
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "presigned PUT: {}", put.status());
    let notifications = api.p.aws.drain(&api.p.aws.store_queue, 1).await;
    assert!(
        notifications.iter().any(|n| n.contains("ObjectCreated")),
        "moto delivered the upload's notification: {notifications:?}"
    );
    let report =
        docpipe_pipeline::handlers::store::handle_sqs(&api.p.store, sqs_batch(&notifications))
            .await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    let doc = api.p.doc(doc_id).await.unwrap();
    assert_eq!(
        doc.status,
        DocStatus::Stored,
        "the store stage knew the registered document"
    );
    assert_eq!(
        doc.current_run_id,
        Some(run_id),
        "and adopted its waiting run"
    );
}

/// The document's view: indexed, with what was registered and every stage of its run; the run's
/// block count.
async fn assert_document_view(api: &Api, doc_id: &str, run_id: i64, text: &str) -> i64 {
    let (status, body) = api.get(&format!("/documents/{doc_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "indexed", "{body}");
    assert_eq!(body["tags"], json!(["civil", "prc"]));
    assert_eq!(body["metadata"], json!({"source": "test"}));
    assert_eq!(body["size_bytes"], text.len());
    assert_eq!(body["deleting"], false);
    let run = &body["current_run"];
    assert_eq!(run["run_id"], run_id);
    assert_eq!(run["trigger_type"], "upload");
    assert_eq!(run["run_status"], "succeeded");
    // Each stage's time is from the previous stage's end (finished: from the run's start), in
    // order, and the stages that do work take some.
    let at = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("{run}"))).unwrap()
    };
    for (stage, from) in [
        ("stored", &run["started_at"]),
        ("parsed", &run["stages"]["stored"]["at"]),
        ("indexed", &run["stages"]["parsed"]["at"]),
        ("finished", &run["started_at"]),
    ] {
        let took = (at(&run["stages"][stage]["at"]) - at(from)).num_milliseconds();
        assert!(took >= 0, "{stage} ends after it starts: {run}");
        assert_eq!(run["stages"][stage]["duration_ms"], took, "{stage}: {run}");
    }
    for stage in ["parsed", "indexed"] {
        assert!(
            run["stages"][stage]["duration_ms"].as_i64().unwrap() > 0,
            "{stage} took time: {run}"
        );
    }
    assert!(
        run["stages"]["finished"]["duration_ms"].as_i64().unwrap()
            >= run["stages"]["indexed"]["duration_ms"].as_i64().unwrap()
                + run["stages"]["parsed"]["duration_ms"].as_i64().unwrap(),
        "{run}"
    );
    let blocks_total = run["counts"]["semantic_blocks"].as_i64().unwrap();
    assert!(blocks_total > 3, "{run}");
    assert!(run["counts"]["chunks"].as_i64().unwrap() > 0);
    assert_eq!(run["failure_stage"], "");
    blocks_total
}

/// One run, its history, and its four artifacts (downloadable, checksums matching; none for
/// another run).
async fn assert_runs_history_and_artifacts(api: &Api, doc_id: &str, run_id: i64) {
    let (_, runs) = api.get(&format!("/documents/{doc_id}/runs")).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);

    let (_, history) = api.get(&format!("/documents/{doc_id}/history")).await;
    let steps: Vec<&str> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["to_status"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["pending", "stored", "parsed", "indexed"]);

    let (_, artifacts) = api.get(&format!("/documents/{doc_id}/artifacts")).await;
    let artifacts = artifacts["artifacts"].as_array().unwrap();
    let types: BTreeSet<&str> = artifacts
        .iter()
        .map(|a| a["artifact_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        BTreeSet::from([
            "layouts",
            "semantic_blocks",
            "structure_nodes",
            "vector_chunks"
        ])
    );
    for a in artifacts {
        let bytes = fetch(a["download_url"].as_str().unwrap()).await;
        assert_eq!(sha256_hex(&bytes), a["checksum"], "{}", a["object_name"]);
    }
    let (status, other_run) = api
        .get(&format!(
            "/documents/{doc_id}/artifacts?run_id={}",
            run_id + 1000
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(other_run["artifacts"].as_array().unwrap().is_empty());
}

/// The heading tree nests, each child deeper than its parent, and counts its nodes.
async fn assert_structure_nests(api: &Api, doc_id: &str) {
    let (_, structure) = api.get(&format!("/documents/{doc_id}/structure")).await;
    fn walk(nodes: &Value, parent_level: i64, count: &mut usize, nested: &mut bool) {
        for n in nodes.as_array().unwrap() {
            *count += 1;
            let level = n["level"].as_i64().unwrap();
            assert!(
                level > parent_level,
                "a child is deeper than its parent: {n}"
            );
            if !n["children"].as_array().unwrap().is_empty() {
                *nested = true;
            }
            walk(&n["children"], level, count, nested);
        }
    }
    let (mut count, mut nested) = (0, false);
    walk(&structure["nodes"], i64::MIN, &mut count, &mut nested);
    assert!(count > 0 && nested, "a law's headings nest: {structure}");
    assert_eq!(structure["node_count"], count);
}

/// Blocks, three at a time, cover every block once, in order; the type and title filters hold.
async fn assert_blocks_page_and_filter(api: &Api, doc_id: &str, blocks_total: i64) {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/documents/{doc_id}/blocks?limit=3&cursor={c}"),
            None => format!("/documents/{doc_id}/blocks?limit=3"),
        };
        let (status, page) = api.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let blocks = page["blocks"].as_array().unwrap();
        assert!(blocks.len() <= 3);
        seen.extend(blocks.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len() as i64, blocks_total);
    let ids: HashSet<&str> = seen
        .iter()
        .map(|b| b["semantic_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), seen.len(), "no block twice");
    let block_type = seen[0]["block_type"].as_str().unwrap().to_string();
    let (_, by_type) = api
        .get(&format!(
            "/documents/{doc_id}/blocks?limit=200&block_type={block_type}"
        ))
        .await;
    let by_type = by_type["blocks"].as_array().unwrap();
    let expected = seen
        .iter()
        .filter(|b| b["block_type"] == block_type.as_str())
        .count();
    assert_eq!(by_type.len(), expected.min(200));
    let title = seen
        .iter()
        .map(|b| b["section_title"].as_str().unwrap())
        .find(|t| !t.is_empty())
        .unwrap()
        .to_string();
    let r = api
        .http
        .get(api.url(&format!("/documents/{doc_id}/blocks")))
        .query(&[("section_title", title.as_str()), ("limit", "200")])
        .send()
        .await
        .unwrap();
    let by_title = read(r).await.body;
    let by_title = by_title["blocks"].as_array().unwrap();
    assert!(!by_title.is_empty());
    assert!(by_title
        .iter()
        .all(|b| b["section_title"] == title.as_str()));
}

#[tokio::test]
async fn the_listing_pages_by_update_time_and_filters() {
    let api = Api::new().await;
    let ids = register_seven(&api).await;
    pages_hold_every_document_once(&api, &ids).await;
    filters_narrow_the_listing(&api, &ids).await;
    updated_since_leaves_out_the_older(&api).await;

    for (path, what) in [
        ("/documents?limit=0", "limit 0"),
        ("/documents?limit=201", "limit over 200"),
        ("/documents?limit=ten", "limit not a number"),
        ("/documents?status=processing", "unknown status"),
        ("/documents?cursor=not-a-cursor!", "malformed cursor"),
        ("/documents?cursor=YjE6MTI", "a blocks cursor"),
        ("/documents?updated_since=yesterday", "not a timestamp"),
        ("/documents?regulation_type=a%00b", "NUL in a filter"),
        ("/documents?colour=red", "unknown parameter"),
    ] {
        let a = read(api.http.get(api.url(path)).send().await.unwrap()).await;
        assert_problem(&a, 400, "invalid-parameter", what);
    }
    api.p.cleanup().await;
}

/// Seven registered documents: law and policy in turn, the first four v1 and the rest v2.
async fn register_seven(api: &Api) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..7 {
        let body = api
            .register(json!({
                "file_name": format!("f{i}.md"),
                "regulation_type": if i % 2 == 0 { "law" } else { "policy" },
                "version": if i < 4 { "v1" } else { "v2" },
            }))
            .await;
        ids.push(body["doc_id"].as_str().unwrap().to_string());
    }
    ids
}

/// Three documents share one updated_at: the doc_id breaks the tie, and no page loses one.
async fn pages_hold_every_document_once(api: &Api, ids: &[String]) {
    api.p
        .db
        .client()
        .await
        .execute_typed(
            "UPDATE documents SET updated_at = '2026-01-01T00:00:00Z' WHERE doc_id = ANY($1)",
            &[(&&ids[1..4], Type::VARCHAR_ARRAY)],
        )
        .await
        .unwrap();
    let expected: Vec<String> = api
        .p
        .db
        .client()
        .await
        .query_typed(
            "SELECT doc_id FROM documents ORDER BY updated_at DESC, doc_id DESC",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut listed = Vec::new();
    let mut path = "/documents?limit=2".to_string();
    let mut pages = 0;
    loop {
        let (status, page) = api.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        pages += 1;
        for d in page["documents"].as_array().unwrap() {
            listed.push(d["doc_id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/documents?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(listed, expected, "every document once, newest update first");
    assert_eq!(pages, 4);
}

/// Filters by regulation type, status and version, alone and together.
async fn filters_narrow_the_listing(api: &Api, ids: &[String]) {
    let (_, policy) = api.get("/documents?regulation_type=policy").await;
    let policy: Vec<&str> = policy["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["doc_id"].as_str().unwrap())
        .collect();
    assert_eq!(policy.len(), 3);
    assert!(policy
        .iter()
        .all(|id| [&ids[1], &ids[3], &ids[5]].iter().any(|x| x == id)));
    let (_, filtered) = api
        .get("/documents?status=pending&version=v2&regulation_type=law")
        .await;
    let filtered: BTreeSet<&str> = filtered["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["doc_id"].as_str().unwrap())
        .collect();
    assert_eq!(filtered, BTreeSet::from([ids[4].as_str(), ids[6].as_str()]));
    let (_, none) = api.get("/documents?status=indexed").await;
    assert!(none["documents"].as_array().unwrap().is_empty());
}

/// An hour ago, written with an offset: the three documents moved to 2026-01-01 are older.
async fn updated_since_leaves_out_the_older(api: &Api) {
    let hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1))
        .with_timezone(&chrono::FixedOffset::east_opt(8 * 3600).unwrap())
        .to_rfc3339();
    let r = api
        .http
        .get(api.url("/documents"))
        .query(&[("updated_since", hour_ago.as_str())])
        .send()
        .await
        .unwrap();
    let since = read(r).await.body;
    assert_eq!(since["documents"].as_array().unwrap().len(), 4, "{since}");
    assert!(since["next_cursor"].is_null());
}

#[tokio::test]
async fn a_retry_opens_one_run_and_an_idempotency_key_replays_it() {
    let api = Api::new().await;
    let (name, text) = laws(1).remove(0);
    let doc_id = api
        .p
        .ingest(&format!("uploads/{name}"), text.as_bytes())
        .await;
    let first_run = api.p.doc(&doc_id).await.unwrap().current_run_id.unwrap();

    let retry_run = concurrent_retries_open_one_run(&api, &doc_id, first_run).await;
    let runs = "SELECT count(*) FROM document_processing_runs WHERE doc_id = $1";
    assert_eq!(
        api.query_i64(runs, &doc_id).await,
        2,
        "one upload run, one retry run"
    );
    let sent = api.p.aws.drain(&api.p.aws.parse_queue, 10).await;
    assert_eq!(sent, vec![JobMessage::new(&doc_id, retry_run).encode()]);

    let again = api.retry(&doc_id, Some("key-one")).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(again.body["run_id"], retry_run);
    assert_eq!(
        again.headers.get("idempotent-replayed").map(String::as_str),
        Some("true")
    );
    assert_eq!(api.query_i64(runs, &doc_id).await, 2);

    // Without a key, or with a new one, while the run is in flight: 409, and the new key is free.
    let busy = api.retry(&doc_id, None).await;
    assert_problem(&busy, 409, "run-in-flight", "retry while in flight");
    assert_eq!(busy.body["run_id"], retry_run);
    let busy = api.retry(&doc_id, Some("key-two")).await;
    assert_problem(
        &busy,
        409,
        "run-in-flight",
        "retry with a new key while in flight",
    );
    let keys = "SELECT count(*) FROM idempotency_keys WHERE scope = 'retry:' || $1";
    assert_eq!(
        api.query_i64(keys, &doc_id).await,
        1,
        "only key-one is recorded"
    );

    abandon_the_overdue_run(&api, &doc_id, retry_run).await;

    // A registered document whose bytes never came cannot be retried; a missing one is a 404.
    let pending = api.register(json!({"file_name": "never.md"})).await;
    let a = api.retry(pending["doc_id"].as_str().unwrap(), None).await;
    assert_problem(&a, 409, "not-retryable", "retry before the upload");
    let a = api.retry(&docpipe_core::ids::random_doc_id(), None).await;
    assert_problem(&a, 404, "not-found", "retry of nothing");

    assert_retries_audited(&api, &doc_id).await;
    api.p.cleanup().await;
}

/// An idempotency key is honoured for `KEY_TTL_SECS` (24 h) from its request: within it a repeat
/// replays the answer; after it the key is a new request (even before the sweeper pruned it); and
/// the sweeper's housekeeping deletes expired keys, leaving younger ones.
#[tokio::test]
async fn an_idempotency_key_expires_after_a_day_and_the_sweeper_prunes_it() {
    use docpipe_db::idempotency::KEY_TTL_SECS;
    let api = Api::new().await;
    let (name, text) = laws(1).remove(0);
    let doc_id = api
        .p
        .ingest(&format!("uploads/{name}"), text.as_bytes())
        .await;
    let first = api.retry(&doc_id, Some("key-day")).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    let retry_run = first.body["run_id"].as_i64().unwrap();
    api.p.drive(&doc_id).await;
    assert_eq!(api.p.doc(&doc_id).await.unwrap().status, DocStatus::Indexed);
    let again = api.retry(&doc_id, Some("key-day")).await;
    assert_eq!(
        again.body["run_id"], retry_run,
        "a repeat within the day replays"
    );
    assert_eq!(again.headers["idempotent-replayed"], "true");

    // A day and a minute later, the same key is a new request: a new run.
    let age = |key: &'static str, secs: i64| {
        let api = &api;
        async move {
            api.p
                .db
                .client()
                .await
                .execute_typed(
                    "UPDATE idempotency_keys SET created_at = NOW() - make_interval(secs => $2)
                     WHERE key = $1",
                    &[(&key, Type::VARCHAR), (&(secs as f64), Type::FLOAT8)],
                )
                .await
                .unwrap()
        }
    };
    assert_eq!(age("key-day", KEY_TTL_SECS + 60).await, 1);
    let later = api.retry(&doc_id, Some("key-day")).await;
    assert_eq!(later.status, StatusCode::ACCEPTED, "{}", later.body);
    assert_ne!(
        later.body["run_id"], retry_run,
        "an expired key opens a new run"
    );
    assert!(!later.headers.contains_key("idempotent-replayed"));
    api.p.drive(&doc_id).await;

    // Housekeeping deletes what is past the day, and only that.
    let young = api.retry(&doc_id, Some("key-young")).await;
    assert_eq!(young.status, StatusCode::ACCEPTED, "{}", young.body);
    assert_eq!(age("key-day", KEY_TTL_SECS + 60).await, 1);
    assert_eq!(age("key-young", KEY_TTL_SECS - 600).await, 1);
    let kept = docpipe_pipeline::upkeep::housekeeping::housekeeping(
        &docpipe_pipeline::upkeep::housekeeping::HousekeepingDeps {
            db: &api.p.db.db,
            objects: api.p.store.objects.as_ref(),
            vectors: api.p.milvus.as_ref(),
            bucket: &api.p.aws.bucket,
            clock: &api.p.aws.clock,
        },
        10,
    )
    .await;
    assert!(kept.problems.is_empty(), "{:?}", kept.problems);
    assert_eq!(kept.idempotency_keys_pruned, 1);
    let keys = "SELECT count(*) FROM idempotency_keys WHERE scope = 'retry:' || $1";
    assert_eq!(api.query_i64(keys, &doc_id).await, 1, "key-young stays");
    api.p.cleanup().await;
}

/// Six concurrent retries with one key: one run, every success names it; its id.
async fn concurrent_retries_open_one_run(api: &Api, doc_id: &str, first_run: i64) -> i64 {
    let answers =
        futures::future::join_all((0..6).map(|_| api.retry(doc_id, Some("key-one")))).await;
    let mut run_ids = BTreeSet::new();
    for a in &answers {
        match a.status {
            StatusCode::ACCEPTED => {
                run_ids.insert(a.body["run_id"].as_i64().unwrap());
            }
            StatusCode::CONFLICT => assert!(
                a.body["type"] == format!("{PROBLEMS}idempotency-key-in-use")
                    || a.body["type"] == format!("{PROBLEMS}run-in-flight"),
                "{}",
                a.body
            ),
            other => panic!("unexpected {other}: {}", a.body),
        }
    }
    assert_eq!(run_ids.len(), 1, "{answers:?}");
    let retry_run = *run_ids.iter().next().unwrap();
    assert_ne!(retry_run, first_run);
    retry_run
}

/// A run past its deadline is abandoned by the next retry, which then indexes.
async fn abandon_the_overdue_run(api: &Api, doc_id: &str, retry_run: i64) {
    api.p
        .db
        .client()
        .await
        .execute_typed(
            "UPDATE document_processing_runs SET deadline_at = NOW() - interval '1 minute'
             WHERE run_id = $1",
            &[(&retry_run, Type::INT8)],
        )
        .await
        .unwrap();
    let took_over = api.retry(doc_id, Some("key-two")).await;
    assert_eq!(took_over.status, StatusCode::ACCEPTED, "{}", took_over.body);
    assert_eq!(took_over.body["abandoned_run"], retry_run);
    let third_run = took_over.body["run_id"].as_i64().unwrap();
    let (_, runs_view) = api.get(&format!("/documents/{doc_id}/runs")).await;
    let listed = runs_view["runs"].as_array().unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0]["run_id"], third_run, "newest first");
    assert_eq!(listed[1]["run_status"], "failed");
    assert_eq!(listed[1]["failure_stage"], "retry");
    api.p.drive(doc_id).await;
    assert_eq!(api.p.doc(doc_id).await.unwrap().status, DocStatus::Indexed);
}

/// Every retry request is audited and closed: two succeeded, one replayed, the rest rejected.
async fn assert_retries_audited(api: &Api, doc_id: &str) {
    let audit = docpipe_db::audit::for_target(&**api.p.db.client().await, "document", doc_id)
        .await
        .unwrap();
    let results: Vec<&str> = audit.iter().map(|r| r.result.as_str()).collect();
    assert!(audit.iter().all(|r| r.action == "retry"));
    assert_eq!(results.len(), 10, "{results:?}");
    assert_eq!(
        results.iter().filter(|r| **r == "succeeded").count(),
        2,
        "{results:?}"
    );
    assert!(
        results.contains(&"replayed") && results.contains(&"rejected"),
        "{results:?}"
    );
    assert!(
        !results.contains(&"started"),
        "every record is closed: {results:?}"
    );
}

#[tokio::test]
async fn a_delete_removes_objects_vectors_and_rows_and_answers_the_same_when_repeated() {
    let api = Api::new().await;
    let (name, text) = laws(1).remove(0);
    let key = format!("uploads/{name}");
    let doc_id = api.p.ingest(&key, text.as_bytes()).await;
    let artifacts = format!("artifacts/{doc_id}/");
    assert!(!api.p.aws.keys(&artifacts).await.is_empty());
    assert!(api.p.milvus.count(&doc_id, None).await.unwrap() > 0);

    let a = api.delete(&doc_id).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert!(api.p.aws.keys(&artifacts).await.is_empty());
    assert!(api.p.aws.keys(&key).await.is_empty());
    assert_eq!(api.p.milvus.count(&doc_id, None).await.unwrap(), 0);
    assert!(api.p.doc(&doc_id).await.is_none());
    for table in [
        "document_processing_runs",
        "document_status_history",
        "semantic_blocks",
    ] {
        let sql = format!("SELECT count(*) FROM {table} WHERE doc_id = $1");
        assert_eq!(api.query_i64(&sql, &doc_id).await, 0, "{table}");
    }
    let (status, _) = api.get(&format!("/documents/{doc_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let again = api.delete(&doc_id).await;
    assert_eq!(
        again.status,
        StatusCode::NO_CONTENT,
        "a repeated delete answers the same"
    );
    let never = api.delete(&docpipe_core::ids::random_doc_id()).await;
    assert_problem(
        &never,
        404,
        "not-found",
        "delete of a document that never existed",
    );

    let audit = docpipe_db::audit::for_target(&**api.p.db.client().await, "document", &doc_id)
        .await
        .unwrap();
    let results: Vec<(&str, &str)> = audit
        .iter()
        .map(|r| (r.action.as_str(), r.result.as_str()))
        .collect();
    assert_eq!(
        results,
        [("delete", "succeeded"), ("delete", "already_deleted")]
    );
    assert!(
        audit[0].detail["objects_removed"].as_u64().unwrap() >= 5,
        "{:?}",
        audit[0]
    );
    api.p.cleanup().await;
}

#[tokio::test]
async fn a_delete_racing_parse_and_index_leaves_no_orphan_object_vector_or_row() {
    let api = Api::new().await;
    let (_, text) = laws(1).remove(0);
    for (i, delay_ms) in [0u64, 40, 120, 300, 500, 700, 1000, 1500, 2000]
        .into_iter()
        .enumerate()
    {
        let key = format!("uploads/race-{i}.md");
        api.p.aws.put(&key, text.as_bytes()).await;
        docpipe_pipeline::handlers::store::handle_notification(
            &api.p.store,
            &helpers::s3_put_event(&api.p.aws.bucket, &key),
        )
        .await
        .unwrap();
        let doc_id = docpipe_core::ids::derived_doc_id(&api.p.aws.bucket, &key);
        let job = JobMessage::new(
            &doc_id,
            api.p.doc(&doc_id).await.unwrap().current_run_id.unwrap(),
        );
        let stages = async {
            let parsed =
                docpipe_pipeline::stages::parse::parse_job(&api.p.parse.deps(), &job).await;
            let indexed =
                docpipe_pipeline::stages::index::index_job(&api.p.index.deps(), &job).await;
            (parsed.is_ok(), indexed.is_ok())
        };
        let deleter = async {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            api.delete(&doc_id).await
        };
        let (_, deleted) = tokio::join!(stages, deleter);
        assert_eq!(
            deleted.status,
            StatusCode::NO_CONTENT,
            "{i}: {}",
            deleted.body
        );
        api.p.aws.drain(&api.p.aws.index_queue, 10).await;

        let leftovers = api.p.aws.keys(&format!("artifacts/{doc_id}/")).await;
        assert!(
            leftovers.is_empty(),
            "{i} ({delay_ms} ms): orphan artifacts {leftovers:?}"
        );
        assert!(
            api.p.aws.keys(&key).await.is_empty(),
            "{i}: orphan original"
        );
        assert_eq!(
            api.p.milvus.count(&doc_id, None).await.unwrap(),
            0,
            "{i} ({delay_ms} ms): orphan vectors"
        );
        for table in [
            "documents",
            "document_processing_runs",
            "structure_nodes",
            "semantic_blocks",
            "document_artifacts",
        ] {
            let sql = format!("SELECT count(*) FROM {table} WHERE doc_id = $1");
            assert_eq!(
                api.query_i64(&sql, &doc_id).await,
                0,
                "{i}: rows left in {table}"
            );
        }
    }
    api.p.cleanup().await;
}

#[tokio::test]
async fn search_answers_validated_hits_and_refuses_bad_requests() {
    let api = Api::new().await;
    let mut docs = Vec::new();
    for (name, text) in laws(2) {
        docs.push((
            api.p
                .ingest(&format!("uploads/{name}"), text.as_bytes())
                .await,
            text,
        ));
    }
    let (first, text) = &docs[0];
    let sentence = law_probe(text);
    a_sentence_finds_its_law_in_every_mode(&api, first, &sentence).await;

    let second = &docs[1].0;
    let (_, only) = api
        .post(
            "/search",
            &json!({"query": sentence, "filters": {"doc_ids": [second]}}),
        )
        .await;
    let only = only["hits"].as_array().unwrap();
    assert!(!only.is_empty());
    assert!(only.iter().all(|h| h["doc_id"] == second.as_str()));

    // Once deleted, a document is never a hit.
    assert_eq!(api.delete(first).await.status, StatusCode::NO_CONTENT);
    let (_, after) = api
        .post("/search", &json!({"query": sentence, "top_k": 50}))
        .await;
    assert!(after["hits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["doc_id"] != first.as_str()));

    for (body, kind, what) in invalid_searches(&sentence) {
        let r = api
            .http
            .post(api.url("/search"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_problem(&read(r).await, 422, kind, what);
    }
    api.p.cleanup().await;
}

/// A sentence of the first law finds it, best first, hybrid by default and in every mode asked.
async fn a_sentence_finds_its_law_in_every_mode(api: &Api, first: &str, sentence: &str) {
    let (status, result) = api
        .post("/search", &json!({"query": sentence, "top_k": 5}))
        .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    let hits = result["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 5);
    assert!(hits.iter().any(|h| h["doc_id"] == first), "{result}");
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first");
    assert_eq!(result["stale_dropped"], 0);
    assert_eq!(result["mode"], "hybrid", "hybrid unless asked otherwise");
    assert_eq!(result["parameters"]["fusion"]["method"], "rrf");
    // The hash embedder has no query adapter: the response says so, and fuses with equal weights.
    assert_eq!(
        result["parameters"]["query_adapter"],
        Value::Null,
        "{result}"
    );
    assert_eq!(
        result["parameters"]["fusion"]["k"],
        docpipe_search::fusion::DEFAULT_FUSION.k
    );
    for mode in ["dense", "keyword", "hybrid"] {
        let (status, r) = api
            .post(
                "/search",
                &json!({"query": sentence, "top_k": 5, "mode": mode}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        assert_eq!(r["mode"], mode);
        assert!(
            r["hits"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["doc_id"] == first),
            "{mode}: {r}"
        );
    }
}

/// Search bodies the API must refuse, with the problem type and what each one tries.
fn invalid_searches(sentence: &str) -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            json!({"query": sentence, "top_k": 0}),
            "validation-failed",
            "top_k 0",
        ),
        (
            json!({"query": sentence, "top_k": 51}),
            "validation-failed",
            "top_k 51",
        ),
        (
            json!({"query": sentence, "top_k": "5"}),
            "invalid-body",
            "top_k a string",
        ),
        (json!({"query": "   "}), "validation-failed", "blank query"),
        (
            json!({"query": "x".repeat(2001)}),
            "validation-failed",
            "query too long",
        ),
        (json!({"top_k": 5}), "invalid-body", "no query"),
        (
            json!({"query": "q", "limit": 5}),
            "invalid-body",
            "unknown field",
        ),
        (
            json!({"query": "q", "filters": {"colour": "red"}}),
            "invalid-body",
            "unknown filter",
        ),
        (
            json!({"query": "q", "filters": {"doc_ids": ["../etc"]}}),
            "validation-failed",
            "bad doc id",
        ),
        (
            json!({"query": "q", "filters": {"tags": ["a\u{0}b"]}}),
            "validation-failed",
            "NUL tag",
        ),
        (
            json!({"query": "q", "mode": "fuzzy"}),
            "invalid-body",
            "unknown mode",
        ),
        (
            json!({"query": "q", "mode": 1}),
            "invalid-body",
            "mode a number",
        ),
    ]
}

#[tokio::test]
async fn bad_input_is_always_a_problem_and_never_a_server_error() {
    let api = Api::new().await;
    let id = docpipe_core::ids::random_doc_id();
    bad_paths_are_problems(&api, &id).await;
    bad_registrations_are_problems(&api).await;
    bad_methods_and_keys_are_problems(&api, &id).await;
    // None of this reached the audit log: bad ids are refused before any query.
    let audited = api
        .p
        .db
        .client()
        .await
        .query_typed_one(
            "SELECT count(*) FROM audit_log WHERE action <> 'register'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(audited, 0);
    api.p.cleanup().await;
}

/// Bad ids, parameters and routes: 400 or 404 problems.
async fn bad_paths_are_problems(api: &Api, id: &str) {
    let get = |path: String| {
        let api = &api;
        async move { read(api.http.get(api.url(&path)).send().await.unwrap()).await }
    };
    for (path, what) in [
        ("/documents/..%2F..%2Fetc%2Fpasswd".to_string(), "traversal"),
        (format!("/documents/{}", "a".repeat(300)), "long id"),
        (
            "/documents/doc_0123456789abcdef0123456789abcde%00/runs".to_string(),
            "NUL in id",
        ),
        (format!("/documents/{id}/blocks?limit=0"), "blocks limit 0"),
        (
            format!("/documents/{id}/blocks?section_title=%01"),
            "control char filter",
        ),
        (
            format!("/documents/{id}/blocks?cursor=%%%"),
            "bad blocks cursor",
        ),
        (format!("/documents/{id}/artifacts?run_id=0"), "run_id 0"),
        (
            format!("/documents/{id}/artifacts?run_id=x"),
            "run_id not a number",
        ),
    ] {
        assert_problem(&get(path).await, 400, "invalid-parameter", what);
    }
    // Well-formed ids that name nothing (imported legacy ids may look like these) are 404s.
    for (path, what) in [
        ("/documents/doc_123".to_string(), "short id"),
        (format!("/documents/{}", id.to_uppercase()), "upper-case id"),
    ] {
        assert_problem(&get(path).await, 404, "not-found", what);
    }
    for sub in [
        "",
        "/runs",
        "/history",
        "/artifacts",
        "/structure",
        "/blocks",
        "/download",
    ] {
        assert_problem(
            &get(format!("/documents/{id}{sub}")).await,
            404,
            "not-found",
            sub,
        );
    }
    assert_problem(
        &get("/nowhere".into()).await,
        404,
        "not-found",
        "unknown route",
    );
}

/// Bodies that are no registration: 400, 413, 415 or 422 problems.
async fn bad_registrations_are_problems(api: &Api) {
    let post_raw = |body: Vec<u8>, content_type: Option<&'static str>| {
        let api = &api;
        async move {
            let mut req = api.http.post(api.url("/documents")).body(body);
            if let Some(ct) = content_type {
                req = req.header("content-type", ct);
            }
            read(req.send().await.unwrap()).await
        }
    };
    let json_ct = Some("application/json");
    assert_problem(
        &post_raw(b"{\"file_name\":".to_vec(), json_ct).await,
        400,
        "malformed-json",
        "truncated JSON",
    );
    assert_problem(
        &post_raw(b"".to_vec(), json_ct).await,
        400,
        "malformed-json",
        "empty body",
    );
    assert_problem(
        &post_raw(b"{\"file_name\":\"a.md\"}".to_vec(), None).await,
        415,
        "unsupported-media-type",
        "no content type",
    );
    let big = serde_json::to_vec(&json!({"file_name": "a.md", "doc_name": "x".repeat(70 * 1024)}))
        .unwrap();
    assert_problem(
        &post_raw(big, json_ct).await,
        413,
        "payload-too-large",
        "70 KiB body",
    );
    for (body, kind, what) in invalid_registrations() {
        let a = post_raw(serde_json::to_vec(&body).unwrap(), json_ct).await;
        assert_problem(&a, 422, kind, what);
    }
}

/// Registration bodies the API must refuse, with the problem type and what each one tries.
fn invalid_registrations() -> Vec<(Value, &'static str, &'static str)> {
    let mut bodies = not_registrations();
    bodies.extend(registrations_that_fail_validation());
    bodies
}

/// Bodies that do not parse as a registration: an unknown or missing field, a wrong shape.
fn not_registrations() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            json!({"file_name": "a.md", "owner": "me"}),
            "invalid-body",
            "unknown field",
        ),
        (
            json!({"doc_name": "no file"}),
            "invalid-body",
            "missing file_name",
        ),
        (
            json!({"file_name": "a.md", "tags": "civil"}),
            "invalid-body",
            "tags not a list",
        ),
        (json!([1, 2]), "invalid-body", "not an object"),
    ]
}

/// Registrations that parse but break a rule: traversal, NUL and control characters, reserved
/// keys, values wider than their column.
fn registrations_that_fail_validation() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            json!({"file_name": "../a.md"}),
            "validation-failed",
            "traversal in file_name",
        ),
        (
            json!({"file_name": ".."}),
            "validation-failed",
            "dot-dot file_name",
        ),
        (
            json!({"file_name": "a\u{0}.md"}),
            "validation-failed",
            "NUL in file_name",
        ),
        (
            json!({"file_name": "a.md", "metadata": {"k": "v\u{0}"}}),
            "validation-failed",
            "NUL in metadata",
        ),
        (
            json!({"file_name": "a.md", "metadata": {"k": [1.7976931348623157e308]}}),
            "validation-failed",
            "a number JSONB cannot give back",
        ),
        (
            json!({"file_name": "a.md", "metadata": {"tags": []}}),
            "validation-failed",
            "reserved metadata key",
        ),
        (
            json!({"file_name": "a.md", "content_type": "text\u{1}/plain"}),
            "validation-failed",
            "control char in content type",
        ),
        (
            json!({"file_name": "a.md", "tags": [""]}),
            "validation-failed",
            "empty tag",
        ),
        (
            json!({"file_name": "a.md", "version": "v".repeat(65)}),
            "validation-failed",
            "long version",
        ),
        (
            json!({"file_name": "a.md", "regulation_type": "类".repeat(129)}),
            "validation-failed",
            "regulation type wider than its column",
        ),
        (
            json!({"file_name": "a.md", "regulation_type": "类".repeat(43)}),
            "validation-failed",
            "regulation type wider than the vector index's 128 bytes",
        ),
        (
            json!({"file_name": "a.md", "version": "版".repeat(22)}),
            "validation-failed",
            "version wider than the vector index's 64 bytes",
        ),
        (
            json!({"file_name": "a.md", "doc_name": "名".repeat(513)}),
            "validation-failed",
            "doc name wider than its column",
        ),
        (
            json!({"file_name": format!("{}.md", "f".repeat(510))}),
            "validation-failed",
            "file name wider than its column",
        ),
        (
            json!({"file_name": "a.md", "content_type": format!("text/plain; x={}", "c".repeat(120))}),
            "validation-failed",
            "content type wider than its column",
        ),
    ]
}

/// Methods a route does not take (405, with Allow) and a bad Idempotency-Key (400).
async fn bad_methods_and_keys_are_problems(api: &Api, id: &str) {
    let a = read(api.http.put(api.url("/documents")).send().await.unwrap()).await;
    assert_problem(&a, 405, "method-not-allowed", "PUT /documents");
    let allow = a.headers.get("allow").cloned().unwrap_or_default();
    assert!(
        allow.contains("GET") && allow.contains("POST"),
        "Allow: {allow}"
    );
    let a = read(
        api.http
            .patch(api.url(&format!("/documents/{id}")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_problem(&a, 405, "method-not-allowed", "PATCH a document");

    let r = api
        .http
        .post(api.url(&format!("/documents/{id}/retry")))
        .header("Idempotency-Key", "has space")
        .send()
        .await
        .unwrap();
    assert_problem(
        &read(r).await,
        400,
        "invalid-parameter",
        "bad Idempotency-Key",
    );
}

#[tokio::test]
async fn the_s3_webhook_wants_its_token_and_stores_what_it_is_told() {
    let api = Api::new().await;
    let (_, text) = laws(1).remove(0);
    let key = "uploads/report 2026.md";
    api.p.aws.put(key, text.as_bytes()).await;
    api.p.aws.drain(&api.p.aws.store_queue, 1).await;
    let sample =
        std::fs::read_to_string(workspace_root().join("events/store-minio-notification.json"))
            .unwrap()
            .replace("docpipe-local", &api.p.aws.bucket)
            .replace("uploads%2Freport+2026.pdf", "uploads%2Freport+2026.md")
            .replace("report 2026.pdf", "report 2026.md");
    let doc_id = the_webhook_refuses_a_missing_or_wrong_token(&api, &sample, key).await;
    the_webhook_stores_once(&api, &sample, &doc_id, &text).await;
    the_webhook_refuses_what_is_not_a_notification_for_its_bucket(&api).await;
    the_webhook_takes_only_keys_under_uploads(&api, &sample, &text).await;
    the_webhook_does_not_exist_without_a_token(&api).await;
    api.p.cleanup().await;
}

/// Posts `body` to the S3 webhook, with `auth` as its Authorization header if there is one.
async fn send_webhook(api: &Api, auth: Option<String>, body: String) -> Answer {
    let mut req = api
        .http
        .post(api.url("/notifications/s3"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(auth) = auth {
        req = req.header("authorization", auth);
    }
    read(req.send().await.unwrap()).await
}

/// No token, a wrong one and a Basic one are 401s and store nothing; the key's doc id.
async fn the_webhook_refuses_a_missing_or_wrong_token(
    api: &Api,
    sample: &str,
    key: &str,
) -> String {
    let a = send_webhook(api, None, sample.to_string()).await;
    assert_problem(&a, 401, "unauthorized", "no token");
    assert_eq!(
        a.headers.get("www-authenticate").map(String::as_str),
        Some("Bearer")
    );
    let a = send_webhook(api, Some(format!("Bearer {TOKEN}x")), sample.to_string()).await;
    assert_problem(&a, 401, "unauthorized", "wrong token");
    let a = send_webhook(api, Some("Basic dXNlcjpwYXNz".into()), sample.to_string()).await;
    assert_problem(&a, 401, "unauthorized", "not a bearer token");
    let doc_id = docpipe_core::ids::derived_doc_id(&api.p.aws.bucket, key);
    assert!(
        api.p.doc(&doc_id).await.is_none(),
        "nothing happened without the token"
    );
    doc_id
}

/// With the token the notification stores the object; the same one again is a duplicate.
async fn the_webhook_stores_once(api: &Api, sample: &str, doc_id: &str, text: &str) {
    let a = send_webhook(api, Some(format!("Bearer {TOKEN}")), sample.to_string()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(
        a.body["result"].as_str().unwrap().contains("stored"),
        "{}",
        a.body
    );
    let doc = api.p.doc(doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Stored);
    assert_eq!(doc.content_sha256, sha256_hex(text.as_bytes()));
    // The store's at-least-once delivery: the same notification again opens no run.
    let a = send_webhook(api, Some(format!("Bearer {TOKEN}")), sample.to_string()).await;
    assert!(
        a.body["result"].as_str().unwrap().contains("duplicate"),
        "{}",
        a.body
    );
}

/// Bad JSON, a body that is no notification and one for another bucket are problems.
async fn the_webhook_refuses_what_is_not_a_notification_for_its_bucket(api: &Api) {
    let auth = Some(format!("Bearer {TOKEN}"));
    assert_problem(
        &send_webhook(api, auth.clone(), "{not json".into()).await,
        400,
        "malformed-json",
        "bad JSON",
    );
    assert_problem(
        &send_webhook(api, auth, "{\"foo\":1}".into()).await,
        422,
        "invalid-body",
        "not a notification",
    );

    let elsewhere =
        std::fs::read_to_string(workspace_root().join("events/store-minio-notification.json"))
            .unwrap();
    assert_problem(
        &send_webhook(api, Some(format!("Bearer {TOKEN}")), elsewhere).await,
        422,
        "validation-failed",
        "another bucket",
    );
}

/// The webhook takes keys under `uploads/` only, as the bucket's own notification does: a key
/// elsewhere in the bucket (beside the parse artifacts, say), even of an object that exists, is a
/// 422 naming the prefix, and nothing is stored or recorded for it.
async fn the_webhook_takes_only_keys_under_uploads(api: &Api, sample: &str, text: &str) {
    for key in ["artifacts/report 2026.md", "elsewhere/report 2026.md"] {
        api.p.aws.put(key, text.as_bytes()).await;
        let encoded = key.replace('/', "%2F").replace(' ', "+");
        let body = sample.replace("uploads%2Freport+2026.md", &encoded);
        assert!(body.contains(&encoded));
        let a = send_webhook(api, Some(format!("Bearer {TOKEN}")), body).await;
        assert_problem(&a, 422, "validation-failed", key);
        assert_eq!(a.body["field"], "Records");
        let detail = a.body["detail"].as_str().unwrap();
        assert!(
            detail.contains("uploads/") && detail.contains(key),
            "{detail}"
        );
        let doc_id = docpipe_core::ids::derived_doc_id(&api.p.aws.bucket, key);
        assert!(api.p.doc(&doc_id).await.is_none(), "{key}: no document");
    }
    let client = api.p.db.client().await;
    let recorded: i64 = client
        .query_typed_one(
            "SELECT count(*) FROM intake_failures WHERE object_name NOT LIKE 'uploads/%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(recorded, 0, "refused, not recorded: the sender was told");
}

/// Without a configured token the webhook does not exist.
async fn the_webhook_does_not_exist_without_a_token(api: &Api) {
    let mut config = api.config.clone();
    config.webhook_token = None;
    let base = helpers::serve_state(state_for(
        &api.p,
        config,
        ActorSource::Local,
        api.p.milvus.clone(),
    ))
    .await;
    let r = api
        .http
        .post(format!("{base}/notifications/s3"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_problem(&read(r).await, 404, "not-found", "webhook disabled");
}

#[tokio::test]
async fn healthz_reports_each_dependency_and_fails_when_one_is_down() {
    let api = Api::new().await;
    let (status, health) = api.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(
        health,
        json!({
            "status": "ok",
            "checks": {
                "database": {"status": "up"},
                "s3": {"status": "up"},
                "milvus": {"status": "up"},
            },
        })
    );

    // A missing bucket and an unreachable Milvus (connected lazily: the API still starts).
    let mut config = api.config.clone();
    config.bucket = format!("{}-missing", api.p.aws.bucket);
    let nowhere = Arc::new(LazyMilvus::new("http://127.0.0.1:9", None, "nowhere"));
    let base = helpers::serve_state(state_for(&api.p, config, ActorSource::Local, nowhere)).await;
    let r = read(
        api.http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    // A status per dependency and nothing more: the route is open to anyone, and why a
    // dependency is down (hosts, ports, bucket and collection names) is the log's business.
    assert_eq!(
        r.body,
        json!({
            "status": "degraded",
            "checks": {
                "database": {"status": "up"},
                "s3": {"status": "down"},
                "milvus": {"status": "down"},
            },
        })
    );
    // What needs no vectors still works.
    let r = read(
        api.http
            .get(format!("{base}/documents"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    // What needs them is a 503, not a 500.
    let r = api
        .http
        .post(format!("{base}/search"))
        .json(&json!({"query": "合同"}))
        .send()
        .await
        .unwrap();
    assert_problem(
        &read(r).await,
        503,
        "service-unavailable",
        "search without Milvus",
    );
    api.p.cleanup().await;
}

/// A search whose vector collection does not exist is an error the API reports, not an empty
/// dense list: once PostgreSQL has indexed documents, dense and hybrid answer 503 naming the
/// collection (a wrong DOCPIPE_MILVUS_COLLECTION, a dropped collection), and keyword still
/// answers. Before anything is indexed, no collection is the truth: no dense hits, no error.
/// Before, every mode answered 200 with whatever the keyword side found.
#[tokio::test]
async fn a_missing_collection_is_a_503_naming_it_once_documents_are_indexed() {
    let api = Api::new().await;
    let (name, text) = laws(1).remove(0);
    let sentence = law_probe(&text);
    let search = |base: String, mode: &'static str| {
        let http = api.http.clone();
        let query = sentence.clone();
        async move {
            read(
                http.post(format!("{base}/search"))
                    .json(&json!({"query": query, "mode": mode}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let a = search(api.base.clone(), "dense").await;
    assert_eq!(a.status, StatusCode::OK, "nothing indexed yet: {}", a.body);
    assert_eq!(a.body["hits"], json!([]));

    api.p
        .ingest_indexed(&format!("uploads/{name}"), text.as_bytes())
        .await;
    let wrong = helpers::unique("t_no_such_");
    let elsewhere = Arc::new(
        docpipe_vector::MilvusIndex::connect(&helpers::milvus_url(), None, &wrong)
            .await
            .unwrap(),
    );
    let base = helpers::serve_state(state_for(
        &api.p,
        api.config.clone(),
        ActorSource::Local,
        elsewhere,
    ))
    .await;
    for mode in ["dense", "hybrid"] {
        let a = search(base.clone(), mode).await;
        assert_problem(&a, 503, "service-unavailable", mode);
        assert_eq!(a.body["collection"], wrong.as_str(), "{}", a.body);
        assert!(
            a.body["detail"].as_str().unwrap().contains(&wrong),
            "{}",
            a.body
        );
    }
    let a = search(base.clone(), "keyword").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(!a.body["hits"].as_array().unwrap().is_empty());
    api.p.cleanup().await;
}

/// `/healthz` is open to anyone, so what it costs must not be the callers' choice: however many
/// ask, the dependencies are probed once per `HEALTH_TTL`, concurrent callers sharing one probe.
#[tokio::test]
async fn healthz_probes_its_dependencies_once_per_interval_however_many_ask() {
    use docpipe_api_fn::health::HEALTH_TTL;
    use std::sync::atomic::Ordering;
    let api = Api::new().await;
    let counted = Arc::new(helpers::HookedVectorIndex::new(api.p.milvus.clone()));
    let state = state_for(
        &api.p,
        api.config.clone(),
        ActorSource::Local,
        counted.clone(),
    );
    let base = helpers::serve_state(state).await;
    let get = || async {
        read(
            api.http
                .get(format!("{base}/healthz"))
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let started = std::time::Instant::now();
    let at_once = futures::future::join_all((0..20).map(|_| get())).await;
    let mut answers = at_once;
    for _ in 0..20 {
        answers.push(get().await);
    }
    assert!(
        started.elapsed() < HEALTH_TTL,
        "the requests took {:?}",
        started.elapsed()
    );
    for a in &answers {
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.body["checks"]["milvus"]["status"], "up");
        assert_eq!(
            a.headers["cache-control"],
            format!("max-age={}", HEALTH_TTL.as_secs())
        );
    }
    assert_eq!(
        counted.counts.load(Ordering::SeqCst),
        1,
        "40 requests within {HEALTH_TTL:?} probe Milvus once"
    );
    // Once the answer is older than the interval, the next caller probes again.
    tokio::time::sleep(HEALTH_TTL + Duration::from_millis(100)).await;
    assert_eq!(get().await.status, StatusCode::OK);
    assert_eq!(counted.counts.load(Ordering::SeqCst), 2);
    api.p.cleanup().await;
}

#[tokio::test]
async fn api_gateway_events_reach_the_same_router_and_the_authorizer_names_the_actor() {
    let api = Api::new().await;
    let (name, text) = laws(1).remove(0);
    let doc_id = api
        .p
        .ingest(&format!("uploads/{name}"), text.as_bytes())
        .await;
    the_read_events_answer_as_over_http(&api, &doc_id).await;
    the_retry_event_replays_by_its_idempotency_key(&api, &doc_id).await;

    // A header cannot claim to be someone else in Lambda: the authorizer's subject is recorded.
    let registered = register_claiming_to_be_mallory(&api, &doc_id).await;
    let client = api.p.db.client().await;
    let audit = docpipe_db::audit::for_target(&**client, "document", &registered)
        .await
        .unwrap();
    assert_eq!(audit[0].actor_type, "user");
    assert_eq!(audit[0].actor_id, "8d6f5f4e-2b1c-4c8a-9a53-5f0e2f4b7c10");
    assert_eq!(audit[0].request_id, "Jf3kLhGxoAMEJdB=");

    the_delete_event_names_the_iam_actor(&api, &client, &doc_id).await;

    // The generic sample event (an unknown path) is answered with a problem by the fallback.
    let sample = std::fs::read_to_string(
        helpers::client_events_dir().join("apigateway-http-api-proxy.json"),
    )
    .unwrap();
    // Its JWT names no tenant: refused before any route is looked at.
    let a = api.lambda(&sample).await;
    assert_problem(
        &a,
        403,
        "tenant-required",
        "the sample event, whose JWT has no tenant claim",
    );
    api.p.cleanup().await;
}

/// The sample read events (get, list, structure, blocks, search, healthz) are answered.
async fn the_read_events_answer_as_over_http(api: &Api, doc_id: &str) {
    let a = api.lambda(&event("api-get-document.json", doc_id)).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["doc_id"], doc_id);
    assert_eq!(a.body["status"], "indexed");
    assert_eq!(
        a.headers["x-request-id"], "Jf3kLhGxoAMEJdD=",
        "API Gateway's request id"
    );
    for (file, status) in [
        ("api-list-documents.json", 200),
        ("api-get-structure.json", 200),
        ("api-get-blocks.json", 200),
        ("api-post-search.json", 200),
        ("api-get-healthz.json", 200),
    ] {
        let a = api.lambda(&event(file, doc_id)).await;
        assert_eq!(a.status.as_u16(), status, "{file}: {}", a.body);
    }
    let a = api.lambda(&event("api-list-documents.json", doc_id)).await;
    assert_eq!(
        a.body["documents"][0]["doc_id"], doc_id,
        "status=indexed lists it"
    );
}

/// The retry event opens a run, and sent again replays it.
async fn the_retry_event_replays_by_its_idempotency_key(api: &Api, doc_id: &str) {
    let retry = event("api-post-retry.json", doc_id);
    let first = api.lambda(&retry).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    let replay = api.lambda(&retry).await;
    assert_eq!(replay.status, StatusCode::ACCEPTED);
    assert_eq!(
        replay.body["run_id"], first.body["run_id"],
        "the event's Idempotency-Key"
    );
}

/// The register event with an actor header naming mallory; the registered doc id.
async fn register_claiming_to_be_mallory(api: &Api, doc_id: &str) -> String {
    let register = event("api-post-document.json", doc_id).replace(
        "\"accept\": \"application/json\",",
        "\"accept\": \"application/json\", \"x-docpipe-actor\": \"mallory\",",
    );
    let a = api.lambda(&register).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    a.body["doc_id"].as_str().unwrap().to_string()
}

/// The delete event comes through an IAM authorizer.
async fn the_delete_event_names_the_iam_actor(
    api: &Api,
    client: &docpipe_db::Client,
    doc_id: &str,
) {
    api.p.drive(doc_id).await;
    let a = api.lambda(&event("api-delete-document.json", doc_id)).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.body);
    let audit = docpipe_db::audit::for_target(&***client, "document", doc_id)
        .await
        .unwrap();
    let who: Vec<(&str, &str, &str)> = audit
        .iter()
        .map(|r| (r.action.as_str(), r.result.as_str(), r.actor_type.as_str()))
        .collect();
    assert_eq!(
        who,
        [
            ("retry", "succeeded", "user"),
            ("retry", "replayed", "user"),
            ("delete", "succeeded", "iam")
        ]
    );
    assert_eq!(
        audit[2].actor_id,
        "arn:aws:sts::123456789012:assumed-role/docpipe-operator/ops-session"
    );
}

#[tokio::test]
async fn the_openapi_spec_and_the_router_name_the_same_routes() {
    let spec: Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace_root().join("openapi.yaml")).unwrap(),
    )
    .unwrap();
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.1."));
    let mut in_spec = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in [
            "get", "put", "post", "delete", "patch", "head", "options", "trace",
        ] {
            if item.get(method).is_some() {
                in_spec.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let in_router: BTreeSet<(String, String)> = docpipe_api_fn::routes()
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let missing_from_spec: Vec<_> = in_router.difference(&in_spec).collect();
    let missing_from_router: Vec<_> = in_spec.difference(&in_router).collect();
    assert!(
        missing_from_spec.is_empty(),
        "served but not in openapi.yaml: {missing_from_spec:?}"
    );
    assert!(
        missing_from_router.is_empty(),
        "in openapi.yaml but not served: {missing_from_router:?}"
    );

    // And the table is what the router really serves: every spec route is answered by a handler,
    // never by the no-route fallback or a 405.
    let api = Api::new().await;
    let id = docpipe_core::ids::random_doc_id();
    for (method, path) in &in_spec {
        let url = api.url(&path.replace("{doc_id}", &id));
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let a = read(
            api.http
                .request(method.clone(), url)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_ne!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(
            !a.body["detail"]
                .as_str()
                .unwrap_or_default()
                .starts_with("no route"),
            "{method} {path}: {}",
            a.body
        );
        assert!(
            a.status.as_u16() < 500 || path == "/healthz",
            "{method} {path}: {}",
            a.body
        );
    }
    api.p.cleanup().await;
}

/// The routes that take no authorization: the health check, and the webhook, whose bearer token
/// the function checks.
const OPEN_ROUTES: [&str; 2] = ["GET /healthz", "POST /notifications/s3"];

fn tagged<'a>(value: &'a serde_yaml::Value, tag: &str) -> Option<&'a serde_yaml::Value> {
    match value {
        serde_yaml::Value::Tagged(t) if t.tag == tag => Some(&t.value),
        _ => None,
    }
}

/// A value as the template writes it in flow style: `!If [UseJwt, JWT, AWS_IAM]`.
fn yaml_text(value: &serde_yaml::Value) -> String {
    use serde_yaml::Value;
    match value {
        Value::Tagged(t) => format!("{} {}", t.tag, yaml_text(&t.value)),
        Value::Sequence(items) => format!(
            "[{}]",
            items.iter().map(yaml_text).collect::<Vec<_>>().join(", ")
        ),
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => serde_yaml::to_string(other).unwrap().trim().to_string(),
    }
}

/// Whether a route key (`GET /documents/{doc_id}`, `ANY /documents/{doc_id}/{proxy+}`,
/// `$default`) takes a request, and how specifically: API Gateway picks the most specific.
fn route_match(route_key: &str, method: &str, path: &str) -> Option<(usize, bool, bool)> {
    if route_key == "$default" {
        return Some((0, false, false));
    }
    let (m, template) = route_key.split_once(' ')?;
    if m != "ANY" && m != method {
        return None;
    }
    let (want, have): (Vec<&str>, Vec<&str>) = (
        template.trim_matches('/').split('/').collect(),
        path.trim_matches('/').split('/').collect(),
    );
    let mut literal = 0;
    for (i, segment) in want.iter().enumerate() {
        if segment.ends_with("+}") {
            return (have.len() > i).then_some((literal, false, m != "ANY"));
        }
        let got = have.get(i)?;
        if segment.starts_with('{') {
            continue;
        }
        if segment != got {
            return None;
        }
        literal += 1;
    }
    (want.len() == have.len()).then_some((literal + 1, true, m != "ANY"))
}

/// What is wrong with the HTTP API's authorization in a template: a route other than the two open
/// ones that is not `AWS_IAM` or, with `AuthMode=jwt`, JWT with the template's authorizer; an
/// open route that is not open; a way to reach a function that bypasses the routes; a route of
/// the router that the template would serve with the wrong authorization.
fn route_authorization_problems(template: &serde_yaml::Value) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = template["Resources"].as_mapping().expect("Resources");
    let expected_type = "!If [UseJwt, JWT, AWS_IAM]";
    let expected_authorizer = "!If [UseJwt, !Ref JwtAuthorizer, !Ref AWS::NoValue]";
    let mut routes: Vec<(String, bool)> = Vec::new();
    for (id, resource) in resources {
        let id = id.as_str().unwrap_or_default();
        let kind = resource["Type"].as_str().unwrap_or_default();
        match kind {
            "AWS::ApiGatewayV2::Route" => {}
            "AWS::Lambda::Url" | "AWS::Serverless::Api" | "AWS::Serverless::HttpApi" => {
                problems.push(format!(
                    "{id}: a {kind} is a way in that bypasses the routes"
                ));
                continue;
            }
            k if k.starts_with("AWS::ApiGateway::") => {
                problems.push(format!("{id}: a REST API ({k}) beside the HTTP API"));
                continue;
            }
            "AWS::Serverless::Function" => {
                if let Some(events) = resource["Properties"]["Events"].as_mapping() {
                    for (name, event) in events {
                        let t = event["Type"].as_str().unwrap_or_default();
                        if matches!(t, "Api" | "HttpApi") {
                            problems.push(format!("{id}: event {name:?} of type {t} adds routes"));
                        }
                    }
                }
                if !resource["Properties"]["FunctionUrlConfig"].is_null() {
                    problems.push(format!("{id}: a function URL bypasses the routes"));
                }
                continue;
            }
            _ => continue,
        }
        let p = &resource["Properties"];
        let key = p["RouteKey"].as_str().unwrap_or_default().to_string();
        if tagged(&p["ApiId"], "!Ref").and_then(|v| v.as_str()) != Some("HttpApi") {
            problems.push(format!("{id} ({key}): not a route of HttpApi"));
        }
        let open = OPEN_ROUTES.contains(&key.as_str());
        if open {
            if p["AuthorizationType"].as_str() != Some("NONE") || !p["AuthorizerId"].is_null() {
                problems.push(format!(
                    "{id} ({key}): must be open (AuthorizationType NONE)"
                ));
            }
        } else {
            if yaml_text(&p["AuthorizationType"]) != expected_type {
                problems.push(format!(
                    "{id} ({key}): AuthorizationType is {}, not {expected_type}",
                    yaml_text(&p["AuthorizationType"])
                ));
            }
            if yaml_text(&p["AuthorizerId"]) != expected_authorizer {
                problems.push(format!(
                    "{id} ({key}): AuthorizerId is {}, not {expected_authorizer}",
                    yaml_text(&p["AuthorizerId"])
                ));
            }
        }
        let actually_open = p["AuthorizationType"].as_str() == Some("NONE");
        routes.push((key, actually_open));
    }
    for key in OPEN_ROUTES {
        if !routes.iter().any(|(k, _)| k == key) {
            problems.push(format!("no route {key}"));
        }
    }
    if !routes.iter().any(|(k, _)| k == "$default") {
        problems.push("no $default route: unknown paths would not reach the router".into());
    }
    if yaml_text(&template["Conditions"]["UseJwt"]) != "!Equals [!Ref AuthMode, jwt]" {
        problems.push(format!(
            "Condition UseJwt is {}",
            yaml_text(&template["Conditions"]["UseJwt"])
        ));
    }
    let mode = &template["Parameters"]["AuthMode"];
    if mode["Default"].as_str() != Some("iam") || yaml_text(&mode["AllowedValues"]) != "[iam, jwt]"
    {
        problems.push(format!(
            "AuthMode must default to iam and allow iam and jwt: {mode:?}"
        ));
    }
    let jwt = &template["Resources"]["JwtAuthorizer"];
    if jwt["Type"].as_str() != Some("AWS::ApiGatewayV2::Authorizer")
        || jwt["Properties"]["AuthorizerType"].as_str() != Some("JWT")
        || jwt["Condition"].as_str() != Some("UseJwt")
    {
        problems.push(format!(
            "JwtAuthorizer is not the JWT authorizer of AuthMode=jwt: {jwt:?}"
        ));
    }
    // Each route the router serves reaches the template route API Gateway would pick for it, and
    // that route is open exactly when the router's route is one of the open ones.
    for (method, path) in docpipe_api_fn::routes() {
        let path = path.replace("{doc_id}", "doc_0123");
        let picked = routes
            .iter()
            .filter_map(|(key, open)| {
                route_match(key, method.as_str(), &path).map(|s| (s, key, open))
            })
            .max_by_key(|(s, _, _)| *s);
        let want_open = OPEN_ROUTES.contains(&format!("{method} {path}").as_str());
        match picked {
            None => problems.push(format!("{method} {path}: no route serves it")),
            Some((_, key, open)) if *open != want_open => problems.push(format!(
                "{method} {path}: served by {key}, which is {}",
                if *open { "open" } else { "signed" }
            )),
            Some(_) => {}
        }
    }
    problems
}

/// Every route in template.yaml has the authorization it should: only `/healthz` and the
/// token-checked webhook are open; every other route, `$default` included, is AWS_IAM, or JWT by
/// the AuthMode condition; nothing else exposes a function; each of the router's routes reaches a
/// template route of the right kind. The same check on altered copies of the template shows that
/// it can fail.
#[test]
fn every_template_route_is_signed_except_the_health_check_and_the_webhook() {
    let text = std::fs::read_to_string(workspace_root().join("template.yaml")).unwrap();
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(
        route_authorization_problems(&template),
        Vec::<String>::new()
    );

    let mut opened = template.clone();
    opened["Resources"]["RouteSearch"]["Properties"]["AuthorizationType"] = "NONE".into();
    let problems = route_authorization_problems(&opened);
    assert!(
        problems.iter().any(|p| p.contains("POST /search")),
        "{problems:?}"
    );

    let mut unauthorized = template.clone();
    unauthorized["Resources"]["RouteDocument"]["Properties"]
        .as_mapping_mut()
        .unwrap()
        .remove("AuthorizerId");
    let problems = route_authorization_problems(&unauthorized);
    assert!(
        problems.iter().any(|p| p.contains("RouteDocument")),
        "{problems:?}"
    );

    let mut iam_only = template.clone();
    iam_only["Resources"]["RouteDefault"]["Properties"]["AuthorizationType"] = "AWS_IAM".into();
    assert!(!route_authorization_problems(&iam_only).is_empty());

    let mut wide_open = template.clone();
    wide_open["Resources"]["RouteHealth"]["Properties"]["RouteKey"] = "ANY /{proxy+}".into();
    let problems = route_authorization_problems(&wide_open);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("served by ANY /{proxy+}, which is open")),
        "{problems:?}"
    );
}

/// The law of `corpus/versions` in its two versions, oldest first: (file, body).
fn secrets_law_versions() -> Vec<(String, Vec<u8>)> {
    [
        "保守国家秘密法(2010-04-29).md",
        "保守国家秘密法(2024-02-27).md",
    ]
    .iter()
    .map(|f| {
        let body =
            std::fs::read(helpers::corpus_dir().join("versions").join(f)).expect("corpus/versions");
        (f.to_string(), body)
    })
    .collect()
}

#[tokio::test]
async fn a_registration_names_its_version_and_contradicting_or_colliding_dates_are_problems() {
    let api = Api::new().await;
    for (file, body) in secrets_law_versions() {
        api.p
            .ingest_indexed(&format!("uploads/versions/{file}"), &body)
            .await;
    }
    let register = |extra: Value| {
        let mut body =
            json!({"file_name": "保守国家秘密法.pdf", "content_type": "application/pdf"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    // The 2010 version is recorded as taking effect on 2010-10-01 (its effect article).
    let (status, problem) = api
        .post(
            "/documents",
            &register(json!({"work": "保守国家秘密法", "version": "2010-04-29",
                             "effective_from": "2011-01-01"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(problem["type"], format!("{PROBLEMS}version-collides"));
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("effective_from 2010-10-01") && detail.contains("2011-01-01"),
        "{detail}"
    );
    assert_eq!(
        api.p.count("SELECT count(*) FROM documents").await,
        2,
        "a refused registration leaves no document"
    );
    // The same version with the recorded dates is another rendition of it.
    let (status, registered) = api
        .post(
            "/documents",
            &register(
                json!({"work": "《中华人民共和国保守国家秘密法》", "version": "2010-04-29",
                             "effective_from": "2010-10-01", "regulation_type": "法律"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    let doc_id = registered["doc_id"].as_str().unwrap();
    let (_, doc) = api.get(&format!("/documents/{doc_id}")).await;
    assert_eq!(doc["version"], "2010-04-29", "{doc}");

    for (extra, field, what) in [
        (
            json!({"promulgated": "2020-05-01", "effective_from": "2020-01-01"}),
            "effective_from",
            "in force before it was promulgated",
        ),
        (
            json!({"effective_from": "2020-01-01", "effective_to": "2020-01-01"}),
            "effective_to",
            "ends the day it starts",
        ),
        (
            json!({"effective_to": "2020-02-30"}),
            "effective_to",
            "no such day",
        ),
        (
            json!({"promulgated": "2020/01/01"}),
            "promulgated",
            "not ISO",
        ),
        (json!({"work": "《》"}), "work", "names no regulation"),
        (json!({"work": "法".repeat(513)}), "work", "too long"),
        (
            json!({"metadata": {"version_of": {"work": "x"}}}),
            "metadata",
            "a reserved key",
        ),
    ] {
        let (status, problem) = api.post("/documents", &register(extra)).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{what}: {problem}"
        );
        assert_eq!(problem["field"], field, "{what}: {problem}");
    }
    let (_, problem) = api
        .post(
            "/documents",
            &register(json!({"promulgated": "2020-05-01", "effective_from": "2020-01-01"})),
        )
        .await;
    assert_eq!(
        problem["detail"],
        "effective_from: effective_from 2020-01-01 is before promulgated 2020-05-01: the dates \
         contradict each other"
    );
}

#[tokio::test]
async fn works_list_their_versions_and_bad_dates_or_ids_are_problems() {
    let api = Api::new().await;
    for (file, body) in secrets_law_versions() {
        let doc = api
            .p
            .ingest_indexed(&format!("uploads/versions/{file}"), &body)
            .await;
        api.p.wait_searchable(&doc.doc_id).await;
    }
    let (status, page) = api.get("/works?name=中华人民共和国保守国家秘密法").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let works = page["works"].as_array().unwrap();
    assert_eq!(works.len(), 1, "{page}");
    let work = &works[0];
    assert_eq!(work["level"], "法律");
    assert_eq!(work["level_source"], "title");
    assert_eq!(work["versions"], 2);
    assert_eq!(work["current_version"], "2024-02-27");
    let id = work["work_id"].as_i64().unwrap();
    let (_, none) = api.get("/works?name=民法典").await;
    assert_eq!(none["works"], json!([]));

    let (status, timeline) = api.get(&format!("/works/{id}?as_of=2015-01-01")).await;
    assert_eq!(status, StatusCode::OK, "{timeline}");
    let versions = timeline["versions"].as_array().unwrap();
    let summary: Vec<_> = versions
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap(),
                v["status"].as_str().unwrap(),
                v["effective_from"].as_str().unwrap(),
                v["effective_from_source"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("2010-04-29", "in_force", "2010-10-01", "effect_article"),
            (
                "2024-02-27",
                "not_yet_in_force",
                "2024-05-01",
                "effect_article"
            ),
        ]
    );
    assert_eq!(versions[0]["effective_to"], "2024-05-01");

    let (status, then) = api
        .post(
            "/search",
            &json!({"query": "国家秘密的密级分为绝密、机密、秘密三级", "as_of": "2015-01-01", "mode": "keyword"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{then}");
    assert_eq!(then["as_of"], "2015-01-01");
    assert_eq!(then["versions"], "in_force");
    let hits = then["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{then}");
    assert!(
        hits.iter().all(|h| h["version"]["version"] == "2010-04-29"),
        "{then}"
    );

    // The default release mode released each version with its index commit.
    let doc_id: String = api
        .p
        .db
        .client()
        .await
        .query_typed_one(
            "SELECT doc_id FROM version_documents ORDER BY doc_id LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let (status, released) = api
        .post_as_reviewer(
            &format!("/works/{id}/versions/{doc_id}/release"),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["already"], true);
    for (body, status, what) in [
        (json!({"repealed_on": "2025-13-01"}), 422, "a month 13"),
        (
            json!({"repealed_on": "2025-01-01", "successor_work_id": id}),
            422,
            "itself",
        ),
        (
            json!({"repealed_on": null, "successor_work_id": 999_999}),
            422,
            "a successor without a repeal",
        ),
        (
            json!({"repealed_on": "2025-01-01", "successor_work_id": 999_999}),
            422,
            "no such successor",
        ),
        (json!({"on": "2025-01-01"}), 422, "an unknown field"),
    ] {
        let (got, problem) = api
            .post_as_reviewer(&format!("/works/{id}/repeal"), &body)
            .await;
        assert_eq!(got.as_u16(), status, "{what}: {problem}");
    }
    let (got, _) = api
        .post_as_reviewer(
            "/works/999999999/repeal",
            &json!({"repealed_on": "2025-01-01"}),
        )
        .await;
    assert_eq!(got, StatusCode::NOT_FOUND);
    let (got, repealed) = api
        .post_as_reviewer(
            &format!("/works/{id}/repeal"),
            &json!({"repealed_on": "2030-01-01"}),
        )
        .await;
    assert_eq!(got, StatusCode::OK, "{repealed}");
    assert_eq!(repealed["repealed_on"], "2030-01-01");
    let (_, shown) = api.get(&format!("/works/{id}")).await;
    assert_eq!(shown["work"]["repealed_on"], "2030-01-01");
    let stranger = docpipe_core::ids::random_doc_id();
    let (status, _) = api
        .post_as_reviewer(
            &format!("/works/{id}/versions/{stranger}/release"),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let get = |path: String| {
        let api = &api;
        async move { read(api.http.get(api.url(&path)).send().await.unwrap()).await }
    };
    for (path, what) in [
        ("/works/abc".to_string(), "a work id that is no number"),
        ("/works/0".to_string(), "work id 0"),
        (format!("/works/{id}?as_of=2024-02-30"), "no such day"),
        (format!("/works/{id}?as_of=yesterday"), "no date"),
        ("/works?limit=0".to_string(), "limit 0"),
        ("/works?cursor=x".to_string(), "a cursor not given out"),
        ("/works?colour=red".to_string(), "an unknown parameter"),
    ] {
        assert_problem(&get(path).await, 400, "invalid-parameter", what);
    }
    assert_problem(
        &get("/works/999999999".into()).await,
        404,
        "not-found",
        "an unknown work",
    );
    let post = |body: Value| {
        let api = &api;
        async move {
            read(
                api.http
                    .post(api.url("/search"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    assert_problem(
        &post(json!({"query": "保密", "as_of": "2024-13-01"})).await,
        422,
        "validation-failed",
        "a month 13",
    );
    for (body, what) in [
        (
            json!({"query": "保密", "as_of": 20240101}),
            "a number for a date",
        ),
        (
            json!({"query": "保密", "versions": "latest"}),
            "an unknown choice",
        ),
    ] {
        assert_problem(&post(body).await, 422, "invalid-body", what);
    }
    api.p.cleanup().await;
}

/// Five laws of `corpus/versions` in two versions each: the diff of each pair holds together
/// (every article of each version accounted for once, identical text never reported as changed),
/// and the full 修订 of 保守国家秘密法 (2010 → 2024) gives the counts checked by hand.
#[tokio::test]
async fn the_diff_of_two_versions_accounts_for_every_article() {
    let api = Api::new().await;
    let pairs = [
        (
            "保守国家秘密法(2010-04-29).md",
            "保守国家秘密法(2024-02-27).md",
        ),
        ("反垄断法(2007-08-30).md", "反垄断法(2022-06-24).md"),
        ("立法法(2015-03-15).md", "立法法(2023-03-13).md"),
        (
            "专利法实施细则(2010-01-09).md",
            "专利法实施细则(2023-12-11).md",
        ),
        ("民事诉讼法(2021-12-24).md", "民事诉讼法(2023-09-01).md"),
    ];
    let dir = helpers::corpus_dir().join("versions");
    let mut report = Vec::new();
    for (old, new) in pairs {
        let mut docs = Vec::new();
        for file in [old, new] {
            let body = std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            let doc = api
                .p
                .ingest_indexed(&format!("uploads/versions/{file}"), &body)
                .await;
            docs.push(doc.doc_id);
        }
        let work: i64 = api
            .p
            .db
            .client()
            .await
            .query_typed_one(
                "SELECT v.work_id FROM version_documents vd
                 JOIN work_versions v ON v.version_id = vd.version_id WHERE vd.doc_id = $1",
                &[(&docs[0], Type::VARCHAR)],
            )
            .await
            .unwrap()
            .get(0);
        let (status, d) = api.get(&format!("/works/{work}/diff")).await;
        assert_eq!(status, StatusCode::OK, "{old}: {d}");
        let c = &d["counts"];
        let n = |k: &str| c[k].as_u64().unwrap();
        assert_eq!(
            n("old_articles"),
            n("unchanged") + n("renumbered") + n("modified") + n("removed"),
            "{old}: {c}"
        );
        assert_eq!(
            n("new_articles"),
            n("unchanged") + n("renumbered") + n("modified") + n("added"),
            "{new}: {c}"
        );
        let articles = d["articles"].as_array().unwrap();
        assert_eq!(
            articles.len() as u64,
            n("unchanged") + n("renumbered") + n("modified") + n("added") + n("removed")
        );
        for a in articles {
            if a["change"] == "modified" {
                assert!(
                    a["spans"].as_array().is_some_and(|s| !s.is_empty()),
                    "{old}: a modified article says what changed: {a}"
                );
            }
        }
        report.push((old, c.clone()));
    }
    for (old, c) in &report {
        println!("{old}: {c}");
    }
    // 保守国家秘密法, revised as a whole in 2024: 53 articles became 65. 14 articles read the same
    // in both (an exact comparison of their texts, made apart from docpipe): 第二条 kept its number,
    // 13 moved (第五条 → 第六条 … 第四十三条 → 第五十条; 第三十七条 and 第三十九条 swapped order,
    // as 第四十五条 and 第四十四条). 9 have no similar article in order (第八条's award clause became
    // 第十二条's 表彰和奖励, Dice 0.29), and 21 are new.
    let secrets = &report[0].1;
    let counts: Vec<u64> = [
        "old_articles",
        "new_articles",
        "unchanged",
        "renumbered",
        "modified",
        "removed",
        "added",
    ]
    .iter()
    .map(|k| secrets[*k].as_u64().unwrap())
    .collect();
    assert_eq!(counts, [53, 65, 1, 13, 30, 9, 21], "{secrets}");

    let (status, same) = api
        .get(&format!(
            "/works/{}/diff?from=2010-04-29&to=2010-04-29",
            report_work(&api, "保守国家秘密法(2010-04-29).md").await
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        same["counts"]["unchanged"], 53,
        "a version against itself: {}",
        same["counts"]
    );
    api.p.cleanup().await;
}

async fn report_work(api: &Api, file: &str) -> i64 {
    api.p
        .db
        .client()
        .await
        .query_typed_one(
            "SELECT v.work_id FROM version_documents vd
             JOIN work_versions v ON v.version_id = vd.version_id
             JOIN documents d ON d.doc_id = vd.doc_id WHERE d.file_name = $1",
            &[(&file, Type::VARCHAR)],
        )
        .await
        .unwrap()
        .get(0)
}

/// In Lambda the tenant comes from the authorizer only: an IAM caller's role tag (read from IAM),
/// a JWT's claim. A header naming a tenant is not read there; a principal without the tag, or a
/// token without the claim, gets 403; a caller of another tenant gets the document as missing.
#[tokio::test]
async fn in_lambda_the_tenant_is_the_principals_tag_or_the_tokens_claim_never_a_header() {
    let api = Api::new().await;
    let (name, text) = laws(1).remove(0);
    let doc_id = api
        .p
        .ingest(&format!("uploads/{name}"), text.as_bytes())
        .await;
    let iam_get = |role: &str, header: Option<&str>| {
        let mut event: Value =
            serde_json::from_str(&event("api-delete-document.json", &doc_id)).unwrap();
        event["routeKey"] = json!("GET /documents/{doc_id}");
        event["requestContext"]["http"]["method"] = json!("GET");
        event["requestContext"]["authorizer"]["iam"]["userArn"] =
            json!(format!("arn:aws:sts::123456789012:assumed-role/{role}/s"));
        if let Some(t) = header {
            event["headers"]["x-docpipe-tenant"] = json!(t);
        }
        event.to_string()
    };
    helpers::iam_role_with_tags(
        "docpipe-reader-beta",
        &[(docpipe_api_fn::principal_tags::TENANT_TAG, "beta")],
    )
    .await;
    helpers::iam_role_with_tags("docpipe-untagged", &[("team", "x")]).await;

    let a = api.lambda(&iam_get("docpipe-operator", None)).await;
    assert_eq!(
        a.status,
        StatusCode::OK,
        "the role tagged default: {}",
        a.body
    );
    let a = api
        .lambda(&iam_get("docpipe-reader-beta", Some("default")))
        .await;
    assert_problem(
        &a,
        404,
        "not-found",
        "beta's role, whatever its header says",
    );
    let a = api
        .lambda(&iam_get("docpipe-untagged", Some("default")))
        .await;
    assert_problem(&a, 403, "tenant-required", "a role without the tenant tag");

    // A token's claim: the sample read event names `default`; another claim, another tenant.
    let a = api.lambda(&event("api-get-document.json", &doc_id)).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let beta = event("api-get-document.json", &doc_id)
        .replace("\"organ_id\": \"default\"", "\"organ_id\": \"beta\"");
    let a = api.lambda(&beta).await;
    assert_problem(&a, 404, "not-found", "a token of tenant beta");
    let none = event("api-get-document.json", &doc_id).replace("\"organ_id\": \"default\",", "");
    let a = api.lambda(&none).await;
    assert_problem(&a, 403, "tenant-required", "a token without the claim");
    api.p.cleanup().await;
}
