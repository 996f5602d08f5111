//! `DELETE /documents/{doc_id}`: seed 000 §6.7, repeatable.

use super::*;

/// Deletes in seed 000 §6.7's order. Repeating a delete that succeeded answers 204 again (the
/// audit log remembers it); a document that never existed is a 404.
pub(crate) async fn delete_document(
    State(state): AppState,
    caller: crate::tenant::Caller,
    DocId(doc_id): DocId,
) -> Result<Response, ApiError> {
    // Another tenant's document is as missing as one never made (the same statements run for
    // both), and the public library's is the caller's to read, not to delete (unless a
    // publisher).
    let visible = match crate::tenant::gate_document(&state.db, &caller, &doc_id, true).await {
        Ok(_) => true,
        Err(ApiError::NotFound(_)) => false,
        Err(e) => return Err(e),
    };
    let meta = caller.meta.clone();
    let audit = Audit::begin(&state, &meta, "delete", &doc_id, json!({})).await?;
    let deps = stages::delete::DeleteDeps {
        db: &state.db,
        objects: state.objects.as_ref(),
        vectors: state.vectors.as_ref(),
        artifacts_bucket: &state.config.bucket,
    };
    let deleted = if visible {
        stages::delete::delete(&deps, &doc_id).await
    } else {
        Err(stages::delete::DeleteError::NotFound(doc_id.clone()))
    };
    match deleted {
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
        Err(stages::delete::DeleteError::NotFound(_)) => {
            let deleted_before = async {
                let client = state.db.client().await?;
                Ok::<_, ApiError>(
                    docpipe_db::audit::was_deleted(&**client, &doc_id, &caller.tenant).await?,
                )
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
