//! Seed 000 §6.3: a stored original becomes layouts, a heading tree, semantic blocks and chunks;
//! the four artifacts are written; one transaction replaces the snapshot, records the artifacts and
//! moves the document to `parsed`; then the index job goes out.
//!
//! A message acts only while its run is the document's current run and the document is `stored`.
//! A message for a run that is `parsed` already re-sends the index job (the first delivery may have
//! committed and then failed to send it); anything else is stale and dropped.

use super::lease::HeldLease;
use crate::adapters::{JobQueue, ObjectStore, StorageError};
use crate::error::StageError;
use crate::stages::cleanup::{record_and_try, CleanupDeps};
use docpipe_core::artifacts::{self, Artifact};
use docpipe_core::config::ParseConfig;
use docpipe_core::config::ScanAction;
use docpipe_core::model::{DocStatus, JobMessage, Stage};
use docpipe_db::cleanups::Kind;
use docpipe_db::security::NewScan;
use docpipe_db::transitions::{self, ParseCounts};
use docpipe_db::{documents, snapshot, Db, DbError};
use docpipe_parse::references::Reference;
use docpipe_parse::{Hint, ParsedDocument, VectorChunk};
use sha2::Digest;
use std::time::Instant;
use tracing::{info, warn};

pub struct ParseDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub queue: &'a dyn JobQueue,
    pub config: &'a ParseConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseOutcome {
    Parsed {
        doc_id: String,
        run_id: i64,
        structure_nodes: usize,
        semantic_blocks: usize,
        chunks: usize,
    },
    /// The input is bad: the run failed at `parse` with the reason.
    Failed {
        doc_id: String,
        run_id: i64,
        reason: String,
    },
    /// The run was parsed already; its index job was sent again.
    IndexResent { doc_id: String, run_id: i64 },
    /// Not this message's business any more (deleted, superseded, or past this stage).
    Stale {
        doc_id: String,
        run_id: i64,
        why: String,
    },
}

fn db_err(e: DbError) -> StageError {
    StageError::from_db(Stage::Parse, e)
}

fn storage_err(e: StorageError) -> StageError {
    StageError::transient(Stage::ArtifactPersist, e)
}

