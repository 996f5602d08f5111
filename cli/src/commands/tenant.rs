//! `docpipe tenant`: the caller's tenant as the API sees it (its roles, its scan policy, its
//! quotas and what it holds); `--scan-policy warn|mask|block|default` (a reviewer) chooses what a
//! finding of the sensitive-data scan does in the tenant's documents from the next parse on.

use super::print_json;
use crate::client::Conn;
use serde_json::Value;
use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct TenantArgs {
    /// Choose the tenant's scan policy (a reviewer's act): warn, mask, block, or default for the
    /// deployment's.
    #[arg(long, value_parser = ["warn", "mask", "block", "default"])]
    pub scan_policy: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn tenant(args: TenantArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let client = args.conn.client()?;
    let v = match args.scan_policy.as_deref() {
        Some(policy) => {
            let policy = (policy != "default").then_some(policy);
            client.set_scan_policy(policy).await?
        }
        None => client.tenant().await?,
    };
    if args.conn.json {
        return print_json(out, &v);
    }
    let limit = |q: &Value| match q["limit"].as_i64() {
        Some(n) => n.to_string(),
        None => "no limit".into(),
    };
    let roles: Vec<&str> = [("reviewer", &v["reviewer"]), ("publisher", &v["publisher"])]
        .into_iter()
        .filter(|(_, on)| on.as_bool() == Some(true))
        .map(|(name, _)| name)
        .collect();
    writeln!(
        out,
        "tenant {}{}",
        v["organ_id"].as_str().unwrap_or_default(),
        if roles.is_empty() {
            String::new()
        } else {
            format!(" ({})", roles.join(", "))
        }
    )?;
    let policy = &v["scan_policy"];
    writeln!(
        out,
        "  scan policy  {}{}",
        policy["applies"].as_str().unwrap_or_default(),
        if policy["chosen"].is_null() {
            " (the deployment's)"
        } else {
            " (the tenant's)"
        }
    )?;
    let q = &v["quotas"];
    writeln!(
        out,
        "  documents    {} held, {}",
        q["documents"]["held"],
        limit(&q["documents"])
    )?;
    writeln!(
        out,
        "  bytes        {} held, {}",
        q["bytes"]["held"],
        limit(&q["bytes"])
    )?;
    writeln!(
        out,
        "  searches     {} a minute",
        limit(&q["searches_per_minute"])
    )?;
    Ok(())
}
