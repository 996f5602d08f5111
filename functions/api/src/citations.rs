//! `POST /citations/resolve` (one citation as people write it → its canonical address, work,
//! version in force and text) and `POST /citations/verify` (every citation of a passage, each found,
//! not found, not in force on the date, or of an unknown law). `docpipe_search::citations` checks.

use crate::problem::{ApiError, ApiJson};
use crate::state::ApiState;
use axum::extract::State;
use axum::Json;
use docpipe_parse::references::citations;
use docpipe_search::citations::{Checker, Status};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub const MAX_CITATION_CHARS: usize = 200;
pub const MAX_PASSAGE_CHARS: usize = 20_000;
/// The body a verify takes: the longest passage at 12 bytes a character (a surrogate pair escaped
/// as two \uXXXX), with room for the other fields.
pub const MAX_VERIFY_BODY_BYTES: usize = MAX_PASSAGE_CHARS * 12 + 16 * 1024;
/// The most citations one passage is checked for; the answer says when more were left.
pub const MAX_CITATIONS: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    pub citation: String,
    #[serde(default)]
    pub as_of: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    pub passage: String,
    #[serde(default)]
    pub as_of: Option<String>,
}

fn within(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    let n = value.chars().count();
    if n > max_chars {
        return Err(ApiError::validation(
            field,
            format!("{n} characters, at most {max_chars}"),
        ));
    }
    Ok(())
}

pub(crate) async fn resolve(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    ApiJson(request): ApiJson<ResolveRequest>,
) -> Result<Json<Value>, ApiError> {
    within("citation", &request.citation, MAX_CITATION_CHARS)?;
    let as_of = crate::works::as_of_date(request.as_of.as_deref())
        .map_err(|e| ApiError::validation("as_of", e))?;
    let found = citations(&request.citation);
    let Some(citation) = found.first() else {
        return Err(ApiError::validation(
            "citation",
            format!(
                "{:?} names no article of a law (write it as 《民法典》第1079条, 民法典第一千零七十九条第三款)",
                request.citation
            ),
        ));
    };
    crate::quota::count_search(&state, &caller).await?;
    let mut checker =
        Checker::new(&state.db, &state.search_cache, &as_of, &caller.readable()).await?;
    let checked = checker.check(citation).await?;
    if checked.status == Status::LawUnknown {
        return Err(ApiError::NotFound(checked.reason));
    }
    Ok(Json(json!({ "as_of": as_of, "resolved": checked })))
}

pub(crate) async fn verify(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    ApiJson(request): ApiJson<VerifyRequest>,
) -> Result<Json<Value>, ApiError> {
    within("passage", &request.passage, MAX_PASSAGE_CHARS)?;
    let as_of = crate::works::as_of_date(request.as_of.as_deref())
        .map_err(|e| ApiError::validation("as_of", e))?;
    let mut found = citations(&request.passage);
    let total = found.len();
    found.truncate(MAX_CITATIONS);
    let mut out = Vec::with_capacity(found.len());
    crate::quota::count_search(&state, &caller).await?;
    if !found.is_empty() {
        let mut checker =
            Checker::new(&state.db, &state.search_cache, &as_of, &caller.readable()).await?;
        for c in &found {
            out.push(checker.check(c).await?);
        }
    }
    Ok(Json(json!({
        "as_of": as_of,
        "citations": out,
        "found": total,
        "checked": out.len(),
    })))
}
