//! `docpipe summary`: documents by status, chunks, and the median time of each stage.

use super::{or_dash, print_json};
use crate::client::{Client, ClientError, Conn, ListFilter};
use crate::model::Doc;
use crate::text::{excerpt, seconds, truncate};
use clap::Args;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;

#[derive(Args, Debug)]
pub struct SummaryArgs {
    #[arg(long)]
    pub regulation_type: Option<String>,
    #[arg(long)]
    pub version: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// The median, the 90th percentile and the largest of some durations (ms), nearest-rank.
fn spread(mut ms: Vec<i64>) -> Value {
    if ms.is_empty() {
        return json!({ "runs": 0, "median_ms": null, "p90_ms": null, "max_ms": null });
    }
    ms.sort_unstable();
    let rank = |q: f64| ms[(((ms.len() as f64) * q).ceil() as usize).clamp(1, ms.len()) - 1];
    let median = if ms.len() % 2 == 1 {
        ms[ms.len() / 2]
    } else {
        (ms[ms.len() / 2 - 1] + ms[ms.len() / 2]) / 2
    };
    json!({
        "runs": ms.len(),
        "median_ms": median,
        "p90_ms": rank(0.9),
        "max_ms": ms[ms.len() - 1],
    })
}

/// Computes the summary from the API: the listing, then each document's current run.
pub async fn summary_value(client: &Client, filter: &ListFilter) -> anyhow::Result<Value> {
    let docs: Vec<Doc> = client
        .list(filter, None)
        .await?
        .documents
        .iter()
        .map(Doc::from_value)
        .collect();
    let mut by_status: BTreeMap<&str, usize> = ["pending", "stored", "parsed", "indexed", "failed"]
        .into_iter()
        .map(|s| (s, 0))
        .collect();
    for d in &docs {
        *by_status.entry(d.status.as_str()).or_default() += 1;
    }
    let chunks: i64 = docs
        .iter()
        .filter(|d| d.status == "indexed")
        .map(|d| d.chunk_count)
        .sum();
    let detailed = current_runs(client, &docs).await?;
    let times = StageTimes::of(&detailed);
    let failed: Vec<Value> = detailed
        .iter()
        .filter(|d| d.status == "failed")
        .map(|d| {
            let run = d.current_run.clone().unwrap_or_default();
            json!({
                "doc_id": d.doc_id,
                "doc_name": d.name(),
                "failure_stage": run.failure_stage,
                "error_message": if run.error_message.is_empty() { &d.error_message } else { &run.error_message },
            })
        })
        .collect();
    Ok(json!({
        "documents": docs.len(),
        "by_status": by_status,
        "chunks": chunks,
        "stages": {
            "store": spread(times.store),
            "parse": spread(times.parse),
            "index": spread(times.index),
            "total": spread(times.total),
        },
        "span_ms": times.span_ms,
        "until_ms": {
            "stored": times.until_ms[0],
            "parsed": times.until_ms[1],
            "indexed": times.until_ms[2],
        },
        "failed": failed,
    }))
}

/// Each listed document with a run, read again for its current run (eight at a time); one
/// deleted since the listing no longer counts.
async fn current_runs(client: &Client, docs: &[Doc]) -> anyhow::Result<Vec<Doc>> {
    let ids: Vec<String> = docs
        .iter()
        .filter(|d| d.current_run_id.is_some())
        .map(|d| d.doc_id.clone())
        .collect();
    Ok(futures::stream::iter(ids)
        .map(|id| {
            let client = client.clone();
            async move {
                match client.document(&id).await {
                    Ok(v) => Ok(Some(Doc::from_value(&v))),
                    Err(ClientError::Problem { status: 404, .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect())
}

/// The current runs' stage durations, and the span from the first start to the last index.
#[derive(Default)]
struct StageTimes {
    store: Vec<i64>,
    parse: Vec<i64>,
    index: Vec<i64>,
    total: Vec<i64>,
    span_ms: Option<i64>,
    /// From the first run's start to the last document stored, parsed and indexed: where a batch's
    /// wall time went, stage by stage (the stages overlap).
    until_ms: [Option<i64>; 3],
}

impl StageTimes {
    fn of(detailed: &[Doc]) -> StageTimes {
        let mut times = StageTimes::default();
        let mut first_start = None;
        let mut last_end = None;
        let mut last_at = [None; 3];
        for d in detailed {
            let Some(run) = &d.current_run else { continue };
            let stages = [&run.stages.stored, &run.stages.parsed, &run.stages.indexed];
            for (last, stage) in last_at.iter_mut().zip(stages) {
                *last = (*last).max(stage.at);
            }
            times.store.extend(run.stages.stored.duration_ms);
            times.parse.extend(run.stages.parsed.duration_ms);
            times.index.extend(run.stages.indexed.duration_ms);
            if let (Some(start), Some(end)) = (run.started_at, run.stages.indexed.at) {
                times.total.push((end - start).num_milliseconds());
                first_start = first_start.min(Some(start)).or(Some(start));
                last_end = last_end.max(Some(end));
            }
        }
        times.span_ms = match (first_start, last_end) {
            (Some(a), Some(b)) => Some((b - a).num_milliseconds()),
            _ => None,
        };
        let first = detailed
            .iter()
            .filter_map(|d| d.current_run.as_ref()?.started_at)
            .min();
        times.until_ms = last_at.map(|last| Some((last? - first?).num_milliseconds()));
        times
    }
}

pub async fn summary(args: SummaryArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let filter = ListFilter {
        regulation_type: args.regulation_type.clone(),
        version: args.version.clone(),
        ..Default::default()
    };
    let s = summary_value(&args.conn.client()?, &filter).await?;
    if args.conn.json {
        return print_json(out, &s);
    }
    let by: Vec<String> = s["by_status"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| n.as_u64() != Some(0))
                .map(|(k, n)| format!("{n} {k}"))
                .collect()
        })
        .unwrap_or_default();
    writeln!(
        out,
        "documents  {}{}",
        s["documents"],
        if by.is_empty() {
            String::new()
        } else {
            format!(": {}", by.join(", "))
        }
    )?;
    writeln!(out, "chunks     {} (indexed documents)", s["chunks"])?;
    write_stage_table(&s, out)?;
    if let Some(span) = s["span_ms"].as_i64() {
        let chunks = s["chunks"].as_i64().unwrap_or(0);
        let rate = if span > 0 {
            format!(", {:.1} chunks/s", chunks as f64 * 1000.0 / span as f64)
        } else {
            String::new()
        };
        writeln!(
            out,
            "span       {} from the first run's start to the last index{rate}",
            seconds(span as f64)
        )?;
    }
    for f in s["failed"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "failed     {}  {}  {}: {}",
            f["doc_id"].as_str().unwrap_or(""),
            f["doc_name"].as_str().unwrap_or(""),
            or_dash(f["failure_stage"].as_str().unwrap_or("")),
            truncate(&excerpt(f["error_message"].as_str().unwrap_or("")), 80)
        )?;
    }
    Ok(())
}

/// One line per stage: the median, p90 and maximum of the current runs' durations.
fn write_stage_table(s: &Value, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<34}  {:>8}  {:>8}  {:>8}  {:>5}",
        "stage (current runs)", "median", "p90", "max", "runs"
    )?;
    for (key, label) in [
        ("store", "store   stored − started"),
        ("parse", "parse   parsed − stored"),
        ("index", "index   indexed − parsed"),
        ("total", "total   indexed − started"),
    ] {
        let st = &s["stages"][key];
        let fmt = |k: &str| {
            st[k]
                .as_i64()
                .map(|ms| seconds(ms as f64))
                .unwrap_or("-".into())
        };
        writeln!(
            out,
            "{label:<34}  {:>8}  {:>8}  {:>8}  {:>5}",
            fmt("median_ms"),
            fmt("p90_ms"),
            fmt("max_ms"),
            st["runs"]
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_nearest_rank() {
        let s = spread(vec![5, 1, 3, 2, 4]);
        assert_eq!(s["median_ms"], 3);
        assert_eq!(s["p90_ms"], 5);
        assert_eq!(s["max_ms"], 5);
        assert_eq!(spread(vec![1, 2, 3, 4])["median_ms"], 2);
        assert_eq!(spread(vec![])["runs"], 0);
    }
}
