//! The `documents` table: the current state of each document.

use super::{DbError, Type};
use chrono::{DateTime, Utc};
use docpipe_core::model::DocStatus;
use serde::Serialize;
use tokio_postgres::{GenericClient, Row};

#[derive(Debug, Clone, Serialize)]
pub struct Document {
    pub doc_id: String,
    pub doc_name: String,
    pub file_name: String,
    pub object_name: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub status: DocStatus,
    pub regulation_type: String,
    pub version: String,
    pub chunk_count: i32,
    pub parser_name: String,
    pub index_name: String,
    pub error_message: String,
    pub metadata: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub current_run_id: Option<i64>,
    pub source_bucket: String,
    pub content_sha256: String,
    pub source_etag: String,
    /// Set when a delete has begun: every stage treats the document as gone.
    pub deleting_at: Option<DateTime<Utc>>,
    /// Its tenant ([`docpipe_core::tenant`]); never changes.
    pub organ_id: String,
}

pub(crate) const COLUMNS: &str =
    "doc_id, doc_name, file_name, object_name, content_type, size_bytes, status, \
    regulation_type, version, chunk_count, parser_name, index_name, error_message, metadata, \
    created_at, updated_at, current_run_id, source_bucket, content_sha256, source_etag, deleting_at, organ_id";

impl Document {
    pub(crate) fn from_row(row: &Row) -> Document {
        let status: String = row.get("status");
        Document {
            doc_id: row.get("doc_id"),
            doc_name: row.get("doc_name"),
            file_name: row.get("file_name"),
            object_name: row.get("object_name"),
            content_type: row.get("content_type"),
            size_bytes: row.get("size_bytes"),
            // The CHECK constraint admits only the five statuses.
            status: DocStatus::parse(&status).unwrap_or(DocStatus::Failed),
            regulation_type: row.get("regulation_type"),
            version: row.get("version"),
            chunk_count: row.get("chunk_count"),
            parser_name: row.get("parser_name"),
            index_name: row.get("index_name"),
            error_message: row.get("error_message"),
            metadata: row.get("metadata"),
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
            current_run_id: row.get("current_run_id"),
            source_bucket: row.get("source_bucket"),
            content_sha256: row.get("content_sha256"),
            source_etag: row.get("source_etag"),
            deleting_at: row.get("deleting_at"),
            organ_id: row.get("organ_id"),
        }
    }
}

pub async fn get(c: &impl GenericClient, doc_id: &str) -> Result<Option<Document>, DbError> {
    let row = c
        .query_typed_opt(
            &format!("SELECT {COLUMNS} FROM documents WHERE doc_id = $1"),
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.as_ref().map(Document::from_row))
}

