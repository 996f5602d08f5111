//! The commands that talk to the API: `upload`, `ls`, `status`, `retry`, `rm`, `search`, `tree`,
//! `summary` (and `watch`, in [`crate::watch`]). Each prints a table for people, or with `--json`
//! the API's own JSON for scripts; an error answer becomes `error: <title>: <detail>`.

use crate::client::{search_request, Client, ClientError, Conn, ListFilter};
use crate::model::{Doc, Hit, Node};
use crate::text::{excerpt, human_bytes, local_time, seconds, truncate};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Subcommand, Debug)]
pub enum ApiCommand {
    /// Upload files through presigned URLs (POST /documents, then PUT); prints each doc_id.
    Upload(UploadArgs),
    /// List documents, most recently updated first.
    Ls(LsArgs),
    /// A document, its current run with per-stage times, and why it failed.
    Status(IdArgs),
    /// Live progress of documents until each is indexed or failed.
    Watch(crate::watch::WatchArgs),
    /// Process a document again in a new run (from failed or indexed).
    Retry(IdArgs),
    /// Delete a document, its objects and its vectors.
    Rm(IdArgs),
    /// Search the indexed articles (hybrid by default: dense and keyword, fused).
    Search(SearchArgs),
    /// A document's heading tree.
    Tree(TreeArgs),
    /// Documents by status, chunks, and the median time of each stage.
    Summary(SummaryArgs),
    /// Uploads that did not become a document (GET /intake-failures), newest first.
    IntakeFailures(IntakeArgs),
}

/// Runs one command, printing to `out`.
pub async fn run(cmd: ApiCommand, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    match cmd {
        ApiCommand::Upload(a) => upload(a, out).await,
        ApiCommand::Ls(a) => ls(a, out).await,
        ApiCommand::Status(a) => status(a, out).await,
        ApiCommand::Watch(a) => crate::watch::watch(a, out).await,
        ApiCommand::Retry(a) => retry(a, out).await,
        ApiCommand::Rm(a) => rm(a, out).await,
        ApiCommand::Search(a) => search(a, out).await,
        ApiCommand::Tree(a) => tree(a, out).await,
        ApiCommand::Summary(a) => summary(a, out).await,
        ApiCommand::IntakeFailures(a) => intake_failures(a, out).await,
    }
}

/// The line an error ends the command with: `error: <title>: <detail>` for an API problem.
pub fn error_line(e: &anyhow::Error) -> String {
    format!("error: {}", error_text(e))
}

fn error_text(e: &anyhow::Error) -> String {
    match e.downcast_ref::<ClientError>() {
        Some(c) => c.to_string(),
        None => format!("{e:#}"),
    }
}

fn print_json(out: &mut (dyn Write + Send), v: &Value) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(v)?)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// upload

