//! The dev runner's command: for each queue, a few polling workers that invoke the same handler the
//! Lambda function runs, printing which document is at which step as they go; and the HTTP API, the
//! same router the API Lambda runs, served on `DOCPIPE_API_URL` (default http://127.0.0.1:8080).

use aws_lambda_events::event::sqs::SqsEvent;
use clap::Args;
use docpipe::config::{AwsConfig, EnvReader};
use docpipe::dev_runner::pump_once;
use docpipe::handlers::sqs::BatchReport;
use docpipe::services::{AwsClients, IndexService, ParseService, StoreService};
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
    /// How often the sweeper runs, in seconds.
    #[arg(long, default_value_t = 30)]
    sweep_every_secs: u64,
    /// Serve only the HTTP API: no queue workers, no sweeper.
    #[arg(long, conflicts_with = "no_api")]
    api_only: bool,
    /// Do not serve the HTTP API.
    #[arg(long)]
    no_api: bool,
}

/// Serves the API Lambda's router on `DOCPIPE_API_URL`. When the API is all this process does, a
/// port that cannot be bound is an error; beside the queue workers it is a warning.
async fn start_api(
    required: bool,
) -> anyhow::Result<Option<tokio::task::JoinHandle<std::io::Result<()>>>> {
    let url = std::env::var("DOCPIPE_API_URL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "http://127.0.0.1:8080".to_string());
    let addr = docpipe_api_fn::listen_addr(&url).map_err(anyhow::Error::msg)?;
    let state = docpipe_api_fn::ApiState::from_env(docpipe_api_fn::ActorSource::Local).await?;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) if !required => {
            eprintln!(
                "dev runner: cannot serve the API on {addr} ({e}); the queues run without it"
            );
            return Ok(None);
        }
        Err(e) => return Err(anyhow::anyhow!("cannot serve the API on {addr}: {e}")),
    };
    println!("dev runner: API on http://{addr}");
    Ok(Some(tokio::spawn(docpipe_api_fn::serve(
        listener,
        Arc::new(state),
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    ))))
}

type Handler = Arc<dyn Fn(SqsEvent) -> BoxFuture<'static, BatchReport> + Send + Sync>;

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let api = if args.no_api {
        None
    } else {
        start_api(args.api_only).await?
    };
    if args.api_only {
        let server = api.expect("a required API is served or start_api failed");
        server.await??;
        println!("dev runner: stopping");
        return Ok(());
    }
    let mut env = EnvReader::from_process();
    let aws = AwsConfig::read(&mut env);
    let store_queue = env.url("DOCPIPE_STORE_QUEUE_URL");
    let parse_queue = env.url("DOCPIPE_PARSE_QUEUE_URL");
    let index_queue = env.url("DOCPIPE_INDEX_QUEUE_URL");
    let dead_letter_queues: Vec<String> = [
        "DOCPIPE_STORE_DLQ_URL",
        "DOCPIPE_PARSE_DLQ_URL",
        "DOCPIPE_INDEX_DLQ_URL",
    ]
    .iter()
    .filter_map(|name| env.optional(name))
    .collect();
    env.finish()?;
    let store = Arc::new(StoreService::from_env().await?);
    let parse = Arc::new(ParseService::from_env().await?);
    let index = Arc::new(IndexService::from_env().await?);
    let db = index.db.clone();
    let sweep_db = index.db.clone();
    let sqs = AwsClients::new(&aws).await.sqs;

    let store_handler: Handler = Arc::new(move |event| {
        let store = store.clone();
        Box::pin(async move { docpipe::handlers::store::handle_sqs(&store, event).await })
    });
    let parse_handler: Handler = Arc::new(move |event| {
        let parse = parse.clone();
        Box::pin(async move { docpipe::handlers::parse::handle_sqs(&parse, event).await })
    });
    let index_handler: Handler = Arc::new(move |event| {
        let index = index.clone();
        Box::pin(async move { docpipe::handlers::index::handle_sqs(&index, event).await })
    });
    let dlq_handler: Handler = Arc::new(move |event| {
        let db = db.clone();
        Box::pin(async move { docpipe::handlers::dlq::handle_sqs(&db, event).await })
    });
    let mut stages = vec![
        ("store", store_queue, store_handler),
        ("parse", parse_queue, parse_handler),
        ("index", index_queue, index_handler),
    ];
    for queue in dead_letter_queues {
        stages.push(("dlq", queue, dlq_handler.clone()));
    }

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
    // The schedule that runs the sweeper in AWS.
    workers.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(args.sweep_every_secs));
        loop {
            tick.tick().await;
            match docpipe::stages::sweep::sweep(&sweep_db, 500).await {
                Ok(swept) => {
                    for s in swept {
                        println!(
                            "{} [sweep] {} run {}: failed: {}",
                            chrono::Utc::now().format("%H:%M:%S"),
                            s.doc_id,
                            s.run_id,
                            s.message
                        );
                    }
                }
                Err(e) => eprintln!("[sweep] {}", docpipe::error::chain(&e)),
            }
        }
    }));
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
        // The template's BatchSize: parse and index take one message per invocation, so a message
        // never waits behind another one's processing past its visibility timeout.
        let batch_size = if matches!(name, "parse" | "index") {
            1
        } else {
            10
        };
        match pump_once(
            &sqs,
            &queue_url,
            &region,
            wait_seconds,
            batch_size,
            move |event| handler(event),
        )
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