pub async fn parse_job(deps: &ParseDeps<'_>, job: &JobMessage) -> Result<ParseOutcome, StageError> {
    let (doc_id, run_id) = (job.doc_id.as_str(), job.run_id);
    let stale = |why: String| {
        info!(doc_id, run_id, stage = "parse", why = %why, "stale parse message dropped");
        Ok(ParseOutcome::Stale {
            doc_id: doc_id.to_string(),
            run_id,
            why,
        })
    };

    let doc = match super::current::check(deps.db, job).await.map_err(db_err)? {
        Ok(doc) => doc,
        Err(why) => return stale(why),
    };
    match doc.status {
        DocStatus::Stored => {}
        DocStatus::Parsed => {
            send_index(deps, doc_id, run_id).await?;
            return Ok(ParseOutcome::IndexResent {
                doc_id: doc_id.to_string(),
                run_id,
            });
        }
        other => return stale(format!("the document is {other}, not stored")),
    }
    let Some(lease) = HeldLease::take(deps.db, run_id, Stage::Parse, deps.config.clock.lease)
        .await
        .map_err(db_err)?
    else {
        return Err(StageError::transient(
            Stage::Parse,
            format!("run {run_id} is being parsed by another worker"),
        ));
    };
    let outcome = match lease.too_many_abandoned(&deps.config.clock, Stage::Parse) {
        Some(reason) => fail(deps, doc_id, run_id, reason).await,
        None => parse_stored(deps, &doc, run_id).await,
    };
    lease.release(deps.db).await;
    outcome
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

/// A step's result: what it made, or the reason the input is refused (the run fails with it);
/// the outer error asks for a retry.
type Step<T> = Result<Result<T, String>, StageError>;

/// The parse itself, under the run's lease: fetch, parse and chunk, write the artifacts, commit,
/// queue the index job.
async fn parse_stored(
    deps: &ParseDeps<'_>,
    doc: &docpipe_db::documents::Document,
    run_id: i64,
) -> Result<ParseOutcome, StageError> {
    let doc_id = doc.doc_id.as_str();
    let started = Instant::now();
    let original = match fetch_original(deps, doc).await? {
        Ok(bytes) => bytes,
        Err(reason) => return fail(deps, doc_id, run_id, reason).await,
    };
    // The bytes must be the ones this run stored: an overwrite of the key since then has its own
    // upload event, whose store replaces this run (and this message then finds it stale). Until
    // that store is done, this run waits rather than parse another upload's bytes under its name.
    let read = hex::encode(sha2::Sha256::digest(&original));
    if !doc.content_sha256.is_empty() && read != doc.content_sha256 {
        return Err(StageError::transient(
            Stage::Parse,
            format!(
                "the original changed after run {run_id} stored it (sha256 {} then, {} now): its newer upload is stored in its place",
                short(&doc.content_sha256),
                short(&read)
            ),
        ));
    }
    let fetch_ms = started.elapsed().as_millis() as u64;
    // The tenant's own choice of what a finding does, over the deployment's.
    let mut policy = deps.config.scan.clone();
    let chosen = docpipe_db::tenants::scan_policy(
        &**deps
            .db
            .client()
            .await
            .map_err(|e| StageError::from_db(Stage::Parse, e))?,
        &doc.organ_id,
    )
    .await
    .map_err(|e| StageError::from_db(Stage::Parse, e))?;
    if let Some(action) = chosen.as_deref().and_then(ScanAction::named) {
        policy.action = action;
    }
    let (parsed, chunks, references, scan) =
        match parse_and_chunk(deps, doc, original, started, policy).await {
            Ok(made) => made,
            Err(reason) => return fail(deps, doc_id, run_id, reason).await,
        };
    let parse_ms = started.elapsed().as_millis() as u64 - fetch_ms;
    let writing = Instant::now();
    let written = match write_artifacts(deps, doc_id, run_id, &parsed, &chunks).await? {
        Ok(written) => written,
        Err(reason) => return fail(deps, doc_id, run_id, reason).await,
    };
    let timings = Timings {
        started,
        fetch_ms,
        parse_ms,
        artifacts_ms: writing.elapsed().as_millis() as u64,
    };
    let output = Output {
        parsed: &parsed,
        chunks: &chunks,
        references: &references,
        written: &written,
        scan: &scan,
    };
    if !commit(deps, doc_id, run_id, &output, &timings).await? {
        return abandon(deps, doc_id, run_id).await;
    }
    info!(
        doc_id,
        run_id,
        stage = "parse",
        format = parsed.format.as_str(),
        pages = parsed.page_count,
        structure_nodes = parsed.structure_nodes.len(),
        semantic_blocks = parsed.semantic_blocks.len(),
        chunks = chunks.len(),
        parse_ms,
        ocr_pages = parsed.ocr.as_ref().map_or(0, |o| o.pages.len()),
        "parsed"
    );
    send_index(deps, doc_id, run_id).await?;
    Ok(ParseOutcome::Parsed {
        doc_id: doc_id.to_string(),
        run_id,
        structure_nodes: parsed.structure_nodes.len(),
        semantic_blocks: parsed.semantic_blocks.len(),
        chunks: chunks.len(),
    })
}

/// The stored original's bytes.
async fn fetch_original(
    deps: &ParseDeps<'_>,
    doc: &docpipe_db::documents::Document,
) -> Step<Vec<u8>> {
    let got = deps
        .objects
        .get(&doc.source_bucket, &doc.object_name, deps.config.max_bytes)
        .await;
    Ok(match got {
        Ok(bytes) => Ok(bytes),
        Err(StorageError::NotFound { bucket, key }) => {
            Err(format!("the original s3://{bucket}/{key} no longer exists"))
        }
        Err(StorageError::TooLarge { limit }) => Err(format!(
            "the original is larger than the limit of {limit} bytes"
        )),
        Err(e @ StorageError::AccessDenied { .. }) => Err(docpipe_core::error::chain(&e)),
        Err(e) => return Err(StageError::transient(Stage::Parse, e)),
    })
}

/// Parses, chunks and reads the references between articles on a blocking thread (CPU-bound; OCR
/// may take minutes), with OCR's budget taken from what is left of the function's timeout. Every
/// parse error is the input's fault.
async fn parse_and_chunk(
    deps: &ParseDeps<'_>,
    doc: &docpipe_db::documents::Document,
    original: Vec<u8>,
    started: Instant,
    policy: docpipe_core::config::ScanPolicy,
) -> Result<(ParsedDocument, Vec<VectorChunk>, Vec<Reference>, NewScan), String> {
    let hint = Hint::new(doc.file_name.clone(), doc.content_type.clone());
    let limits = docpipe_parse::Limits {
        ocr_budget_ms: ocr_budget(deps.config.clock.parse.function_timeout, started.elapsed()),
        ..deps.config.limits
    };
    let chunk_config = deps.config.chunk;
    let parsed = tokio::task::spawn_blocking(move || {
        let mut parsed = docpipe_parse::parse(&original, &hint, &limits)?;
        // A document over `DOCPIPE_MAX_CHUNKS` fails here, before any chunk is embedded.
        let mut chunks = docpipe_parse::chunk_within(&parsed, &chunk_config, limits.max_chunks)?;
        let references = docpipe_parse::references::extract(&parsed.semantic_blocks);
        // Before anything is written: with the mask policy nothing stored or indexed holds a value.
        let scan = super::scan::scan_parse(&mut parsed, &mut chunks, &policy);
        Ok::<_, docpipe_parse::ParseError>((parsed, chunks, references, scan))
    })
    .await;
    match parsed {
        Ok(Ok((_, chunks, _, _))) if chunks.is_empty() => {
            Err("the document has no text to index (no chunks)".to_string())
        }
        Ok(Ok(made)) => Ok(made),
        Ok(Err(e)) => Err(format!("{} ({})", e, e.kind())),
        // The parser catches panics itself; this is the last line of defence.
        Err(join) => Err(format!("the parser crashed: {join}")),
    }
}

/// The four artifacts, written side by side: one round trip instead of four. Each body moves
/// into its request, so the artifacts are held in memory once.
async fn write_artifacts(
    deps: &ParseDeps<'_>,
    doc_id: &str,
    run_id: i64,
    parsed: &ParsedDocument,
    chunks: &[VectorChunk],
) -> Step<Vec<Artifact>> {
    let (written, bodies): (Vec<Artifact>, Vec<Vec<u8>>) =
        artifacts::build_all(doc_id, run_id, parsed, chunks)
            .into_iter()
            .unzip();
    let put_all =
        futures::future::try_join_all(written.iter().zip(bodies).map(|(artifact, body)| {
            deps.objects.put(
                &deps.config.bucket,
                &artifact.object_name,
                body,
                "application/json",
            )
        }))
        .await;
    match put_all {
        Ok(_) => Ok(Ok(written)),
        Err(e @ StorageError::AccessDenied { .. }) => Ok(Err(docpipe_core::error::chain(&e))),
        Err(e) => Err(storage_err(e)),
    }
}

/// The share of the function's timeout that OCR may spend: the rest is left for the artifacts and
/// the commit, so a scan too slow to finish fails with its reason instead of being killed.
const OCR_SHARE_OF_TIMEOUT: f64 = 0.8;

/// What is left of OCR's share once `spent` has gone; never 0, which `Limits` reads as no limit.
fn ocr_budget(function_timeout: std::time::Duration, spent: std::time::Duration) -> u64 {
    let budget = function_timeout.mul_f64(OCR_SHARE_OF_TIMEOUT);
    (budget.saturating_sub(spent).as_millis() as u64).max(1)
}

/// Where a parse's time went, recorded in the run's metadata.
struct Timings {
    started: Instant,
    fetch_ms: u64,
    parse_ms: u64,
    artifacts_ms: u64,
}

/// What a parse made, as the commit writes it.
struct Output<'a> {
    parsed: &'a ParsedDocument,
    chunks: &'a [VectorChunk],
    references: &'a [Reference],
    written: &'a [Artifact],
    scan: &'a NewScan,
}

