//! What reconcile reads and keeps: where each listing stopped (`reconcile_cursors`), the state of
//! the documents it meets, the run horizon, and which artifact keys have a row.

use super::{DbError, Type};
use std::collections::{HashMap, HashSet};
use tokio_postgres::GenericClient;

/// Where a listing stopped, and how often it went through the whole of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    pub position: String,
    pub passes: i64,
}

pub async fn read_cursor(c: &impl GenericClient, name: &str) -> Result<Cursor, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT position, passes FROM reconcile_cursors WHERE name = $1",
            &[(&name, Type::VARCHAR)],
        )
        .await?;
    Ok(row.map_or_else(Cursor::default, |r| Cursor {
        position: r.get("position"),
        passes: r.get("passes"),
    }))
}

/// Keeps `position`; a listing that `wrapped` past its end counts one more pass.
pub async fn write_cursor(
    c: &impl GenericClient,
    name: &str,
    position: &str,
    wrapped: bool,
) -> Result<(), DbError> {
    let passes = i64::from(wrapped);
    c.execute_typed(
        "INSERT INTO reconcile_cursors (name, position, passes) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position,
             passes = reconcile_cursors.passes + EXCLUDED.passes, updated_at = NOW()",
        &[
            (&name, Type::VARCHAR),
            (&position, Type::VARCHAR),
            (&passes, Type::INT8),
        ],
    )
    .await?;
    Ok(())
}

/// A document as reconcile weighs what it holds.
pub struct DocState {
    pub status: String,
    pub current_run_id: Option<i64>,
    pub deleting: bool,
}

/// The states of those of `ids` that have a row.
pub async fn doc_states(
    c: &impl GenericClient,
    ids: &[String],
) -> Result<HashMap<String, DocState>, DbError> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = c
        .query_typed(
            "SELECT doc_id, status, current_run_id, deleting_at IS NOT NULL AS deleting
             FROM documents WHERE doc_id = ANY($1)",
            &[(&ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get("doc_id"),
                DocState {
                    status: r.get("status"),
                    current_run_id: r.get("current_run_id"),
                    deleting: r.get("deleting"),
                },
            )
        })
        .collect())
}

/// The newest run id PostgreSQL has handed out (0 before the first).
pub async fn run_horizon(c: &impl GenericClient) -> Result<i64, DbError> {
    let row = c
        .query_typed_one(
            "SELECT COALESCE(pg_sequence_last_value(
                 pg_get_serial_sequence('document_processing_runs', 'run_id')), 0) AS horizon",
            &[],
        )
        .await?;
    Ok(row.get("horizon"))
}

/// Those of `keys` that a `document_artifacts` row names.
pub async fn recorded_artifacts(
    c: &impl GenericClient,
    keys: &[String],
) -> Result<HashSet<String>, DbError> {
    let rows = c
        .query_typed(
            "SELECT object_name FROM document_artifacts WHERE object_name = ANY($1)",
            &[(&keys, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get("object_name")).collect())
}
