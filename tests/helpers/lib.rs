//! What every integration test stands on: the real local stack (`make up`), a fresh database per
//! test (created through PgBouncer and migrated), and a bucket and queues of the test's own, wired
//! with a real bucket notification. Tests therefore run in parallel without seeing each other.

mod api;
mod aws;
mod clock;
mod corpus;
mod database;
mod downstream;
mod faults;
mod pipeline;

pub use api::*;
pub use aws::*;
pub use clock::*;
pub use corpus::*;
pub use database::*;
pub use downstream::*;
pub use faults::*;
pub use pipeline::*;

use std::path::PathBuf;

/// The stack's defaults, as `make env` prints them; the environment overrides each.
pub(crate) fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// The repository's root: `corpus/`, `docs/seeds/` and `events/` are in it.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The events real clients made (`sam local generate-event`, moto), kept in `events/clients/`.
pub fn client_events_dir() -> PathBuf {
    workspace_root().join("events/clients")
}

/// The specs docpipe comes from (`docs/seeds/`); seed 000's DDL is migration 0001.
pub fn seeds_dir() -> PathBuf {
    workspace_root().join("docs/seeds")
}

pub fn unique(prefix: &str) -> String {
    let n: u64 = rand::random();
    format!("{prefix}{:012x}", n & 0xffff_ffff_ffff)
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}
