//! The one classification every failure gets: permanent (the input is bad, retrying cannot help; the
//! run fails at once) or transient (a dependency is unavailable; the message goes back to the queue).

use crate::model::Stage;

#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The input is at fault. The run is failed with this stage and message, and the message is
    /// acknowledged.
    #[error("{stage} failed permanently: {message}")]
    Permanent { stage: Stage, message: String },
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
    pub fn permanent(stage: Stage, message: impl Into<String>) -> Self {
        StageError::Permanent {
            stage,
            message: message.into(),
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

    /// A database error: permanent when the data is at fault ([`DbError::is_data_error`]),
    /// transient otherwise.
    pub fn from_db(stage: Stage, e: crate::db::DbError) -> Self {
        if e.is_data_error() {
            StageError::permanent(stage, format!("the data does not fit: {}", chain(&e)))
        } else {
            StageError::transient(stage, e)
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, StageError::Transient { .. })
    }

    pub fn class(&self) -> &'static str {
        match self {
            StageError::Permanent { .. } => "permanent",
            StageError::Transient { .. } => "transient",
        }
    }
}

/// Formats an error with its whole source chain, for logs and `error_message` columns.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}
