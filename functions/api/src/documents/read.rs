//! `GET /documents/{doc_id}` and its read-only sub-resources: runs, history, artifacts, structure, blocks, download.

use super::*;

pub(crate) async fn get_document(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
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

pub(crate) async fn list_runs(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;

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
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Json<Value>, ApiError> {
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;

    let client = state.db.client().await?;
    let events = runs::history(&**client, &doc_id).await?;
    let run_events = docpipe_db::run_events::list_for_doc(&**client, &doc_id).await?;
    Ok(Json(
        json!({ "doc_id": doc_id, "history": events, "run_events": run_events }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArtifactsQuery {
    pub run_id: Option<i64>,
}

pub async fn artifacts(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
    ApiQuery(q): ApiQuery<ArtifactsQuery>,
) -> Result<Response, ApiError> {
    if q.run_id.is_some_and(|r| r < 1) {
        return Err(ApiError::invalid("run_id must be a positive integer"));
    }
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    let client = state.db.client().await?;
    // The artifacts hold the parsed text: the same authority as the blocks (404 when missing).
    let served = authority::check(&**client, &doc_id, Need::NotWithheld, &caller).await?;
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
    Ok(served.answer(json!({ "doc_id": doc_id, "artifacts": items })))
}

/// Findings a scan answer shows at most (its `findings_count` is whole).
const SCAN_FINDINGS_SHOWN: i64 = 200;

/// The sensitive-data scan of the document's current run: status, risk, counts by kind, and the
/// findings with their place and a masked sample (never the value). `scan` is null before the
/// first parse commits.
pub async fn scan(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Response, ApiError> {
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    let client = state.db.client().await?;
    // Where the findings are tells of the text: the same authority as the blocks.
    let served = authority::check(&**client, &doc_id, Need::NotWithheld, &caller).await?;
    let scan = docpipe_db::security::of_document(&**client, &doc_id, SCAN_FINDINGS_SHOWN).await?;
    Ok(served.answer(json!({ "doc_id": doc_id, "scan": scan })))
}

pub async fn structure(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Response, ApiError> {
    let doc = crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    let client = state.db.client().await?;
    let served = authority::check(&**client, &doc_id, Need::NotWithheld, &caller).await?;
    let nodes = db_views::structure_nodes(&**client, &doc_id).await?;
    let count = nodes.len();
    let tree = db_views::nest(nodes);
    Ok(served.answer(json!({
        "doc_id": doc_id,
        "run_id": doc.current_run_id,
        "node_count": count,
        "nodes": tree,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BlocksQuery {
    pub section_title: Option<String>,
    pub block_type: Option<String>,
    pub semantic_id: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

pub async fn blocks(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
    ApiQuery(q): ApiQuery<BlocksQuery>,
) -> Result<Response, ApiError> {
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
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    let filter = BlockFilter {
        section_title: q.section_title,
        block_type: q.block_type,
        semantic_id: q.semantic_id,
    };
    let client = state.db.client().await?;
    let served = authority::check(&**client, &doc_id, Need::NotWithheld, &caller).await?;
    let mut rows = db_views::blocks(&**client, &doc_id, &filter, after, limit + 1).await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|b| views::encode_block_cursor(b.id))
    } else {
        None
    };
    Ok(served.answer(json!({
        "doc_id": doc_id,
        "blocks": rows,
        "next_cursor": next_cursor,
    })))
}

pub async fn download(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Response, ApiError> {
    let doc = crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    if doc.content_sha256.is_empty() || doc.object_name.is_empty() || doc.source_bucket.is_empty() {
        return Err(ApiError::conflict(
            "not-uploaded",
            format!(
                "document {doc_id} has no stored original yet (status {})",
                doc.status
            ),
        ));
    }
    let client = state.db.client().await?;
    let served = authority::check(&**client, &doc_id, Need::NotWithheld, &caller).await?;
    drop(client);
    let ttl = state.config.download_url_ttl;
    let url = state
        .objects
        .presign_get(&doc.source_bucket, &doc.object_name, ttl)
        .await?;
    Ok(served.answer(json!({
        "doc_id": doc_id,
        "url": url,
        "expires_at": expires_at(ttl),
        "file_name": doc.file_name,
        "content_type": doc.content_type,
        "size_bytes": doc.size_bytes,
        "content_sha256": doc.content_sha256,
    })))
}
