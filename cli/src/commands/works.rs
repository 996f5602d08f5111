//! `docpipe works` and `docpipe versions`: the laws held, and one law's versions over time.

use super::print_json;
use crate::client::Conn;
use crate::text::truncate;
use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;
use std::io::Write;

#[derive(Args, Debug)]
pub struct WorksArgs {
    /// Only this level (法律, 行政法规, 司法解释…).
    #[arg(long)]
    pub level: Option<String>,
    /// Only titles containing this (with or without 中华人民共和国).
    #[arg(long)]
    pub name: Option<String>,
    /// At most this many (default 50, at most 200).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Args, Debug)]
pub struct VersionsArgs {
    /// The work: its id (from `docpipe works`), or a name that matches exactly one work.
    pub work: String,
    /// The date the statuses are for (YYYY-MM-DD; default today).
    #[arg(long)]
    pub as_of: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn works(args: WorksArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    if !(1..=200).contains(&args.limit) {
        bail!("--limit must be between 1 and 200");
    }
    let mut query = vec![("limit", args.limit.to_string())];
    if let Some(l) = &args.level {
        query.push(("level", l.clone()));
    }
    if let Some(n) = &args.name {
        query.push(("name", n.clone()));
    }
    let page = args.conn.client()?.get("/works", &query).await?;
    if args.conn.json {
        return print_json(out, &page);
    }
    let works = page["works"].as_array().cloned().unwrap_or_default();
    writeln!(
        out,
        "{:>5}  {:<8}  {:>3}  {:<10}  TITLE",
        "ID", "LEVEL", "VER", "IN FORCE"
    )?;
    for w in &works {
        writeln!(
            out,
            "{:>5}  {:<8}  {:>3}  {:<10}  {}",
            w["work_id"].as_i64().unwrap_or(0),
            w["level"].as_str().unwrap_or("-"),
            w["versions"].as_i64().unwrap_or(0),
            w["current_version"].as_str().unwrap_or("-"),
            truncate(w["title"].as_str().unwrap_or_default(), 60)
        )?;
    }
    writeln!(out, "{} works", works.len())?;
    Ok(())
}

pub async fn versions(args: VersionsArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let client = args.conn.client()?;
    let id = match args.work.parse::<i64>() {
        Ok(id) => id,
        Err(_) => {
            let page = client
                .get(
                    "/works",
                    &[("name", args.work.clone()), ("limit", "2".into())],
                )
                .await?;
            let found = page["works"].as_array().cloned().unwrap_or_default();
            match found.as_slice() {
                [one] => one["work_id"].as_i64().context("a work id")?,
                [] => bail!("no work is named {:?}", args.work),
                _ => bail!(
                    "{:?} names more than one work: give its id (docpipe works --name …)",
                    args.work
                ),
            }
        }
    };
    let query: Vec<(&str, String)> = args.as_of.iter().map(|d| ("as_of", d.clone())).collect();
    let work = client.get(&format!("/works/{id}"), &query).await?;
    if args.conn.json {
        return print_json(out, &work);
    }
    print_timeline(out, &work)
}

fn print_timeline(out: &mut (dyn Write + Send), work: &Value) -> anyhow::Result<()> {
    writeln!(
        out,
        "{} ({}), as of {}",
        work["work"]["title"].as_str().unwrap_or_default(),
        work["work"]["level"].as_str().unwrap_or("-"),
        work["as_of"].as_str().unwrap_or_default()
    )?;
    writeln!(
        out,
        "{:<10}  {:<16}  {:<28}  {:<10}  DOCUMENTS",
        "VERSION", "STATUS", "EFFECTIVE (SOURCE)", "UNTIL"
    )?;
    for v in work["versions"].as_array().into_iter().flatten() {
        let effective = format!(
            "{} ({})",
            v["effective_from"].as_str().unwrap_or("?"),
            v["effective_from_source"].as_str().unwrap_or("-")
        );
        let documents: Vec<&str> = v["documents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        writeln!(
            out,
            "{:<10}  {:<16}  {:<28}  {:<10}  {}",
            v["version"].as_str().unwrap_or_default(),
            v["status"].as_str().unwrap_or_default(),
            effective,
            v["effective_to"].as_str().unwrap_or("-"),
            documents.join(", ")
        )?;
        for d in v["decisions"].as_array().into_iter().flatten() {
            writeln!(out, "            note: {}", d.as_str().unwrap_or_default())?;
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The work: its id, or a name that matches exactly one work.
    pub work: String,
    /// The older version (label or id); default the one before TO.
    pub from: Option<String>,
    /// The newer version; default the latest.
    pub to: Option<String>,
    /// Also list the unchanged articles.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn diff(args: DiffArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let client = args.conn.client()?;
    let id = work_id(&client, &args.work).await?;
    let mut query = Vec::new();
    if let Some(f) = &args.from {
        query.push(("from", f.clone()));
    }
    if let Some(t) = &args.to {
        query.push(("to", t.clone()));
    }
    let d = client.get(&format!("/works/{id}/diff"), &query).await?;
    if args.conn.json {
        return print_json(out, &d);
    }
    let c = &d["counts"];
    let n = |k: &str| c[k].as_i64().unwrap_or(0);
    writeln!(
        out,
        "{} → {}: {} → {} articles; {} unchanged, {} renumbered, {} modified, {} added, {} removed, {} moved",
        d["from"].as_str().unwrap_or_default(),
        d["to"].as_str().unwrap_or_default(),
        n("old_articles"),
        n("new_articles"),
        n("unchanged"),
        n("renumbered"),
        n("modified"),
        n("added"),
        n("removed"),
        n("moved")
    )?;
    for a in d["articles"].as_array().into_iter().flatten() {
        let change = a["change"].as_str().unwrap_or_default();
        if change == "unchanged" && !args.all && a["moved"] != true {
            continue;
        }
        let numbers = match (a["old_number"].as_str(), a["new_number"].as_str()) {
            (Some(o), Some(n)) if o != n => format!("{o} → {n}"),
            (_, Some(n)) => n.to_string(),
            (Some(o), None) => o.to_string(),
            _ => String::new(),
        };
        let moved = if a["moved"] == true {
            format!(
                "  (moved: {} → {})",
                a["old_chapter"].as_str().unwrap_or("-"),
                a["new_chapter"].as_str().unwrap_or("-")
            )
        } else {
            String::new()
        };
        writeln!(out, "{change:<10}  {numbers}{moved}")?;
        for s in a["spans"].as_array().into_iter().flatten().take(3) {
            for (sign, side) in [('-', "old"), ('+', "new")] {
                let text = s[side].as_str().unwrap_or_default();
                if !text.is_empty() {
                    writeln!(out, "            {sign} {}", truncate(text, 80))?;
                }
            }
        }
    }
    Ok(())
}

/// A work's id from an id or a name that matches exactly one work.
async fn work_id(client: &crate::client::Client, work: &str) -> anyhow::Result<i64> {
    if let Ok(id) = work.parse::<i64>() {
        return Ok(id);
    }
    let page = client
        .get(
            "/works",
            &[("name", work.to_string()), ("limit", "2".into())],
        )
        .await?;
    let found = page["works"].as_array().cloned().unwrap_or_default();
    match found.as_slice() {
        [one] => one["work_id"].as_i64().context("a work id"),
        [] => bail!("no work is named {work:?}"),
        _ => bail!("{work:?} names more than one work: give its id (docpipe works --name …)"),
    }
}
