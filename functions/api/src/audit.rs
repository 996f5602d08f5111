//! The audit trail of registrations, retries and deletes (seed 004 §14). The record is opened
//! before the operation runs; if it cannot be written, the operation does not run (503). It is
//! closed with the result: `succeeded`, `replayed` (an idempotent repeat), `already_deleted`,
//! `rejected` (4xx) or `failed` (5xx).

use crate::context::RequestMeta;
use crate::problem::ApiError;
use crate::state::ApiState;
use docpipe_db::audit::{self, AuditEntry};
use serde_json::{json, Value};

pub(crate) const SUCCEEDED: &str = "succeeded";
pub(crate) const REPLAYED: &str = "replayed";
pub(crate) const ALREADY_DELETED: &str = "already_deleted";
pub(crate) const REJECTED: &str = "rejected";
pub const FAILED: &str = "failed";

/// Strings from the request go into JSONB: without NUL (PostgreSQL refuses it) and bounded.
fn scrub(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace('\0', "").chars().take(512).collect()),
        Value::Array(items) => Value::Array(items.into_iter().map(scrub).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k.replace('\0', ""), scrub(v)))
                .collect(),
        ),
        other => other,
    }
}

/// An open audit record.
pub(crate) struct Audit {
    id: i64,
    request_id: String,
    action: &'static str,
}

impl Audit {
    pub async fn begin(
        state: &ApiState,
        meta: &RequestMeta,
        action: &'static str,
        target_id: &str,
        detail: Value,
    ) -> Result<Audit, ApiError> {
        Self::begin_on(state, meta, action, "document", target_id, detail).await
    }

    /// [`Audit::begin`] for a target that is no document (a work).
    pub async fn begin_on(
        state: &ApiState,
        meta: &RequestMeta,
        action: &'static str,
        target_type: &str,
        target_id: &str,
        detail: Value,
    ) -> Result<Audit, ApiError> {
        let client = state.db.client().await?;
        let id = audit::begin(
            &**client,
            &AuditEntry {
                actor_type: &meta.actor.actor_type,
                actor_id: &meta.actor.actor_id,
                action,
                target_type,
                target_id,
                request_id: &meta.request_id,
                detail: scrub(detail),
                organ_id: meta.tenant.as_deref().unwrap_or_default(),
            },
        )
        .await?;
        Ok(Audit {
            id,
            request_id: meta.request_id.clone(),
            action,
        })
    }

    /// Closes the record. A failure here is logged with everything the record would have said:
    /// the operation has happened and its answer must still reach the caller.
    pub async fn finish(
        &self,
        state: &ApiState,
        result: &str,
        target_id: Option<&str>,
        detail: Value,
    ) {
        let detail = scrub(detail);
        let written = async {
            let client = state.db.client().await?;
            audit::finish(&**client, self.id, result, target_id, &detail).await
        }
        .await;
        if let Err(e) = written {
            tracing::error!(
                audit_id = self.id,
                request_id = self.request_id,
                action = self.action,
                result,
                target_id,
                detail = %detail,
                error = %docpipe_core::error::chain(&e),
                "audit record not closed"
            );
        }
    }

    /// Closes the record for an operation that ended in `error`, and hands the error back.
    pub async fn fail(&self, state: &ApiState, error: ApiError) -> ApiError {
        let status = error.status();
        let result = if status.is_server_error() {
            FAILED
        } else {
            REJECTED
        };
        self.finish(
            state,
            result,
            None,
            json!({
                "status": status.as_u16(),
                "problem": error.kind(),
                "reason": error.to_string(),
            }),
        )
        .await;
        error
    }
}
