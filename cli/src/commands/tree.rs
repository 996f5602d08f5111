//! `docpipe tree`: a document's heading tree.

use super::print_json;
use crate::client::Conn;
use crate::model::Node;
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct TreeArgs {
    /// The document's id (doc_…).
    pub doc_id: String,
    /// Show headings this many levels deep at most.
    #[arg(long)]
    pub depth: Option<usize>,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn tree(args: TreeArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let v = args.conn.client()?.structure(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    let nodes: Vec<Node> = serde_json::from_value(v["nodes"].clone()).unwrap_or_default();
    if nodes.is_empty() {
        writeln!(out, "{}: no headings (not parsed yet?)", args.doc_id)?;
        return Ok(());
    }
    fn max_page(nodes: &[Node]) -> i64 {
        nodes
            .iter()
            .map(|n| n.page.max(max_page(&n.children)))
            .max()
            .unwrap_or(0)
    }
    let paged = max_page(&nodes) > 1;
    fn walk(
        out: &mut dyn Write,
        nodes: &[Node],
        depth: usize,
        max: Option<usize>,
        paged: bool,
    ) -> std::io::Result<()> {
        for n in nodes {
            let page = if paged {
                format!("  (p.{})", n.page)
            } else {
                String::new()
            };
            writeln!(out, "{}{}{page}", "  ".repeat(depth), n.title.trim())?;
            if max.is_none_or(|m| depth + 1 < m) {
                walk(out, &n.children, depth + 1, max, paged)?;
            }
        }
        Ok(())
    }
    walk(out, &nodes, 0, args.depth, paged)?;
    writeln!(out, "{} headings", v["node_count"])?;
    Ok(())
}
