//! The sweeper Lambda, on a schedule: fails every run that sat in `running` past its deadline.

use docpipe::config::{DbConfig, EnvReader};
use docpipe::db::Db;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    env.finish()?;
    let db = Db::connect(&db_config)?;
    let db = &db;
    lambda_runtime::run(service_fn(move |_: LambdaEvent<Value>| async move {
        let swept = docpipe::stages::sweep::sweep(db, 500).await?;
        Ok::<Value, Error>(json!({ "swept": swept.len() }))
    }))
    .await
}