/// The document, if it belongs to one of `organs` (every tenant when empty): another tenant's
/// document is as missing as one that never was, by the same one key lookup.
pub async fn get_in(
    c: &impl GenericClient,
    doc_id: &str,
    organs: &[String],
) -> Result<Option<Document>, DbError> {
    let row = c
        .query_typed_opt(
            &format!(
                "SELECT {COLUMNS} FROM documents
                 WHERE doc_id = $1 AND (cardinality($2::varchar[]) = 0 OR organ_id = ANY($2))"
            ),
            &[(&doc_id, Type::VARCHAR), (&organs, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(row.as_ref().map(Document::from_row))
}

/// The tenant an upload key names (`uploads/{organ_id}/…` of a registered tenant, else `default`).
pub async fn tenant_of_key(c: &impl GenericClient, key: &str) -> Result<String, DbError> {
    let row = c
        .query_typed_one(
            "SELECT docpipe_tenant_of_key($1)::text AS organ_id",
            &[(&key, Type::TEXT)],
        )
        .await?;
    Ok(row.get("organ_id"))
}

/// Registers a tenant, if new, so that uploads under `uploads/{organ_id}/` are its.
pub async fn ensure_tenant(c: &impl GenericClient, organ_id: &str) -> Result<(), DbError> {
    c.execute_typed(
        "INSERT INTO tenants (organ_id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[(&organ_id, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}

/// Finds the document for an object, creating its row if this is the first event for it, and locks
/// the row until the transaction ends: concurrent deliveries of one event serialise here.
pub async fn lock_or_create(
    c: &impl GenericClient,
    doc_id: &str,
    bucket: &str,
    key: &str,
    file_name: &str,
) -> Result<Document, DbError> {
    c.execute_typed(
        "INSERT INTO documents (doc_id, doc_name, file_name, object_name, source_bucket, organ_id)
         VALUES ($1, $2, $2, $3, $4, docpipe_tenant_of_key($3))
         ON CONFLICT (doc_id) DO NOTHING",
        &[
            (&doc_id, Type::VARCHAR),
            (&file_name, Type::VARCHAR),
            (&key, Type::VARCHAR),
            (&bucket, Type::VARCHAR),
        ],
    )
    .await?;
    let row = c
        .query_typed_one(
            &format!("SELECT {COLUMNS} FROM documents WHERE doc_id = $1 FOR UPDATE"),
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(Document::from_row(&row))
}

/// Locks an existing document's row for the rest of the transaction.
pub async fn lock(c: &impl GenericClient, doc_id: &str) -> Result<Option<Document>, DbError> {
    let row = c
        .query_typed_opt(
            &format!("SELECT {COLUMNS} FROM documents WHERE doc_id = $1 FOR UPDATE"),
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.as_ref().map(Document::from_row))
}

/// A document registered through the API before its upload (seed 000 §6.1 happens when the object
/// arrives). Every column not given keeps its default.
pub struct NewRegistration<'a> {
    pub doc_id: &'a str,
    pub doc_name: &'a str,
    pub file_name: &'a str,
    pub object_name: &'a str,
    pub content_type: &'a str,
    pub regulation_type: &'a str,
    pub version: &'a str,
    /// A JSON object, as text.
    pub metadata: &'a str,
    pub source_bucket: &'a str,
    pub organ_id: &'a str,
}

pub async fn insert_registered(
    c: &impl GenericClient,
    d: &NewRegistration<'_>,
) -> Result<(), DbError> {
    c.execute_typed(
        "INSERT INTO documents (doc_id, doc_name, file_name, object_name, content_type,
                                regulation_type, version, metadata, source_bucket, organ_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10)",
        &[
            (&d.doc_id, Type::VARCHAR),
            (&d.doc_name, Type::VARCHAR),
            (&d.file_name, Type::VARCHAR),
            (&d.object_name, Type::VARCHAR),
            (&d.content_type, Type::VARCHAR),
            (&d.regulation_type, Type::VARCHAR),
            (&d.version, Type::VARCHAR),
            (&d.metadata, Type::TEXT),
            (&d.source_bucket, Type::VARCHAR),
            (&d.organ_id, Type::VARCHAR),
        ],
    )
    .await?;
    Ok(())
}

/// What the store stage read of an object it then refused to store.
pub struct RejectedObject<'a> {
    pub object_name: &'a str,
    pub file_name: &'a str,
    pub size_bytes: i64,
    pub source_etag: &'a str,
    pub content_type: &'a str,
    /// Merged into `metadata` (a JSON object, as text): the full names a column cut short.
    pub metadata: &'a str,
}

/// Records the object a document's failed run was refused for, so its row says what arrived.
pub async fn record_rejected_object(
    c: &impl GenericClient,
    doc_id: &str,
    o: &RejectedObject<'_>,
) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE documents SET object_name = $2, file_name = $3, size_bytes = $4, source_etag = $5,
                content_type = $6, content_sha256 = '', updated_at = NOW(),
                metadata = metadata || $7::jsonb
         WHERE doc_id = $1",
        &[
            (&doc_id, Type::VARCHAR),
            (&o.object_name, Type::VARCHAR),
            (&o.file_name, Type::VARCHAR),
            (&o.size_bytes, Type::INT8),
            (&o.source_etag, Type::VARCHAR),
            (&o.content_type, Type::VARCHAR),
            (&o.metadata, Type::TEXT),
        ],
    )
    .await?;
    Ok(())
}

/// Marks the document as being deleted (seed 001: from then on nothing of it is served). False
/// when there is no such document. Marking twice keeps the first time.
pub async fn mark_deleting(c: &impl GenericClient, doc_id: &str) -> Result<bool, DbError> {
    let marked = c
        .query_typed_opt(
            "UPDATE documents SET deleting_at = COALESCE(deleting_at, NOW()), updated_at = NOW()
             WHERE doc_id = $1 RETURNING doc_id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    super::projection::refresh_works_of(c, &[doc_id.to_string()], &[]).await?;
    Ok(marked.is_some())
}

/// Removes the row; its runs, history, nodes and blocks go with it (foreign keys cascade). The
/// removal is announced (`DocumentDeleted`, crate::outbox) in the same statement, with the
/// version the document was a rendition of, read before the cascade takes it.
pub async fn remove(c: &impl GenericClient, doc_id: &str) -> Result<(), DbError> {
    c.execute_typed(
        "WITH rendition AS (
             SELECT vd.version_id, v.work_id FROM version_documents vd
             JOIN work_versions v ON v.version_id = vd.version_id WHERE vd.doc_id = $1),
         gone AS (
             DELETE FROM documents WHERE doc_id = $1
             RETURNING doc_id, file_name, object_name,
                       (EXTRACT(EPOCH FROM COALESCE(deleting_at, NOW())) * 1000)::int8 AS at_ms)
         INSERT INTO event_outbox (event_id, detail_type, doc_id, work_id, detail)
         SELECT 'DocumentDeleted:' || gone.doc_id || ':' || gone.at_ms::text, 'DocumentDeleted',
                gone.doc_id, r.work_id,
                jsonb_build_object('doc_id', gone.doc_id, 'file_name', gone.file_name,
                                   'key', gone.object_name, 'work_id', r.work_id,
                                   'version_id', r.version_id)
         FROM gone LEFT JOIN rendition r ON TRUE
         ON CONFLICT (event_id) DO NOTHING",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}

/// Inserts legacy records (a JSON array of `documents` rows, as text) in one statement; a record
/// whose doc_id exists is left untouched. Returns the doc_ids inserted.
pub async fn import_legacy(c: &impl GenericClient, records: &str) -> Result<Vec<String>, DbError> {
    let inserted = c
        .query_typed(
            "INSERT INTO documents (doc_id, doc_name, file_name, object_name, content_type,
                 size_bytes, status, regulation_type, version, summary, summary_latency_ms,
                 chunk_count, parser_name, index_name, error_message, metadata, created_at,
                 updated_at, source_bucket)
             SELECT doc_id, doc_name, file_name, object_name, content_type, size_bytes, status,
                    regulation_type, version, summary, summary_latency_ms, 0,
                    parser_name, index_name, error_message, metadata, created_at, updated_at,
                    source_bucket
             FROM jsonb_populate_recordset(NULL::documents, $1::jsonb)
             ON CONFLICT (doc_id) DO NOTHING
             RETURNING doc_id",
            &[(&records, Type::TEXT)],
        )
        .await?;
    Ok(inserted.iter().map(|r| r.get("doc_id")).collect())
}

/// Gives each imported document its run (failed at `import`) and its history row. A second
/// statement: a statement's own CTEs cannot see the rows it inserts.
pub async fn open_imported_runs(c: &impl GenericClient, doc_ids: &[String]) -> Result<(), DbError> {
    c.execute_typed(
        "WITH run AS (
             INSERT INTO document_processing_runs (doc_id, trigger_type, run_status,
                 failure_stage, error_message, finished_at, metadata)
             SELECT doc_id, 'upload', 'failed', 'import', error_message, NOW(),
                    jsonb_build_object('import', metadata->'import')
             FROM documents WHERE doc_id = ANY($1)
             RETURNING run_id, doc_id, error_message),
         history AS (
             INSERT INTO document_status_history (doc_id, run_id, from_status, to_status, stage, message)
             SELECT doc_id, run_id, '', 'failed', 'import', error_message FROM run)
         UPDATE documents d SET current_run_id = run.run_id FROM run WHERE d.doc_id = run.doc_id",
        &[(&doc_ids, Type::VARCHAR_ARRAY)],
    )
    .await?;
    Ok(())
}

pub async fn count(c: &impl GenericClient) -> Result<i64, DbError> {
    let row = c
        .query_typed_one("SELECT count(*) AS documents FROM documents", &[])
        .await?;
    Ok(row.get("documents"))
}

/// Whether any document is indexed (and not being deleted).
pub async fn any_indexed(c: &impl GenericClient) -> Result<bool, DbError> {
    let row = c
        .query_typed_one(
            "SELECT EXISTS (SELECT 1 FROM documents
                            WHERE status = 'indexed' AND deleting_at IS NULL) AS any_indexed",
            &[],
        )
        .await?;
    Ok(row.get("any_indexed"))
}

/// One document as the local `docs` command lists it.
pub struct DocumentLine {
    pub doc_id: String,
    pub status: String,
    /// 0 before its first run.
    pub current_run_id: i64,
    pub file_name: String,
    pub error_message: String,
}

/// Every document, oldest first. Unpaged: for the local development stack's `docs` command, not
/// for the API (which pages through `views::list_documents`).
pub async fn all_lines(c: &impl GenericClient) -> Result<Vec<DocumentLine>, DbError> {
    let rows = c
        .query_typed(
            "SELECT doc_id, status, COALESCE(current_run_id, 0) AS current_run_id, file_name,
                    error_message
             FROM documents ORDER BY created_at, doc_id",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| DocumentLine {
            doc_id: r.get("doc_id"),
            status: r.get("status"),
            current_run_id: r.get("current_run_id"),
            file_name: r.get("file_name"),
            error_message: r.get("error_message"),
        })
        .collect())
}
