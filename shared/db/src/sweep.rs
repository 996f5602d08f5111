//! What the sweeper reads: runs whose upload never arrived, and runs whose job may be lost.

use super::{DbError, Type};
use std::time::Duration;
use tokio_postgres::GenericClient;

/// A registered upload whose deadline passed with its run still `pending`.
pub struct UnarrivedUpload {
    pub run_id: i64,
    pub doc_id: String,
    /// The deadline, as PostgreSQL prints a timestamp.
    pub deadline: String,
    pub waited_secs: i64,
}

/// Up to `limit` pending runs past their upload deadline, the longest overdue first.
pub async fn unarrived_uploads(
    c: &impl GenericClient,
    limit: i64,
) -> Result<Vec<UnarrivedUpload>, DbError> {
    let rows = c
        .query_typed(
            "SELECT r.run_id, r.doc_id, r.deadline_at::text AS deadline,
                    EXTRACT(EPOCH FROM (NOW() - r.started_at))::int8 AS waited
             FROM document_processing_runs r
             JOIN documents d ON d.doc_id = r.doc_id AND d.current_run_id = r.run_id
             WHERE r.run_status = 'running' AND d.status = 'pending' AND r.deadline_at < NOW()
             ORDER BY r.deadline_at LIMIT $1",
            &[(&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| UnarrivedUpload {
            run_id: r.get("run_id"),
            doc_id: r.get("doc_id"),
            deadline: r.get("deadline"),
            waited_secs: r.get("waited"),
        })
        .collect())
}

/// A queued run the sweeper looks at, with what it knows of the run's job.
pub struct QueuedRun {
    pub run_id: i64,
    pub doc_id: String,
    pub redrives: i32,
    /// Attempts of the stage the run is queued for.
    pub attempts: i32,
    pub lease_expired: bool,
    /// Its job was decided in a commit and never known to be sent.
    pub unsent: bool,
    /// Queued longer than the queue keeps a message.
    pub past_retention: bool,
    pub queued_secs: i64,
}

/// Up to `limit` current runs of documents in `status` (queued for the parse stage when
/// `index` is false, for the index stage when true) with no live lease, not waiting out a
/// backoff, and sent longer than `grace` ago: the oldest first.
pub async fn queued_runs(
    c: &impl GenericClient,
    status: &str,
    index: bool,
    limit: i64,
    grace: Duration,
    retention: Duration,
) -> Result<Vec<QueuedRun>, DbError> {
    let (grace, retention) = (grace.as_secs_f64(), retention.as_secs_f64());
    let rows = c
        .query_typed(
            "SELECT r.run_id, r.doc_id, r.redrives,
                    CASE WHEN $5 THEN r.index_attempts ELSE r.parse_attempts END AS attempts,
                    (r.lease_owner <> '' AND r.lease_expires_at < NOW()) AS lease_expired,
                    COALESCE(r.queued_at < NOW() - make_interval(secs => $4), false)
                        AS past_retention,
                    COALESCE(EXTRACT(EPOCH FROM (NOW() - r.queued_at))::int8, 0) AS queued_secs,
                    r.job_unsent
             FROM document_processing_runs r
             JOIN documents d ON d.doc_id = r.doc_id AND d.current_run_id = r.run_id
             WHERE r.run_status = 'running' AND d.status = $1 AND d.deleting_at IS NULL
               AND (r.lease_owner = '' OR r.lease_expires_at < NOW())
               AND (r.visible_at IS NULL OR r.visible_at < NOW())
               AND (r.lease_owner <> '' OR r.queued_at < NOW() - make_interval(secs => $3))
             ORDER BY r.queued_at LIMIT $2",
            &[
                (&status, Type::VARCHAR),
                (&limit, Type::INT8),
                (&grace, Type::FLOAT8),
                (&retention, Type::FLOAT8),
                (&index, Type::BOOL),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| QueuedRun {
            run_id: r.get("run_id"),
            doc_id: r.get("doc_id"),
            redrives: r.get("redrives"),
            attempts: r.get("attempts"),
            lease_expired: r.get("lease_expired"),
            past_retention: r.get("past_retention"),
            queued_secs: r.get("queued_secs"),
            unsent: r.get("job_unsent"),
        })
        .collect())
}
