//! `GET /works` and `GET /works/{work_id}`: the laws docpipe holds, each with its versions, their
//! dates (with where each came from), their status on a date and their documents.

use crate::documents::page_limit;
use crate::problem::{ApiError, ApiQuery};
use crate::state::ApiState;
use axum::extract::{Path, State};
use axum::Json;
use docpipe_db::DbError;
use docpipe_parse::article_ref::normalize_law_name;
use docpipe_parse::version_dates::Day;
use docpipe_pipeline::stages::cleanup::Carry;
use docpipe_pipeline::stages::index::PROJECTIONS_AT_ONCE;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorksQuery {
    pub level: Option<String>,
    /// Part of the title, as people write it (中华人民共和国 or not).
    pub name: Option<String>,
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// `own`, `public` or `all` (the default).
    pub scope: Option<docpipe_core::tenant::Scope>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkQuery {
    /// The date the statuses are for (YYYY-MM-DD; default today).
    pub as_of: Option<String>,
}

/// A date a request gave (today when none), or what is wrong with it.
pub(crate) fn as_of_date(given: Option<&str>) -> Result<String, String> {
    match given {
        None => Ok(docpipe_search::today()),
        Some(text) => Day::parse_iso(text)
            .map(|d| d.to_string())
            .ok_or_else(|| format!("{text:?} is not a calendar date (YYYY-MM-DD)")),
    }
}

fn short(field: &str, value: Option<&str>, max_chars: usize) -> Result<(), ApiError> {
    match value {
        Some(v) if v.chars().count() > max_chars || v.chars().any(char::is_control) => {
            Err(ApiError::invalid(format!(
                "{field}: at most {max_chars} characters, without control characters"
            )))
        }
        _ => Ok(()),
    }
}

pub(crate) async fn list_works(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    ApiQuery(q): ApiQuery<WorksQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = page_limit(q.limit)?;
    short("level", q.level.as_deref(), 128)?;
    short("name", q.name.as_deref(), 200)?;
    let after = match q.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<i64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| ApiError::invalid("cursor is not one this API gave out"))?,
    };
    let name_key = q.name.as_deref().map(normalize_law_name);
    let client = state.db.client().await?;
    let mut works = docpipe_db::works::list(
        &**client,
        &docpipe_search::today(),
        q.level.as_deref(),
        name_key.as_deref().filter(|k| !k.is_empty()),
        after,
        limit + 1,
        &caller.reads(q.scope.unwrap_or_default()),
    )
    .await?;
    let next_cursor = if works.len() as i64 > limit {
        works.truncate(limit as usize);
        works.last().map(|w| w.work_id.to_string())
    } else {
        None
    };
    Ok(Json(json!({ "works": works, "next_cursor": next_cursor })))
}

pub(crate) async fn get_work(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    Path(work_id): Path<String>,
    ApiQuery(q): ApiQuery<WorkQuery>,
) -> Result<Json<Value>, ApiError> {
    let id = work_id_of(&work_id)?;
    crate::tenant::gate_work(&state.db, &caller, id).await?;
    let as_of =
        as_of_date(q.as_of.as_deref()).map_err(|e| ApiError::invalid(format!("as_of: {e}")))?;
    let client = state.db.client().await?;
    let Some((work, versions)) = docpipe_db::works::timeline(&**client, id, &as_of).await? else {
        return Err(ApiError::NotFound(format!("work {id} does not exist")));
    };
    Ok(Json(
        json!({ "work": work, "as_of": as_of, "versions": versions }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiffQuery {
    /// The older version (its label, or its id); default the version before `to`.
    pub from: Option<String>,
    /// The newer version; default the latest.
    pub to: Option<String>,
}

/// `GET /works/{work_id}/diff`: two versions aligned article by article.
pub(crate) async fn diff_versions(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    Path(work_id): Path<String>,
    ApiQuery(q): ApiQuery<DiffQuery>,
) -> Result<Json<Value>, ApiError> {
    let id = work_id_of(&work_id)?;
    crate::tenant::gate_work(&state.db, &caller, id).await?;
    short("from", q.from.as_deref(), 64)?;
    short("to", q.to.as_deref(), 64)?;
    let client = state.db.client().await?;
    let Some((_, timeline)) =
        docpipe_db::works::timeline(&**client, id, &docpipe_search::today()).await?
    else {
        return Err(ApiError::NotFound(format!("work {id} does not exist")));
    };
    // A version held for its release is no side of a diff: its text answers nothing yet.
    let held: Vec<&str> = timeline
        .iter()
        .filter(|v| v.status == "held")
        .map(|v| v.version.as_str())
        .collect();
    let labels: Vec<&str> = timeline
        .iter()
        .filter(|v| v.status != "held")
        .map(|v| v.version.as_str())
        .collect();
    for (field, label) in [("from", &q.from), ("to", &q.to)] {
        if let Some(label) = label.as_deref().filter(|l| held.contains(l)) {
            return Err(ApiError::conflict(
                "version-held",
                format!("{field}: version {label} of work {id} is held for its release: it answers once released"),
            ));
        }
    }
    let to = match &q.to {
        Some(t) => t.clone(),
        None => labels.last().map(|l| l.to_string()).unwrap_or_default(),
    };
    let from = match &q.from {
        Some(f) => f.clone(),
        None => match labels.iter().position(|l| *l == to) {
            Some(at) if at > 0 => labels[at - 1].to_string(),
            _ => {
                return Err(ApiError::invalid(format!(
                    "work {id} has no version before {to:?} to compare it with: give from"
                )))
            }
        },
    };
    let mut sides = Vec::new();
    for (field, label) in [("from", &from), ("to", &to)] {
        let (version_id, owner) = docpipe_db::works::find_version(&**client, id, label)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("work {id} has no version {label:?}")))?;
        if owner != id {
            return Err(ApiError::invalid(format!(
                "{field}: version {label} is of work {owner}, not {id}: a diff compares two versions of one work"
            )));
        }
        let articles = docpipe_db::works::version_articles(&**client, version_id)
            .await?
            .ok_or_else(|| {
                ApiError::conflict(
                    "version-not-indexed",
                    format!("version {label} of work {id} has no indexed document"),
                )
            })?;
        sides.push(
            articles
                .into_iter()
                .map(docpipe_search::diff::Article::from_block)
                .collect::<Vec<_>>(),
        );
    }
    let diff = docpipe_search::diff::diff(&sides[0], &sides[1]);
    Ok(Json(
        json!({ "work_id": id, "from": from, "to": to, "counts": diff.counts, "articles": diff.articles }),
    ))
}

fn work_id_of(text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::invalid(format!("work_id: {text:?} is not a work id")))
}

/// What a reviewer approves: the content they read, by its sha256 (optional: without it, the
/// content the document holds when the release commits).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseRequest {
    pub sha256: Option<String>,
}

