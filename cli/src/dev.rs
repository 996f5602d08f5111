//! The dev runner's command: it plays the part AWS plays, on the template's clock.
//!
//! - For each queue it reads the event source from `template.yaml` (batch size, batching window,
//!   maximum concurrency) and runs that many workers. Each worker owns a function process
//!   (`docpipe lambda <function>`, a Lambda container: initialised once, then one batch at a time),
//!   so an invocation past the function's timeout is really stopped: the process is killed, as
//!   Lambda kills it, and a fresh one starts. Its messages are not deleted and come back after
//!   their visibility timeout.
//! - The queues get the template's visibility timeouts, retention and redrive policy, so a failed
//!   message comes back after its backoff (set by the handler) or its visibility, and SQS itself
//!   moves it to the DLQ after `MaxReceiveCount` deliveries.
//! - The sweeper runs in-process every sweep period, and the HTTP API is served on
//!   `DOCPIPE_API_URL` (default http://127.0.0.1:8080), the same router the API Lambda runs.
//!
//! `DOCPIPE_TIME_SCALE` shrinks every wait (not the work); see `docpipe_core::clock`.

use crate::lambda_host::{FunctionProcess, Invocation};
use crate::roles::{role_access_key, role_keys, ROLE_KEYS_VAR};
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsEvent};
use clap::Args;
use docpipe_cli::dev_runner::{apply_queue_clock, pump_once};
use docpipe_cli::template::Template;
use docpipe_core::clock::Clock;
use docpipe_core::config::AwsConfig;
use docpipe_core::env::EnvReader;
use docpipe_pipeline::handlers::sqs::BatchReport;
use docpipe_pipeline::services::{AwsClients, Service, SweepService};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct DevArgs {
    /// Long-poll wait per receive, in seconds.
    #[arg(long, default_value_t = 5)]
    wait_seconds: i32,
    /// Workers per function, overriding the template's maximum concurrency (a load test's knob).
    #[arg(long)]
    workers: Option<usize>,
    /// Serve only the HTTP API: no queue workers, no sweeper.
    #[arg(long, conflicts_with = "no_api")]
    api_only: bool,
    /// Do not serve the HTTP API.
    #[arg(long)]
    no_api: bool,
}

/// The template's clock, put into this process's environment before anything reads it, so the
/// dev runner, the API it serves and every function process it starts run on the same values.
/// Called from `main` before the runtime starts (no other thread exists yet).
pub fn adopt_template_clock() -> anyhow::Result<()> {
    let template = Template::load(&Template::locate())?;
    for (name, value) in template.clock_env()? {
        // The template is the one source: a stray variable in the shell does not override it.
        std::env::set_var(name, value);
    }
    Ok(())
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

/// The dead-letter queues' `MessageRetentionPeriod` in template.yaml: SQS's maximum.
const DEAD_LETTER_RETENTION_SECS: f64 = 1_209_600.0;

/// One queue the dev runner polls, and the function it feeds.
struct Feed {
    name: &'static str,
    function: &'static str,
    queue_url: String,
    template_queue: &'static str,
    dead_letter_queue: Option<String>,
}

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    if role_keys() && !args.no_api && !args.api_only {
        anyhow::bail!(
            "with {ROLE_KEYS_VAR}=1 the API signs as a role of its own: serve it as a process of its own (docpipe dev --api-only) and run this one with --no-api"
        );
    }
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
    let template = Template::load(&Template::locate())?;
    let mut env = EnvReader::from_process();
    let aws = AwsConfig::read(&mut env);
    let clock = Clock::read(&mut env);
    let feeds = feeds(&mut env);
    env.finish()?;
    // The queues' set-up is CloudFormation's part; each poller is its function's event source.
    let base_sqs = AwsClients::new(&aws).await.sqs;
    print_clock(&clock);
    let mut workers = Vec::new();
    for feed in feeds {
        workers.extend(start_feed(&feed, &template, &clock, &aws, &base_sqs, &args).await?);
    }
    workers.push(start_sweeper(clock.sweep_period).await?);
    tokio::select! {
        _ = tokio::signal::ctrl_c() => println!("dev runner: stopping"),
        _ = futures::future::select_all(workers) => println!("dev runner: a worker stopped"),
    }
    Ok(())
}

