//! The commands that talk to the API: `upload`, `ls`, `status`, `retry`, `rm`, `search`, `tree`,
//! `summary` (and `watch`, in [`crate::watch`]), one file each. Each prints a table for people, or with `--json`
//! the API's own JSON for scripts; an error answer becomes `error: <title>: <detail>`.

mod article;
mod intake_failures;
mod ls;
mod reindex;
mod retry;
mod rm;
mod scan;
mod search;
mod status;
mod summary;
mod tenant;
mod tree;
mod upload;
mod works;

pub use article::{article, ArticleArgs};
pub use intake_failures::{intake_failures, IntakeArgs};
pub use ls::{ls, LsArgs};
pub use reindex::{index, recall_at_10, reindex, IndexArgs, ReindexArgs};
pub use retry::retry;
pub use rm::rm;
pub use scan::{scan, ScanArgs};
pub use search::{search, SearchArgs};
pub use status::status;
pub use summary::{summary, summary_value, SummaryArgs};
pub use tenant::{tenant, TenantArgs};
pub use tree::{tree, TreeArgs};
pub use upload::{content_type_of, upload, UploadArgs};
pub use works::{diff, versions, works, DiffArgs, VersionsArgs, WorksArgs};

use crate::client::{ClientError, Conn};
use clap::{Args, Subcommand};
use serde_json::Value;
use std::io::Write;

#[derive(Subcommand, Debug)]
pub enum ApiCommand {
    /// Upload files through presigned URLs (POST /documents, then PUT); prints each doc_id.
    Upload(UploadArgs),
    /// List documents, most recently updated first.
    Ls(LsArgs),
    /// A document, its current run with per-stage times, and why it failed.
    Status(IdArgs),
    /// Live progress of documents until each is indexed or failed.
    Watch(crate::watch::WatchArgs),
    /// Process a document again in a new run (from failed or indexed).
    Retry(IdArgs),
    /// Delete a document, its objects and its vectors.
    Rm(IdArgs),
    /// The sensitive-data scan of a document's current parse: risk, counts, findings (masked).
    Scan(ScanArgs),
    /// Search the indexed articles (hybrid by default: dense and keyword, fused).
    Search(SearchArgs),
    /// A document's heading tree.
    Tree(TreeArgs),
    /// Documents by status, chunks, and the median time of each stage.
    Summary(SummaryArgs),
    /// Uploads that did not become a document (GET /intake-failures), newest first.
    IntakeFailures(IntakeArgs),
    /// The laws held: each with its level, how many versions, and the one in force today.
    Works(WorksArgs),
    /// One law's versions over time: dates and their sources, status, documents.
    Versions(VersionsArgs),
    /// What changed between two versions of a law, article by article.
    Diff(DiffArgs),
    /// One article of a law: its paragraphs and items, what it cites and what cites it.
    Article(ArticleArgs),
    /// Which collection search reads, with which embedder, and the rebuild under way.
    Index(IndexArgs),
    /// Re-embed every stored chunk with another embedder into a new collection (blue/green),
    /// following its progress until search switches; --switch or --cancel a rebuild.
    Reindex(ReindexArgs),
    /// The caller's tenant: roles, scan policy, quotas; --scan-policy chooses the policy.
    Tenant(TenantArgs),
}

/// Runs one command, printing to `out`.
pub async fn run(cmd: ApiCommand, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    match cmd {
        ApiCommand::Upload(a) => upload(a, out).await,
        ApiCommand::Ls(a) => ls(a, out).await,
        ApiCommand::Status(a) => status(a, out).await,
        ApiCommand::Watch(a) => crate::watch::watch(a, out).await,
        ApiCommand::Retry(a) => retry(a, out).await,
        ApiCommand::Rm(a) => rm(a, out).await,
        ApiCommand::Scan(a) => scan(a, out).await,
        ApiCommand::Search(a) => search(a, out).await,
        ApiCommand::Tree(a) => tree(a, out).await,
        ApiCommand::Summary(a) => summary(a, out).await,
        ApiCommand::IntakeFailures(a) => intake_failures(a, out).await,
        ApiCommand::Works(a) => works(a, out).await,
        ApiCommand::Versions(a) => versions(a, out).await,
        ApiCommand::Diff(a) => diff(a, out).await,
        ApiCommand::Article(a) => article(a, out).await,
        ApiCommand::Index(a) => index(a, out).await,
        ApiCommand::Reindex(a) => reindex(a, out).await,
        ApiCommand::Tenant(a) => tenant(a, out).await,
    }
}

/// The line an error ends the command with: `error: <title>: <detail>` for an API problem.
pub fn error_line(e: &anyhow::Error) -> String {
    format!("error: {}", error_text(e))
}

fn error_text(e: &anyhow::Error) -> String {
    match e.downcast_ref::<ClientError>() {
        Some(c) => c.to_string(),
        None => format!("{e:#}"),
    }
}

fn print_json(out: &mut (dyn Write + Send), v: &Value) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(v)?)?;
    Ok(())
}

#[derive(Args, Debug)]
pub struct IdArgs {
    /// The document's id (doc_…).
    pub doc_id: String,
    #[command(flatten)]
    pub conn: Conn,
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}
