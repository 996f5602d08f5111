//! The one entry-point shape: each function's `main` is [`serve`] of its service. The service is
//! built once per container ([`Service::from_env`]), then answers one event at a time.

use crate::services::Service;
use lambda_runtime::{service_fn, LambdaEvent};

/// A Lambda function: its service, the event it takes, and what it answers.
#[async_trait::async_trait]
pub trait Function: Service {
    type Event: serde::de::DeserializeOwned + Send + 'static;
    type Response: serde::Serialize + Send;
    /// What makes the invocation fail (Lambda retries it, or, for an SQS batch, the whole batch).
    type Error: std::error::Error + Send + Sync + 'static;

    async fn invoke(&self, event: Self::Event) -> Result<Self::Response, Self::Error>;
}

/// Starts the function: telemetry, its service from the environment, then Lambda's runtime loop.
/// An invocation that fails answers with the error and its whole source chain.
pub async fn serve<F: Function>() -> Result<(), lambda_runtime::Error> {
    docpipe_core::telemetry::init();
    let function = F::from_env().await?;
    let function = &function;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<F::Event>| async move {
        function
            .invoke(event.payload)
            .await
            .map_err(|e| lambda_runtime::Error::from(docpipe_core::error::chain(&e)))
    }))
    .await
}
