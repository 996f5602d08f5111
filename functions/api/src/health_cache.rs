//! The last health answer, kept by the API state and read by `/healthz`: probes cost the
//! dependencies a round trip each, so one answer serves every request for a while.

use std::time::Instant;

/// The last answer, shared by every request of the container.
#[derive(Default)]
pub struct HealthCache {
    pub(crate) last: tokio::sync::Mutex<Option<(Instant, Health)>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Health {
    pub(crate) database: bool,
    pub(crate) s3: bool,
    pub(crate) milvus: bool,
}

impl Health {
    pub(crate) fn all_up(&self) -> bool {
        self.database && self.s3 && self.milvus
    }
}
