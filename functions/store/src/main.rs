//! The store Lambda: decode the event, call the pipeline, encode the answer.

use docpipe::handlers::store::handle_event;
use docpipe::services::StoreService;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let service = StoreService::from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        handle_event(service, event.payload)
            .await
            .map_err(|e| Error::from(docpipe::error::chain(&e)))
    }))
    .await
}
