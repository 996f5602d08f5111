//! `document_processing_runs` and `document_status_history`: what each attempt did, and every status
//! change in order.

use super::{DbError, Type};
use chrono::{DateTime, Utc};
use docpipe_core::model::{RunStatus, Stage};
use serde::Serialize;
use tokio_postgres::{GenericClient, Row};

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub run_id: i64,
    pub doc_id: String,
    pub trigger_type: String,
    pub run_status: RunStatus,
    pub parser_backend: String,
    pub chunk_backend: String,
    pub embedding_model: String,
    pub index_name: String,
    pub started_at: DateTime<Utc>,
    pub stored_at: Option<DateTime<Utc>>,
    pub parsed_at: Option<DateTime<Utc>>,
    pub indexed_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub layout_count: i32,
    pub structure_node_count: i32,
    pub semantic_block_count: i32,
    pub vector_chunk_count: i32,
    pub chunk_count: i32,
    pub failure_stage: String,
    pub error_message: String,
    pub metadata: serde_json::Value,
    pub content_sha256: String,
    pub deadline_at: Option<DateTime<Utc>>,
    pub parse_attempts: i32,
    pub index_attempts: i32,
    pub queued_at: Option<DateTime<Utc>>,
    pub visible_at: Option<DateTime<Utc>>,
    pub redrives: i32,
    pub lease_owner: String,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub lease_renewed_at: Option<DateTime<Utc>>,
    /// Its job was decided in a commit and is not known to be on its queue yet.
    pub job_unsent: bool,
    /// Chunks (in order) an index attempt inserted and recorded; the next attempt goes on from
    /// there.
    pub index_progress: i32,
}

pub(crate) const COLUMNS: &str =
    "run_id, doc_id, trigger_type, run_status, parser_backend, chunk_backend, \
    embedding_model, index_name, started_at, stored_at, parsed_at, indexed_at, finished_at, \
    layout_count, structure_node_count, semantic_block_count, vector_chunk_count, chunk_count, \
    failure_stage, error_message, metadata, content_sha256, deadline_at, parse_attempts, \
    index_attempts, queued_at, visible_at, redrives, lease_owner, lease_expires_at, lease_renewed_at, \
    job_unsent, index_progress";

impl Run {
    pub(crate) fn from_row(row: &Row) -> Run {
        let status: String = row.get("run_status");
        Run {
            run_id: row.get("run_id"),
            doc_id: row.get("doc_id"),
            trigger_type: row.get("trigger_type"),
            run_status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
            parser_backend: row.get("parser_backend"),
            chunk_backend: row.get("chunk_backend"),
            embedding_model: row.get("embedding_model"),
            index_name: row.get("index_name"),
            started_at: row.get("started_at"),
            stored_at: row.get("stored_at"),
            parsed_at: row.get("parsed_at"),
            indexed_at: row.get("indexed_at"),
            finished_at: row.get("finished_at"),
            layout_count: row.get("layout_count"),
            structure_node_count: row.get("structure_node_count"),
            semantic_block_count: row.get("semantic_block_count"),
            vector_chunk_count: row.get("vector_chunk_count"),
            chunk_count: row.get("chunk_count"),
            failure_stage: row.get("failure_stage"),
            error_message: row.get("error_message"),
            metadata: row.get("metadata"),
            content_sha256: row.get("content_sha256"),
            deadline_at: row.get("deadline_at"),
            parse_attempts: row.get("parse_attempts"),
            index_attempts: row.get("index_attempts"),
            queued_at: row.get("queued_at"),
            visible_at: row.get("visible_at"),
            redrives: row.get("redrives"),
            lease_owner: row.get("lease_owner"),
            lease_expires_at: row.get("lease_expires_at"),
            lease_renewed_at: row.get("lease_renewed_at"),
            job_unsent: row.get("job_unsent"),
            index_progress: row.get("index_progress"),
        }
    }
}

pub async fn get(c: &impl GenericClient, run_id: i64) -> Result<Option<Run>, DbError> {
    let row = c
        .query_typed_opt(
            &format!("SELECT {COLUMNS} FROM document_processing_runs WHERE run_id = $1"),
            &[(&run_id, Type::INT8)],
        )
        .await?;
    Ok(row.as_ref().map(Run::from_row))
}