/// Releasing and repealing are a reviewer's acts, apart from uploading: 403 for anyone else.
fn reviewer_only(meta: &crate::context::RequestMeta, act: &str) -> Result<(), ApiError> {
    if meta.reviewer {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "{act} is a reviewer's act: the caller {:?} is no reviewer (the reviewer scope, or the template's reviewer policy)",
            meta.actor.actor_id
        )))
    }
}

/// `POST /works/{work_id}/versions/{doc_id}/release`: the rendition `doc_id`, with the content it
/// holds, starts to answer for its version (one compare-and-set; a search sees it before or after, whole). The
/// review gate of `ReleaseMode=manual`; in the default mode the index commit has released it
/// already, and this answers so. A reviewer's act (403 for anyone else); the audit names who
/// released which document and which content.
pub(crate) async fn release_version(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    Path((work_id, doc_id)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let meta = caller.meta.clone();
    let id = work_id_of(&work_id)?;
    if !docpipe_core::ids::is_addressable_doc_id(&doc_id) {
        return Err(ApiError::invalid(
            "doc_id must be \"doc_\" followed by 32 lowercase hexadecimal digits",
        ));
    }
    let organ = crate::tenant::gate_work(&state.db, &caller, id).await?;
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    reviewer_only(&meta, "releasing a version")?;
    caller.check_write(&organ, &format!("work {id}"))?;
    let request = release_request(&body)?;
    let audit = crate::audit::Audit::begin(
        &state,
        &meta,
        "release",
        &doc_id,
        json!({ "work_id": id, "sha256": request.sha256 }),
    )
    .await?;
    // Seed 001's order: the rendition's vectors answer before the release commits, so that no
    // search between the commit and the projection's update finds neither version.
    docpipe_pipeline::stages::cleanup::widen_before_release(&state.db, &*state.vectors, &doc_id)
        .await;
    let outcome = async {
        let mut client = state.db.client().await?;
        let tx = client.transaction().await.map_err(DbError::from)?;
        let by = format!("{}:{}", meta.actor.actor_type, meta.actor.actor_id);
        let released =
            docpipe_db::works::release(&*tx, id, &doc_id, &by, request.sha256.as_deref()).await?;
        tx.commit().await.map_err(DbError::from)?;
        Ok::<_, ApiError>(released)
    }
    .await;
    // Whether it released or not: the projection says what PostgreSQL says now.
    docpipe_pipeline::stages::cleanup::carry_projections(
        &state.db,
        &*state.vectors,
        Carry::AroundDocument(&doc_id, PROJECTIONS_AT_ONCE),
    )
    .await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return Err(audit.fail(&state, e).await),
    };
    match released(id, &doc_id, outcome) {
        Ok((body, detail)) => {
            audit
                .finish(&state, crate::audit::SUCCEEDED, None, detail)
                .await;
            Ok(Json(body))
        }
        Err(e) => Err(audit.fail(&state, e).await),
    }
}

/// The body, if any: an empty one approves the content the document holds.
fn release_request(body: &[u8]) -> Result<ReleaseRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ReleaseRequest::default());
    }
    let request: ReleaseRequest = serde_json::from_slice(body).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::MalformedJson(e.to_string())
        } else {
            ApiError::InvalidBody(e.to_string())
        }
    })?;
    if let Some(sha) = &request.sha256 {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::validation(
                "sha256",
                "64 hexadecimal digits: the content the reviewer approved",
            ));
        }
    }
    Ok(request)
}

