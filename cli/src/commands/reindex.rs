//! `docpipe index` (which collection search reads, and the rebuild under way) and `docpipe
//! reindex` (re-embed every stored chunk with another embedder into a new collection, blue/green,
//! following its progress until search switches; `--switch`, `--cancel`).

use super::print_json;
use crate::client::Conn;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(clap::Args, Debug)]
pub struct ReindexArgs {
    /// The new embedder: hash, e5-small, bedrock or openai.
    #[arg(long)]
    pub embedder: Option<String>,
    /// One more embedder setting, KEY=VALUE (DOCPIPE_EMBED_DIM=512, DOCPIPE_BEDROCK_MODEL_ID=…).
    #[arg(long = "set", value_parser = key_value)]
    pub settings: Vec<(String, String)>,
    /// The new collection's name (default: the current one's with a timestamp).
    #[arg(long)]
    pub collection: Option<String>,
    /// Stop, ready, once checked, instead of switching: switch with `--switch GENERATION`.
    #[arg(long)]
    pub manual: bool,
    /// Keep the replaced collection after its grace period.
    #[arg(long)]
    pub keep_old: bool,
    /// How long the replaced collection stays after the switch (seconds; default 3600).
    #[arg(long)]
    pub grace_secs: Option<f64>,
    /// With --manual: recall@10 of the current and the new collection (dense) on these
    /// questions (a train.jsonl: `question`, `relevant` articles), side by side.
    #[arg(long)]
    pub questions: Option<PathBuf>,
    /// Questions asked for the recall (the first N).
    #[arg(long, default_value_t = 200)]
    pub sample: usize,
    /// Switch search to a ready rebuild.
    #[arg(long, value_name = "GENERATION", conflicts_with_all = ["embedder", "cancel"])]
    pub switch: Option<i64>,
    /// Cancel the rebuild under way.
    #[arg(long, value_name = "GENERATION", conflicts_with = "embedder")]
    pub cancel: Option<i64>,
    /// Start it and return, without following its progress.
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub conn: Conn,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

pub async fn index(args: IndexArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let v = args.conn.client()?.index().await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    write_index(&v, out)
}

fn write_index(v: &Value, out: &mut dyn Write) -> anyhow::Result<()> {
    let a = &v["active"];
    writeln!(
        out,
        "search reads {}  ({}, {} dimensions{})",
        a["collection"].as_str().unwrap_or("-"),
        a["model_id"].as_str().unwrap_or("-"),
        a["dimension"],
        match a["generation"].as_i64() {
            Some(g) => format!(", generation {g}"),
            None => String::new(),
        }
    )?;
    match v["rebuild"].as_object() {
        Some(_) => writeln!(out, "{}", progress_line(&v["rebuild"]))?,
        None => writeln!(out, "no rebuild under way")?,
    }
    Ok(())
}

/// One line of a rebuild's progress.
fn progress_line(g: &Value) -> String {
    let p = &g["progress"];
    let (done, total) = (
        p["chunks_done"].as_i64().unwrap_or(0),
        p["chunks_total"].as_i64().unwrap_or(0),
    );
    let share = if total > 0 {
        format!(" ({:.1}%)", 100.0 * done as f64 / total as f64)
    } else {
        String::new()
    };
    let mut line = format!(
        "rebuild {}  {}  {done} of {total} chunks{share}  {} of {} documents",
        g["generation"],
        g["state"].as_str().unwrap_or("-"),
        p["docs_done"],
        p["docs_total"],
    );
    if let Some(rate) = p["chunks_per_s"].as_f64() {
        line.push_str(&format!("  {rate:.1} chunks/s"));
    }
    if let Some(eta) = p["eta_s"].as_f64() {
        line.push_str(&format!("  ETA {eta:.0} s"));
    }
    if p["backlog"].as_i64().unwrap_or(0) > 0 {
        line.push_str(&format!("  backlog {}", p["backlog"]));
    }
    if let Some(e) = g["last_error"].as_str() {
        line.push_str(&format!("  (retrying: {})", crate::text::truncate(e, 80)));
    }
    line
}

pub async fn reindex(args: ReindexArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let client = args.conn.client()?;
    if let Some(generation) = args.cancel {
        let v = client
            .index_act(
                "/index/rebuild/cancel",
                &json!({ "generation": generation }),
            )
            .await?;
        if args.conn.json {
            return print_json(out, &v);
        }
        writeln!(
            out,
            "rebuild {generation} cancelled; its collection is dropped at the next sweep"
        )?;
        return Ok(());
    }
    if let Some(generation) = args.switch {
        let v = client
            .index_act("/index/switch", &json!({ "generation": generation }))
            .await?;
        if args.conn.json {
            return print_json(out, &v);
        }
        if v["switched"].as_bool() == Some(true) {
            writeln!(
                out,
                "search reads {} now",
                v["to"]["collection"].as_str().unwrap_or("-")
            )?;
        } else {
            writeln!(
                out,
                "{}",
                v["detail"]
                    .as_str()
                    .unwrap_or("switching once the backlog is copied")
            )?;
        }
        return Ok(());
    }
    let Some(name) = &args.embedder else {
        anyhow::bail!("name the new embedder (--embedder), or --switch / --cancel a rebuild");
    };
    let mut embedder = serde_json::Map::new();
    embedder.insert("DOCPIPE_EMBEDDER".into(), json!(name));
    for (k, v) in &args.settings {
        embedder.insert(k.clone(), json!(v));
    }
    let mut body = json!({
        "embedder": embedder,
        "switch": if args.manual { "manual" } else { "auto" },
        "keep_old": args.keep_old,
    });
    if let Some(c) = &args.collection {
        body["collection"] = json!(c);
    }
    if let Some(g) = args.grace_secs {
        body["grace_secs"] = json!(g);
    }
    let started = client.index_act("/index/rebuild", &body).await?;
    let generation = started["generation"].as_i64().unwrap_or_default();
    if args.conn.json && args.no_wait {
        return print_json(out, &started);
    }
    writeln!(
        out,
        "rebuild {generation} started: {} ({}, {} dimensions)",
        started["collection"].as_str().unwrap_or("-"),
        started["model_id"].as_str().unwrap_or("-"),
        started["dimension"],
    )?;
    if args.no_wait {
        return Ok(());
    }
    let mut last = String::new();
    let end = loop {
        let v = client.index().await?;
        let g = v["recent"]
            .as_array()
            .and_then(|r| {
                r.iter()
                    .find(|g| g["generation"].as_i64() == Some(generation))
            })
            .cloned()
            .unwrap_or(Value::Null);
        let line = progress_line(&g);
        if line != last {
            writeln!(out, "{line}")?;
            out.flush()?;
            last = line;
        }
        match g["state"].as_str() {
            Some("building") | None => tokio::time::sleep(Duration::from_secs(2)).await,
            Some(_) => break g,
        }
    };
    match end["state"].as_str() {
        Some("active") | Some("retired") | Some("dropped") => {
            writeln!(
                out,
                "search reads {} now; check: {}",
                end["collection"].as_str().unwrap_or("-"),
                end["check"]
            )?;
        }
        Some("ready") => {
            writeln!(out, "ready; check: {}", end["check"])?;
            if let Some(path) = &args.questions {
                let (current, next, n) = recall(&client, path, args.sample).await?;
                writeln!(
                    out,
                    "recall@10 (dense) on {n} questions: current {current:.4}, new {next:.4}"
                )?;
            }
            writeln!(out, "switch with: docpipe reindex --switch {generation}")?;
        }
        other => anyhow::bail!("rebuild {generation} ended {}", other.unwrap_or("unknown")),
    }
    Ok(())
}

/// A citation as the questions write it: no 《》, no 中华人民共和国, no spaces.
fn plain_citation(s: &str) -> String {
    s.replace(['《', '》', ' ', '\u{3000}'], "")
        .replace("中华人民共和国", "")
}

/// Recall@10 of dense search on the current and the next collection, on the first `sample`
/// questions of a train.jsonl.
async fn recall(
    client: &crate::client::Client,
    path: &std::path::Path,
    sample: usize,
) -> anyhow::Result<(f64, f64, usize)> {
    let text = std::fs::read_to_string(path)?;
    let questions: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(sample)
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let (current, next) = recall_at_10(client, &questions).await?;
    Ok((current, next, questions.len()))
}

/// Recall@10 of dense search on the current (`index: active`) and the next collection: the share
/// of each question's `relevant` articles among its first ten hits, averaged over the questions.
pub async fn recall_at_10(
    client: &crate::client::Client,
    questions: &[Value],
) -> anyhow::Result<(f64, f64)> {
    let mut sums = [0.0f64; 2];
    for q in questions {
        let relevant: Vec<String> = q["relevant"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(plain_citation))
            .collect();
        if relevant.is_empty() {
            continue;
        }
        for (i, index) in ["active", "next"].iter().enumerate() {
            let v = client
                .search(&json!({ "query": q["question"], "mode": "dense", "top_k": 10, "index": index }))
                .await?;
            let cited: Vec<String> = v["hits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["citation"].as_str().map(plain_citation))
                .collect();
            let found = relevant.iter().filter(|r| cited.contains(r)).count();
            sums[i] += found as f64 / relevant.len() as f64;
        }
    }
    let n = questions.len().max(1) as f64;
    Ok((sums[0] / n, sums[1] / n))
}

#[cfg(test)]
mod tests {
    #[test]
    fn citations_compare_as_the_questions_write_them() {
        assert_eq!(
            super::plain_citation("《中华人民共和国民法典》第五十四条"),
            "民法典第五十四条"
        );
        assert!(super::key_value("DOCPIPE_EMBED_DIM=512").is_ok());
        assert!(super::key_value("nothing").is_err());
    }
}
