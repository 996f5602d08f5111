//! What one Lambda invocation does with its event. The function binaries and the dev runner call
//! these, so a message takes the same path locally as in AWS. Each function's `main` is one call,
//! [`lambda::serve`] of its service.

pub mod async_invoke;
pub mod dlq;
pub mod index;
pub mod lambda;
pub mod migrate;
pub mod parse;
pub mod sqs;
pub mod store;
pub mod sweep;
