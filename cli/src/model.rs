//! Typed views of the API's answers, for the fields the commands show. Every field has a default,
//! so an answer with a field more or less still reads.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Doc {
    pub doc_id: String,
    pub doc_name: String,
    pub file_name: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub status: String,
    pub regulation_type: String,
    pub version: String,
    pub tags: Vec<String>,
    pub chunk_count: i64,
    pub error_message: String,
    pub content_sha256: String,
    pub current_run_id: Option<i64>,
    pub created_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    pub deleting: bool,
    pub current_run: Option<Run>,
    /// Where the current run is (the document's detail carries it; a listing does not).
    pub progress: Option<Progress>,
}

/// The API's `progress`: queued, backing off or running, in which stage, with its attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Progress {
    pub state: String,
    pub stage: Option<String>,
    pub attempts: i64,
    pub redrives: i64,
    pub summary: String,
}

impl Doc {
    pub fn from_value(v: &Value) -> Doc {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    /// The name to show: the document's name, else its file name, else its id.
    pub fn name(&self) -> &str {
        [&self.doc_name, &self.file_name, &self.doc_id]
            .into_iter()
            .find(|s| !s.is_empty())
            .map(String::as_str)
            .unwrap_or("")
    }

    pub fn is_terminal(&self) -> bool {
        is_terminal(&self.status)
    }

    /// What a change of progress is worth a line for: a new state, stage, attempt or re-drive
    /// (not a lease renewal, which the summary's clock shows anyway).
    pub(crate) fn progress_key(&self) -> Option<(String, Option<String>, i64, i64)> {
        self.progress
            .as_ref()
            .map(|p| (p.state.clone(), p.stage.clone(), p.attempts, p.redrives))
    }
}

/// `indexed` and `failed` end a run; `deleted` is what `watch` calls a document that went away.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, "indexed" | "failed" | "deleted")
}

/// How far along the four steps a status is (pending 0 … indexed 3).
pub fn step(status: &str) -> u64 {
    match status {
        "pending" => 0,
        "stored" => 1,
        "parsed" => 2,
        "indexed" => 3,
        _ => 0,
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Run {
    pub run_id: i64,
    pub trigger_type: String,
    pub run_status: String,
    pub started_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub stages: Stages,
    pub counts: Counts,
    pub failure_stage: String,
    pub error_message: String,
    pub parser_backend: String,
    pub chunk_backend: String,
    pub embedding_model: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Stages {
    pub stored: StageTiming,
    pub parsed: StageTiming,
    pub indexed: StageTiming,
    pub finished: StageTiming,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StageTiming {
    pub at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Counts {
    pub layouts: i64,
    pub structure_nodes: i64,
    pub semantic_blocks: i64,
    pub vector_chunks: i64,
    pub chunks: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Hit {
    pub doc_id: String,
    pub doc_name: String,
    pub citation: String,
    pub chunk_id: Option<String>,
    pub score: f64,
    pub text: String,
    pub section_path: Vec<String>,
    pub page_start: i64,
    pub page_end: i64,
    pub version: Option<HitVersion>,
}

/// The law and version a hit belongs to.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct HitVersion {
    pub work_title: String,
    pub version: String,
    pub effective_from: Option<String>,
    pub effective_to: Option<String>,
    pub status: String,
    pub replaced_by: Option<String>,
    pub changed_in_replacement: Option<bool>,
    pub documents: Vec<String>,
}

impl HitVersion {
    /// "version 2018-10-26, in force 2018-10-26 – 2024-07-01, superseded by 2023-12-29 (changed
    /// there)".
    pub fn describe(&self) -> String {
        let validity = match &self.effective_to {
            Some(to) => format!("{} – {to}", self.effective_from.as_deref().unwrap_or("?")),
            None => format!("from {}", self.effective_from.as_deref().unwrap_or("?")),
        };
        let mut s = format!(
            "version {}, in force {validity}, {}",
            self.version,
            self.status.replace('_', " ")
        );
        if let Some(by) = &self.replaced_by {
            s.push_str(&format!(" by {by}"));
            match self.changed_in_replacement {
                Some(true) => s.push_str(" (this article changed there)"),
                Some(false) => s.push_str(" (this article unchanged there)"),
                None => {}
            }
        }
        if self.documents.len() > 1 {
            s.push_str(&format!(", {} renditions", self.documents.len()));
        }
        s
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Node {
    pub page: i64,
    pub level: i64,
    pub title: String,
    pub children: Vec<Node>,
}
