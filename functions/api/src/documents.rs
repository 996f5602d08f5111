//! `/documents…`: register (upload URL), list, read (state, runs, history, artifacts, structure,
//! blocks, download URL), retry and delete.

use crate::audit::{self, Audit};
use crate::context::RequestMeta;
use crate::problem::{ApiError, ApiJson, ApiQuery, DocId};
use crate::state::ApiState;
use crate::views::{self, DocumentView, RunView};
use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use docpipe_core::model::DocStatus;
use docpipe_db::views as db_views;
use docpipe_db::views::{BlockFilter, DocumentFilter};
use docpipe_db::{documents, idempotency, runs, Db};
use docpipe_pipeline::stages::{delete, register, retry};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub const MAX_PAGE: i64 = 200;
pub const DEFAULT_PAGE: i64 = 50;
/// An idempotency key whose request never finished (its process died) may be claimed again after
/// this long.
pub const IDEMPOTENCY_STALE_SECS: i64 = 120;
pub const IDEMPOTENCY_KEY_HEADER: HeaderName = HeaderName::from_static("idempotency-key");
pub const IDEMPOTENT_REPLAYED_HEADER: HeaderName = HeaderName::from_static("idempotent-replayed");

type AppState = State<Arc<ApiState>>;

/// A filter value from a query string: bounded, without control characters (PostgreSQL refuses
/// NUL, and nobody means the others).
fn check_text(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    if value.chars().count() > max_chars {
        return Err(ApiError::invalid(format!(
            "{field} must be at most {max_chars} characters"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(ApiError::invalid(format!(
            "{field} must not contain control characters"
        )));
    }
    Ok(())
}

pub fn page_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::invalid(format!(
            "limit must be 1 to {MAX_PAGE}, got {n}"
        ))),
    }
}

async fn load(db: &Db, doc_id: &str) -> Result<documents::Document, ApiError> {
    let client = db.client().await?;
    documents::get(&**client, doc_id)
        .await?
        .ok_or_else(|| not_found(doc_id))
}

fn not_found(doc_id: &str) -> ApiError {
    ApiError::NotFound(format!("document {doc_id} does not exist"))
}

async fn ensure_exists(db: &Db, doc_id: &str) -> Result<(), ApiError> {
    let client = db.client().await?;
    if db_views::document_exists(&**client, doc_id).await? {
        Ok(())
    } else {
        Err(not_found(doc_id))
    }
}

fn expires_at(ttl: std::time::Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(ttl).unwrap_or_else(|_| chrono::Duration::zero())
}

fn location(doc_id: &str) -> (HeaderName, HeaderValue) {
    (
        header::LOCATION,
        HeaderValue::from_str(&format!("/documents/{doc_id}")).expect("doc ids are header-safe"),
    )
}

// ---------------------------------------------------------------------------------------------
// POST /documents

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    #[serde(default)]
    pub doc_name: String,
    pub file_name: String,
    #[serde(default)]
    pub content_type: String,
    #[serde(default)]
    pub regulation_type: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub metadata: serde_json::Map<String, Value>,
}

/// PostgreSQL's JSONB refuses `\u0000` anywhere; so does this API, with a 422 instead of a 503.
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// The largest magnitude a metadata number may have. JSONB keeps numbers as exact decimals and
/// gives a float near `f64::MAX` back as a 309-digit integer that a JSON parser may refuse to
/// read as a float; nobody's metadata needs numbers that large.
pub const MAX_METADATA_NUMBER: f64 = 1e300;

fn has_huge_number(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(|f| f.abs() > MAX_METADATA_NUMBER),
        Value::Array(items) => items.iter().any(has_huge_number),
        Value::Object(map) => map.values().any(has_huge_number),
        _ => false,
    }
}