#[derive(Args, Debug)]
pub struct UploadArgs {
    /// Files to upload.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long)]
    pub regulation_type: Option<String>,
    #[arg(long)]
    pub version: Option<String>,
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
    if let Some(v) = &args.version {
        request["version"] = json!(v);
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
    let client = args.conn.client();
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

// ---------------------------------------------------------------------------------------------
// ls

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

#[derive(Args, Debug)]
pub struct IntakeArgs {
    /// At most this many (default 50, at most 200).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn intake_failures(args: IntakeArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    if !(1..=200).contains(&args.limit) {
        bail!("--limit must be between 1 and 200");
    }
    let page = args
        .conn
        .client()
        .get("/intake-failures", &[("limit", args.limit.to_string())])
        .await?;
    if args.conn.json {
        return print_json(out, &page);
    }
    let failures = page["intake_failures"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writeln!(out, "{:<19}  {:>4}  OBJECT  REASON", "FAILED", "TRIES")?;
    for f in &failures {
        let failed_at = f["failed_at"]
            .as_str()
            .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
            .map(local_time)
            .unwrap_or_default();
        writeln!(
            out,
            "{:<19}  {:>4}  s3://{}/{}  {}",
            failed_at,
            f["deliveries"].as_i64().unwrap_or(0),
            f["bucket"].as_str().unwrap_or_default(),
            truncate(f["object_name"].as_str().unwrap_or_default(), 80),
            truncate(&excerpt(f["reason"].as_str().unwrap_or_default()), 120)
        )?;
    }
    writeln!(out, "{} intake failures", failures.len())?;
    Ok(())
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
    let page = args.conn.client().list(&filter, args.limit).await?;
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

// ---------------------------------------------------------------------------------------------
// status, retry, rm

#[derive(Args, Debug)]
pub struct IdArgs {
    /// The document's id (doc_…).
    pub doc_id: String,
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn status(args: IdArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let v = args.conn.client().document(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    let doc = Doc::from_value(&v);
    writeln!(out, "{}  {}", doc.doc_id, doc.name())?;
    let mut state = doc.status.clone();
    if doc.status == "indexed" {
        state.push_str(&format!(" · {} chunks", doc.chunk_count));
    }
    if doc.deleting {
        state.push_str(" · being deleted");
    }
    writeln!(out, "  status    {state}")?;
    if let Some(p) = doc.progress.as_ref().filter(|_| !doc.is_terminal()) {
        // Queued or running, and for how long: "queued for index, 14 min".
        writeln!(out, "  now       {}", p.summary)?;
    }
    writeln!(
        out,
        "  file      {} · {} · {}",
        doc.file_name,
        if doc.content_type.is_empty() {
            "?"
        } else {
            &doc.content_type
        },
        human_bytes(doc.size_bytes)
    )?;
    let mut labels = Vec::new();
    if !doc.regulation_type.is_empty() {
        labels.push(format!("type {}", doc.regulation_type));
    }
    if !doc.version.is_empty() {
        labels.push(format!("version {}", doc.version));
    }
    if !doc.tags.is_empty() {
        labels.push(format!("tags {}", doc.tags.join(", ")));
    }
    if !labels.is_empty() {
        writeln!(out, "  labels    {}", labels.join(" · "))?;
    }
    if !doc.content_sha256.is_empty() {
        writeln!(out, "  sha256    {}", doc.content_sha256)?;
    }
    if let Some(t) = doc.created_at {
        writeln!(out, "  created   {}", local_time(t))?;
    }
    match &doc.current_run {
        None => writeln!(out, "  run       none yet")?,
        Some(run) => {
            writeln!(
                out,
                "  run       {} ({}) {}, started {}",
                run.run_id,
                run.trigger_type,
                run.run_status,
                run.started_at.map(local_time).unwrap_or_default()
            )?;
            let stages = [
                ("stored", &run.stages.stored),
                ("parsed", &run.stages.parsed),
                ("indexed", &run.stages.indexed),
                ("finished", &run.stages.finished),
            ];
            for (name, t) in stages {
                // Each stage's time is since the one before; `finished`'s is since the start.
                let note = if name == "finished" { " in all" } else { "" };
                match t.at {
                    Some(at) => writeln!(
                        out,
                        "    {name:<9} {}  {:>8}{note}",
                        at.with_timezone(&chrono::Local).format("%H:%M:%S%.3f"),
                        t.duration_ms
                            .map(|ms| seconds(ms as f64))
                            .unwrap_or_default()
                    )?,
                    None => writeln!(out, "    {name:<9} -")?,
                }
            }
            let c = &run.counts;
            writeln!(
                out,
                "  counts    {} layouts · {} headings · {} blocks · {} chunks",
                c.layouts, c.structure_nodes, c.semantic_blocks, c.chunks
            )?;
            if !run.embedding_model.is_empty() || !run.parser_backend.is_empty() {
                writeln!(
                    out,
                    "  engines   parser {} · embedder {}",
                    or_dash(&run.parser_backend),
                    or_dash(&run.embedding_model)
                )?;
            }
            if !run.failure_stage.is_empty() || !run.error_message.is_empty() {
                writeln!(
                    out,
                    "  failure   {}: {}",
                    or_dash(&run.failure_stage),
                    run.error_message
                )?;
            }
        }
    }
    if doc.status == "failed"
        && !doc.error_message.is_empty()
        && doc
            .current_run
            .as_ref()
            .is_none_or(|r| r.error_message.is_empty())
    {
        writeln!(out, "  failure   {}", doc.error_message)?;
    }
    Ok(())
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

pub async fn retry(args: IdArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let v = args.conn.client().retry(&args.doc_id).await?;
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

pub async fn rm(args: IdArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    args.conn.client().delete(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &json!({ "doc_id": args.doc_id, "deleted": true }));
    }
    writeln!(out, "{}: deleted", args.doc_id)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// search

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
    #[command(flatten)]
    pub conn: Conn,
}

pub async fn search(args: SearchArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let body = search_request(
        &args.query,
        args.mode.as_deref(),
        args.top_k,
        &args.doc_ids,
        args.regulation_type.as_deref(),
        args.version.as_deref(),
        &args.tags,
    );
    let v = args.conn.client().search(&body).await?;
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

// ---------------------------------------------------------------------------------------------
// tree

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
    let v = args.conn.client().structure(&args.doc_id).await?;
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

// ---------------------------------------------------------------------------------------------
// summary

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
    let ids: Vec<String> = docs
        .iter()
        .filter(|d| d.current_run_id.is_some())
        .map(|d| d.doc_id.clone())
        .collect();
    let detailed: Vec<Doc> = futures::stream::iter(ids)
        .map(|id| {
            let client = client.clone();
            async move {
                match client.document(&id).await {
                    Ok(v) => Ok(Some(Doc::from_value(&v))),
                    // Deleted since the listing: it no longer counts.
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
        .collect();
    let (mut store, mut parse, mut index, mut total) = (vec![], vec![], vec![], vec![]);
    let mut first_start = None;
    let mut last_end = None;
    for d in &detailed {
        let Some(run) = &d.current_run else { continue };
        store.extend(run.stages.stored.duration_ms);
        parse.extend(run.stages.parsed.duration_ms);
        index.extend(run.stages.indexed.duration_ms);
        if let (Some(start), Some(end)) = (run.started_at, run.stages.indexed.at) {
            total.push((end - start).num_milliseconds());
            first_start = first_start.min(Some(start)).or(Some(start));
            last_end = last_end.max(Some(end));
        }
    }
    let span_ms = match (first_start, last_end) {
        (Some(a), Some(b)) => Some((b - a).num_milliseconds()),
        _ => None,
    };
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
            "store": spread(store),
            "parse": spread(parse),
            "index": spread(index),
            "total": spread(total),
        },
        "span_ms": span_ms,
        "failed": failed,
    }))
}

pub async fn summary(args: SummaryArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let filter = ListFilter {
        regulation_type: args.regulation_type.clone(),
        version: args.version.clone(),
        ..Default::default()
    };
    let s = summary_value(&args.conn.client(), &filter).await?;
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