/// Seed 000 §6.3 steps 1–7 in one transaction, the references between articles with the snapshot.
/// False when the compare-and-set found the document moved on meanwhile (then nothing was
/// written).
async fn commit(
    deps: &ParseDeps<'_>,
    doc_id: &str,
    run_id: i64,
    output: &Output<'_>,
    timings: &Timings,
) -> Result<bool, StageError> {
    let Output {
        parsed,
        chunks,
        references,
        written,
        scan,
    } = *output;
    let mut client = deps.db.client().await.map_err(db_err)?;
    let tx = client.transaction().await.map_err(|e| db_err(e.into()))?;
    // Lock first: a concurrent duplicate waits here and then finds `parsed`.
    let Some(doc) = documents::lock(&*tx, doc_id).await.map_err(db_err)? else {
        return Ok(false);
    };
    if doc.current_run_id != Some(run_id)
        || doc.status != DocStatus::Stored
        || doc.deleting_at.is_some()
    {
        return Ok(false);
    }
    snapshot::replace(
        &*tx,
        doc_id,
        run_id,
        &parsed.structure_nodes,
        &parsed.semantic_blocks,
        references,
    )
    .await
    .map_err(db_err)?;
    snapshot::record_artifacts(&*tx, doc_id, run_id, written)
        .await
        .map_err(db_err)?;
    docpipe_db::security::record(&*tx, doc_id, run_id, scan)
        .await
        .map_err(db_err)?;
    let metadata = run_metadata(parsed, timings);
    let moved = transitions::mark_parsed(
        &*tx,
        doc_id,
        run_id,
        &ParseCounts {
            parser_backend: &parsed.parser_name,
            chunk_backend: "docpipe-chunker-e5-estimate",
            layouts: parsed.layouts.len() as i32,
            structure_nodes: parsed.structure_nodes.len() as i32,
            semantic_blocks: parsed.semantic_blocks.len() as i32,
            vector_chunks: chunks.len() as i32,
            metadata,
        },
    )
    .await
    .map_err(db_err)?;
    if !moved {
        return Ok(false);
    }
    tx.commit().await.map_err(|e| db_err(e.into()))?;
    Ok(true)
}

