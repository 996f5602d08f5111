//! The status state machine. Each function is one statement that updates the document, updates the
//! run and appends to `document_status_history` together, guarded by a compare-and-set on the
//! expected current state: a duplicate or stale message matches no row and changes nothing.
//!
//! ```text
//! documents.status:  pending ─▶ stored ─▶ parsed ─▶ indexed          (failed from any of them)
//! run_status:        running ─▶ succeeded | failed
//! ```
//! A document's `current_run_id` names the one run whose messages may still move it.

use super::{DbError, Type};
use docpipe_core::model::{Stage, Trigger};
use tokio_postgres::GenericClient;

/// Seed 000 §6.1 / §6.6: opens a run and moves the document to `pending`. The caller holds the
/// document's row lock and has ended any run still in flight (a unique index admits one running run
/// per document, so a race that slipped past would fail here rather than index twice).
pub async fn open_run(
    c: &impl GenericClient,
    doc_id: &str,
    trigger: Trigger,
    message: &str,
    deadline_secs: i64,
) -> Result<i64, DbError> {
    let stage = match trigger {
        Trigger::Upload => Stage::Upload,
        Trigger::Retry => Stage::Retry,
    };
    let row = c
        .query_typed_one(
            "WITH prev AS (
                 -- A document's first run starts from nothing, whatever its row's default says.
                 SELECT CASE WHEN current_run_id IS NULL THEN '' ELSE status END AS status
                 FROM documents WHERE doc_id = $1),
             run AS (
                 INSERT INTO document_processing_runs (doc_id, trigger_type, run_status, deadline_at)
                 VALUES ($1, $2, 'running', NOW() + make_interval(secs => $5))
                 RETURNING run_id),
             doc AS (
                 UPDATE documents SET status = 'pending', current_run_id = (SELECT run_id FROM run),
                        error_message = '', updated_at = NOW()
                 WHERE doc_id = $1 RETURNING doc_id)
             INSERT INTO document_status_history (doc_id, run_id, from_status, to_status, stage, message)
             SELECT $1, run.run_id, COALESCE((SELECT status FROM prev), ''), 'pending', $3, $4
             FROM run, doc
             RETURNING run_id",
            &[
                (&doc_id, Type::VARCHAR),
                (&trigger.as_str(), Type::VARCHAR),
                (&stage.as_str(), Type::VARCHAR),
                (&message, Type::TEXT),
                (&(deadline_secs as f64), Type::FLOAT8),
            ],
        )
        .await?;
    // An indexed rendition that leaves `indexed` no longer answers, and the version before it
    // may answer again.
    super::projection::refresh_works_of(c, &[doc_id.to_string()], &[]).await?;
    Ok(row.get("run_id"))
}

/// What the store stage found when it checked the original.
#[derive(Debug, Clone)]
pub struct StoredObject<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
    pub file_name: &'a str,
    pub content_type: &'a str,
    pub size_bytes: i64,
    pub sha256: &'a str,
    pub etag: &'a str,
    /// Merged into the document's `metadata` (the full values of fields cut to their column).
    /// An overwrite (other content than the document stored) is read afresh: the old object's
    /// version claim goes, and its `version` and `regulation_type` are the new object's, empty
    /// or not.
    pub metadata: &'a serde_json::Value,
    /// What the object's metadata names; empty keeps the document's, but on an overwrite.
    pub version: &'a str,
    pub regulation_type: &'a str,
}

