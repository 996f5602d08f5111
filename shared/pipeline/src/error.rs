//! The one vocabulary every failure speaks: a step either fails the run (the input is bad, retrying
//! cannot help: [`StageError::Failed`], with the stage and a reason) or asks for a retry (a
//! dependency is unavailable: [`StageError::Transient`], with its source chain; the message goes
//! back to its queue).

use docpipe_core::error::chain;
use docpipe_core::model::Stage;

#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The input is at fault: the run fails at `stage` with `reason`, and the message is
    /// acknowledged. A stage that holds the run records the failure itself (the index stage's
    /// steps return this, and the stage fails the run with it); one that reaches a lifter had no
    /// run it could fail (a body that is no job, an upload refused before it had a run) and its
    /// message is dropped.
    #[error("{stage} failed permanently: {reason}")]
    Failed { stage: Stage, reason: String },
    /// A dependency is at fault. The message is returned to its queue and retried; after the queue's
    /// maximum receive count the DLQ handler records the give-up.
    #[error("transient failure in {stage}: {source}")]
    Transient {
        stage: Stage,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StageError {
    /// A step that fails the run.
    pub fn failed(stage: Stage, reason: impl Into<String>) -> Self {
        StageError::Failed {
            stage,
            reason: reason.into(),
        }
    }

    pub fn transient(
        stage: Stage,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        StageError::Transient {
            stage,
            source: source.into(),
        }
    }

    /// A database error: it fails the run when the data is at fault ([`DbError::is_data_error`]),
    /// and asks for a retry otherwise.
    pub fn from_db(stage: Stage, e: docpipe_db::DbError) -> Self {
        if e.is_data_error() {
            StageError::failed(stage, format!("the data does not fit: {}", chain(&e)))
        } else {
            StageError::transient(stage, e)
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, StageError::Transient { .. })
    }

    pub fn class(&self) -> &'static str {
        match self {
            StageError::Failed { .. } => "permanent",
            StageError::Transient { .. } => "transient",
        }
    }
}
