//! `docpipe intake-failures`: uploads that did not become a document, newest first.

use super::print_json;
use crate::client::Conn;
use crate::text::{excerpt, local_time, truncate};
use anyhow::bail;
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct IntakeArgs {
    /// At most this many (default 50, at most 200).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn intake_failures(args: IntakeArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    if !(1..=200).contains(&args.limit) {
        bail!("--limit must be between 1 and 200");
    }
    let page = args
        .conn
        .client()?
        .get("/intake-failures", &[("limit", args.limit.to_string())])
        .await?;
    if args.conn.json {
        return print_json(out, &page);
    }
    let failures = page["intake_failures"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writeln!(out, "{:<19}  {:>4}  OBJECT  REASON", "FAILED", "TRIES")?;
    for f in &failures {
        let failed_at = f["failed_at"]
            .as_str()
            .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
            .map(local_time)
            .unwrap_or_default();
        writeln!(
            out,
            "{:<19}  {:>4}  s3://{}/{}  {}",
            failed_at,
            f["deliveries"].as_i64().unwrap_or(0),
            f["bucket"].as_str().unwrap_or_default(),
            truncate(f["object_name"].as_str().unwrap_or_default(), 80),
            truncate(&excerpt(f["reason"].as_str().unwrap_or_default()), 120)
        )?;
    }
    writeln!(out, "{} intake failures", failures.len())?;
    Ok(())
}