/// Seed 000 §6.2: `pending → stored`, recording what was stored; the run is now queued for parse
/// (waiting there is never a failure, so it has no deadline). Returns false when the document is
/// not `pending` on this run any more.
pub async fn mark_stored(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    object: &StoredObject<'_>,
) -> Result<bool, DbError> {
    let metadata = object.metadata.to_string();
    let rows = c
        .query_typed(
            "WITH doc AS (
                 UPDATE documents SET status = 'stored', file_name = $3, object_name = $4,
                        source_bucket = $5, content_type = $6, size_bytes = $7,
                        content_sha256 = $8, source_etag = $9, updated_at = NOW(),
                        doc_name = CASE WHEN doc_name = '' THEN $3 ELSE doc_name END,
                        metadata = CASE WHEN content_sha256 NOT IN ('', $8)
                                        THEN (metadata - 'version_of') || $10::jsonb
                                        ELSE metadata || $10::jsonb END,
                        version = CASE WHEN content_sha256 NOT IN ('', $8) OR $11 <> '' THEN $11
                                       ELSE version END,
                        regulation_type = CASE WHEN content_sha256 NOT IN ('', $8) OR $12 <> ''
                                               THEN $12 ELSE regulation_type END
                 WHERE doc_id = $1 AND current_run_id = $2 AND status = 'pending' AND deleting_at IS NULL
                 RETURNING doc_id),
             run AS (
                 UPDATE document_processing_runs SET stored_at = NOW(), content_sha256 = $8,
                        deadline_at = NULL, queued_at = NOW(), visible_at = NULL
                 WHERE run_id = $2 AND run_status = 'running' AND EXISTS (SELECT 1 FROM doc)
                 RETURNING run_id),
             queued AS (
                 INSERT INTO run_events (doc_id, run_id, stage, kind, message)
                 SELECT $1, $2, 'parse', 'queued', 'parse job sent' FROM run)
             INSERT INTO document_status_history (doc_id, run_id, from_status, to_status, stage, message)
             SELECT $1, $2, 'pending', 'stored', 'store', 'original checked: ' || $7::text || ' bytes, sha256 ' || $8
             FROM doc, run
             RETURNING event_id",
            &[
                (&doc_id, Type::VARCHAR),
                (&run_id, Type::INT8),
                (&object.file_name, Type::VARCHAR),
                (&object.key, Type::VARCHAR),
                (&object.bucket, Type::VARCHAR),
                (&object.content_type, Type::VARCHAR),
                (&object.size_bytes, Type::INT8),
                (&object.sha256, Type::VARCHAR),
                (&object.etag, Type::VARCHAR),
                (&metadata, Type::TEXT),
                (&object.version, Type::VARCHAR),
                (&object.regulation_type, Type::VARCHAR),
            ],
        )
        .await?;
    Ok(!rows.is_empty())
}

/// Seed 000 §6.5: fails a run that is still running, with its stage and reason. When the run is the
/// document's current one, the document becomes `failed` too; a superseded run fails alone. Returns
/// false when the run had already ended (a duplicate failure changes nothing).
pub async fn fail_run(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    stage: Stage,
    message: &str,
) -> Result<bool, DbError> {
    // The history row goes with the document's change: a superseded run fails alone, silently,
    // since the document's history is about its current run.
    let rows = c
        .query_typed(
            "WITH prev AS (SELECT status FROM documents WHERE doc_id = $1 AND current_run_id = $2),
             run AS (
                 UPDATE document_processing_runs SET run_status = 'failed', failure_stage = $3,
                        error_message = $4, finished_at = NOW()
                 WHERE run_id = $2 AND doc_id = $1 AND run_status = 'running'
                 RETURNING run_id),
             doc AS (
                 UPDATE documents SET status = 'failed', error_message = $4, updated_at = NOW()
                 WHERE doc_id = $1 AND current_run_id = $2 AND EXISTS (SELECT 1 FROM run)
                 RETURNING doc_id),
             history AS (
                 INSERT INTO document_status_history (doc_id, run_id, from_status, to_status, stage, message)
                 SELECT $1, $2, COALESCE((SELECT status FROM prev), ''), 'failed', $3, $4
                 FROM doc
                 RETURNING event_id),
             -- Announced with the document's change, as its history row is (crate::outbox).
             announced AS (
                 INSERT INTO event_outbox (event_id, detail_type, doc_id, detail)
                 SELECT 'DocumentFailed:' || $1 || ':' || $2::text, 'DocumentFailed', $1,
                        jsonb_build_object('doc_id', $1::text, 'run_id', $2::int8,
                                           'stage', $3::text, 'reason', left($4::text, 2000),
                                           'from_status', COALESCE((SELECT status FROM prev), ''))
                 FROM doc
                 ON CONFLICT (event_id) DO NOTHING)
             SELECT run_id FROM run",
            &[
                (&doc_id, Type::VARCHAR),
                (&run_id, Type::INT8),
                (&stage.as_str(), Type::VARCHAR),
                (&message, Type::TEXT),
            ],
        )
        .await?;
    Ok(!rows.is_empty())
}

