//! `POST /search`: articles by dense, keyword or hybrid retrieval, every hit vouched for by
//! PostgreSQL before it is returned (`docpipe_search`).

use crate::problem::{ApiError, ApiJson};
use crate::state::ApiState;
use axum::extract::State;
use axum::Json;
use docpipe_core::filters::Filters;
use docpipe_search::{search, Mode, Query, SearchDeps, SearchResult, Versions, MAX_TOP_K};
use serde::Deserialize;
use std::sync::Arc;

pub(crate) const DEFAULT_TOP_K: i64 = 10;
pub const MAX_QUERY_CHARS: usize = 2000;
pub(crate) const MAX_FILTER_DOC_IDS: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default, deserialize_with = "filters_object")]
    pub filters: Option<Filters>,
    /// `dense`, `keyword` or `hybrid` (the default).
    #[serde(default, deserialize_with = "mode_name")]
    pub mode: Option<Mode>,
    /// The date the search is for (YYYY-MM-DD; default today).
    #[serde(default)]
    pub as_of: Option<String>,
    /// `in_force` (the default: each law's version in force on `as_of`) or `all`.
    #[serde(default, deserialize_with = "versions_name")]
    pub versions: Option<Versions>,
    /// `"references"`: each hit carries what its article cites, with the targets' texts.
    #[serde(default)]
    pub expand: Option<String>,
    /// `active` (the default): the collection search reads; `next`: the one a rebuild fills, to
    /// compare before its switch.
    #[serde(default)]
    pub index: Option<String>,
    /// Whose documents: `own`, `public` (the shared law library) or `all` (the default).
    #[serde(default, deserialize_with = "crate::tenant::scope_name")]
    pub scope: Option<docpipe_core::tenant::Scope>,
}

fn versions_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Versions>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v @ serde_json::Value::String(_)) => serde_json::from_value(v)
            .map(Some)
            .map_err(|_| serde::de::Error::custom("versions must be in_force or all")),
        Some(_) => Err(serde::de::Error::custom("versions must be in_force or all")),
    }
}

/// serde reads a struct from a JSON array too (`"filters": []`); the spec says an object or null.
fn filters_object<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Filters>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v @ serde_json::Value::Object(_)) => serde_json::from_value(v)
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(_) => Err(serde::de::Error::custom("filters must be an object")),
    }
}

/// A mode by name. serde_json reports a number where an enum's name belongs as a syntax error,
/// which would tell the client its valid JSON is not JSON.
fn mode_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Mode>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(name)) => {
            serde_json::from_value(serde_json::Value::String(name))
                .map(Some)
                .map_err(|_| serde::de::Error::custom("mode must be dense, keyword or hybrid"))
        }
        Some(_) => Err(serde::de::Error::custom(
            "mode must be dense, keyword or hybrid",
        )),
    }
}

fn check_value(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    if value.chars().count() > max_chars || value.chars().any(char::is_control) {
        return Err(ApiError::validation(
            field,
            format!("must be at most {max_chars} characters, without control characters"),
        ));
    }
    Ok(())
}

fn check(request: &SearchRequest) -> Result<usize, ApiError> {
    if request.query.trim().is_empty() {
        return Err(ApiError::validation("query", "must contain text"));
    }
    if request.query.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::validation(
            "query",
            format!("must be at most {MAX_QUERY_CHARS} characters"),
        ));
    }
    let top_k = request.top_k.unwrap_or(DEFAULT_TOP_K);
    if !(1..=MAX_TOP_K as i64).contains(&top_k) {
        return Err(ApiError::validation(
            "top_k",
            format!("must be 1 to {MAX_TOP_K}, got {top_k}"),
        ));
    }
    if let Some(filters) = &request.filters {
        if filters.doc_ids.len() > MAX_FILTER_DOC_IDS {
            return Err(ApiError::validation(
                "filters.doc_ids",
                format!("at most {MAX_FILTER_DOC_IDS} ids"),
            ));
        }
        if let Some(bad) = filters
            .doc_ids
            .iter()
            .find(|id| !docpipe_core::ids::is_addressable_doc_id(id))
        {
            return Err(ApiError::validation(
                "filters.doc_ids",
                format!("{bad:?} is not a doc_id"),
            ));
        }
        if let Some(v) = &filters.regulation_type {
            check_value("filters.regulation_type", v, 128)?;
        }
        if let Some(v) = &filters.version {
            check_value("filters.version", v, 64)?;
        }
        if filters.tags.len() > 32 {
            return Err(ApiError::validation("filters.tags", "at most 32 tags"));
        }
        for tag in &filters.tags {
            check_value("filters.tags", tag, 64)?;
        }
    }
    Ok(top_k as usize)
}

pub(crate) async fn search_chunks(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResult>, ApiError> {
    let top_k = check(&request)?;
    crate::quota::count_search(&state, &caller).await?;
    let expand = match request.expand.as_deref() {
        None => false,
        Some("references") => true,
        Some(other) => {
            return Err(ApiError::validation(
                "expand",
                format!(
                    "{:?} is not something a hit can carry: the one choice is \"references\"",
                    other.chars().take(40).collect::<String>()
                ),
            ))
        }
    };
    let as_of = crate::works::as_of_date(request.as_of.as_deref())
        .map_err(|e| ApiError::validation("as_of", e))?;
    let mut filters = request.filters.unwrap_or_default();
    // From the caller's identity, never from the body: `Filters` cannot deserialize it.
    filters.organs = caller.reads(request.scope.unwrap_or_default());
    // One snapshot: the query is embedded by the embedder of the collection it reads.
    let snapshot = state
        .generations
        .snapshot()
        .await
        .map_err(|e| ApiError::unavailable("the vector generations", e))?;
    let side = match request.index.as_deref() {
        None | Some("active") => &snapshot.active,
        Some("next") => match &snapshot.next {
            Some((_, side)) => side,
            None => {
                return Err(ApiError::conflict(
                    "no-rebuild",
                    "no rebuild is under way: index \"next\" has no collection to read",
                ))
            }
        },
        Some(_) => return Err(ApiError::validation("index", "active or next")),
    };
    let result = search(
        &SearchDeps {
            db: &state.db,
            embedder: side.embedder.as_ref(),
            vectors: side.vectors.as_ref(),
            cache: &state.search_cache,
        },
        &Query {
            text: &request.query,
            top_k,
            mode: request.mode.unwrap_or_default(),
            filters: &filters,
            as_of: Some(&as_of),
            versions: request.versions.unwrap_or_default(),
            graph: docpipe_search::Graph::DEFAULT,
        },
    )
    .await?;
    let mut result = result;
    if expand {
        docpipe_search::citations::expand_references(
            &state.db,
            &state.search_cache,
            &mut result.hits,
            &as_of,
            &caller.readable(),
        )
        .await?;
    }
    Ok(Json(result))
}