/// The answer and the audit's detail for a release's outcome, or the problem.
fn released(
    id: i64,
    doc_id: &str,
    outcome: docpipe_db::works::Released,
) -> Result<(Value, Value), ApiError> {
    use docpipe_db::works::Released;
    match outcome {
        Released::Now { label, sha256 } => Ok((
            json!({ "work_id": id, "version": label, "doc_id": doc_id, "sha256": sha256, "released": true, "already": false }),
            json!({ "version": label, "doc_id": doc_id, "sha256": sha256 }),
        )),
        Released::Already { label, sha256 } => Ok((
            json!({ "work_id": id, "version": label, "doc_id": doc_id, "sha256": sha256, "released": true, "already": true }),
            json!({ "version": label, "doc_id": doc_id, "sha256": sha256, "already": true }),
        )),
        Released::NotOfWork => Err(ApiError::NotFound(format!(
            "document {doc_id} is of no version of work {id}"
        ))),
        Released::NotIndexed { label, status } => Err(ApiError::conflict(
            "version-not-indexed",
            format!(
                "version {label} cannot answer yet: its document {doc_id} is {status}, not indexed"
            ),
        )),
        Released::ContentChanged { label, current } => Err(ApiError::conflict(
            "content-changed",
            format!(
                "version {label}: document {doc_id} now holds content {current}, not the content approved: review it again"
            ),
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RepealRequest {
    /// The day it stopped applying (YYYY-MM-DD); null: not repealed after all.
    pub repealed_on: Option<String>,
    /// The work that took its place (合同法 → 民法典).
    #[serde(default)]
    pub successor_work_id: Option<i64>,
}

/// `POST /works/{work_id}/repeal`: the law stopped applying on a day (the status the dates of
/// its versions cannot give), optionally naming the work that took its place.
pub(crate) async fn repeal_work(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    Path(work_id): Path<String>,
    crate::problem::ApiJson(request): crate::problem::ApiJson<RepealRequest>,
) -> Result<Json<Value>, ApiError> {
    let meta = caller.meta.clone();
    let id = work_id_of(&work_id)?;
    let organ = crate::tenant::gate_work(&state.db, &caller, id).await?;
    reviewer_only(&meta, "repealing a work")?;
    caller.check_write(&organ, &format!("work {id}"))?;
    if let Some(successor) = request.successor_work_id {
        // A successor the caller cannot see is as missing as one that never was.
        crate::tenant::gate_work(&state.db, &caller, successor)
            .await
            .map_err(|_| {
                ApiError::validation(
                    "successor_work_id",
                    format!("work {successor} does not exist"),
                )
            })?;
    }
    let on = match request.repealed_on.as_deref() {
        None => None,
        Some(day) => Some(Day::parse_iso(day).map(|d| d.to_string()).ok_or_else(|| {
            ApiError::validation(
                "repealed_on",
                format!("{day:?} is not a calendar date (YYYY-MM-DD)"),
            )
        })?),
    };
    if request.successor_work_id == Some(id) {
        return Err(ApiError::validation(
            "successor_work_id",
            "a work cannot succeed itself",
        ));
    }
    if request.successor_work_id.is_some() && on.is_none() {
        return Err(ApiError::validation(
            "successor_work_id",
            "only a repealed work has a successor: give repealed_on",
        ));
    }
    let audit = crate::audit::Audit::begin_on(
        &state,
        &meta,
        "repeal",
        "work",
        &work_id,
        json!({ "repealed_on": on, "successor_work_id": request.successor_work_id }),
    )
    .await?;
    let outcome = async {
        let mut client = state.db.client().await?;
        let tx = client.transaction().await.map_err(DbError::from)?;
        let repealed =
            docpipe_db::works::repeal(&*tx, id, on.as_deref(), request.successor_work_id).await?;
        tx.commit().await.map_err(DbError::from)?;
        Ok::<_, ApiError>(repealed)
    }
    .await;
    docpipe_pipeline::stages::cleanup::carry_projections(
        &state.db,
        &*state.vectors,
        Carry::Due(PROJECTIONS_AT_ONCE),
    )
    .await;
    use docpipe_db::works::Repealed;
    match outcome {
        Ok(Repealed::Done) => {
            audit
                .finish(&state, crate::audit::SUCCEEDED, None, json!({}))
                .await;
            Ok(Json(json!({
                "work_id": id,
                "repealed_on": on,
                "successor_work_id": request.successor_work_id,
            })))
        }
        Ok(Repealed::NoSuchWork) => Err(audit
            .fail(
                &state,
                ApiError::NotFound(format!("work {id} does not exist")),
            )
            .await),
        Ok(Repealed::NoSuchSuccessor) => Err(audit
            .fail(
                &state,
                ApiError::validation(
                    "successor_work_id",
                    format!(
                        "work {} does not exist",
                        request.successor_work_id.unwrap_or_default()
                    ),
                ),
            )
            .await),
        Err(e) => Err(audit.fail(&state, e).await),
    }
}