/// What a parse produced, for the run's counters.
#[derive(Debug, Clone)]
pub struct ParseCounts<'a> {
    pub parser_backend: &'a str,
    pub chunk_backend: &'a str,
    pub layouts: i32,
    pub structure_nodes: i32,
    pub semantic_blocks: i32,
    pub vector_chunks: i32,
    /// Merged into the run's `metadata` (format, pages, warnings, duration).
    pub metadata: serde_json::Value,
}

/// Seed 000 §6.3 steps 1–3 and 7: `stored → parsed` with the run's counts. Returns false when the
/// document is not `stored` on this run any more (a duplicate or stale message).
pub async fn mark_parsed(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    counts: &ParseCounts<'_>,
) -> Result<bool, DbError> {
    let metadata = counts.metadata.to_string();
    let rows = c
        .query_typed(
            "WITH doc AS (
                 UPDATE documents SET status = 'parsed', parser_name = $3, updated_at = NOW()
                 WHERE doc_id = $1 AND current_run_id = $2 AND status = 'stored' AND deleting_at IS NULL
                 RETURNING doc_id),
             run AS (
                 UPDATE document_processing_runs SET parsed_at = NOW(), parser_backend = $3,
                        chunk_backend = $4, layout_count = $5, structure_node_count = $6,
                        semantic_block_count = $7, vector_chunk_count = $8,
                        metadata = metadata || $9::jsonb,
                        deadline_at = NULL, queued_at = NOW(), visible_at = NULL,
                        lease_owner = '', lease_expires_at = NULL, lease_renewed_at = NULL
                 WHERE run_id = $2 AND run_status = 'running' AND EXISTS (SELECT 1 FROM doc)
                 RETURNING run_id),
             queued AS (
                 INSERT INTO run_events (doc_id, run_id, stage, kind, message)
                 SELECT $1, $2, 'index', 'queued', 'index job sent' FROM run)
             INSERT INTO document_status_history (doc_id, run_id, from_status, to_status, stage, message)
             SELECT $1, $2, 'stored', 'parsed', 'parse',
                    $6::text || ' headings, ' || $7::text || ' blocks, ' || $8::text || ' chunks'
             FROM doc, run
             RETURNING event_id",
            &[
                (&doc_id, Type::VARCHAR),
                (&run_id, Type::INT8),
                (&counts.parser_backend, Type::VARCHAR),
                (&counts.chunk_backend, Type::VARCHAR),
                (&counts.layouts, Type::INT4),
                (&counts.structure_nodes, Type::INT4),
                (&counts.semantic_blocks, Type::INT4),
                (&counts.vector_chunks, Type::INT4),
                (&metadata, Type::TEXT),
            ],
        )
        .await?;
    Ok(!rows.is_empty())
}

