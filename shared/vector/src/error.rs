use milvus::v2::error::Error as MilvusError;
use tonic::Code;

/// The boxed cause kept behind every [`VectorError`], so callers never need the SDK's types.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong talking to the vector store, split the way the pipeline acts on it:
/// a transient error sends the message back to the queue, a permanent one fails the run.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// The store could not be reached or was too busy (connection refused, timeouts, rate
    /// limits, a node not ready). Retrying later may succeed.
    #[error("vector store unavailable during {op}: {source}")]
    Unavailable {
        op: &'static str,
        #[source]
        source: BoxError,
    },
    /// The collection exists but was built for something else (another dimension, another
    /// embedding model, another schema). Retrying cannot help; an operator must act.
    #[error("collection `{collection}` does not match: {detail}")]
    Mismatch { collection: String, detail: String },
    /// A search reached a collection that does not exist: nothing was ever indexed into it, or
    /// it is the wrong name, or it was dropped. Reported rather than answered with no hits, which
    /// would look like a search that found nothing.
    #[error("collection `{collection}` does not exist")]
    MissingCollection { collection: String },
    /// The store refused the request itself (a bad expression, a value too large, a vector of
    /// the wrong length). Retrying the same request cannot help.
    #[error("vector store rejected {op}: {message}")]
    Rejected {
        op: &'static str,
        message: String,
        #[source]
        source: Option<BoxError>,
    },
}

impl VectorError {
    /// True when the same request may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, VectorError::Unavailable { .. })
    }

    pub(crate) fn rejected(op: &'static str, message: impl Into<String>) -> Self {
        VectorError::Rejected {
            op,
            message: message.into(),
            source: None,
        }
    }

    /// Classifies an SDK error. Ambiguous cases lean transient: a redelivery is cheap, while
    /// failing a run for a hiccup makes a user re-upload.
    pub(crate) fn from_milvus(op: &'static str, error: MilvusError) -> Self {
        if is_transient(&error) {
            VectorError::Unavailable {
                op,
                source: Box::new(error),
            }
        } else {
            VectorError::Rejected {
                op,
                message: error.to_string(),
                source: Some(Box::new(error)),
            }
        }
    }
}

pub(crate) fn is_transient(error: &MilvusError) -> bool {
    match error {
        MilvusError::Grpc(status) => grpc_code_is_transient(status.code()),
        MilvusError::Server(server) => {
            server_code_is_transient(server.code(), server.legacy_code(), server.reason())
        }
        // The SDK only gives up with these after retrying a retryable failure or running out
        // of time, both of which say "try again later".
        MilvusError::Timeout(_) | MilvusError::RetryExhausted { .. } => true,
        MilvusError::Cancelled(_) | MilvusError::Unexpected(_) => true,
        MilvusError::Validation(_)
        | MilvusError::Conversion(_)
        | MilvusError::MalformedResponse(_)
        | MilvusError::BulkImport(_) => false,
        _ => false,
    }
}

fn grpc_code_is_transient(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::ResourceExhausted
            | Code::Aborted
            | Code::Cancelled
            | Code::Unknown
            | Code::Internal
    )
}

/// `code` is the Milvus 2.3+ `merr` code; `legacy` is the deprecated `ErrorCode` that older
/// servers (and 2.3 alongside `code`) still send.
pub(crate) fn server_code_is_transient(code: i32, legacy: i32, reason: &str) -> bool {
    if code != 0 {
        return matches!(code,
            // service not ready / unavailable / memory / request limit / internal / disk /
            // rate limit / force deny
            1..=5 | 7..=9
            // collection not loaded or not fully loaded (a load in progress)
            | 101 | 103
            // replica, channel, segment, node, IO: cluster topology in flux
            | 400..=699 | 900..=1099
        );
    }
    match legacy {
        // ConnectFailed, NotShardLeader, NoReplicaAvailable, SegmentNotFound, ForceDeny,
        // RateLimit, MemoryQuotaExhausted, DiskQuotaExhausted, TimeTickLongDelay,
        // NotReadyServe, NotReadyCoordActivating, DataCoordNA, DDRequestRace
        2 | 45..=49 | 53..=57 | 100 | 1000 => true,
        _ => {
            let reason = reason.to_ascii_lowercase();
            reason.contains("not ready") || reason.contains("rate limit")
        }
    }
}

/// Collection-not-found, in either code family, so callers can treat a missing collection as
/// "nothing stored yet" where that is the honest answer.
pub(crate) fn is_collection_missing(error: &MilvusError) -> bool {
    match error {
        MilvusError::Server(server) => {
            server.code() == 100
                || server.legacy_code() == 4
                || server.legacy_code() == 28
                || server.reason().contains("collection not found")
                || server.reason().contains("can't find collection")
        }
        MilvusError::RetryExhausted { source, .. } => is_collection_missing(source),
        _ => false,
    }
}

/// "Collection not loaded": a query, a search or a delete by expression reached a collection that
/// exists but is not (yet, or no longer) in query nodes' memory.
pub(crate) fn is_not_loaded(error: &MilvusError) -> bool {
    match error {
        MilvusError::Server(server) => {
            server.code() == 101 || server.reason().to_ascii_lowercase().contains("not loaded")
        }
        MilvusError::RetryExhausted { source, .. } => is_not_loaded(source),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_unreachable_codes_are_transient() {
        assert!(server_code_is_transient(8, 0, "rate limit exceeded"));
        assert!(server_code_is_transient(101, 0, "collection not loaded"));
        assert!(server_code_is_transient(0, 49, ""));
        assert!(server_code_is_transient(0, 1, "proxy not ready"));
        assert!(grpc_code_is_transient(Code::Unavailable));
        assert!(is_transient(&MilvusError::Timeout("x".into())));
    }

    #[test]
    fn bad_requests_are_permanent() {
        assert!(!server_code_is_transient(1100, 0, "invalid parameter"));
        assert!(!server_code_is_transient(100, 0, "collection not found"));
        assert!(!server_code_is_transient(0, 5, "illegal argument"));
        assert!(!grpc_code_is_transient(Code::InvalidArgument));
        assert!(!grpc_code_is_transient(Code::Unauthenticated));
    }

    #[test]
    fn only_unavailable_is_transient() {
        let unavailable = VectorError::Unavailable {
            op: "insert",
            source: "boom".into(),
        };
        assert!(unavailable.is_transient());
        assert!(!VectorError::rejected("insert", "bad").is_transient());
        let mismatch = VectorError::Mismatch {
            collection: "c".into(),
            detail: "dim".into(),
        };
        assert!(!mismatch.is_transient());
    }
}
