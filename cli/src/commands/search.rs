//! `docpipe search`: the indexed articles (hybrid by default).

use super::print_json;
use crate::client::{search_request, Conn};
use crate::model::Hit;
use crate::text::{excerpt, truncate};
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// What to look for: everyday words, exact terms, or an article ("劳动合同法第39条").
    pub query: String,
    /// dense (vectors), keyword (BM25) or hybrid (both, fused; the API's default).
    #[arg(long, value_parser = ["dense", "keyword", "hybrid"])]
    pub mode: Option<String>,
    /// How many hits (1–50; the API's default is 10).
    #[arg(long)]
    pub top_k: Option<u32>,
    /// Only these documents (repeat, or comma-separate).
    #[arg(long = "doc-id", value_delimiter = ',')]
    pub doc_ids: Vec<String>,
    #[arg(long)]
    pub regulation_type: Option<String>,
    #[arg(long)]
    pub version: Option<String>,
    /// Only documents with any of these tags (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub tags: Vec<String>,
    /// The date to search the law as of (YYYY-MM-DD; the API's default is today).
    #[arg(long)]
    pub as_of: Option<String>,
    /// in_force (each law's version in force on that date; the default) or all.
    #[arg(long, value_parser = ["in_force", "all"])]
    pub versions: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn search(args: SearchArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let mut body = search_request(
        &args.query,
        args.mode.as_deref(),
        args.top_k,
        &args.doc_ids,
        args.regulation_type.as_deref(),
        args.version.as_deref(),
        &args.tags,
    );
    if let Some(day) = &args.as_of {
        body["as_of"] = serde_json::json!(day);
    }
    if let Some(v) = &args.versions {
        body["versions"] = serde_json::json!(v);
    }
    let v = args.conn.client()?.search(&body).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    let hits: Vec<Hit> = v["hits"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|h| serde_json::from_value(h.clone()).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    if hits.is_empty() {
        writeln!(out, "no hits")?;
    }
    for (i, h) in hits.iter().enumerate() {
        let pages = if h.page_end > h.page_start {
            format!("pp.{}–{}", h.page_start, h.page_end)
        } else {
            format!("p.{}", h.page_start)
        };
        let section = if !h.citation.is_empty() {
            h.citation.clone()
        } else if h.section_path.is_empty() {
            "-".to_string()
        } else {
            h.section_path.join(" › ")
        };
        writeln!(
            out,
            "{:>2}  {:.3}  {}  {}  {}",
            i + 1,
            h.score,
            h.doc_name,
            truncate(&section, 60),
            pages
        )?;
        if let Some(v) = &h.version {
            writeln!(out, "           {}", v.describe())?;
        }
        writeln!(out, "           {}", truncate(&excerpt(&h.text), 100))?;
    }
    if let Some(n) = v["stale_dropped"].as_u64().filter(|n| *n > 0) {
        writeln!(
            out,
            "({n} hits dropped: their documents are gone or were reprocessed)"
        )?;
    }
    Ok(())
}
