//! `POST /documents/{doc_id}/scan/resolve`: a reviewer resolves the findings its scan blocked the
//! document for (policy `block`), and the document answers again. A version stays held until it
//! is released, as any held version.

use super::*;

pub(crate) async fn resolve_scan(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Response, ApiError> {
    let meta = caller.meta.clone();
    if !meta.reviewer {
        return Err(ApiError::Forbidden(format!(
            "resolving a scan's findings is a reviewer's act: the caller {:?} is no reviewer (the reviewer scope, or the template's reviewer policy)",
            meta.actor.actor_id
        )));
    }
    let audit = Audit::begin(&state, &meta, "resolve_scan", &doc_id, json!({})).await?;
    let outcome = async {
        crate::tenant::gate_document(&state.db, &caller, &doc_id, true).await?;
        let client = state.db.client().await?;
        let by = format!("{}:{}", meta.actor.actor_type, meta.actor.actor_id);
        match docpipe_db::security::resolve(&**client, &doc_id, &by).await? {
            Some(scan_id) => Ok(scan_id),
            None => Err(ApiError::conflict(
                "scan-not-blocked",
                format!("the scan of document {doc_id}'s current run blocks nothing"),
            )),
        }
    }
    .await;
    match outcome {
        Ok(scan_id) => {
            audit
                .finish(
                    &state,
                    audit::SUCCEEDED,
                    None,
                    json!({ "scan_id": scan_id }),
                )
                .await;
            Ok(
                Json(json!({ "doc_id": doc_id, "scan_id": scan_id, "status": "warned" }))
                    .into_response(),
            )
        }
        Err(e) => Err(audit.fail(&state, e).await),
    }
}
