//! `/documents…`: register (upload URL), list, read (state, runs, history, artifacts, structure,
//! blocks, download URL), retry and delete.

mod delete;
mod list;
mod read;
mod register;
mod resolve;
mod retry;

pub(crate) use delete::delete_document;
pub(crate) use list::list_documents;
pub(crate) use read::{
    artifacts, blocks, download, get_document, history, list_runs, scan, structure,
};
pub(crate) use register::register_document;
pub(crate) use resolve::resolve_scan;
pub(crate) use retry::retry_document;

use crate::audit::{self, Audit};
use crate::authority::{self, Need};
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
use docpipe_db::{documents, idempotency, runs};
use docpipe_pipeline::stages;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub const MAX_PAGE: i64 = 200;
pub(crate) const DEFAULT_PAGE: i64 = 50;
/// An idempotency key whose request never finished (its process died) may be claimed again after
/// this long.
pub(crate) const IDEMPOTENCY_STALE_SECS: i64 = 120;
pub(crate) const IDEMPOTENCY_KEY_HEADER: HeaderName = HeaderName::from_static("idempotency-key");
pub(crate) const IDEMPOTENT_REPLAYED_HEADER: HeaderName =
    HeaderName::from_static("idempotent-replayed");

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

pub(crate) fn page_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::invalid(format!(
            "limit must be 1 to {MAX_PAGE}, got {n}"
        ))),
    }
}

fn not_found(doc_id: &str) -> ApiError {
    ApiError::NotFound(format!("document {doc_id} does not exist"))
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
