//! Commands for the local stack that go straight to the bucket and the database: `put` drops files
//! into the bucket the way any S3 client would, `docs` shows which document is at which step.

use anyhow::Context;
use clap::Args;
use docpipe_core::config::{AwsConfig, DbConfig};
use docpipe_core::env::EnvReader;
use docpipe_core::model::DocStatus;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct PutArgs {
    /// Files to upload.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Key prefix; the bucket notification watches `uploads/`.
    #[arg(long, default_value = "uploads/")]
    prefix: String,
    /// The tenant whose documents these are: the files go under `uploads/{tenant}/` (a tenant
    /// exists once it has called the API; other folders are the default tenant's).
    #[arg(long, conflicts_with = "prefix")]
    tenant: Option<String>,
}

pub async fn put(args: PutArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let aws = AwsConfig::read(&mut env);
    let bucket = env.required("DOCPIPE_BUCKET");
    env.finish()?;
    let prefix = match &args.tenant {
        Some(t) if docpipe_core::tenant::is_valid_organ_id(t) => {
            format!("{}{t}/", docpipe_core::ids::UPLOAD_PREFIX)
        }
        Some(t) => anyhow::bail!(
            "--tenant {t:?} is no tenant id: lower-case letters, digits, - and _, at most 64"
        ),
        None => args.prefix.clone(),
    };
    let s3 = docpipe_pipeline::services::AwsClients::new(&aws).await.s3;
    for file in &args.files {
        let name = file
            .file_name()
            .context("a file name")?
            .to_string_lossy()
            .to_string();
        let key = format!("{prefix}{name}");
        let body = tokio::fs::read(file)
            .await
            .with_context(|| format!("reading {}", file.display()))?;
        s3.put_object()
            .bucket(&bucket)
            .key(&key)
            .content_type(docpipe_cli::commands::content_type_of(&name))
            .body(body.into())
            .send()
            .await
            .with_context(|| format!("putting s3://{bucket}/{key}"))?;
        println!("put s3://{bucket}/{key}");
    }
    Ok(())
}

#[derive(Args)]
pub struct DocsArgs {
    /// Wait until every document has reached this status (or failed), printing progress.
    #[arg(long)]
    wait_for: Option<String>,
    /// Give up waiting after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Print every document, not only the counts.
    #[arg(long)]
    list: bool,
}

fn rank(status: DocStatus) -> u8 {
    match status {
        DocStatus::Pending => 0,
        DocStatus::Stored => 1,
        DocStatus::Parsed => 2,
        DocStatus::Indexed => 3,
        DocStatus::Failed => 4,
    }
}

pub async fn docs(args: DocsArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    env.finish()?;
    let db = docpipe_db::Db::connect(&db_config)?;
    let target = match &args.wait_for {
        Some(s) => Some(DocStatus::parse(s).with_context(|| format!("unknown status {s:?}"))?),
        None => None,
    };
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let lines = docpipe_db::documents::all_lines(&**db.client().await?).await?;
        let docs: Vec<(String, DocStatus, i64, String, String)> = lines
            .into_iter()
            .map(|d| {
                (
                    d.doc_id,
                    DocStatus::parse(&d.status).unwrap_or(DocStatus::Failed),
                    d.current_run_id,
                    d.file_name,
                    d.error_message,
                )
            })
            .collect();
        let mut counts = [0usize; 5];
        for d in &docs {
            counts[rank(d.1) as usize] += 1;
        }
        let summary = format!(
            "{} documents: {} pending, {} stored, {} parsed, {} indexed, {} failed",
            docs.len(),
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4]
        );
        if summary != last {
            println!("[{:>4}s] {summary}", started.elapsed().as_secs());
            last = summary;
        }
        let done = match target {
            None => true,
            Some(t) => docs
                .iter()
                .all(|d| d.1 == DocStatus::Failed || rank(d.1) >= rank(t)),
        };
        if done {
            if args.list || target.is_some() {
                println!(
                    "{:<36}  {:<8}  {:>5}  file / error",
                    "doc_id", "status", "run"
                );
                for (id, status, run, file, error) in &docs {
                    let note = if error.is_empty() {
                        file.clone()
                    } else {
                        format!("{file}: {error}")
                    };
                    println!("{id:<36}  {:<8}  {run:>5}  {note}", status.as_str());
                }
            }
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(args.timeout) {
            anyhow::bail!("gave up after {}s: {last}", args.timeout);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