/// The queues the functions take their events from, as the environment names them: the three
/// stages, and the dead-letter queues that are set.
fn feeds<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Vec<Feed> {
    let store_dlq = env.optional("DOCPIPE_STORE_DLQ_URL");
    let parse_dlq = env.optional("DOCPIPE_PARSE_DLQ_URL");
    let index_dlq = env.optional("DOCPIPE_INDEX_DLQ_URL");
    let mut feeds = vec![
        Feed {
            name: "store",
            function: "store",
            queue_url: env.url("DOCPIPE_STORE_QUEUE_URL"),
            template_queue: "StoreEventsQueue",
            dead_letter_queue: store_dlq.clone(),
        },
        Feed {
            name: "parse",
            function: "parse",
            queue_url: env.url("DOCPIPE_PARSE_QUEUE_URL"),
            template_queue: "ParseQueue",
            dead_letter_queue: parse_dlq.clone(),
        },
        Feed {
            name: "index",
            function: "index",
            queue_url: env.url("DOCPIPE_INDEX_QUEUE_URL"),
            template_queue: "IndexQueue",
            dead_letter_queue: index_dlq.clone(),
        },
    ];
    for (url, template_queue) in [
        (store_dlq, "StoreEventsDeadLetterQueue"),
        (parse_dlq, "ParseDeadLetterQueue"),
        (index_dlq, "IndexDeadLetterQueue"),
    ] {
        if let Some(url) = url {
            feeds.push(Feed {
                name: "dlq",
                function: "dlq",
                queue_url: url,
                template_queue,
                dead_letter_queue: None,
            });
        }
    }
    feeds
}

fn print_clock(clock: &Clock) {
    println!(
        "dev runner: clock ×{} · visibility store {} s, parse {} s, index {} s · timeouts {:.0}/{:.0}/{:.0} s · {} receives · backoff {}–{} s · lease {} s · sweep every {} s",
        clock.scale,
        clock.store.visibility.as_secs(),
        clock.parse.visibility.as_secs(),
        clock.index.visibility.as_secs(),
        clock.store.function_timeout.as_secs_f64(),
        clock.parse.function_timeout.as_secs_f64(),
        clock.index.function_timeout.as_secs_f64(),
        clock.max_receive_count,
        clock.backoff_base.as_secs(),
        clock.backoff_max.as_secs(),
        clock.lease.as_secs(),
        clock.sweep_period.as_secs(),
    );
}

