use std::path::PathBuf;

pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an embedding failed. [`EmbedError::is_transient`] tells the stage whether to put the
/// message back on the queue (the endpoint may answer later) or to fail the run now (it never will).
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedder configuration: {var}: {message}")]
    Config { var: String, message: String },

    #[error("e5 model file {path}: {message}")]
    ModelFile {
        path: PathBuf,
        message: String,
        #[source]
        source: Option<std::io::Error>,
    },

    #[error("embedding dimension mismatch: configured {expected}, the model returned {got}")]
    DimensionMismatch { expected: usize, got: usize },

    #[error("text {index} of the batch is empty")]
    EmptyInput { index: usize },

    /// An HTTP answer other than 2xx; transient for 408, 429 and 5xx.
    #[error("embedding endpoint answered HTTP {status}: {body}")]
    Status { status: u16, body: String },

    #[error("embedding endpoint unreachable or timed out")]
    Network(#[source] reqwest::Error),

    #[error("embedding service is throttling: {message}")]
    Throttled {
        message: String,
        #[source]
        source: Option<BoxError>,
    },

    /// A managed service's own error, classified by its error code.
    #[error("{service}: {message}")]
    Service {
        service: &'static str,
        message: String,
        transient: bool,
        #[source]
        source: Option<BoxError>,
    },

    /// The endpoint answered 2xx with something that is not what the API promises: a wrong model
    /// or URL, which retrying does not fix.
    #[error("unexpected response from the embedding endpoint: {message}")]
    InvalidResponse {
        message: String,
        #[source]
        source: Option<BoxError>,
    },

    #[error("e5 engine failed: {message}")]
    Engine { message: String },

    #[error("embedding task did not finish")]
    Task(#[source] tokio::task::JoinError),
}

impl EmbedError {
    pub fn is_transient(&self) -> bool {
        match self {
            EmbedError::Status { status, .. } => {
                *status == 408 || *status == 429 || (500..=599).contains(status)
            }
            EmbedError::Network(_) | EmbedError::Throttled { .. } => true,
            EmbedError::Service { transient, .. } => *transient,
            // Cancelled means the runtime is shutting down; a panic is a bug that repeats.
            EmbedError::Task(e) => e.is_cancelled(),
            EmbedError::Config { .. }
            | EmbedError::ModelFile { .. }
            | EmbedError::DimensionMismatch { .. }
            | EmbedError::EmptyInput { .. }
            | EmbedError::InvalidResponse { .. }
            | EmbedError::Engine { .. } => false,
        }
    }

    pub fn is_permanent(&self) -> bool {
        !self.is_transient()
    }

    pub fn config(var: &str, message: impl Into<String>) -> Self {
        EmbedError::Config {
            var: var.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        EmbedError::InvalidResponse {
            message: message.into(),
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let status = |s| EmbedError::Status {
            status: s,
            body: String::new(),
        };
        assert!(status(500).is_transient());
        assert!(status(503).is_transient());
        assert!(status(429).is_transient());
        assert!(status(408).is_transient());
        assert!(status(400).is_permanent());
        assert!(status(401).is_permanent());
        assert!(status(404).is_permanent());
        assert!(EmbedError::DimensionMismatch {
            expected: 1,
            got: 2
        }
        .is_permanent());
        assert!(EmbedError::EmptyInput { index: 0 }.is_permanent());
        assert!(EmbedError::config("X", "y").is_permanent());
        assert!(EmbedError::Throttled {
            message: "slow down".into(),
            source: None
        }
        .is_transient());
    }
}
