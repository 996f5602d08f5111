//! `POST /documents/{doc_id}/retry`: a new run, once per `Idempotency-Key`.

use super::*;

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

pub(crate) async fn retry_document(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let meta = caller.meta.clone();
    let key = idempotency_key(&headers)?;
    let audit = Audit::begin(
        &state,
        &meta,
        "retry",
        &doc_id,
        json!({ "idempotency_key": key }),
    )
    .await?;
    // Missing and another tenant's answer alike, by this one lookup; the public library's is
    // a publisher's to retry.
    if let Err(e) = crate::tenant::gate_document(&state.db, &caller, &doc_id, true).await {
        return Err(audit.fail(&state, e).await);
    }
    let idem = key.map(|key| RetryKey {
        organ_id: caller.tenant.clone(),
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
    match stages::retry::retry(&retry_deps(&state), &doc_id).await {
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
    organ_id: String,
    scope: String,
    key: String,
}

async fn claim_retry_key(
    state: &ApiState,
    idem: &RetryKey,
) -> Result<idempotency::Claim, ApiError> {
    let client = state.db.client().await?;
    Ok(idempotency::claim(
        &**client,
        &idem.organ_id,
        &idem.scope,
        &idem.key,
        IDEMPOTENCY_STALE_SECS,
    )
    .await?)
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

fn retry_deps(state: &ApiState) -> stages::retry::RetryDeps<'_> {
    stages::retry::RetryDeps {
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
    retried: stages::retry::Retried,
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
