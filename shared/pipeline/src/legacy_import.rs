//! Seed 000 §7.3: existing document records (the old `documents.json`) loaded into `documents`,
//! through the state machine. Idempotent (a record whose doc_id exists is skipped), and refuses bad
//! records one by one with the reason, never the whole file.
//!
//! What an imported record means here: nothing of it is parsed or indexed in *this* system (its
//! old vectors live elsewhere), so a record the old system called `indexed` (or anything but
//! `failed`) would lie if it kept that status: search finds none of it. Each record therefore
//! arrives as `failed` at stage `import`, with one run and one history row that say it was
//! imported and what its old status was (`metadata.import.legacy_status`). Its original is
//! recorded in its source bucket, so a retry processes it (`POST /documents/{id}/retry` reads it
//! again and indexes it) and a delete removes it.

use docpipe_core::ids::is_safe_legacy_id;
use docpipe_core::model::DocStatus;
use docpipe_db::{documents, Db, DbError};
use serde::{Deserialize, Serialize};

/// One legacy record: the `documents` columns of seed 000, every one but `doc_id` optional.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LegacyDocument {
    pub doc_id: String,
    #[serde(default)]
    pub doc_name: String,
    #[serde(default)]
    pub file_name: String,
    #[serde(default)]
    pub object_name: String,
    #[serde(default)]
    pub content_type: String,
    #[serde(default)]
    pub size_bytes: i64,
    #[serde(default = "default_status")]
    pub status: String,
    #[serde(default)]
    pub regulation_type: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub summary_latency_ms: i32,
    #[serde(default)]
    pub chunk_count: i32,
    #[serde(default)]
    pub parser_name: String,
    #[serde(default)]
    pub index_name: String,
    #[serde(default)]
    pub error_message: String,
    #[serde(default = "empty_object")]
    pub metadata: serde_json::Value,
    #[serde(default)]
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
}

fn default_status() -> String {
    "pending".into()
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ImportReport {
    pub imported: Vec<String>,
    /// Already present: left exactly as they are.
    pub skipped: Vec<String>,
    /// (position in the file, doc_id if readable, reason)
    pub rejected: Vec<(usize, String, String)>,
}

fn check(doc: &LegacyDocument) -> Result<(), String> {
    if !is_safe_legacy_id(&doc.doc_id) {
        return Err("doc_id must be 1-128 characters of letters, digits, '-', '_' or '.', starting with a letter or digit, without '..'".into());
    }
    if DocStatus::parse(&doc.status).is_none() {
        return Err(format!(
            "status {:?} is not one of pending, stored, parsed, indexed, failed",
            doc.status
        ));
    }
    for (field, value, max) in [
        ("doc_name", &doc.doc_name, 512),
        ("file_name", &doc.file_name, 512),
        ("object_name", &doc.object_name, 1024),
        ("content_type", &doc.content_type, 128),
        ("regulation_type", &doc.regulation_type, 128),
        ("version", &doc.version, 64),
        ("parser_name", &doc.parser_name, 128),
        ("index_name", &doc.index_name, 128),
    ] {
        if value.chars().count() > max {
            return Err(format!("{field} is longer than {max} characters"));
        }
    }
    if doc.size_bytes < 0 || doc.chunk_count < 0 || doc.summary_latency_ms < 0 {
        return Err("size_bytes, chunk_count and summary_latency_ms must not be negative".into());
    }
    if !doc.metadata.is_object() {
        return Err("metadata must be a JSON object".into());
    }
    Ok(())
}

/// Why an imported record is `failed`, in its own words.
fn imported_message(doc: &LegacyDocument) -> String {
    match doc.status.as_str() {
        "failed" if !doc.error_message.is_empty() => {
            format!("imported as failed: {}", doc.error_message)
        }
        status => format!(
            "imported from a legacy record ({status}); nothing of it is indexed here: retry it to process it"
        ),
    }
}

/// Parses and loads a JSON array of records; `source_bucket` is where their originals are.
pub async fn import(db: &Db, json: &str, source_bucket: &str) -> Result<ImportReport, ImportError> {
    let values: Vec<serde_json::Value> =
        serde_json::from_str(json).map_err(|e| ImportError::NotAnArray(e.to_string()))?;
    let mut report = ImportReport::default();
    let mut good = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, value) in values.into_iter().enumerate() {
        let id_hint = value
            .get("doc_id")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        match serde_json::from_value::<LegacyDocument>(value) {
            Err(e) => report.rejected.push((i, id_hint, e.to_string())),
            Ok(doc) => match check(&doc) {
                Err(reason) => report.rejected.push((i, doc.doc_id, reason)),
                Ok(()) if !seen.insert(doc.doc_id.clone()) => report.rejected.push((
                    i,
                    doc.doc_id,
                    "the same doc_id appears earlier in the file".into(),
                )),
                Ok(()) => good.push(doc),
            },
        }
    }
    let now = chrono::Utc::now();
    let rows: Vec<serde_json::Value> = good
        .iter()
        .map(|d| {
            let mut v = serde_json::to_value(d).expect("records serialise");
            v["created_at"] = serde_json::json!(d.created_at.unwrap_or(now));
            v["updated_at"] = serde_json::json!(d.updated_at.or(d.created_at).unwrap_or(now));
            v["status"] = "failed".into();
            v["error_message"] = imported_message(d).into();
            v["source_bucket"] = source_bucket.into();
            v["metadata"]["import"] =
                serde_json::json!({ "legacy_status": d.status, "legacy_chunk_count": d.chunk_count });
            v
        })
        .collect();
    let payload = serde_json::Value::Array(rows).to_string();
    let mut client = db.client().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    // One statement for the whole file; a record whose doc_id exists is left untouched. Each new
    // one then gets its run (failed at `import`) and its history row, in the same transaction (a
    // second statement: a statement's own CTEs cannot see the rows it inserts).
    let new_ids = documents::import_legacy(&*tx, &payload).await?;
    documents::open_imported_runs(&*tx, &new_ids).await?;
    tx.commit().await.map_err(DbError::from)?;
    let inserted: std::collections::HashSet<String> = new_ids.into_iter().collect();
    for d in good {
        if inserted.contains(&d.doc_id) {
            report.imported.push(d.doc_id);
        } else {
            report.skipped.push(d.doc_id);
        }
    }
    Ok(report)
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("the file is not a JSON array of records: {0}")]
    NotAnArray(String),
    #[error("the database is unavailable")]
    Db(#[from] DbError),
}
