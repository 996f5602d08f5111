//! The sweeper Lambda, on a schedule: fails every run that sat in `running` past its deadline.

use docpipe::config::{AwsConfig, DbConfig, EnvReader};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    let aws_config = AwsConfig::read(&mut env);
    env.finish()?;
    let db = docpipe::services::connect_db(&db_config, &aws_config).await?;
    let db = &db;
    lambda_runtime::run(service_fn(move |_: LambdaEvent<Value>| async move {
        let swept = docpipe::stages::sweep::sweep(db, 500).await?;
        docpipe::metrics::runs_swept(swept.len());
        Ok::<Value, Error>(json!({ "swept": swept.len() }))
    }))
    .await
}