/// One queue as its event source mapping runs it: the queue given the template's clock (its
/// visibility, retention and redrive), then as many pollers as the mapping allows, each handing
/// batches to a function process of its own.
async fn start_feed(
    feed: &Feed,
    template: &Template,
    clock: &Clock,
    aws: &AwsConfig,
    base_sqs: &aws_sdk_sqs::Client,
    args: &DevArgs,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let source = template.event_source(feed.template_queue)?;
    let stage = match feed.function {
        "store" => clock.store,
        "parse" => clock.parse,
        "index" => clock.index,
        _ => clock.dead_letter,
    };
    let function_timeout = stage.function_timeout;
    let memory_mb = template.function_memory_mb(&source.function)?;
    // A dead-letter queue keeps its messages for 14 days (the template's), not the work
    // queues' retention, and has no dead-letter queue of its own.
    let retention = if feed.function == "dlq" {
        clock.scaled_secs(DEAD_LETTER_RETENTION_SECS)
    } else {
        clock.retention
    };
    apply_queue_clock(
        &sqs_as(base_sqs, "dev-runner"),
        &feed.queue_url,
        feed.dead_letter_queue.as_deref(),
        stage.visibility,
        retention,
        clock.max_receive_count,
    )
    .await?;
    // A source without a maximum (the dead-letter queues) gets one worker: what it does is rare
    // and small, and this machine's cores are better spent on the stages.
    let count = args
        .workers
        .filter(|_| feed.function != "dlq")
        .or(source.max_concurrency)
        .unwrap_or(1)
        .max(1);
    println!(
        "dev runner: {} ← {} ({count} workers, batch {}, window {} s, timeout {:.0} s, memory {memory_mb} MB)",
        feed.name,
        feed.queue_url,
        source.batch_size,
        source.batching_window_secs,
        function_timeout.as_secs_f64()
    );
    Ok((0..count)
        .map(|_| {
            tokio::spawn(poll(
                feed.name,
                feed.function,
                feed.queue_url.clone(),
                aws.region.clone(),
                args.wait_seconds,
                source.batch_size,
                Duration::from_secs(source.batching_window_secs),
                function_timeout,
                memory_mb,
                sqs_as(base_sqs, feed.function),
            ))
        })
        .collect())
}

/// The schedule that runs the sweeper in AWS: a sweep every `period`, its actions printed.
async fn start_sweeper(period: Duration) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let sweeper = SweepService::from_env().await?;
    Ok(tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tick.tick().await;
            match sweeper.run_once().await {
                Ok(None) => println!("{} [sweep] another sweep holds the lease: skipped", now()),
                Ok(Some((report, kept))) => {
                    for action in &report.actions {
                        println!("{} [sweep] {}", now(), describe_sweep(action));
                    }
                    if kept.removed() > 0 || kept.tombstones_pruned > 0 {
                        println!(
                            "{} [sweep] housekeeping: {} clean-ups carried out, {} removed by the reconcile, {} tombstones pruned",
                            now(),
                            kept.cleanups.removed,
                            kept.reconciled.total(),
                            kept.tombstones_pruned
                        );
                    }
                    for problem in report.problems.iter().chain(&kept.problems) {
                        println!("{} [sweep] left for the next sweep: {problem}", now());
                    }
                }
                Err(e) => eprintln!("[sweep] {}", docpipe_core::error::chain(&e)),
            }
        }
    }))
}

/// With role keys, this process signs as the sweeper (which runs in it) or, with `--api-only`, as
/// the API. Called from `main` before the runtime starts (no other thread exists yet).
pub fn adopt_role_key(args: &DevArgs) {
    if role_keys() {
        let role = if args.api_only { "api" } else { "sweeper" };
        std::env::set_var("AWS_ACCESS_KEY_ID", role_access_key(role));
    }
}

/// An SQS client that signs as `role` when role keys are on, else with the process's credentials.
fn sqs_as(base: &aws_sdk_sqs::Client, role: &str) -> aws_sdk_sqs::Client {
    if !role_keys() {
        return base.clone();
    }
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|_| "test".to_string());
    let credentials = aws_sdk_sqs::config::Credentials::new(
        role_access_key(role),
        secret,
        None,
        None,
        "docpipe-dev-role-keys",
    );
    let config = base
        .config()
        .to_builder()
        .credentials_provider(credentials)
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

fn now() -> String {
    chrono::Utc::now().format("%H:%M:%S").to_string()
}

fn describe_sweep(action: &docpipe_pipeline::upkeep::sweep::Swept) -> String {
    use docpipe_pipeline::upkeep::sweep::Swept;
    match action {
        Swept::Redriven {
            doc_id,
            run_id,
            stage,
            reason,
        } => format!("{doc_id} run {run_id}: {stage} job re-driven: {reason}"),
        Swept::Failed {
            doc_id,
            run_id,
            message,
        } => format!("{doc_id} run {run_id}: failed: {message}"),
    }
}

