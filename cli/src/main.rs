//! `docpipe`: the command line for people and scripts. `migrate` applies the schema; `dev` runs the
//! local stand-in for Lambda's event source mappings.

mod dev;

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    docpipe::telemetry::init();
    match cli.command {
        Command::Migrate => migrate().await,
        Command::Dev(args) => dev::run(args).await,
    }
}

async fn migrate() -> anyhow::Result<()> {
    let mut env = docpipe::config::EnvReader::from_process();
    let db_config = docpipe::config::DbConfig::read(&mut env);
    env.finish()?;
    let db = docpipe::db::Db::connect(&db_config)?;
    let applied = docpipe::db::migrate::run(&db).await?;
    if applied.is_empty() {
        println!("migrations: up to date");
    } else {
        println!("migrations: applied {applied:?}");
    }
    Ok(())
}
