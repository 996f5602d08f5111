//! The index Lambda: decode the SQS batch, call the pipeline, answer with the partial batch response.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use docpipe::handlers::index::handle_sqs;
use docpipe::services::IndexService;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let service = IndexService::from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<SqsBatchResponse, Error>(handle_sqs(service, event.payload).await.response)
    }))
    .await
}
