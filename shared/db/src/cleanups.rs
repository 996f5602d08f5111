//! The clean-up outbox: removals decided in PostgreSQL and carried out in Milvus or S3. A row is
//! written with the decision, and removed only once the removal has succeeded; until then the
//! sweeper retries it. Nothing a failed removal leaves behind is forgotten.

use super::{DbError, Type};
use tokio_postgres::GenericClient;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The vectors of one run.
    VectorsRun,
    /// The artifacts of one run.
    ArtifactsRun,
    /// A delete to finish: the original, the artifacts, the vectors, then the row.
    Document,
    /// The document's version state (`search_projection`) to write onto its vectors.
    Projection,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::VectorsRun => "vectors_run",
            Kind::ArtifactsRun => "artifacts_run",
            Kind::Document => "document",
            Kind::Projection => "projection",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "vectors_run" => Kind::VectorsRun,
            "artifacts_run" => Kind::ArtifactsRun,
            "document" => Kind::Document,
            "projection" => Kind::Projection,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleanup {
    pub cleanup_id: i64,
    pub kind: Kind,
    pub doc_id: String,
    pub run_id: Option<i64>,
    pub reason: String,
    pub attempts: i32,
}

/// Records a removal to carry out (once per target: a second record of the same one only brings
/// it forward). Returns its id.
pub async fn record(
    c: &impl GenericClient,
    kind: Kind,
    doc_id: &str,
    run_id: Option<i64>,
    reason: &str,
) -> Result<i64, DbError> {
    let row = c
        .query_typed_one(
            "INSERT INTO cleanups (kind, doc_id, run_id, reason) VALUES ($1, $2, $3, $4)
             ON CONFLICT (kind, doc_id, COALESCE(run_id, 0))
             DO UPDATE SET next_at = LEAST(cleanups.next_at, NOW())
             RETURNING cleanup_id",
            &[
                (&kind.as_str(), Type::VARCHAR),
                (&doc_id, Type::VARCHAR),
                (&run_id, Type::INT8),
                (&reason, Type::TEXT),
            ],
        )
        .await?;
    Ok(row.get("cleanup_id"))
}

/// The removal succeeded (or turned out to be unnecessary).
pub async fn done(c: &impl GenericClient, cleanup_id: i64) -> Result<(), DbError> {
    c.execute_typed(
        "DELETE FROM cleanups WHERE cleanup_id = $1",
        &[(&cleanup_id, Type::INT8)],
    )
    .await?;
    Ok(())
}

/// Done with every clean-up of this kind for the document (a delete that finished).
pub async fn done_for(c: &impl GenericClient, kind: Kind, doc_id: &str) -> Result<(), DbError> {
    c.execute_typed(
        "DELETE FROM cleanups WHERE kind = $1 AND doc_id = $2",
        &[(&kind.as_str(), Type::VARCHAR), (&doc_id, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}

/// The removal failed: try again after `retry_in_secs`.
pub async fn failed(
    c: &impl GenericClient,
    cleanup_id: i64,
    error: &str,
    retry_in_secs: i64,
) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE cleanups SET attempts = attempts + 1, last_error = $2,
                next_at = NOW() + make_interval(secs => $3::int8)
         WHERE cleanup_id = $1",
        &[
            (&cleanup_id, Type::INT8),
            (&error, Type::TEXT),
            (&retry_in_secs, Type::INT8),
        ],
    )
    .await?;
    Ok(())
}

/// The clean-ups that are due, oldest first.
pub async fn due(c: &impl GenericClient, limit: i64) -> Result<Vec<Cleanup>, DbError> {
    let rows = c
        .query_typed(
            "SELECT cleanup_id, kind, doc_id, run_id, reason, attempts FROM cleanups
             WHERE next_at <= NOW() ORDER BY next_at, cleanup_id LIMIT $1",
            &[(&limit, Type::INT8)],
        )
        .await?;
    Ok(rows.iter().filter_map(cleanup_of).collect())
}

/// The due clean-ups of one kind, oldest first.
pub async fn due_of(
    c: &impl GenericClient,
    kind: Kind,
    limit: i64,
) -> Result<Vec<Cleanup>, DbError> {
    let rows = c
        .query_typed(
            "SELECT cleanup_id, kind, doc_id, run_id, reason, attempts FROM cleanups
             WHERE kind = $1 AND next_at <= NOW() ORDER BY next_at, cleanup_id LIMIT $2",
            &[(&kind.as_str(), Type::VARCHAR), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows.iter().filter_map(cleanup_of).collect())
}

/// The due `projection` clean-ups of `doc_id` and of the other documents of its work: what one
/// index commit changed (bounded by one work's documents), oldest first.
pub async fn due_projections_around(
    c: &impl GenericClient,
    doc_id: &str,
    limit: i64,
) -> Result<Vec<Cleanup>, DbError> {
    let rows = c
        .query_typed(
            "SELECT cleanup_id, kind, doc_id, run_id, reason, attempts FROM cleanups
             WHERE kind = 'projection' AND next_at <= NOW()
               AND (doc_id = $1 OR doc_id IN (
                    SELECT sibling.doc_id FROM version_documents own
                    JOIN work_versions v ON v.version_id = own.version_id
                    JOIN work_versions w ON w.work_id = v.work_id
                    JOIN version_documents sibling ON sibling.version_id = w.version_id
                    WHERE own.doc_id = $1))
             ORDER BY next_at, cleanup_id LIMIT $2",
            &[(&doc_id, Type::VARCHAR), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows.iter().filter_map(cleanup_of).collect())
}

/// A row of `cleanups` (none for a kind this build does not know).
fn cleanup_of(r: &tokio_postgres::Row) -> Option<Cleanup> {
    Some(Cleanup {
        cleanup_id: r.get("cleanup_id"),
        kind: Kind::parse(r.get("kind"))?,
        doc_id: r.get("doc_id"),
        run_id: r.get("run_id"),
        reason: r.get("reason"),
        attempts: r.get("attempts"),
    })
}

/// How many clean-ups are waiting (for status and tests).
pub async fn pending(c: &impl GenericClient, doc_id: &str) -> Result<i64, DbError> {
    let row = c
        .query_typed_one(
            "SELECT count(*) AS pending FROM cleanups WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.get("pending"))
}