/// A document's runs, newest first.
pub async fn list_for_doc(c: &impl GenericClient, doc_id: &str) -> Result<Vec<Run>, DbError> {
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM document_processing_runs WHERE doc_id = $1
                 ORDER BY started_at DESC, run_id DESC"
            ),
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(rows.iter().map(Run::from_row).collect())
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusEvent {
    pub event_id: i64,
    pub doc_id: String,
    pub run_id: Option<i64>,
    pub from_status: String,
    pub to_status: String,
    pub stage: String,
    pub message: String,
    pub occurred_at: DateTime<Utc>,
}

/// A document's status history, oldest first.
pub async fn history(c: &impl GenericClient, doc_id: &str) -> Result<Vec<StatusEvent>, DbError> {
    let rows = c
        .query_typed(
            "SELECT event_id, doc_id, run_id, from_status, to_status, stage, message, occurred_at
             FROM document_status_history WHERE doc_id = $1 ORDER BY event_id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| StatusEvent {
            event_id: r.get("event_id"),
            doc_id: r.get("doc_id"),
            run_id: r.get("run_id"),
            from_status: r.get("from_status"),
            to_status: r.get("to_status"),
            stage: r.get("stage"),
            message: r.get("message"),
            occurred_at: r.get("occurred_at"),
        })
        .collect())
}

/// Counts the re-drive on the run (its job is queued again from now; an expired lease is cleared)
/// and records it as a run event, in one statement. False when another sweep got there first.
pub async fn record_redrive(
    c: &impl GenericClient,
    run_id: i64,
    redrives: i32,
    stage: Stage,
    reason: &str,
) -> Result<bool, DbError> {
    let rows = c
        .query_typed(
            "WITH prev AS (
                 SELECT lease_owner, lease_expires_at,
                        CASE WHEN $3 = 'index' THEN index_attempts ELSE parse_attempts END AS attempts
                 FROM document_processing_runs WHERE run_id = $1),
             run AS (
                 UPDATE document_processing_runs
                 SET redrives = redrives + 1, queued_at = NOW(), visible_at = NULL, job_unsent = true,
                     lease_owner = CASE WHEN lease_expires_at < NOW() THEN '' ELSE lease_owner END,
                     lease_expires_at = CASE WHEN lease_expires_at < NOW() THEN NULL ELSE lease_expires_at END
                 WHERE run_id = $1 AND run_status = 'running' AND redrives = $2
                 RETURNING doc_id, run_id, redrives),
             -- A lease cleared here is an attempt that died, counted as a takeover counts it.
             expired AS (
                 INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message)
                 SELECT run.doc_id, run.run_id, $3, 'lease_expired', prev.attempts,
                        'the lease ran out at ' || prev.lease_expires_at::text || ' without renewal'
                 FROM run, prev
                 WHERE prev.lease_owner <> '' AND prev.lease_expires_at < NOW())
             INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message)
             SELECT doc_id, run_id, $3, 'redrive', redrives, 're-drive ' || redrives || ': ' || $4
             FROM run RETURNING event_id",
            &[
                (&run_id, Type::INT8),
                (&redrives, Type::INT4),
                (&stage.as_str(), Type::VARCHAR),
                (&reason, Type::TEXT),
            ],
        )
        .await?;
    Ok(!rows.is_empty())
}

/// The run's job must be sent, decided in the caller's transaction: until [`job_sent`] clears it,
/// the sweeper counts a job as lost once its grace has passed, whatever the queue holds.
pub async fn job_unsent(c: &impl GenericClient, run_id: i64) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE document_processing_runs SET job_unsent = true WHERE run_id = $1",
        &[(&run_id, Type::INT8)],
    )
    .await?;
    Ok(())
}

/// The run's job is on its queue.
pub async fn job_sent(c: &impl GenericClient, run_id: i64) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE document_processing_runs SET job_unsent = false WHERE run_id = $1",
        &[(&run_id, Type::INT8)],
    )
    .await?;
    Ok(())
}

/// Records that the run's first `chunks` chunks are in the vector index, if `owner` still holds
/// its lease (a worker that lost the run records nothing). False when it does not.
pub async fn record_index_progress(
    c: &impl GenericClient,
    run_id: i64,
    owner: &str,
    chunks: i32,
) -> Result<bool, DbError> {
    let updated = c
        .execute_typed(
            "UPDATE document_processing_runs SET index_progress = $3
             WHERE run_id = $1 AND lease_owner = $2 AND run_status = 'running'",
            &[
                (&run_id, Type::INT8),
                (&owner, Type::VARCHAR),
                (&chunks, Type::INT4),
            ],
        )
        .await?;
    Ok(updated == 1)
}
