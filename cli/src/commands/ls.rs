//! `docpipe ls`: documents, most recently updated first.

use super::print_json;
use crate::client::{Conn, ListFilter};
use crate::model::Doc;
use crate::text::{excerpt, human_bytes, local_time, truncate};
use anyhow::bail;
use clap::Args;
use serde_json::json;
use std::io::Write;

#[derive(Args, Debug)]
pub struct LsArgs {
    /// Only documents in this status (pending, stored, parsed, indexed, failed).
    #[arg(long)]
    pub status: Option<String>,
    #[arg(long)]
    pub regulation_type: Option<String>,
    #[arg(long)]
    pub version: Option<String>,
    /// At most this many (the most recently updated); all of them without it.
    #[arg(long)]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn ls(args: LsArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    if args.limit == Some(0) {
        bail!("--limit must be at least 1");
    }
    let filter = ListFilter {
        status: args.status.clone(),
        regulation_type: args.regulation_type.clone(),
        version: args.version.clone(),
        updated_since: None,
    };
    let page = args.conn.client()?.list(&filter, args.limit).await?;
    if args.conn.json {
        return print_json(
            out,
            &json!({ "documents": page.documents, "next_cursor": page.next_cursor }),
        );
    }
    writeln!(
        out,
        "{:<36}  {:<7}  {:>6}  {:>9}  {:<19}  NAME",
        "DOC_ID", "STATUS", "CHUNKS", "SIZE", "UPDATED"
    )?;
    for d in &page.documents {
        let doc = Doc::from_value(d);
        let mut name = doc.name().to_string();
        if !doc.error_message.is_empty() {
            name = format!("{name}  ({})", truncate(&excerpt(&doc.error_message), 80));
        }
        writeln!(
            out,
            "{:<36}  {:<7}  {:>6}  {:>9}  {:<19}  {}",
            doc.doc_id,
            doc.status,
            doc.chunk_count,
            human_bytes(doc.size_bytes),
            doc.updated_at.map(local_time).unwrap_or_default(),
            name
        )?;
    }
    let more = if page.next_cursor.is_some() {
        " (more: raise --limit)"
    } else {
        ""
    };
    writeln!(out, "{} documents{more}", page.documents.len())?;
    Ok(())
}
