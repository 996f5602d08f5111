//! What the API answers with: documents, runs and their stage timings, and the opaque cursors.

use crate::problem::ApiError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use docpipe_core::model::{DocStatus, RunStatus};
use docpipe_db::documents::Document;
use docpipe_db::runs::Run;
use docpipe_db::views::DocumentCursor;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub(crate) struct DocumentView {
    pub doc_id: String,
    pub doc_name: String,
    pub file_name: String,
    pub object_name: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub status: DocStatus,
    pub regulation_type: String,
    pub version: String,
    pub tags: Vec<String>,
    pub metadata: serde_json::Value,
    pub chunk_count: i32,
    pub parser_name: String,
    pub index_name: String,
    pub error_message: String,
    pub content_sha256: String,
    pub current_run_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// A delete has begun; the document is going away.
    pub deleting: bool,
}

impl From<Document> for DocumentView {
    fn from(d: Document) -> Self {
        let mut metadata = match d.metadata {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        // Registration keeps the tags in `metadata.tags`; they are shown as their own field.
        let tags = match metadata.remove("tags") {
            Some(serde_json::Value::Array(items)) => items
                .into_iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            Some(other) => {
                metadata.insert("tags".into(), other);
                Vec::new()
            }
            None => Vec::new(),
        };
        DocumentView {
            doc_id: d.doc_id,
            doc_name: d.doc_name,
            file_name: d.file_name,
            object_name: d.object_name,
            content_type: d.content_type,
            size_bytes: d.size_bytes,
            status: d.status,
            regulation_type: d.regulation_type,
            version: d.version,
            tags,
            metadata: serde_json::Value::Object(metadata),
            chunk_count: d.chunk_count,
            parser_name: d.parser_name,
            index_name: d.index_name,
            error_message: d.error_message,
            content_sha256: d.content_sha256,
            current_run_id: d.current_run_id,
            created_at: d.created_at,
            updated_at: d.updated_at,
            deleting: d.deleting_at.is_some(),
        }
    }
}

/// When a stage ended and how long it took (from the previous stage's end; `finished` counts from
/// the run's start).
#[derive(Debug, Serialize)]
pub struct StageTiming {
    pub at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
}

fn timing(at: Option<DateTime<Utc>>, from: Option<DateTime<Utc>>) -> StageTiming {
    StageTiming {
        at,
        duration_ms: match (at, from) {
            (Some(at), Some(from)) => Some((at - from).num_milliseconds().max(0)),
            _ => None,
        },
    }
}

#[derive(Debug, Serialize)]
pub struct Stages {
    pub stored: StageTiming,
    pub parsed: StageTiming,
    pub indexed: StageTiming,
    pub finished: StageTiming,
}

#[derive(Debug, Serialize)]
pub struct Counts {
    pub layouts: i32,
    pub structure_nodes: i32,
    pub semantic_blocks: i32,
    pub vector_chunks: i32,
    pub chunks: i32,
}

#[derive(Debug, Serialize)]
pub(crate) struct RunView {
    pub run_id: i64,
    pub trigger_type: String,
    pub run_status: RunStatus,
    pub started_at: DateTime<Utc>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub stages: Stages,
    pub counts: Counts,
    pub failure_stage: String,
    pub error_message: String,
    pub parser_backend: String,
    pub chunk_backend: String,
    pub embedding_model: String,
    pub index_name: String,
    pub content_sha256: String,
    pub metadata: serde_json::Value,
    /// Attempts of each stage, across deliveries and re-drives.
    pub parse_attempts: i32,
    pub index_attempts: i32,
    /// When the current stage's job was last sent; when a backed-off message comes back.
    pub queued_at: Option<DateTime<Utc>>,
    pub retry_at: Option<DateTime<Utc>>,
    pub redrives: i32,
    pub lease_renewed_at: Option<DateTime<Utc>>,
}

impl From<Run> for RunView {
    fn from(r: Run) -> Self {
        RunView {
            stages: Stages {
                stored: timing(r.stored_at, Some(r.started_at)),
                parsed: timing(r.parsed_at, r.stored_at),
                indexed: timing(r.indexed_at, r.parsed_at),
                finished: timing(r.finished_at, Some(r.started_at)),
            },
            counts: Counts {
                layouts: r.layout_count,
                structure_nodes: r.structure_node_count,
                semantic_blocks: r.semantic_block_count,
                vector_chunks: r.vector_chunk_count,
                chunks: r.chunk_count,
            },
            run_id: r.run_id,
            trigger_type: r.trigger_type,
            run_status: r.run_status,
            started_at: r.started_at,
            deadline_at: r.deadline_at,
            failure_stage: r.failure_stage,
            error_message: r.error_message,
            parser_backend: r.parser_backend,
            chunk_backend: r.chunk_backend,
            embedding_model: r.embedding_model,
            index_name: r.index_name,
            content_sha256: r.content_sha256,
            metadata: r.metadata,
            parse_attempts: r.parse_attempts,
            index_attempts: r.index_attempts,
            queued_at: r.queued_at,
            retry_at: r.visible_at,
            redrives: r.redrives,
            lease_renewed_at: r.lease_renewed_at,
        }
    }
}

const DOC_CURSOR_PREFIX: &str = "d1:";
const BLOCK_CURSOR_PREFIX: &str = "b1:";
const MAX_CURSOR_LEN: usize = 256;

fn bad_cursor() -> ApiError {
    ApiError::invalid("cursor is not one this API issued")
}

fn decode_cursor(cursor: &str, prefix: &str) -> Result<String, ApiError> {
    if cursor.is_empty() || cursor.len() > MAX_CURSOR_LEN {
        return Err(bad_cursor());
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad_cursor())?;
    let text = String::from_utf8(bytes).map_err(|_| bad_cursor())?;
    text.strip_prefix(prefix)
        .map(String::from)
        .ok_or_else(bad_cursor)
}

/// The opaque cursor of a document listing: the last row's `(updated_at, doc_id)`.
pub(crate) fn encode_doc_cursor(doc: &Document) -> String {
    URL_SAFE_NO_PAD.encode(format!(
        "{DOC_CURSOR_PREFIX}{}:{}",
        doc.updated_at.timestamp_micros(),
        doc.doc_id
    ))
}

pub(crate) fn decode_doc_cursor(cursor: &str) -> Result<DocumentCursor, ApiError> {
    let text = decode_cursor(cursor, DOC_CURSOR_PREFIX)?;
    let (micros, doc_id) = text.split_once(':').ok_or_else(bad_cursor)?;
    let micros: i64 = micros.parse().map_err(|_| bad_cursor())?;
    let updated_at = DateTime::from_timestamp_micros(micros).ok_or_else(bad_cursor)?;
    if !docpipe_core::ids::is_addressable_doc_id(doc_id) {
        return Err(bad_cursor());
    }
    Ok(DocumentCursor {
        updated_at,
        doc_id: doc_id.to_string(),
    })
}

pub(crate) fn encode_block_cursor(id: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{BLOCK_CURSOR_PREFIX}{id}"))
}

pub(crate) fn decode_block_cursor(cursor: &str) -> Result<i64, ApiError> {
    decode_cursor(cursor, BLOCK_CURSOR_PREFIX)?
        .parse::<i64>()
        .ok()
        .filter(|id| *id >= 0)
        .ok_or_else(bad_cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_junk() {
        let id = docpipe_core::ids::random_doc_id();
        let at = DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        let token = URL_SAFE_NO_PAD.encode(format!("d1:{}:{id}", at.timestamp_micros()));
        let c = decode_doc_cursor(&token).unwrap();
        assert_eq!(c.updated_at, at);
        assert_eq!(c.doc_id, id);
        assert_eq!(decode_block_cursor(&encode_block_cursor(42)).unwrap(), 42);
        for junk in [
            "",
            "!!!",
            "ZDE6",
            &URL_SAFE_NO_PAD.encode("d1:abc:doc_x"),
            &URL_SAFE_NO_PAD.encode(format!("b1:{}", 3)),
            &URL_SAFE_NO_PAD.encode(format!("d1:1:{id}/extra")),
        ] {
            assert!(decode_doc_cursor(junk).is_err(), "{junk:?}");
        }
        assert!(decode_block_cursor(&URL_SAFE_NO_PAD.encode("b1:-1")).is_err());
        assert!(decode_block_cursor(&token).is_err());
    }
}
