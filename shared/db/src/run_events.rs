//! `run_events`: what happened to a run that is not a status change. Each attempt a worker starts,
//! each backoff with the error that caused it, each re-drive by the sweeper, each give-up.

use super::{DbError, Type};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::GenericClient;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The stage's job was sent (by the stage before).
    Queued,
    /// A worker took the run's lease and started the stage.
    Attempt,
    /// A delivery failed transiently; the message comes back at `visible_at`.
    Backoff,
    /// The sweeper sent the job again because it was lost.
    Redrive,
    /// A worker's lease ran out without renewal (it died or was cut off).
    LeaseExpired,
    /// The queue gave up on the job (dead-lettered).
    GaveUp,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Queued => "queued",
            Kind::Attempt => "attempt",
            Kind::Backoff => "backoff",
            Kind::Redrive => "redrive",
            Kind::LeaseExpired => "lease_expired",
            Kind::GaveUp => "gave_up",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunEvent {
    pub event_id: i64,
    pub run_id: i64,
    pub stage: String,
    pub kind: String,
    pub attempt: i32,
    pub message: String,
    pub visible_at: Option<DateTime<Utc>>,
    pub occurred_at: DateTime<Utc>,
}

/// Appends one event; the run must exist (the event goes with it when the document is deleted).
pub async fn record(
    c: &impl GenericClient,
    run_id: i64,
    stage: &str,
    kind: Kind,
    attempt: i32,
    message: &str,
) -> Result<(), DbError> {
    c.execute_typed(
        "INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message)
         SELECT doc_id, run_id, $2, $3, $4, $5 FROM document_processing_runs WHERE run_id = $1",
        &[
            (&run_id, Type::INT8),
            (&stage, Type::VARCHAR),
            (&kind.as_str(), Type::VARCHAR),
            (&attempt, Type::INT4),
            (&message, Type::TEXT),
        ],
    )
    .await?;
    Ok(())
}

/// A transient failure of a running run: the attempt's error is kept as the run's last error (what
/// a give-up reports), and the backoff as an event with the time the message comes back.
pub async fn record_backoff(
    c: &impl GenericClient,
    run_id: i64,
    stage: &str,
    delivery: i32,
    error: &str,
    delay_secs: f64,
) -> Result<(), DbError> {
    let detail = serde_json::json!({
        "last_error": { "stage": stage, "message": error, "at": Utc::now() }
    })
    .to_string();
    c.execute_typed(
        "WITH run AS (
             UPDATE document_processing_runs
             SET metadata = metadata || $5::jsonb,
                 visible_at = NOW() + make_interval(secs => $6)
             WHERE run_id = $1 AND run_status = 'running'
             RETURNING doc_id, run_id, visible_at)
         INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message, visible_at)
         SELECT doc_id, run_id, $2, 'backoff', $3, $4, visible_at FROM run",
        &[
            (&run_id, Type::INT8),
            (&stage, Type::VARCHAR),
            (&delivery, Type::INT4),
            (&error, Type::TEXT),
            (&detail, Type::TEXT),
            (&delay_secs, Type::FLOAT8),
        ],
    )
    .await?;
    Ok(())
}

/// A document's run events, oldest first.
pub async fn list_for_doc(c: &impl GenericClient, doc_id: &str) -> Result<Vec<RunEvent>, DbError> {
    let rows = c
        .query_typed(
            "SELECT event_id, run_id, stage, kind, attempt, message, visible_at, occurred_at
             FROM run_events WHERE doc_id = $1 ORDER BY event_id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| RunEvent {
            event_id: r.get("event_id"),
            run_id: r.get("run_id"),
            stage: r.get("stage"),
            kind: r.get("kind"),
            attempt: r.get("attempt"),
            message: r.get("message"),
            visible_at: r.get("visible_at"),
            occurred_at: r.get("occurred_at"),
        })
        .collect())
}
