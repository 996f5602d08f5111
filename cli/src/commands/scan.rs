//! `docpipe scan`: what the sensitive-data scan of a document's current parse found, each finding
//! by its place and a masked sample; `--resolve` (a reviewer) resolves the findings a `block`
//! policy withheld it for.

use super::{print_json, IdArgs};
use serde_json::Value;
use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    #[command(flatten)]
    pub id: IdArgs,
    /// Resolve the findings the scan blocked the document for (a reviewer's act), then show it.
    #[arg(long)]
    pub resolve: bool,
}

pub async fn scan(args: ScanArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let ScanArgs { id: args, resolve } = args;
    let client = args.conn.client()?;
    if resolve {
        let resolved = client.resolve_scan(&args.doc_id).await?;
        if !args.conn.json {
            writeln!(
                out,
                "{}  findings resolved (scan {})",
                args.doc_id, resolved["scan_id"]
            )?;
        }
    }
    let v = client.scan(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    write_scan(&args.doc_id, &v["scan"], out)
}

fn write_scan(doc_id: &str, scan: &Value, out: &mut dyn Write) -> anyhow::Result<()> {
    if scan.is_null() {
        writeln!(
            out,
            "{doc_id}  not scanned yet (its first parse has not committed)"
        )?;
        return Ok(());
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    writeln!(
        out,
        "{doc_id}  {} · risk {} · {} finding(s) · policy {} · run {} · {}",
        text(&scan["status"]),
        text(&scan["risk_level"]),
        scan["findings_count"],
        text(&scan["policy"]),
        scan["run_id"],
        text(&scan["scanner_version"]),
    )?;
    if let Some(by_type) = scan["summary"]["by_type"].as_object() {
        let counts: Vec<String> = by_type.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if !counts.is_empty() {
            writeln!(out, "  by type   {}", counts.join(" · "))?;
        }
    }
    for f in scan["findings"].as_array().into_iter().flatten() {
        let place = &f["location"];
        let article = place["article"].as_str().unwrap_or("");
        writeln!(
            out,
            "  {:<10} {:<7} {:<28} {}{}paragraph {}, char {}",
            text(&f["finding_type"]),
            text(&f["severity"]),
            text(&f["masked_sample"]),
            article,
            if article.is_empty() { "" } else { " · " },
            place["paragraph"],
            place["char"],
        )?;
    }
    let shown = scan["findings"].as_array().map_or(0, Vec::len);
    let total = scan["findings_count"].as_u64().unwrap_or(0) as usize;
    if shown < total {
        writeln!(out, "  … {} more not listed", total - shown)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_scan_reads_as_its_status_and_each_finding_by_its_place() {
        let scan = serde_json::json!({
            "status": "warned", "risk_level": "high", "findings_count": 3, "policy": "warn",
            "run_id": 7, "scanner_version": "docpipe-sensitive/1",
            "summary": { "by_type": { "id_card": 1, "mobile": 2 } },
            "findings": [{
                "finding_type": "id_card", "severity": "high",
                "masked_sample": "110**************X",
                "location": { "article": "第十条", "paragraph": 2, "char": 14 }
            }]
        });
        let mut out = Vec::new();
        super::write_scan("doc_x", &scan, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "doc_x  warned · risk high · 3 finding(s) · policy warn · run 7 · docpipe-sensitive/1\n\
             \x20 by type   id_card 1 · mobile 2\n\
             \x20 id_card    high    110**************X           第十条 · paragraph 2, char 14\n\
             \x20 … 2 more not listed\n"
        );
    }
}
