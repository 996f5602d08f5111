//! The narrow interfaces the stages talk to, and their AWS implementations. A test can wrap any of
//! them to inject faults; the stages never see which one they got. [`memory`] (tests only) keeps
//! objects in memory, for unit tests of stage logic that needs no real service.

pub mod aws;
pub mod event_bus;
pub mod generations;
pub(crate) mod lazy_vectors;
#[cfg(any(test, feature = "testing"))]
pub mod memory;
pub(crate) mod object_store;
pub mod queue;
pub mod secrets;

pub use lazy_vectors::LazyVectorIndex;
pub use object_store::{ContentDigest, ObjectHead, ObjectStore, S3ObjectStore, StorageError};
pub use queue::{JobQueue, QueueDepth, QueueError, SqsJobQueue};
