//! `/index`: which collection search reads, and re-embedding into a new one, blue/green.
//!
//! - `GET /index`: the active collection and its embedder; the rebuild under way with its
//!   progress (chunks done of total, rate, ETA), its backlog, its last error and its check.
//! - `POST /index/rebuild`: starts a rebuild with another embedder (a reviewer's act). 409 while
//!   one runs.
//! - `POST /index/switch`: an operator's switch of a ready rebuild (one compare-and-set).
//! - `POST /index/rebuild/cancel`: cancels the rebuild under way; its collection is dropped.

use crate::audit::Audit;
use crate::context::RequestMeta;
use crate::problem::{ApiError, ApiJson};
use crate::state::ApiState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use docpipe_db::generations::{
    self, Generation, StartOptions, Started, State as GenState, Switched, Target,
};
use docpipe_db::DbError;
use docpipe_pipeline::stages::rebuild::RebuildMessage;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Generations `GET /index` lists besides the active one and the rebuild.
const RECENT: i64 = 10;
/// The longest grace period a rebuild may ask for (30 days).
const MAX_GRACE_SECS: f64 = 30.0 * 24.0 * 3600.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RebuildRequest {
    /// The new embedder: a name (`hash`, `e5-small`, `bedrock`, `openai`), or its settings as
    /// `{"DOCPIPE_EMBEDDER": "…", "DOCPIPE_EMBED_DIM": "…", …}` over the functions' environment.
    pub embedder: Value,
    /// The new collection's name (default: the active one's with the generation's number).
    #[serde(default)]
    pub collection: Option<String>,
    /// `auto` (the default): search switches once the check passes; `manual`: it waits, ready.
    #[serde(default)]
    pub switch: Option<String>,
    /// Keep the replaced collection after its grace period.
    #[serde(default)]
    pub keep_old: bool,
    /// How long the replaced collection stays, still written to, after the switch (default 3600).
    #[serde(default)]
    pub grace_secs: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationRequest {
    pub generation: i64,
}

fn reviewer_only(meta: &RequestMeta, act: &str) -> Result<(), ApiError> {
    if meta.reviewer {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "{act} is a reviewer's act: the caller {:?} is no reviewer (the reviewer scope, or the template's reviewer policy)",
            meta.actor.actor_id
        )))
    }
}

/// `GET /index`.
pub(crate) async fn show(State(state): State<Arc<ApiState>>) -> Result<Json<Value>, ApiError> {
    let snapshot = state
        .generations
        .snapshot()
        .await
        .map_err(|e| ApiError::unavailable("the vector generations", e))?;
    let recent = {
        let client = state.db.client().await?;
        generations::recent(&**client, RECENT).await?
    };
    let active = recent.iter().find(|g| g.state == GenState::Active);
    let rebuild = recent
        .iter()
        .find(|g| matches!(g.state, GenState::Building | GenState::Ready));
    Ok(Json(json!({
        "active": match active {
            Some(g) => describe(g),
            None => json!({
                "generation": null,
                "collection": snapshot.active.vectors.collection(),
                "model_id": snapshot.active.embedder.model_id(),
                "dimension": snapshot.active.embedder.dimension(),
                "embedder": "as configured",
            }),
        },
        "rebuild": rebuild.map(describe),
        "recent": recent.iter().map(describe).collect::<Vec<_>>(),
    })))
}

/// A generation as `GET /index` shows it, with its progress.
fn describe(g: &Generation) -> Value {
    let elapsed = (g.updated_at - g.created_at).num_milliseconds().max(1) as f64 / 1000.0;
    let rate = g.chunks_done as f64 / elapsed;
    let left = (g.chunks_total - g.chunks_done).max(0) as f64;
    let building = g.state == GenState::Building;
    json!({
        "generation": g.generation_id,
        "state": g.state.as_str(),
        "collection": g.collection,
        "embedder": g.embedder,
        "model_id": g.model_id,
        "dimension": g.dimension,
        "switch": if g.auto_switch { "auto" } else { "manual" },
        "keep_old": g.keep,
        "progress": {
            "chunks_done": g.chunks_done,
            "chunks_total": g.chunks_total,
            "docs_done": g.docs_done,
            "docs_total": g.docs_total,
            "walked": g.walked,
            "backlog": g.backlog,
            "chunks_per_s": if building && g.chunks_done > 0 { Some((rate * 10.0).round() / 10.0) } else { None },
            "eta_s": if building && rate > 0.0 { Some((left / rate).ceil()) } else { None },
        },
        "last_error": (!g.last_error.is_empty()).then_some(&g.last_error),
        "check": g.check_report,
        "requested_by": g.requested_by,
        "created_at": g.created_at,
        "ready_at": g.ready_at,
        "switched_at": g.switched_at,
        "retired_at": g.retired_at,
        "drop_after": g.drop_after,
    })
}