#[allow(clippy::too_many_arguments)]
async fn poll(
    name: &'static str,
    function: &'static str,
    queue_url: String,
    region: String,
    wait_seconds: i32,
    batch_size: i32,
    batching_window: Duration,
    function_timeout: Duration,
    memory_mb: u64,
    sqs: aws_sdk_sqs::Client,
) {
    let mut process: Option<FunctionProcess> = None;
    loop {
        // A container is ready before the poller hands it anything: init is not the invocation.
        if process.is_none() {
            match FunctionProcess::start(function).await {
                Ok(p) => process = Some(p),
                Err(e) => {
                    eprintln!("[{name}] cannot start the {function} function: {e:#}");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            }
        }
        let slot = &mut process;
        let result = pump_once(
            &sqs,
            &queue_url,
            &region,
            wait_seconds,
            batch_size,
            batching_window,
            |event| invoke(name, slot, event, function_timeout, memory_mb),
        )
        .await;
        match result {
            Ok(Some(report)) => {
                for line in report.lines {
                    println!("{} [{name}] {line}", now());
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("[{name}] {}", docpipe_core::error::chain(&e));
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

/// One invocation in the worker's function process, cut off at the function's timeout. A cut-off
/// or crashed invocation reports every message as failed, so none is deleted: they come back after
/// their visibility timeout, as they do after a Lambda timeout.
async fn invoke(
    name: &str,
    slot: &mut Option<FunctionProcess>,
    event: SqsEvent,
    timeout: Duration,
    memory_mb: u64,
) -> BatchReport {
    let ids: Vec<String> = event
        .records
        .iter()
        .map(|r| r.message_id.clone().unwrap_or_default())
        .collect();
    let Some(process) = slot.as_mut() else {
        return all_failed(ids, "no function process".into());
    };
    let pid = process.pid();
    let outcome = tokio::time::timeout(timeout, async {
        tokio::select! {
            answer = process.invoke(&event) => Ok(answer),
            used_mb = memory_exceeded(pid, memory_mb) => Err(used_mb),
        }
    })
    .await;
    let why = match outcome {
        Ok(Ok(Ok(Invocation { response, lines }))) => {
            return BatchReport {
                response,
                lines,
                outcomes: Vec::new(),
            };
        }
        Ok(Ok(Err(e))) => format!("the function process failed: {e:#}"),
        Ok(Err(used_mb)) => format!(
            "ran out of memory: {used_mb} MB, over its MemorySize of {memory_mb} MB: the invocation was stopped, as Lambda stops it; its messages return after their backoff or visibility timeout"
        ),
        Err(_) => format!(
            "timed out after {:.1} s: the invocation was stopped; its messages return after their backoff or visibility timeout",
            timeout.as_secs_f64()
        ),
    };
    if let Some(process) = slot.take() {
        process.kill().await;
    }
    eprintln!("[{name}] {why}");
    all_failed(ids, why)
}

/// Resolves when the process's resident memory goes over `limit_mb` (the template's MemorySize:
/// Lambda stops a function there), with what it used; never, while it stays under.
async fn memory_exceeded(pid: Option<u32>, limit_mb: u64) -> u64 {
    let Some(pid) = pid else {
        return std::future::pending().await;
    };
    let status = format!("/proc/{pid}/status");
    loop {
        if let Some(kb) = std::fs::read_to_string(&status).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        }) {
            if kb > limit_mb * 1024 {
                return kb / 1024;
            }
        }
        tokio::time::sleep(MEMORY_POLL).await;
    }
}

/// How often a running invocation's memory is read: a process can grow by about a gigabyte a
/// second, so this overshoots the limit by a fraction of that at most.
const MEMORY_POLL: Duration = Duration::from_millis(50);

fn all_failed(ids: Vec<String>, why: String) -> BatchReport {
    let mut report = BatchReport::default();
    for id in ids {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        report.response.batch_item_failures.push(failure);
    }
    report.lines.push(why);
    report
}
