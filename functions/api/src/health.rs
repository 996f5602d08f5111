//! `GET /healthz`: PostgreSQL, S3 and Milvus, each `up` or `down`. 200 when all are up, 503
//! otherwise.
//!
//! The route is open to anyone (the template gives it no authorization), so it says no more than a
//! status per dependency: why a dependency is down (an error chain naming hosts, buckets or
//! collections) goes to the log, never into the body. And it is cheap whatever the callers do: the
//! answer is kept for [`HEALTH_TTL`] and shared, and concurrent callers wait for one probe, so a
//! flood of requests costs at most one probe of each dependency per [`HEALTH_TTL`].

use crate::health_cache::Health;
use crate::state::ApiState;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one probe of a dependency may take before it counts as down.
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an answer is reused: every caller within it gets the same answer and no probe runs.
pub const HEALTH_TTL: Duration = Duration::from_secs(10);
/// A well-formed id that no document has: Milvus is asked to count its vectors.
const PROBE_DOC_ID: &str = "doc_00000000000000000000000000000000";

/// Runs one probe; logs why it failed. True when the dependency answered.
async fn check<F, E>(dependency: &'static str, probe: F) -> bool
where
    F: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    match tokio::time::timeout(CHECK_TIMEOUT, probe).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::warn!(dependency, error = %e, "health check: down");
            false
        }
        Err(_) => {
            tracing::warn!(
                dependency,
                timeout_s = CHECK_TIMEOUT.as_secs(),
                "health check: no answer in time"
            );
            false
        }
    }
}

async fn probe(state: &ApiState) -> Health {
    let database = check("database", async {
        state.db.ping().await.map_err(|e| match e {
            docpipe_db::DbError::Statement(_) => {
                format!("statement failed: {}", docpipe_core::error::chain(&e))
            }
            _ => docpipe_core::error::chain(&e),
        })?;
        Ok::<_, String>(())
    });
    let s3 = check("s3", async {
        state
            .s3
            .head_bucket()
            .bucket(&state.config.bucket)
            .send()
            .await
            .map_err(|e| format!("HeadBucket failed: {}", e.into_service_error()))?;
        Ok::<_, String>(())
    });
    let milvus = check("milvus", async {
        state
            .vectors
            .count(PROBE_DOC_ID, None)
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?;
        Ok::<_, String>(())
    });
    let (database, s3, milvus) = tokio::join!(database, s3, milvus);
    Health {
        database,
        s3,
        milvus,
    }
}

/// The cached answer while it is fresh; otherwise one probe, which callers arriving meanwhile
/// wait for and share.
async fn current(state: &ApiState) -> (Health, Duration) {
    let mut last = state.health.last.lock().await;
    if let Some((at, health)) = *last {
        if at.elapsed() < HEALTH_TTL {
            return (health, at.elapsed());
        }
    }
    let health = probe(state).await;
    *last = Some((Instant::now(), health));
    (health, Duration::ZERO)
}

pub async fn healthz(State(state): State<Arc<ApiState>>) -> Response {
    let (health, age) = current(&state).await;
    let word = |up: bool| if up { "up" } else { "down" };
    let all_up = health.all_up();
    let status = if all_up {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = (
        status,
        Json(json!({
            "status": if all_up { "ok" } else { "degraded" },
            "checks": {
                "database": { "status": word(health.database) },
                "s3": { "status": word(health.s3) },
                "milvus": { "status": word(health.milvus) },
            },
        })),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::AGE, HeaderValue::from(age.as_secs()));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&format!("max-age={}", HEALTH_TTL.as_secs()))
            .expect("a valid header"),
    );
    response
}
