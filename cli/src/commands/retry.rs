//! `docpipe retry`: a document processed again in a new run.

use super::{print_json, IdArgs};
use std::io::Write;

pub async fn retry(args: IdArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let v = args.conn.client()?.retry(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    write!(
        out,
        "{}: run {} opened (status {}, parse queued)",
        v["doc_id"].as_str().unwrap_or(&args.doc_id),
        v["run_id"],
        v["status"].as_str().unwrap_or("stored")
    )?;
    if let Some(old) = v["abandoned_run"].as_i64() {
        write!(out, "; run {old} was past its deadline and is abandoned")?;
    }
    writeln!(out)?;
    Ok(())
}