/// The new embedder's settings, as the request names them: only `DOCPIPE_` variables, never a
/// secret (API keys stay in the functions' environment).
fn embedder_settings(value: &Value) -> Result<Value, ApiError> {
    let settings: Map<String, Value> = match value {
        Value::String(name) => {
            let mut m = Map::new();
            m.insert("DOCPIPE_EMBEDDER".into(), Value::String(name.clone()));
            m
        }
        Value::Object(m) => m.clone(),
        _ => {
            return Err(ApiError::validation(
                "embedder",
                "a name (hash, e5-small, bedrock, openai) or an object of DOCPIPE_ settings",
            ))
        }
    };
    if settings.len() > 16 {
        return Err(ApiError::validation("embedder", "at most 16 settings"));
    }
    for (key, v) in &settings {
        let secret = ["KEY", "SECRET", "TOKEN", "PASSWORD"]
            .iter()
            .any(|s| key.to_ascii_uppercase().contains(s));
        if !key.starts_with("DOCPIPE_") || key.len() > 64 || secret {
            return Err(ApiError::validation(
                "embedder",
                format!(
                    "{:?} is not an embedder setting this route takes (DOCPIPE_ variables, no secrets)",
                    key.chars().take(64).collect::<String>()
                ),
            ));
        }
        match v {
            Value::String(s) if s.len() <= 256 => {}
            _ => {
                return Err(ApiError::validation(
                    "embedder",
                    format!("{key} must be a string of at most 256 bytes"),
                ))
            }
        }
    }
    if !settings.contains_key("DOCPIPE_EMBEDDER") {
        return Err(ApiError::validation(
            "embedder",
            "DOCPIPE_EMBEDDER is required",
        ));
    }
    Ok(Value::Object(settings))
}

/// A Milvus collection name: letters, digits and underscores, a letter or underscore first, at
/// most 255 characters.
fn check_collection(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ApiError::validation(
            "collection",
            "letters, digits and underscores, a letter or underscore first, at most 255",
        ))
    }
}

