//! The dev runner's command: for each queue, a few polling workers that invoke the same handler the
//! Lambda function runs, printing which document is at which step as they go.

use aws_lambda_events::event::sqs::SqsEvent;
use clap::Args;
use docpipe::config::{AwsConfig, EnvReader};
use docpipe::dev_runner::pump_once;
use docpipe::handlers::sqs::BatchReport;
use docpipe::services::{AwsClients, ParseService, StoreService};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct DevArgs {
    /// Long-poll wait per receive, in seconds.
    #[arg(long, default_value_t = 5)]
    wait_seconds: i32,
    /// Concurrent workers per stage (Lambda's concurrency, locally).
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

type Handler = Arc<dyn Fn(SqsEvent) -> BoxFuture<'static, BatchReport> + Send + Sync>;

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let aws = AwsConfig::read(&mut env);
    let store_queue = env.url("DOCPIPE_STORE_QUEUE_URL");
    let parse_queue = env.url("DOCPIPE_PARSE_QUEUE_URL");
    env.finish()?;
    let store = Arc::new(StoreService::from_env().await?);
    let parse = Arc::new(ParseService::from_env().await?);
    let sqs = AwsClients::new(&aws).await.sqs;

    let store_handler: Handler = Arc::new(move |event| {
        let store = store.clone();
        Box::pin(async move { docpipe::handlers::store::handle_sqs(&store, event).await })
    });
    let parse_handler: Handler = Arc::new(move |event| {
        let parse = parse.clone();
        Box::pin(async move { docpipe::handlers::parse::handle_sqs(&parse, event).await })
    });
    let stages = [
        ("store", store_queue, store_handler),
        ("parse", parse_queue, parse_handler),
    ];

    let mut workers = Vec::new();
    for (name, queue_url, handler) in stages {
        println!(
            "dev runner: {name} ← {queue_url} ({} workers)",
            args.workers
        );
        for _ in 0..args.workers {
            workers.push(tokio::spawn(poll(
                name,
                queue_url.clone(),
                aws.region.clone(),
                args.wait_seconds,
                sqs.clone(),
                handler.clone(),
            )));
        }
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => println!("dev runner: stopping"),
        _ = futures::future::select_all(workers) => println!("dev runner: a worker stopped"),
    }
    Ok(())
}

async fn poll(
    name: &'static str,
    queue_url: String,
    region: String,
    wait_seconds: i32,
    sqs: aws_sdk_sqs::Client,
    handler: Handler,
) {
    loop {
        let handler = handler.clone();
        match pump_once(&sqs, &queue_url, &region, wait_seconds, move |event| {
            handler(event)
        })
        .await
        {
            Ok(Some(report)) => {
                for line in report.lines {
                    println!("{} [{name}] {line}", chrono::Utc::now().format("%H:%M:%S"));
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("[{name}] {}", docpipe::error::chain(&e));
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}