fn check_registration(r: &RegisterRequest) -> Result<(), ApiError> {
    if !r.content_type.is_empty() {
        let ok = r.content_type.len() <= 128
            && r.content_type.contains('/')
            && r.content_type.bytes().all(|b| (0x20..0x7f).contains(&b));
        if !ok {
            return Err(ApiError::validation(
                "content_type",
                "must be a media type such as application/pdf (printable ASCII, at most 128)",
            ));
        }
    }
    if r.metadata.contains_key("tags") {
        return Err(ApiError::validation(
            "metadata",
            "the key \"tags\" is reserved: send tags in the tags field",
        ));
    }
    if r.metadata
        .iter()
        .any(|(k, v)| k.contains('\0') || has_nul(v))
    {
        return Err(ApiError::validation(
            "metadata",
            "must not contain NUL characters",
        ));
    }
    if r.metadata.values().any(has_huge_number) {
        return Err(ApiError::validation(
            "metadata",
            format!("numbers must be at most {MAX_METADATA_NUMBER:e} in magnitude"),
        ));
    }
    let registration = to_registration(r);
    register::validate(&registration).map_err(ApiError::from)
}

fn to_registration(r: &RegisterRequest) -> register::Registration {
    register::Registration {
        doc_name: r.doc_name.clone(),
        file_name: r.file_name.clone(),
        content_type: r.content_type.clone(),
        regulation_type: r.regulation_type.clone(),
        version: r.version.clone(),
        tags: r.tags.clone(),
        metadata: r.metadata.clone(),
    }
}

pub async fn register_document(
    State(state): AppState,
    meta: RequestMeta,
    ApiJson(body): ApiJson<RegisterRequest>,
) -> Result<Response, ApiError> {
    let audit = Audit::begin(
        &state,
        &meta,
        "register",
        "",
        json!({"file_name": body.file_name, "doc_name": body.doc_name}),
    )
    .await?;
    let result = async {
        check_registration(&body)?;
        let registered = register::register(
            &state.db,
            &state.config.bucket,
            &to_registration(&body),
            state.config.registration_deadline_secs(),
        )
        .await?;
        let upload_url = state
            .objects
            .presign_put(
                &state.config.bucket,
                &registered.object_name,
                &body.content_type,
                state.config.upload_url_ttl,
            )
            .await?;
        Ok::<_, ApiError>((registered, upload_url))
    }
    .await;
    match result {
        Ok((registered, upload_url)) => {
            audit
                .finish(
                    &state,
                    audit::SUCCEEDED,
                    Some(&registered.doc_id),
                    json!({"run_id": registered.run_id, "object_name": registered.object_name}),
                )
                .await;
            let mut upload_headers = serde_json::Map::new();
            if !body.content_type.is_empty() {
                upload_headers.insert("Content-Type".into(), body.content_type.clone().into());
            }
            let answer = json!({
                "doc_id": registered.doc_id,
                "run_id": registered.run_id,
                "status": DocStatus::Pending,
                "object_name": registered.object_name,
                "upload_url": upload_url,
                "upload_method": "PUT",
                "upload_headers": upload_headers,
                "upload_expires_at": expires_at(state.config.upload_url_ttl),
            });
            Ok((
                StatusCode::CREATED,
                [location(&registered.doc_id)],
                Json(answer),
            )
                .into_response())
        }
        Err(e) => Err(audit.fail(&state, e).await),
    }
}

// ---------------------------------------------------------------------------------------------
// GET /documents

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub status: Option<DocStatus>,
    pub regulation_type: Option<String>,
    pub version: Option<String>,
    pub updated_since: Option<DateTime<Utc>>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

pub async fn list_documents(
    State(state): AppState,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = page_limit(q.limit)?;
    if let Some(v) = &q.regulation_type {
        check_text("regulation_type", v, 128)?;
    }
    if let Some(v) = &q.version {
        check_text("version", v, 64)?;
    }
    let after = q
        .cursor
        .as_deref()
        .map(views::decode_doc_cursor)
        .transpose()?;
    let filter = DocumentFilter {
        status: q.status,
        regulation_type: q.regulation_type,
        version: q.version,
        updated_since: q.updated_since,
    };
    let client = state.db.client().await?;
    let mut docs = db_views::list_documents(&**client, &filter, after.as_ref(), limit + 1).await?;
    let next_cursor = if docs.len() as i64 > limit {
        docs.truncate(limit as usize);
        docs.last().map(views::encode_doc_cursor)
    } else {
        None
    };
    let documents: Vec<DocumentView> = docs.into_iter().map(DocumentView::from).collect();
    Ok(Json(
        json!({ "documents": documents, "next_cursor": next_cursor }),
    ))
}

