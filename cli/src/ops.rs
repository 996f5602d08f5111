//! Operator commands that go to the stores directly: `reconcile`, `reindex-keywords`, `import`.

use clap::Args;
use docpipe_core::config::{AwsConfig, DbConfig, MilvusConfig};
use docpipe_core::env::EnvReader;
use docpipe_pipeline::adapters::S3ObjectStore;

#[derive(Args)]
pub struct ReconcileArgs {
    /// Remove what is found. Without it, only report (a dry run).
    #[arg(long)]
    apply: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn reconcile(args: ReconcileArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    let aws = AwsConfig::read(&mut env);
    let milvus = MilvusConfig::read(&mut env);
    let bucket = env.required("DOCPIPE_BUCKET");
    env.finish()?;
    let db = docpipe_pipeline::services::connect_db(&db_config, &aws).await?;
    let s3 = docpipe_pipeline::services::AwsClients::new(&aws).await.s3;
    let objects = S3ObjectStore::new(s3);
    let vectors = docpipe_vector::MilvusIndex::connect(
        &milvus.url,
        milvus.token.as_ref().map(|t| t.expose().to_string()),
        &milvus.collection,
    )
    .await?;
    let report = docpipe_pipeline::upkeep::reconcile::reconcile(
        &db,
        &objects,
        &vectors,
        &bucket,
        args.apply,
        usize::MAX,
    )
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let verb = if args.apply {
        "removed"
    } else {
        "found (dry run; --apply removes)"
    };
    println!("reconcile: {verb}");
    println!(
        "  {:>6}  documents with vectors but no row",
        report.orphan_vector_docs.len()
    );
    println!(
        "  {:>6}  indexed documents with other runs' vectors",
        report.stale_run_vectors.len()
    );
    println!(
        "  {:>6}  failed documents still holding vectors",
        report.failed_doc_vectors.len()
    );
    println!(
        "  {:>6}  artifact objects without a row",
        report.orphan_artifacts.len()
    );
    for id in &report.orphan_vector_docs {
        println!("  vectors without a document: {id}");
    }
    for (id, n) in &report.stale_run_vectors {
        println!("  {n} stale vectors of {id}");
    }
    for key in &report.orphan_artifacts {
        println!("  orphan artifact: {key}");
    }
    Ok(())
}

#[derive(Args)]
pub struct ImportArgs {
    /// A JSON array of document records (the old documents.json).
    file: std::path::PathBuf,
    /// The bucket the records' originals (`object_name`) are in; DOCPIPE_BUCKET without it.
    #[arg(long)]
    source_bucket: Option<String>,
    #[arg(long)]
    json: bool,
}

pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    let aws = AwsConfig::read(&mut env);
    let bucket = match args.source_bucket {
        Some(bucket) => bucket,
        None => env.required("DOCPIPE_BUCKET"),
    };
    env.finish()?;
    let db = docpipe_pipeline::services::connect_db(&db_config, &aws).await?;
    let text = std::fs::read_to_string(&args.file)?;
    let report = docpipe_pipeline::legacy_import::import(&db, &text, &bucket).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "import: {} imported, {} already present, {} rejected",
            report.imported.len(),
            report.skipped.len(),
            report.rejected.len()
        );
        for (i, id, reason) in &report.rejected {
            println!("  record {i} ({id}): {reason}");
        }
    }
    if !report.rejected.is_empty() {
        std::process::exit(2);
    }
    Ok(())
}

#[derive(Args)]
pub struct ReindexKeywordsArgs {
    /// Documents per pass (each its own transaction); passes repeat until none is left.
    #[arg(long, default_value_t = 200)]
    batch: i64,
}

/// Re-analyses the keyword rows of every indexed document that an older analyzer wrote (or that
/// has none) from `semantic_blocks`: nothing is parsed or embedded again.
pub async fn reindex_keywords(args: ReindexKeywordsArgs) -> anyhow::Result<()> {
    let mut env = EnvReader::from_process();
    let db_config = DbConfig::read(&mut env);
    let aws = AwsConfig::read(&mut env);
    env.finish()?;
    let db = docpipe_pipeline::services::connect_db(&db_config, &aws).await?;
    let started = std::time::Instant::now();
    let (mut documents, mut blocks) = (0, 0);
    loop {
        let pass = docpipe_pipeline::stages::keywords::reindex(&db, args.batch.max(1)).await?;
        if pass.documents == 0 {
            break;
        }
        documents += pass.documents;
        blocks += pass.blocks;
        eprintln!("reindex-keywords: {documents} documents, {blocks} blocks so far");
    }
    println!(
        "reindex-keywords: {documents} documents ({blocks} blocks) re-analysed with {} in {:.1} s",
        docpipe_core::analyzer::ANALYZER,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
