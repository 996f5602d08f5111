//! `docpipe rm`: a document deleted, with its objects and vectors.

use super::{print_json, IdArgs};
use serde_json::json;
use std::io::Write;

pub async fn rm(args: IdArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    args.conn.client()?.delete(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &json!({ "doc_id": args.doc_id, "deleted": true }));
    }
    writeln!(out, "{}: deleted", args.doc_id)?;
    Ok(())
}
