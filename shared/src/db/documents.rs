//! The `documents` table: the current state of each document.

use super::{DbError, Type};
use crate::model::DocStatus;
use chrono::{DateTime, Utc};
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
}

pub const COLUMNS: &str =
    "doc_id, doc_name, file_name, object_name, content_type, size_bytes, status, \
    regulation_type, version, chunk_count, parser_name, index_name, error_message, metadata, \
    created_at, updated_at, current_run_id, source_bucket, content_sha256, source_etag, deleting_at";

impl Document {
    pub fn from_row(row: &Row) -> Document {
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
        "INSERT INTO documents (doc_id, doc_name, file_name, object_name, source_bucket)
         VALUES ($1, $2, $2, $3, $4)
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

pub async fn count(c: &impl GenericClient) -> Result<i64, DbError> {
    let row = c
        .query_typed_one("SELECT count(*) FROM documents", &[])
        .await?;
    Ok(row.get(0))
}
