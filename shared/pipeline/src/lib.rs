//! The pipeline: a file lands, and it is stored, parsed and indexed (seed 000 §6).
//!
//! - [`stages`]: the pipeline itself, stage by stage. Start reading there.
//! - [`upkeep`]: what keeps it moving when a message is lost or a job dies: the sweeper, the
//!   give-up of a dead-lettered job, housekeeping (the clean-up outbox, keyword backfill) and the
//!   reconciliation of Milvus against PostgreSQL.
//! - [`adapters`]: the narrow traits the stages talk to (object store, job queue, vectors) and
//!   their AWS implementations.
//! - [`handlers`]: what a Lambda invocation does with its event (the binaries only call these).
//! - [`publish`]: the events each change recorded, out of the outbox onto the bus.
//! - [`services`]: the clients a function builds once per container.

pub mod adapters;
pub mod error;
pub mod handlers;
pub mod legacy_import;
pub mod publish;
pub mod services;
pub mod stages;
pub mod upkeep;
