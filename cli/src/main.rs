//! `docpipe`: the command line for people and scripts. `migrate` applies the schema; `dev` runs the
//! local stand-in for Lambda's event source mappings; `upload`, `ls`, `status`, `watch`, `retry`,
//! `rm`, `search`, `tree` and `summary` talk to the HTTP API (`DOCPIPE_API_URL` or `--api-url`).

mod dev;
mod lambda_host;
mod local;
mod ops;
mod roles;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "docpipe",
    version,
    about = "docpipe: store, parse and index documents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending database migrations (DATABASE_URL).
    Migrate,
    /// Run the dev runner: poll the pipeline's queues and invoke the same handlers Lambda runs.
    Dev(dev::DevArgs),
    /// Print the environment the template gives every function (its clock), as KEY=VALUE lines.
    TemplateEnv,
    /// The clock's rules on environments given as a JSON array of objects on stdin: prints
    /// `{"variables": [...], "problems": [[...], ...]}`, one list of problems per environment
    /// (what each function would refuse at start). `make deploy-check` reads the rules here.
    ClockCheck,
    /// One function process of the dev runner (its Lambda container): SQS batches in on stdin.
    #[command(hide = true)]
    Lambda {
        /// store, parse, index or dlq.
        function: String,
    },
    /// Put files into the bucket as any S3 client would (local stack).
    Put(local::PutArgs),
    /// Show the documents by status, optionally waiting until all reach one.
    Docs(local::DocsArgs),
    /// Find (and with --apply remove) vectors and artifacts PostgreSQL does not vouch for.
    Reconcile(ops::ReconcileArgs),
    /// Rebuild the keyword index of documents an older analyzer indexed, from PostgreSQL alone.
    ReindexKeywords(ops::ReindexKeywordsArgs),
    /// Load legacy document records (a JSON array of `documents` rows); idempotent: each gets a
    /// run failed at `import` until it is retried.
    Import(ops::ImportArgs),
    /// docpipe's events (EventBridge): `tail` prints them live.
    #[command(subcommand)]
    Events(EventsCommand),
    #[command(flatten)]
    Api(Box<docpipe_cli::ApiCommand>),
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Subscribe to the bus and print every docpipe event as it arrives.
    Tail(docpipe_cli::events::TailArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Dev(args) = &cli.command {
        // Before the runtime starts: setting the environment is only sound with one thread.
        dev::adopt_template_clock()?;
        dev::adopt_role_key(args);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    docpipe_core::telemetry::init();
    match cli.command {
        Command::Migrate => migrate().await,
        Command::Dev(args) => dev::run(args).await,
        Command::Lambda { function } => lambda_host::serve(&function).await,
        Command::TemplateEnv => {
            let template =
                docpipe_cli::template::Template::load(&docpipe_cli::template::Template::locate())?;
            for (name, value) in template.clock_env()? {
                println!("{name}={value}");
            }
            Ok(())
        }
        Command::ClockCheck => clock_check(),
        Command::Put(args) => local::put(args).await,
        Command::Docs(args) => local::docs(args).await,
        Command::Reconcile(args) => ops::reconcile(args).await,
        Command::ReindexKeywords(args) => ops::reindex_keywords(args).await,
        Command::Import(args) => ops::import(args).await,
        Command::Events(EventsCommand::Tail(args)) => docpipe_cli::events::tail(args).await,
        Command::Api(cmd) => {
            let mut out = std::io::stdout();
            if let Err(e) = docpipe_cli::run(*cmd, &mut out).await {
                eprintln!("{}", docpipe_cli::error_line(&e));
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

fn clock_check() -> anyhow::Result<()> {
    use docpipe_core::clock::{Clock, VARIABLES};
    let envs: Vec<std::collections::HashMap<String, String>> =
        serde_json::from_reader(std::io::stdin().lock())
            .map_err(|e| anyhow::anyhow!("clock-check reads a JSON array of objects: {e}"))?;
    let problems: Vec<Vec<String>> = envs.iter().map(Clock::problems_of).collect();
    println!(
        "{}",
        serde_json::json!({ "variables": VARIABLES, "problems": problems })
    );
    Ok(())
}

async fn migrate() -> anyhow::Result<()> {
    let mut env = docpipe_core::env::EnvReader::from_process();
    let db_config = docpipe_core::config::DbConfig::read(&mut env);
    env.finish()?;
    let db = docpipe_db::Db::connect(&db_config)?;
    let applied = docpipe_db::migrate::run(&db).await?;
    if applied.is_empty() {
        println!("migrations: up to date");
    } else {
        println!("migrations: applied {applied:?}");
    }
    Ok(())
}