/// `POST /index/rebuild`.
pub(crate) async fn start(
    State(state): State<Arc<ApiState>>,
    meta: RequestMeta,
    ApiJson(request): ApiJson<RebuildRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    reviewer_only(&meta, "rebuilding the index")?;
    let settings = embedder_settings(&request.embedder)?;
    let auto_switch = match request.switch.as_deref() {
        None | Some("auto") => true,
        Some("manual") => false,
        Some(_) => return Err(ApiError::validation("switch", "auto or manual")),
    };
    let grace_secs = request.grace_secs.unwrap_or(3600.0);
    if !(0.0..=MAX_GRACE_SECS).contains(&grace_secs) {
        return Err(ApiError::validation(
            "grace_secs",
            format!("from 0 to {MAX_GRACE_SECS}"),
        ));
    }
    if let Some(name) = &request.collection {
        check_collection(name)?;
    }
    // The embedder must be one this deployment can build (its search embeds queries with it).
    let embedder =
        (docpipe_pipeline::adapters::generations::Generations::embedders_from_env())(&settings)
            .map_err(|e| ApiError::validation("embedder", docpipe_core::error::chain(&e)))?;
    let snapshot = state
        .generations
        .snapshot()
        .await
        .map_err(|e| ApiError::unavailable("the vector generations", e))?;
    let configured = state.generations.configured();
    let current = Target {
        collection: snapshot.active.vectors.collection().to_string(),
        embedder: configured_settings(),
        model_id: snapshot.active.embedder.model_id().to_string(),
        dimension: snapshot.active.embedder.dimension() as i32,
    };
    let collection = request.collection.clone().unwrap_or_else(|| {
        let base: String = configured.vectors.collection().chars().take(200).collect();
        format!("{base}_{}", chrono::Utc::now().format("%Y%m%d%H%M%S"))
    });
    let next = Target {
        collection,
        embedder: settings.clone(),
        model_id: embedder.model_id().to_string(),
        dimension: embedder.dimension() as i32,
    };
    let audit = Audit::begin_on(
        &state,
        &meta,
        "index_rebuild",
        "index",
        &next.collection,
        json!({ "embedder": settings, "model_id": next.model_id }),
    )
    .await?;
    let started = async {
        let mut client = state.db.client().await?;
        let tx = client.transaction().await.map_err(DbError::from)?;
        let by = format!("{}:{}", meta.actor.actor_type, meta.actor.actor_id);
        let options = StartOptions {
            auto_switch,
            keep_old: request.keep_old,
            grace_secs,
        };
        let started = generations::start(&*tx, &current, &next, &options, &by).await?;
        tx.commit().await.map_err(DbError::from)?;
        Ok::<_, ApiError>(started)
    }
    .await;
    let generation = match started {
        Ok(Started::Started(g)) => g,
        Ok(Started::Busy(g)) => {
            let e = ApiError::conflict(
                "rebuild-running",
                format!(
                    "rebuild {} is {}: one rebuild at a time (cancel it, or switch to it)",
                    g.generation_id,
                    g.state.as_str()
                ),
            );
            return Err(audit.fail(&state, e).await);
        }
        Ok(Started::Unchanged(g)) => {
            let e = ApiError::conflict(
                "rebuild-unchanged",
                format!(
                    "search already reads {} with these embedder settings",
                    g.collection
                ),
            );
            return Err(audit.fail(&state, e).await);
        }
        Err(e) => return Err(audit.fail(&state, e).await),
    };
    state.generations.forget().await;
    if let Err(e) = send_step(&state, &generation).await {
        // The sweeper sends a quiet rebuild on: this one starts late, not never.
        tracing::warn!(generation = generation.generation_id, error = %e, "the first rebuild step was not sent; the sweeper will");
    }
    audit
        .finish(
            &state,
            crate::audit::SUCCEEDED,
            Some(&generation.collection),
            json!({ "generation": generation.generation_id }),
        )
        .await;
    Ok((StatusCode::ACCEPTED, Json(describe(&generation))))
}

/// What the functions' own environment says the embedder is (the active generation's settings
/// before any was recorded).
fn configured_settings() -> Value {
    let mut m = Map::new();
    for key in [
        "DOCPIPE_EMBEDDER",
        "DOCPIPE_EMBED_DIM",
        "DOCPIPE_BEDROCK_MODEL_ID",
        "DOCPIPE_OPENAI_BASE_URL",
        "DOCPIPE_OPENAI_MODEL",
        "DOCPIPE_E5_MODEL",
    ] {
        if let Ok(v) = std::env::var(key) {
            if !v.trim().is_empty() {
                m.insert(key.into(), Value::String(v));
            }
        }
    }
    Value::Object(m)
}

async fn send_step(state: &ApiState, g: &Generation) -> Result<(), String> {
    state
        .queue
        .send(
            &state.config.index_queue_url,
            RebuildMessage::new(g.generation_id, g.step).encode(),
        )
        .await
        .map_err(|e| docpipe_core::error::chain(&e))
}

