//! `docpipe upload`: files through presigned URLs (POST /documents, then PUT), several at once.

use super::{error_text, print_json};
use crate::client::{Client, Conn, ListFilter};
use crate::model::Doc;
use anyhow::{bail, Context};
use clap::Args;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct UploadArgs {
    /// Files to upload.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long)]
    pub regulation_type: Option<String>,
    #[arg(long)]
    pub version: Option<String>,
    /// The work the files are a version of, by its citable title (else read from the text).
    #[arg(long)]
    pub work: Option<String>,
    /// The version's date, YYYY-MM-DD (else read from its heading notes).
    #[arg(long)]
    pub promulgated: Option<String>,
    /// The day the version takes effect, YYYY-MM-DD (else read from its text).
    #[arg(long)]
    pub effective_from: Option<String>,
    /// The day the version stops applying, YYYY-MM-DD.
    #[arg(long)]
    pub effective_to: Option<String>,
    /// Comma-separated tags.
    #[arg(long, value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Uploads in flight at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub concurrency: u16,
    /// Upload no file whose content (sha256) a document that has not failed already holds;
    /// print that document's id instead.
    #[arg(long)]
    pub skip_existing: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// The media type the upload announces, from the file's extension.
pub fn content_type_of(name: &str) -> &'static str {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "pdf" => "application/pdf",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "html" | "htm" => "text/html",
        "md" | "markdown" => "text/markdown",
        "txt" | "text" => "text/plain",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
}

/// What became of one file.
enum Uploaded {
    /// Registered and uploaded: the API's registration answer.
    New(Value),
    /// The same content is already held by this document (the API's listing entry).
    Present(Value),
}

async fn upload_one(
    client: &Client,
    args: &UploadArgs,
    path: &Path,
    present: &HashMap<String, Value>,
) -> anyhow::Result<Uploaded> {
    let file_name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?
        .to_string_lossy()
        .to_string();
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    if args.skip_existing {
        use sha2::Digest;
        let sha = hex::encode(sha2::Sha256::digest(&bytes));
        if let Some(doc) = present.get(&sha) {
            return Ok(Uploaded::Present(doc.clone()));
        }
    }
    let content_type = content_type_of(&file_name);
    let mut request = json!({
        "file_name": file_name,
        "doc_name": file_name,
        "content_type": content_type,
    });
    if let Some(t) = &args.regulation_type {
        request["regulation_type"] = json!(t);
    }
    let given = [
        ("version", &args.version),
        ("work", &args.work),
        ("promulgated", &args.promulgated),
        ("effective_from", &args.effective_from),
        ("effective_to", &args.effective_to),
    ];
    for (field, value) in given {
        if let Some(v) = value {
            request[field] = json!(v);
        }
    }
    if !args.tags.is_empty() {
        request["tags"] = json!(args.tags);
    }
    let registered = client.register(&request).await?;
    if let Err(e) = client.upload(&registered, content_type, bytes).await {
        // Nothing will ever arrive for this registration: take it back rather than leave it pending.
        if let Some(id) = registered["doc_id"].as_str() {
            let _ = client.delete(id).await;
        }
        return Err(e.into());
    }
    Ok(Uploaded::New(registered))
}

pub async fn upload(args: UploadArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let client = args.conn.client()?;
    // The content already held, by sha256 (a pending document has none yet).
    let mut present: HashMap<String, Value> = HashMap::new();
    if args.skip_existing {
        for d in client.list(&ListFilter::default(), None).await?.documents {
            let doc = Doc::from_value(&d);
            if !doc.content_sha256.is_empty() && doc.status != "failed" && !doc.deleting {
                present.entry(doc.content_sha256.clone()).or_insert(d);
            }
        }
    }
    let json = args.conn.json;
    let results: Vec<(PathBuf, anyhow::Result<Uploaded>)> = {
        // Owned by each upload, so that the command's future is Send (a task may run it).
        let shared = Arc::new((client.clone(), present));
        let args = Arc::new(args);
        let mut stream = futures::stream::iter(args.files.clone())
            .map(|path| {
                let (shared, args) = (shared.clone(), args.clone());
                async move {
                    let r = upload_one(&shared.0, &args, &path, &shared.1).await;
                    (path, r)
                }
            })
            .buffered(args.concurrency as usize);
        let mut results = Vec::new();
        while let Some((path, r)) = stream.next().await {
            if !json {
                match &r {
                    Ok(Uploaded::New(reg)) => writeln!(
                        out,
                        "{}  uploaded  {}",
                        reg["doc_id"].as_str().unwrap_or("?"),
                        path.display()
                    )?,
                    Ok(Uploaded::Present(d)) => {
                        let doc = Doc::from_value(d);
                        writeln!(
                            out,
                            "{}  present   {}  (same content, {})",
                            doc.doc_id,
                            path.display(),
                            doc.status
                        )?
                    }
                    Err(e) => eprintln!("error: {}: {}", path.display(), error_text(e)),
                }
                out.flush()?;
            }
            results.push((path, r));
        }
        results
    };
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    if json {
        let answers: Vec<Value> = results
            .iter()
            .filter_map(|(_, r)| match r {
                Ok(Uploaded::New(v)) | Ok(Uploaded::Present(v)) => Some(v.clone()),
                Err(_) => None,
            })
            .collect();
        print_json(out, &Value::Array(answers))?;
        for (path, r) in &results {
            if let Err(e) = r {
                eprintln!("error: {}: {}", path.display(), error_text(e));
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} files were not uploaded", results.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_follow_the_extension() {
        assert_eq!(content_type_of("a.PDF"), "application/pdf");
        assert_eq!(content_type_of("法.md"), "text/markdown");
        assert_eq!(content_type_of("x.htm"), "text/html");
        assert_eq!(content_type_of("noext"), "application/octet-stream");
    }
}
