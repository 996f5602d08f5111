//! The DLQ Lambda: records the give-up of every message the parse, index and store-events queues
//! dead-lettered.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use docpipe::config::{AwsConfig, DbConfig, EnvReader};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    let aws_config = AwsConfig::read(&mut env);
    env.finish()?;
    let db = docpipe::services::connect_db(&db_config, &aws_config).await?;
    let db = &db;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<SqsBatchResponse, Error>(
            docpipe::handlers::dlq::handle_sqs(db, event.payload)
                .await
                .response,
        )
    }))
    .await
}