/// Seed 001's lease, renewed: true while the caller still holds it. A lease that another worker
/// took over, or a run that ended, answers false.
pub async fn renew_lease(
    c: &impl GenericClient,
    run_id: i64,
    owner: &str,
    lease_secs: f64,
) -> Result<bool, DbError> {
    let renewed = c
        .execute_typed(
            "UPDATE document_processing_runs
             SET lease_expires_at = NOW() + make_interval(secs => $3), lease_renewed_at = NOW()
             WHERE run_id = $1 AND run_status = 'running' AND lease_owner = $2",
            &[
                (&run_id, Type::INT8),
                (&owner, Type::VARCHAR),
                (&lease_secs, Type::FLOAT8),
            ],
        )
        .await?;
    Ok(renewed == 1)
}

/// What [`start_attempt`] learned while taking the run's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first attempt of this stage on this run, counted across deliveries and re-drives.
    /// Counted when the lease is taken, before anything is written, so an attempt that wrote
    /// anything has always been counted.
    pub attempt: i32,
    /// Whether the document has runs other than this one, whose vectors a reindex must remove.
    pub other_runs: bool,
    /// Earlier attempts of this stage on this run that died holding the lease (timed out, killed,
    /// out of memory), this takeover's finding included.
    pub abandoned: i32,
}

/// Seed 001's lease, taken for an attempt of `stage` (parse or index): granted when nobody holds
/// it, the caller already does, or the holder's lease ran out (it died; that is recorded). Counts
/// the attempt and records it, in one statement. `None` when another worker holds a live lease or
/// the run is no longer running.
pub async fn start_attempt(
    c: &impl GenericClient,
    run_id: i64,
    stage: Stage,
    owner: &str,
    lease_secs: f64,
) -> Result<Option<Attempt>, DbError> {
    let index = stage == Stage::Index;
    let row = c
        .query_typed_opt(
            "WITH prev AS (
                 SELECT lease_owner, lease_expires_at FROM document_processing_runs WHERE run_id = $1),
             run AS (
                 UPDATE document_processing_runs r
                 SET lease_owner = $2, lease_expires_at = NOW() + make_interval(secs => $3),
                     lease_renewed_at = NOW(), visible_at = NULL,
                     index_attempts = r.index_attempts + CASE WHEN $4 THEN 1 ELSE 0 END,
                     parse_attempts = r.parse_attempts + CASE WHEN $4 THEN 0 ELSE 1 END
                 WHERE r.run_id = $1 AND r.run_status = 'running'
                   AND (r.lease_owner = '' OR r.lease_owner = $2 OR r.lease_expires_at < NOW())
                 RETURNING r.doc_id, r.run_id,
                           CASE WHEN $4 THEN r.index_attempts ELSE r.parse_attempts END AS attempt,
                           EXISTS (SELECT 1 FROM document_processing_runs o
                                   WHERE o.doc_id = r.doc_id AND o.run_id <> r.run_id) AS other_runs),
             expired AS (
                 INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message)
                 SELECT run.doc_id, run.run_id, $5, 'lease_expired', run.attempt - 1,
                        'the previous attempt''s lease ran out at ' || prev.lease_expires_at::text || ' without renewal'
                 FROM run, prev WHERE prev.lease_owner NOT IN ('', $2)),
             attempt AS (
                 INSERT INTO run_events (doc_id, run_id, stage, kind, attempt, message)
                 SELECT doc_id, run_id, $5, 'attempt', attempt, 'started by ' || $2 FROM run)
             -- Dead attempts, each once: the sweeper's re-drive and this takeover may both
             -- record the same one (they race on an expired lease), under the same attempt number.
             SELECT attempt, other_runs,
                    (SELECT count(DISTINCT dead.attempt)::int4 FROM (
                         SELECT e.attempt FROM run_events e
                          WHERE e.run_id = $1 AND e.stage = $5 AND e.kind = 'lease_expired'
                         UNION ALL
                         SELECT run.attempt - 1 FROM prev
                          WHERE prev.lease_owner NOT IN ('', $2)) dead) AS abandoned
             FROM run",
            &[
                (&run_id, Type::INT8),
                (&owner, Type::VARCHAR),
                (&lease_secs, Type::FLOAT8),
                (&index, Type::BOOL),
                (&stage.as_str(), Type::VARCHAR),
            ],
        )
        .await?;
    Ok(row.map(|row| Attempt {
        attempt: row.get("attempt"),
        other_runs: row.get("other_runs"),
        abandoned: row.get("abandoned"),
    }))
}

