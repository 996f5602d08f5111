//! `GET /healthz`: PostgreSQL, S3 and Milvus, each up or down with its latency. 200 when all are
//! up, 503 otherwise.

use crate::state::ApiState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);
/// A well-formed id that no document has: Milvus is asked to count its vectors.
const PROBE_DOC_ID: &str = "doc_00000000000000000000000000000000";

async fn check<F, E>(probe: F) -> serde_json::Value
where
    F: Future<Output = Result<(), E>>,
    E: std::error::Error,
{
    let started = Instant::now();
    let outcome = tokio::time::timeout(CHECK_TIMEOUT, probe).await;
    let latency_ms = (started.elapsed().as_secs_f64() * 1000.0 * 10.0).round() / 10.0;
    match outcome {
        Ok(Ok(())) => json!({ "status": "up", "latency_ms": latency_ms }),
        Ok(Err(e)) => json!({ "status": "down", "latency_ms": latency_ms, "error": e.to_string() }),
        Err(_) => json!({
            "status": "down",
            "latency_ms": latency_ms,
            "error": format!("no answer within {}s", CHECK_TIMEOUT.as_secs()),
        }),
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Down(String);

pub async fn healthz(State(state): State<Arc<ApiState>>) -> Response {
    let database = check(async {
        let client = state.db.client().await.map_err(|e| Down(e.to_string()))?;
        client
            .query_typed("SELECT 1", &[])
            .await
            .map_err(|e| Down(format!("statement failed: {e}")))?;
        Ok::<_, Down>(())
    });
    let s3 = check(async {
        state
            .s3
            .head_bucket()
            .bucket(&state.config.bucket)
            .send()
            .await
            .map_err(|e| Down(format!("HeadBucket failed: {}", e.into_service_error())))?;
        Ok::<_, Down>(())
    });
    let milvus = check(async {
        state
            .vectors
            .count(PROBE_DOC_ID, None)
            .await
            .map_err(|e| Down(e.to_string()))?;
        Ok::<_, Down>(())
    });
    let (database, s3, milvus) = tokio::join!(database, s3, milvus);
    let all_up = [&database, &s3, &milvus]
        .iter()
        .all(|c| c["status"] == "up");
    let status = if all_up {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "status": if all_up { "ok" } else { "degraded" },
            "checks": { "database": database, "s3": s3, "milvus": milvus },
        })),
    )
        .into_response()
}
