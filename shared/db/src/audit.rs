//! `audit_log` (seed 004 §14): who did what to which document, when, and how it ended. A record is
//! opened (`result = 'started'`) before the operation runs and closed with its result afterwards,
//! so an operation never happens without its record, even when the process dies in between. No
//! foreign key: the record outlives the document it names.

use super::{fit, DbError, Type};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::GenericClient;

/// What is being done, by whom.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    /// `user` (a JWT subject), `iam` (an IAM principal), `local` (the dev runner), `anonymous`.
    pub actor_type: &'a str,
    pub actor_id: &'a str,
    /// `register`, `retry`, `delete`.
    pub action: &'a str,
    pub target_type: &'a str,
    /// The document's id; empty until a registration has made one.
    pub target_id: &'a str,
    pub request_id: &'a str,
    pub detail: serde_json::Value,
    /// The caller's tenant.
    pub organ_id: &'a str,
}

/// `started` until [`finish`] records how it ended.
pub(crate) const STARTED: &str = "started";

/// Opens a record and returns its id.
pub async fn begin(c: &impl GenericClient, entry: &AuditEntry<'_>) -> Result<i64, DbError> {
    let detail = entry.detail.to_string();
    let row = c
        .query_typed_one(
            "INSERT INTO audit_log (actor_type, actor_id, action, target_type, target_id,
                                    request_id, result, detail, organ_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9) RETURNING id",
            &[
                (&fit(entry.actor_type, 32), Type::VARCHAR),
                (&fit(entry.actor_id, 256), Type::VARCHAR),
                (&fit(entry.action, 64), Type::VARCHAR),
                (&fit(entry.target_type, 32), Type::VARCHAR),
                (&fit(entry.target_id, 128), Type::VARCHAR),
                (&fit(entry.request_id, 128), Type::VARCHAR),
                (&STARTED, Type::VARCHAR),
                (&detail, Type::TEXT),
                (&fit(entry.organ_id, 64), Type::VARCHAR),
            ],
        )
        .await?;
    Ok(row.get("id"))
}

/// Closes a record: its result (`succeeded`, `rejected`, `failed`, `replayed`, …), the target
/// when the operation made it (a registration's new doc_id), and more detail merged in.
pub async fn finish(
    c: &impl GenericClient,
    id: i64,
    result: &str,
    target_id: Option<&str>,
    detail: &serde_json::Value,
) -> Result<(), DbError> {
    let detail = detail.to_string();
    let target_id = target_id.map(|t| fit(t, 128));
    c.execute_typed(
        "UPDATE audit_log SET result = $2, target_id = COALESCE($3, target_id),
                detail = detail || $4::jsonb
         WHERE id = $1",
        &[
            (&id, Type::INT8),
            (&fit(result, 32), Type::VARCHAR),
            (&target_id, Type::VARCHAR),
            (&detail, Type::TEXT),
        ],
    )
    .await?;
    Ok(())
}

/// Whether a delete of this document succeeded before: a repeated delete then answers as the
/// first one did.
pub async fn was_deleted(
    c: &impl GenericClient,
    doc_id: &str,
    organ_id: &str,
) -> Result<bool, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT 1 FROM audit_log
             WHERE target_type = 'document' AND target_id = $1 AND action = 'delete'
               AND result = 'succeeded' AND organ_id = $2
             LIMIT 1",
            &[(&doc_id, Type::VARCHAR), (&organ_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.is_some())
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    pub id: i64,
    pub actor_type: String,
    pub actor_id: String,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    pub request_id: String,
    pub result: String,
    pub detail: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// The records about one target, oldest first.
pub async fn for_target(
    c: &impl GenericClient,
    target_type: &str,
    target_id: &str,
) -> Result<Vec<AuditRecord>, DbError> {
    let rows = c
        .query_typed(
            "SELECT id, actor_type, actor_id, action, target_type, target_id, request_id, result,
                    detail, created_at
             FROM audit_log WHERE target_type = $1 AND target_id = $2 ORDER BY id",
            &[(&target_type, Type::VARCHAR), (&target_id, Type::VARCHAR)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| AuditRecord {
            id: r.get("id"),
            actor_type: r.get("actor_type"),
            actor_id: r.get("actor_id"),
            action: r.get("action"),
            target_type: r.get("target_type"),
            target_id: r.get("target_id"),
            request_id: r.get("request_id"),
            result: r.get("result"),
            detail: r.get("detail"),
            created_at: r.get("created_at"),
        })
        .collect())
}