/// `POST /index/switch`: a ready rebuild becomes what search reads (one compare-and-set), or, if
/// documents were indexed since its check, goes on copying them and switches by itself.
pub(crate) async fn switch(
    State(state): State<Arc<ApiState>>,
    meta: RequestMeta,
    ApiJson(request): ApiJson<GenerationRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    reviewer_only(&meta, "switching the index")?;
    let id = request.generation;
    let audit = Audit::begin_on(
        &state,
        &meta,
        "index_switch",
        "index",
        &id.to_string(),
        json!({}),
    )
    .await?;
    let outcome = async {
        let mut client = state.db.client().await?;
        let tx = client.transaction().await.map_err(DbError::from)?;
        let switched = generations::switch(&*tx, id, &[GenState::Ready]).await?;
        let resumed = match &switched {
            Switched::Refused(_) => generations::resume_to_switch(&*tx, id).await?,
            Switched::Switched { .. } => None,
        };
        tx.commit().await.map_err(DbError::from)?;
        let g = generations::get(&**client, id).await?;
        Ok::<_, ApiError>((switched, resumed, g))
    }
    .await;
    let (switched, resumed, g) = match outcome {
        Ok(o) => o,
        Err(e) => return Err(audit.fail(&state, e).await),
    };
    state.generations.forget().await;
    let answer = match (switched, resumed, g) {
        (Switched::Switched { from, to }, _, _) => {
            let body = json!({
                "switched": true,
                "from": from.as_deref().map(describe),
                "to": describe(&to),
            });
            (StatusCode::OK, body)
        }
        (Switched::Refused(_), Some(_), Some(g)) => {
            if let Err(e) = send_step(&state, &g).await {
                tracing::warn!(generation = id, error = %e, "the rebuild step was not sent; the sweeper will");
            }
            let body = json!({
                "switched": false,
                "detail": "documents were indexed since the check: they are copied first, then search switches by itself",
                "rebuild": describe(&g),
            });
            (StatusCode::ACCEPTED, body)
        }
        (Switched::Refused(why), _, None) => {
            let e = ApiError::NotFound(format!("no rebuild {id}: {why}"));
            return Err(audit.fail(&state, e).await);
        }
        (Switched::Refused(why), _, Some(_)) => {
            let e = ApiError::conflict("not-switchable", why);
            return Err(audit.fail(&state, e).await);
        }
    };
    audit
        .finish(
            &state,
            crate::audit::SUCCEEDED,
            None,
            json!({ "status": answer.0.as_u16() }),
        )
        .await;
    Ok((answer.0, Json(answer.1)))
}

/// `POST /index/rebuild/cancel`.
pub(crate) async fn cancel(
    State(state): State<Arc<ApiState>>,
    meta: RequestMeta,
    ApiJson(request): ApiJson<GenerationRequest>,
) -> Result<Json<Value>, ApiError> {
    reviewer_only(&meta, "cancelling a rebuild")?;
    let id = request.generation;
    let audit = Audit::begin_on(
        &state,
        &meta,
        "index_cancel",
        "index",
        &id.to_string(),
        json!({}),
    )
    .await?;
    let cancelled = async {
        let client = state.db.client().await?;
        Ok::<_, ApiError>(generations::cancel(&**client, id).await?)
    }
    .await;
    match cancelled {
        Ok(Some(g)) => {
            state.generations.forget().await;
            audit
                .finish(&state, crate::audit::SUCCEEDED, None, json!({}))
                .await;
            Ok(Json(describe(&g)))
        }
        Ok(None) => {
            let e = ApiError::conflict(
                "not-cancellable",
                format!("generation {id} is no rebuild under way"),
            );
            Err(audit.fail(&state, e).await)
        }
        Err(e) => Err(audit.fail(&state, e).await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedder_settings_take_names_and_refuse_secrets() {
        assert_eq!(
            embedder_settings(&json!("e5-small")).unwrap(),
            json!({"DOCPIPE_EMBEDDER": "e5-small"})
        );
        assert!(embedder_settings(
            &json!({"DOCPIPE_EMBEDDER": "openai", "DOCPIPE_OPENAI_API_KEY": "x"})
        )
        .is_err());
        assert!(embedder_settings(&json!({"PATH": "/bin", "DOCPIPE_EMBEDDER": "hash"})).is_err());
        assert!(embedder_settings(&json!({"DOCPIPE_EMBED_DIM": "256"})).is_err());
        assert!(embedder_settings(&json!(7)).is_err());
        assert!(embedder_settings(&json!({"DOCPIPE_EMBEDDER": 1})).is_err());
    }

    #[test]
    fn collection_names_are_milvus_names() {
        assert!(check_collection("docpipe_chunks_2").is_ok());
        for bad in ["", "9x", "a-b", "a b", &"x".repeat(256)] {
            assert!(check_collection(bad).is_err(), "{bad}");
        }
    }
}
