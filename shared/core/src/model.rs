//! The domain's vocabulary: statuses, stages and the queue message.

use serde::{Deserialize, Serialize};
use std::fmt;

/// `documents.status` (seed 000 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocStatus {
    Pending,
    Stored,
    Parsed,
    Indexed,
    Failed,
}

impl DocStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DocStatus::Pending => "pending",
            DocStatus::Stored => "stored",
            DocStatus::Parsed => "parsed",
            DocStatus::Indexed => "indexed",
            DocStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => DocStatus::Pending,
            "stored" => DocStatus::Stored,
            "parsed" => DocStatus::Parsed,
            "indexed" => DocStatus::Indexed,
            "failed" => DocStatus::Failed,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, DocStatus::Indexed | DocStatus::Failed)
    }
}

impl fmt::Display for DocStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `document_processing_runs.run_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "succeeded" => RunStatus::Succeeded,
            "failed" => RunStatus::Failed,
            _ => return None,
        })
    }
}

/// `document_processing_runs.trigger_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Upload,
    Retry,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Upload => "upload",
            Trigger::Retry => "retry",
        }
    }
}

/// The stage a status change or failure belongs to (`failure_stage`, `document_status_history.stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Upload,
    Store,
    Parse,
    ArtifactPersist,
    Embed,
    Index,
    Retry,
    Sweep,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Upload => "upload",
            Stage::Store => "store",
            Stage::Parse => "parse",
            Stage::ArtifactPersist => "artifact_persist",
            Stage::Embed => "embed",
            Stage::Index => "index",
            Stage::Retry => "retry",
            Stage::Sweep => "sweep",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every parse and index message: small and versioned; everything else is read from
/// PostgreSQL, which is the authority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobMessage {
    pub v: u32,
    pub doc_id: String,
    pub run_id: i64,
}

pub const JOB_MESSAGE_VERSION: u32 = 1;

impl JobMessage {
    pub fn new(doc_id: impl Into<String>, run_id: i64) -> Self {
        JobMessage {
            v: JOB_MESSAGE_VERSION,
            doc_id: doc_id.into(),
            run_id,
        }
    }

    /// Decodes a message body; anything that is not a version-1 job with a well-formed id is refused
    /// with the reason.
    pub fn decode(body: &str) -> Result<Self, String> {
        let msg: JobMessage =
            serde_json::from_str(body).map_err(|e| format!("not a job message: {e}"))?;
        if msg.v != JOB_MESSAGE_VERSION {
            return Err(format!("unsupported job message version {}", msg.v));
        }
        if !crate::ids::is_addressable_doc_id(&msg.doc_id) {
            return Err(format!("malformed doc_id {:?}", msg.doc_id));
        }
        Ok(msg)
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a job message always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_messages_round_trip_and_refuse_junk() {
        let id = crate::ids::random_doc_id();
        let m = JobMessage::new(id.clone(), 7);
        assert_eq!(JobMessage::decode(&m.encode()).unwrap(), m);
        assert!(JobMessage::decode("{}").is_err());
        assert!(JobMessage::decode("not json").is_err());
        assert!(JobMessage::decode(&format!(r#"{{"v":2,"doc_id":"{id}","run_id":1}}"#)).is_err());
        assert!(JobMessage::decode(r#"{"v":1,"doc_id":"../x","run_id":1}"#).is_err());
    }

    #[test]
    fn statuses_round_trip() {
        for s in [
            DocStatus::Pending,
            DocStatus::Stored,
            DocStatus::Parsed,
            DocStatus::Indexed,
            DocStatus::Failed,
        ] {
            assert_eq!(DocStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(DocStatus::parse("processing"), None);
    }
}