/// What the run records of its parse: the format, pages, warnings and timings, and what OCR did.
fn run_metadata(parsed: &ParsedDocument, timings: &Timings) -> serde_json::Value {
    serde_json::json!({
        "parse": {
            "format": parsed.format.as_str(),
            "pages": parsed.page_count,
            "warnings": parsed.warnings,
            "duration_ms": timings.started.elapsed().as_millis() as u64,
            "fetch_ms": timings.fetch_ms,
            "parse_ms": timings.parse_ms,
            "artifacts_ms": timings.artifacts_ms,
        },
        "ocr": parsed.ocr,
    })
}

/// The document moved on while this message was parsing. If the run is still current (a duplicate
/// got there first) its artifacts are the winner's too and stay; otherwise they are this run's
/// leftovers and go, through the clean-up outbox, so a removal that fails is retried by the
/// sweeper rather than forgotten.
async fn abandon(
    deps: &ParseDeps<'_>,
    doc_id: &str,
    run_id: i64,
) -> Result<ParseOutcome, StageError> {
    let cleanup = CleanupDeps {
        db: deps.db,
        objects: deps.objects,
        vectors: None,
        artifacts_bucket: &deps.config.bucket,
        clock: &deps.config.clock,
    };
    let carried = record_and_try(
        &cleanup,
        Kind::ArtifactsRun,
        doc_id,
        Some(run_id),
        "the run was lost while it was parsed",
    )
    .await
    .map_err(db_err)?;
    warn!(doc_id, run_id, stage = "parse", outcome = ?carried, "run no longer current");
    Ok(ParseOutcome::Stale {
        doc_id: doc_id.to_string(),
        run_id,
        why: "the document moved on while it was parsed".into(),
    })
}

async fn fail(
    deps: &ParseDeps<'_>,
    doc_id: &str,
    run_id: i64,
    reason: String,
) -> Result<ParseOutcome, StageError> {
    let client = deps.db.client().await.map_err(db_err)?;
    let failed = transitions::fail_run(&**client, doc_id, run_id, Stage::Parse, &reason)
        .await
        .map_err(db_err)?;
    if failed {
        warn!(doc_id, run_id, stage = "parse", reason = %reason, class = "permanent", "parse failed");
        Ok(ParseOutcome::Failed {
            doc_id: doc_id.to_string(),
            run_id,
            reason,
        })
    } else {
        Ok(ParseOutcome::Stale {
            doc_id: doc_id.to_string(),
            run_id,
            why: "the run ended before its failure could be recorded".into(),
        })
    }
}

async fn send_index(deps: &ParseDeps<'_>, doc_id: &str, run_id: i64) -> Result<(), StageError> {
    deps.queue
        .send(
            &deps.config.index_queue_url,
            JobMessage::new(doc_id, run_id).encode(),
        )
        .await
        .map_err(|e| StageError::transient(Stage::Parse, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ocr_gets_four_fifths_of_the_timeout_less_what_was_spent_and_never_no_limit() {
        // The template's parse timeout, 900 s, with 10 s spent fetching.
        assert_eq!(
            ocr_budget(Duration::from_secs(900), Duration::from_secs(10)),
            710_000
        );
        // Spent past the share: 1 ms, so the first page check fails it, not 0 (unlimited).
        assert_eq!(
            ocr_budget(Duration::from_secs(20), Duration::from_secs(30)),
            1
        );
    }
}
