//! What keeps the pipeline live and its stores agreeing when messages are lost, jobs die or a
//! step fails half-way: each pass is bounded, takes its lease, and may run again at any time.
//!
//! - [`sweep`]: runs whose job was lost or whose lease lapsed are re-driven on the template clock.
//! - [`give_up`]: a dead-lettered job fails its run with its last error, its vectors removed.
//! - [`housekeeping`]: the clean-up outbox is drained and the keyword index backfilled.
//! - [`reconcile`]: Milvus against PostgreSQL, orphans reported or removed.
//! - [`rebuilds`]: a quiet re-embedding sent on, collections past their time dropped.

pub mod give_up;
pub mod housekeeping;
pub mod rebuilds;
pub mod reconcile;
pub mod sweep;
