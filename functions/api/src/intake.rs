//! `GET /intake-failures`: uploads that reached the store function and did not become a document,
//! newest first, with the bucket, the key and the reason.

use crate::documents::page_limit;
use crate::problem::{ApiError, ApiQuery};
use crate::state::ApiState;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IntakeQuery {
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

pub(crate) async fn list_intake_failures(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    ApiQuery(q): ApiQuery<IntakeQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = page_limit(q.limit)?;
    let before = match q.cursor.as_deref() {
        None => None,
        Some(c) => Some(
            c.parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ApiError::invalid("cursor is not one this API gave out"))?,
        ),
    };
    let client = state.db.client().await?;
    let mut failures =
        docpipe_db::intake::list(&**client, &caller.tenant, limit + 1, before).await?;
    let next_cursor = if failures.len() as i64 > limit {
        failures.truncate(limit as usize);
        failures.last().map(|f| f.failure_id.to_string())
    } else {
        None
    };
    Ok(Json(
        json!({ "intake_failures": failures, "next_cursor": next_cursor }),
    ))
}
