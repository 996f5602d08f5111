//! The dev runner's command: one polling loop per queue, each printing which document is at which
//! step as it goes.

use clap::Args;
use docpipe::config::{AwsConfig, EnvReader};
use docpipe::dev_runner::pump_once;
use docpipe::handlers::store::handle_sqs;
use docpipe::services::StoreService;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct DevArgs {
    /// Long-poll wait per receive, in seconds.
    #[arg(long, default_value_t = 10)]
    wait_seconds: i32,
}

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let aws = AwsConfig::read(&mut env);
    let store_queue = env.url("DOCPIPE_STORE_QUEUE_URL");
    env.finish()?;
    let store = Arc::new(StoreService::from_env().await?);
    let sqs = docpipe::services::AwsClients::new(&aws).await.sqs;
    println!("dev runner: polling store-events at {store_queue}");

    let worker = {
        let store = store.clone();
        let sqs = sqs.clone();
        let region = aws.region.clone();
        tokio::spawn(async move {
            loop {
                let store = store.clone();
                let result = pump_once(
                    &sqs,
                    &store_queue,
                    &region,
                    args.wait_seconds,
                    |event| async move { handle_sqs(&store, event).await },
                )
                .await;
                match result {
                    Ok(Some(report)) => {
                        for line in report.lines {
                            println!("{} [store] {line}", chrono::Utc::now().format("%H:%M:%S"));
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        eprintln!("[store] {}", docpipe::error::chain(&e));
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
            }
        })
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => println!("dev runner: stopping"),
        _ = worker => {}
    }
    Ok(())
}