pub async fn release_lease(
    c: &impl GenericClient,
    run_id: i64,
    owner: &str,
) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE document_processing_runs SET lease_owner = '', lease_expires_at = NULL
         WHERE run_id = $1 AND lease_owner = $2",
        &[(&run_id, Type::INT8), (&owner, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}

/// What the index stage recorded.
#[derive(Debug, Clone)]
pub struct IndexCounts<'a> {
    pub chunks: i32,
    pub embedding_model: &'a str,
    pub index_name: &'a str,
    pub metadata: serde_json::Value,
}

/// Seed 000 §6.4: `parsed → indexed`; the run succeeds and its lease is released. Fenced by the
/// lease: only the worker that holds it commits, so a stale worker whose lease was taken over can
/// never mark a run indexed over vectors it does not vouch for. The caller holds the document's row
/// lock (see [`crate::documents::lock`]), so the run and the document change together or not
/// at all. Returns false when the document is not `parsed` on this run any more, is being
/// deleted, or the lease is somebody else's.
pub async fn mark_indexed(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    owner: &str,
    counts: &IndexCounts<'_>,
) -> Result<bool, DbError> {
    let metadata = counts.metadata.to_string();
    let rows = c
        .query_typed(
            "WITH run AS (
                 UPDATE document_processing_runs SET indexed_at = NOW(), finished_at = NOW(),
                        run_status = 'succeeded', vector_chunk_count = $3, chunk_count = $3,
                        embedding_model = $5, index_name = $4, lease_owner = '',
                        lease_expires_at = NULL, deadline_at = NULL, visible_at = NULL,
                        metadata = metadata || $6::jsonb
                 WHERE run_id = $2 AND run_status = 'running' AND lease_owner = $7
                   AND EXISTS (SELECT 1 FROM documents WHERE doc_id = $1 AND current_run_id = $2
                               AND status = 'parsed' AND deleting_at IS NULL)
                 RETURNING run_id),
             doc AS (
                 UPDATE documents SET status = 'indexed', chunk_count = $3, index_name = $4,
                        error_message = '', updated_at = NOW()
                 WHERE doc_id = $1 AND EXISTS (SELECT 1 FROM run)
                 RETURNING doc_id, file_name, object_name, content_sha256),
             -- Announced in the commit that makes it true (crate::outbox).
             announced AS (
                 INSERT INTO event_outbox (event_id, detail_type, doc_id, detail)
                 SELECT 'DocumentIndexed:' || $1 || ':' || $2::text, 'DocumentIndexed', $1,
                        jsonb_build_object('doc_id', $1::text, 'run_id', $2::int8,
                                           'file_name', doc.file_name, 'key', doc.object_name,
                                           'sha256', doc.content_sha256, 'chunks', $3::int4,
                                           'index_name', $4::text, 'embedding_model', $5::text)
                 FROM doc
                 ON CONFLICT (event_id) DO NOTHING)
             INSERT INTO document_status_history (doc_id, run_id, from_status, to_status, stage, message)
             SELECT $1, $2, 'parsed', 'indexed', 'index', $3::text || ' chunks in ' || $4 || ' (' || $5 || ')'
             FROM doc, run
             RETURNING event_id",
            &[
                (&doc_id, Type::VARCHAR),
                (&run_id, Type::INT8),
                (&counts.chunks, Type::INT4),
                (&counts.index_name, Type::VARCHAR),
                (&counts.embedding_model, Type::VARCHAR),
                (&metadata, Type::TEXT),
                (&owner, Type::VARCHAR),
            ],
        )
        .await?;
    Ok(!rows.is_empty())
}
