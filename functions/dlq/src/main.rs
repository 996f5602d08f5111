//! The DLQ Lambda: records the give-up of every message the parse, index and store-events queues
//! dead-lettered, and removes what the given-up run wrote to Milvus.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use docpipe::services::DeadLetterService;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let service = DeadLetterService::from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<SqsBatchResponse, Error>(
            docpipe::handlers::dlq::handle_sqs(service, event.payload)
                .await
                .response,
        )
    }))
    .await
}
