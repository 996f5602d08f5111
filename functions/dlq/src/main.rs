//! The DLQ Lambda: records the give-up of every message the parse, index and store-events queues
//! dead-lettered, and removes what the given-up run wrote to Milvus (see `docpipe_pipeline::handlers::dlq`).

use docpipe_pipeline::services::DeadLetterService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe_pipeline::handlers::lambda::serve::<DeadLetterService>().await
}
