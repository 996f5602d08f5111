//! `POST /notifications/s3`: the intake for S3-compatible stores (MinIO's webhook target) that
//! cannot notify SQS. Authenticated with a bearer token from configuration, compared in constant
//! time; a notification of this API's bucket, for keys under `uploads/` only, then takes the store
//! stage's usual path.

use crate::problem::ApiError;
use crate::state::ApiState;
use axum::extract::{Request, State};
use axum::http::header;
use axum::Json;
use docpipe_core::events::Notification;
use docpipe_core::ids::UPLOAD_PREFIX;
use docpipe_pipeline::error::StageError;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Compares digests, so neither the token's content nor its length leaks through timing.
fn token_matches(presented: &str, expected: &str) -> bool {
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    a.ct_eq(&b).into()
}

pub(crate) async fn s3_notification(
    State(state): State<Arc<ApiState>>,
    request: Request,
) -> Result<Json<Value>, ApiError> {
    let Some(expected) = &state.config.webhook_token else {
        return Err(ApiError::NotFound(
            "the S3 notification webhook is not enabled (DOCPIPE_WEBHOOK_TOKEN is unset)".into(),
        ));
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match presented {
        Some(token) if token_matches(token, expected.expose()) => {}
        _ => {
            return Err(ApiError::Unauthorized(
                "a valid bearer token is required".into(),
            ))
        }
    }
    let body = axum::body::to_bytes(request.into_body(), state.config.max_body_bytes)
        .await
        .map_err(|_| ApiError::PayloadTooLarge)?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ApiError::InvalidBody(
            "a notification is a JSON object".into(),
        ));
    }
    // Only the bucket this deployment serves, and only keys under the upload prefix (the one the
    // bucket's own notification watches): a token holder cannot point the store stage at another
    // bucket the function's role can read, nor at the parse artifacts beside the uploads. The
    // whole notification is refused, so a sender configured for the whole bucket learns it.
    if let Ok(Notification::Created(objects)) = docpipe_core::events::decode_notification(&value) {
        if let Some(other) = objects.iter().find(|o| o.bucket != state.config.bucket) {
            return Err(ApiError::validation(
                "Records",
                format!(
                    "the notification names bucket {:?}; this API serves {:?}",
                    other.bucket, state.config.bucket
                ),
            ));
        }
        if let Some(outside) = objects.iter().find(|o| !o.key.starts_with(UPLOAD_PREFIX)) {
            return Err(ApiError::validation(
                "Records",
                format!(
                    "the notification names key {:?}; only keys under {UPLOAD_PREFIX:?} are \
                     uploads (filter the bucket's notification to that prefix)",
                    outside.key
                ),
            ));
        }
    }
    match docpipe_pipeline::handlers::store::handle_notification(&state.store, &value).await {
        Ok(notified) => Ok(Json(json!({ "result": notified.to_string() }))),
        Err(StageError::Failed { reason, .. }) => Err(ApiError::InvalidBody(reason)),
        Err(e @ StageError::Transient { .. }) => Err(ApiError::unavailable("the store stage", e)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_compare_exactly() {
        assert!(super::token_matches(
            "s3cret-token-123456",
            "s3cret-token-123456"
        ));
        assert!(!super::token_matches(
            "s3cret-token-12345",
            "s3cret-token-123456"
        ));
        assert!(!super::token_matches("", "s3cret-token-123456"));
    }
}
