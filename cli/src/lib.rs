//! The `docpipe` CLI's client of the HTTP API: the commands `upload`, `ls`, `status`, `watch`,
//! `retry`, `rm`, `search`, `tree` and `summary` ([`commands::ApiCommand`]). The binary wires them
//! beside its local commands; tests run them in-process against an API they serve.

pub mod auth;
pub mod client;
pub mod commands;
pub mod dev_runner;
pub mod events;
pub mod model;
pub mod template;
pub mod text;
pub mod watch;

pub use commands::{error_line, run, ApiCommand};

/// The API commands alone, as the binary parses them (for tests and embedding).
#[derive(clap::Parser, Debug)]
#[command(name = "docpipe")]
struct ApiCli {
    #[command(subcommand)]
    command: ApiCommand,
}

/// Parses `docpipe <command> …` (the first item is the program's name).
pub fn parse<I, T>(args: I) -> Result<ApiCommand, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    <ApiCli as clap::Parser>::try_parse_from(args).map(|c| c.command)
}
