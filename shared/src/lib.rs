//! docpipe's library: everything the Lambda functions, the dev runner and the CLI share.
//!
//! - [`stages`]: the pipeline itself, seed 000 §6 stage by stage. Start reading there.
//! - [`db`]: PostgreSQL, the authority: pool, migrations, repositories and the status state machine.
//! - [`adapters`]: the narrow traits the stages talk to (object store, job queue) and their AWS
//!   implementations.
//! - [`events`]: tolerant decoding of every shape an upload notification arrives in.
//! - [`handlers`]: what a Lambda invocation does with its event (the binaries only call these).

pub mod adapters;
pub mod analyzer;
pub mod artifacts;
pub mod async_invoke;
pub mod clock;
pub mod config;
pub mod db;
pub mod dev_runner;
pub mod error;
pub mod events;
pub mod handlers;
pub mod ids;
pub mod legacy;
pub mod metrics;
pub mod model;
pub mod progress;
pub mod reconcile;
pub mod search;
pub mod services;
pub mod stages;
pub mod telemetry;

/// The parsers (bytes → layouts, heading tree, semantic blocks, chunks), for callers of this crate.
pub use docpipe_parse as parse;
pub use error::StageError;