// ---------------------------------------------------------------------------------------------
// GET /documents/{doc_id} and its read-only sub-resources

pub async fn get_document(
    State(state): AppState,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    let client = state.db.client().await?;
    let doc = documents::get(&**client, &doc_id)
        .await?
        .ok_or_else(|| not_found(&doc_id))?;
    let run = match doc.current_run_id {
        Some(run_id) => runs::get(&**client, run_id).await?,
        None => None,
    };
    let progress = run.as_ref().map(|r| {
        crate::progress::of(
            r,
            doc.status,
            chrono::Utc::now(),
            state.config.max_receive_count,
        )
    });
    let ocr = run
        .as_ref()
        .and_then(|r| r.metadata.get("ocr"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut answer = serde_json::to_value(DocumentView::from(doc)).expect("views serialise");
    answer["ocr"] = ocr;
    answer["current_run"] = serde_json::to_value(run.map(RunView::from)).expect("views serialise");
    answer["progress"] = serde_json::to_value(progress).expect("views serialise");
    Ok(Json(answer))
}

pub async fn list_runs(
    State(state): AppState,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    ensure_exists(&state.db, &doc_id).await?;
    let client = state.db.client().await?;
    let runs: Vec<RunView> = runs::list_for_doc(&**client, &doc_id)
        .await?
        .into_iter()
        .map(RunView::from)
        .collect();
    Ok(Json(json!({ "doc_id": doc_id, "runs": runs })))
}

pub async fn history(
    State(state): AppState,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    ensure_exists(&state.db, &doc_id).await?;
    let client = state.db.client().await?;
    let events = runs::history(&**client, &doc_id).await?;
    let run_events = docpipe_db::run_events::list_for_doc(&**client, &doc_id).await?;
    Ok(Json(
        json!({ "doc_id": doc_id, "history": events, "run_events": run_events }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactsQuery {
    pub run_id: Option<i64>,
}

pub async fn artifacts(
    State(state): AppState,
    DocId(doc_id): DocId,
    ApiQuery(q): ApiQuery<ArtifactsQuery>,
) -> Result<Json<Value>, ApiError> {
    if q.run_id.is_some_and(|r| r < 1) {
        return Err(ApiError::invalid("run_id must be a positive integer"));
    }
    ensure_exists(&state.db, &doc_id).await?;
    let client = state.db.client().await?;
    let rows = db_views::artifacts(&**client, &doc_id, q.run_id).await?;
    drop(client);
    let ttl = state.config.download_url_ttl;
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        let url = state
            .objects
            .presign_get(&state.config.bucket, &row.object_name, ttl)
            .await?;
        let mut item = serde_json::to_value(&row).expect("rows serialise");
        item["download_url"] = url.into();
        item["expires_at"] = json!(expires_at(ttl));
        items.push(item);
    }
    Ok(Json(json!({ "doc_id": doc_id, "artifacts": items })))
}

pub async fn structure(
    State(state): AppState,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    let doc = load(&state.db, &doc_id).await?;
    let client = state.db.client().await?;
    let nodes = db_views::structure_nodes(&**client, &doc_id).await?;
    let count = nodes.len();
    let tree = db_views::nest(nodes);
    Ok(Json(json!({
        "doc_id": doc_id,
        "run_id": doc.current_run_id,
        "node_count": count,
        "nodes": tree,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlocksQuery {
    pub section_title: Option<String>,
    pub block_type: Option<String>,
    pub semantic_id: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

pub async fn blocks(
    State(state): AppState,
    DocId(doc_id): DocId,
    ApiQuery(q): ApiQuery<BlocksQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = page_limit(q.limit)?;
    if let Some(v) = &q.section_title {
        check_text("section_title", v, 512)?;
    }
    if let Some(v) = &q.block_type {
        check_text("block_type", v, 64)?;
    }
    if let Some(v) = &q.semantic_id {
        check_text("semantic_id", v, 128)?;
    }
    let after = q
        .cursor
        .as_deref()
        .map(views::decode_block_cursor)
        .transpose()?;
    ensure_exists(&state.db, &doc_id).await?;
    let filter = BlockFilter {
        section_title: q.section_title,
        block_type: q.block_type,
        semantic_id: q.semantic_id,
    };
    let client = state.db.client().await?;
    let mut rows = db_views::blocks(&**client, &doc_id, &filter, after, limit + 1).await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|b| views::encode_block_cursor(b.id))
    } else {
        None
    };
    Ok(Json(json!({
        "doc_id": doc_id,
        "blocks": rows,
        "next_cursor": next_cursor,
    })))
}

pub async fn download(
    State(state): AppState,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    let doc = load(&state.db, &doc_id).await?;
    if doc.content_sha256.is_empty() || doc.object_name.is_empty() || doc.source_bucket.is_empty() {
        return Err(ApiError::conflict(
            "not-uploaded",
            format!(
                "document {doc_id} has no stored original yet (status {})",
                doc.status
            ),
        ));
    }
    if doc.deleting_at.is_some() {
        return Err(ApiError::conflict(
            "document-deleting",
            format!("document {doc_id} is being deleted"),
        ));
    }
    let ttl = state.config.download_url_ttl;
    let url = state
        .objects
        .presign_get(&doc.source_bucket, &doc.object_name, ttl)
        .await?;
    Ok(Json(json!({
        "doc_id": doc_id,
        "url": url,
        "expires_at": expires_at(ttl),
        "file_name": doc.file_name,
        "content_type": doc.content_type,
        "size_bytes": doc.size_bytes,
        "content_sha256": doc.content_sha256,
    })))
}

// ---------------------------------------------------------------------------------------------
// POST /documents/{doc_id}/retry

/// The `Idempotency-Key` header: 1 to 255 printable ASCII characters.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| (0x21..0x7f).contains(&b)))
        .ok_or_else(|| {
            ApiError::invalid("Idempotency-Key must be 1 to 255 printable ASCII characters")
        })?;
    Ok(Some(key.to_string()))
}

pub async fn retry_document(
    State(state): AppState,
    meta: RequestMeta,
    DocId(doc_id): DocId,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let audit = Audit::begin(
        &state,
        &meta,
        "retry",
        &doc_id,
        json!({ "idempotency_key": key }),
    )
    .await?;
    let idem = key.map(|key| RetryKey {
        scope: format!("retry:{doc_id}"),
        key,
    });
    if let Some(idem) = &idem {
        match claim_retry_key(&state, idem).await {
            Err(e) => return Err(audit.fail(&state, e).await),
            Ok(idempotency::Claim::Acquired) => {}
            Ok(idempotency::Claim::InProgress) => {
                let e = ApiError::conflict(
                    "idempotency-key-in-use",
                    "a request with this Idempotency-Key is still being processed; repeat it shortly",
                );
                return Err(audit.fail(&state, e).await);
            }
            Ok(idempotency::Claim::Completed {
                status_code,
                response,
            }) => return Ok(replay_retry(&state, &audit, &doc_id, status_code, response).await),
        }
    }
    match retry::retry(&retry_deps(&state), &doc_id).await {
        Ok(retried) => {
            let answer = answer_retry(&state, &meta, &audit, &doc_id, idem.as_ref(), retried);
            Ok(answer.await)
        }
        Err(e) => {
            if let Some(idem) = &idem {
                release_retry_key(&state, &meta, &doc_id, idem).await;
            }
            Err(audit.fail(&state, e.into()).await)
        }
    }
}

/// A retry's `Idempotency-Key` and the scope it is claimed in (one per document).
struct RetryKey {
    scope: String,
    key: String,
}

async fn claim_retry_key(
    state: &ApiState,
    idem: &RetryKey,
) -> Result<idempotency::Claim, ApiError> {
    let client = state.db.client().await?;
    Ok(idempotency::claim(&**client, &idem.scope, &idem.key, IDEMPOTENCY_STALE_SECS).await?)
}

/// A repeated key whose request finished: its answer again, marked as a replay.
async fn replay_retry(
    state: &ApiState,
    audit: &Audit,
    doc_id: &str,
    status_code: u16,
    response: Value,
) -> Response {
    audit
        .finish(
            state,
            audit::REPLAYED,
            None,
            json!({ "run_id": response.get("run_id") }),
        )
        .await;
    let status = StatusCode::from_u16(status_code).unwrap_or(StatusCode::ACCEPTED);
    (
        status,
        [
            location(doc_id),
            (IDEMPOTENT_REPLAYED_HEADER, HeaderValue::from_static("true")),
        ],
        Json(response),
    )
        .into_response()
}

fn retry_deps(state: &ApiState) -> retry::RetryDeps<'_> {
    retry::RetryDeps {
        db: &state.db,
        objects: state.objects.as_ref(),
        queue: state.queue.as_ref(),
        parse_queue_url: &state.config.parse_queue_url,
        stage_deadline_secs: state.config.stage_deadline_secs,
        max_bytes: state.config.max_bytes,
    }
}

/// The new run's answer (202), saved under the key when there is one, and audited.
async fn answer_retry(
    state: &ApiState,
    meta: &RequestMeta,
    audit: &Audit,
    doc_id: &str,
    idem: Option<&RetryKey>,
    retried: retry::Retried,
) -> Response {
    let answer = json!({
        "doc_id": retried.doc_id,
        "run_id": retried.run_id,
        "status": DocStatus::Stored,
        "abandoned_run": retried.abandoned_run,
    });
    if let Some(idem) = idem {
        let stored = async {
            let client = state.db.client().await?;
            idempotency::complete(&**client, &idem.scope, &idem.key, 202, &answer).await
        }
        .await;
        if let Err(e) = stored {
            tracing::error!(
                request_id = meta.request_id,
                doc_id,
                error = %docpipe_core::error::chain(&e),
                "the retry succeeded but its idempotency record was not saved"
            );
        }
    }
    audit
        .finish(
            state,
            audit::SUCCEEDED,
            None,
            json!({ "run_id": retried.run_id, "abandoned_run": retried.abandoned_run }),
        )
        .await;
    (StatusCode::ACCEPTED, [location(doc_id)], Json(answer)).into_response()
}

/// A retry that failed frees its key, so that repeating the request tries again.
async fn release_retry_key(state: &ApiState, meta: &RequestMeta, doc_id: &str, idem: &RetryKey) {
    let released = async {
        let client = state.db.client().await?;
        idempotency::release(&**client, &idem.scope, &idem.key).await
    }
    .await;
    if let Err(err) = released {
        tracing::warn!(
            request_id = meta.request_id,
            doc_id,
            error = %docpipe_core::error::chain(&err),
            "idempotency key not released; it frees itself after {IDEMPOTENCY_STALE_SECS}s"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// DELETE /documents/{doc_id}

/// Deletes in seed 000 §6.7's order. Repeating a delete that succeeded answers 204 again (the
/// audit log remembers it); a document that never existed is a 404.
pub async fn delete_document(
    State(state): AppState,
    meta: RequestMeta,
    DocId(doc_id): DocId,
) -> Result<Response, ApiError> {
    let audit = Audit::begin(&state, &meta, "delete", &doc_id, json!({})).await?;
    let deps = delete::DeleteDeps {
        db: &state.db,
        objects: state.objects.as_ref(),
        vectors: state.vectors.as_ref(),
        artifacts_bucket: &state.config.bucket,
    };
    match delete::delete(&deps, &doc_id).await {
        Ok(deleted) => {
            audit
                .finish(
                    &state,
                    audit::SUCCEEDED,
                    None,
                    json!({ "objects_removed": deleted.objects_removed }),
                )
                .await;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Err(delete::DeleteError::NotFound(_)) => {
            let deleted_before = async {
                let client = state.db.client().await?;
                Ok::<_, ApiError>(docpipe_db::audit::was_deleted(&**client, &doc_id).await?)
            }
            .await;
            match deleted_before {
                Ok(true) => {
                    audit
                        .finish(&state, audit::ALREADY_DELETED, None, json!({}))
                        .await;
                    Ok(StatusCode::NO_CONTENT.into_response())
                }
                Ok(false) => Err(audit.fail(&state, not_found(&doc_id)).await),
                Err(e) => Err(audit.fail(&state, e).await),
            }
        }
        Err(e) => Err(audit.fail(&state, e.into()).await),
    }
}
