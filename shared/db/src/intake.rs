//! Uploads that reached the store function and did not become a document: every upload ends as a
//! document or as one of these, with its bucket, key and reason.

use super::{DbError, Type};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::GenericClient;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IntakeFailure {
    pub failure_id: i64,
    pub bucket: String,
    pub object_name: String,
    pub reason: String,
    /// How often the event was delivered before it was given up on (0: refused at once).
    pub deliveries: i32,
    pub failed_at: DateTime<Utc>,
}

/// Longest reason kept: a reason quotes its error's chain, which a hostile key could make long.
const MAX_REASON_CHARS: usize = 4000;

pub async fn record(
    c: &impl GenericClient,
    bucket: &str,
    object_name: &str,
    reason: &str,
    deliveries: i32,
) -> Result<i64, DbError> {
    let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
    let bucket: String = bucket.chars().take(255).collect();
    let object_name: String = object_name.chars().take(1024).collect();
    let row = c
        .query_typed_one(
            "INSERT INTO intake_failures (bucket, object_name, reason, deliveries)
             VALUES ($1, $2, $3, $4) RETURNING failure_id",
            &[
                (&bucket, Type::VARCHAR),
                (&object_name, Type::VARCHAR),
                (&reason, Type::TEXT),
                (&deliveries, Type::INT4),
            ],
        )
        .await?;
    Ok(row.get("failure_id"))
}

/// The newest first, `limit` of them, older than the `before` id when paging.
pub async fn list(
    c: &impl GenericClient,
    organ_id: &str,
    limit: i64,
    before: Option<i64>,
) -> Result<Vec<IntakeFailure>, DbError> {
    let before = before.unwrap_or(i64::MAX);
    let rows = c
        .query_typed(
            "SELECT failure_id, bucket, object_name, reason, deliveries, failed_at
             FROM intake_failures WHERE organ_id = $3 AND failure_id < $1
             ORDER BY failure_id DESC LIMIT $2",
            &[
                (&before, Type::INT8),
                (&limit, Type::INT8),
                (&organ_id, Type::VARCHAR),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| IntakeFailure {
            failure_id: r.get("failure_id"),
            bucket: r.get("bucket"),
            object_name: r.get("object_name"),
            reason: r.get("reason"),
            deliveries: r.get("deliveries"),
            failed_at: r.get("failed_at"),
        })
        .collect())
}
