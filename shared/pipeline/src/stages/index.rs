//! Seed 000 §6.4: the run's chunks are embedded and written to Milvus, the vectors of older runs are
//! removed, and one transaction marks the run `succeeded` and the document `indexed`.
//!
//! Exactly one set of vectors per run: the stage claims a lease on the run before it writes (two
//! deliveries of one message cannot both insert), counts its attempts there, and renews the lease
//! while it works. Every insert must be acknowledged for all its rows. A retry first deletes whatever
//! an earlier, interrupted attempt of the same run left, and reads the count back with Strong
//! consistency before committing; the first attempt has nothing to clean and skips both, which is
//! most of a small document's time in Milvus. The commit is fenced by the lease: a worker whose
//! lease was taken over cannot mark the run indexed. Older runs' vectors are removed only after the
//! commit succeeded, so a stale worker never removes the vectors of the run that replaced it. A
//! worker that lost its run removes what the run wrote only when nobody committed the run.

use super::lease::HeldLease;
use crate::adapters::{ObjectStore, StorageError};
use crate::error::StageError;
use crate::stages::cleanup::{record_and_try, Carried, Carry, CleanupDeps, Written};
use crate::stages::keywords;
use crate::stages::versions::{self, VersionOf};
use docpipe_core::artifacts;
use docpipe_core::config::{IndexConfig, ReleaseMode};
use docpipe_core::model::{DocStatus, JobMessage, Stage};
use docpipe_db::cleanups::{self, Kind};
use docpipe_db::keyword::{self, AnalysedDocument};
use docpipe_db::transitions::{self, IndexCounts};
use docpipe_db::{documents, generations, runs, works, Db, DbError};
use docpipe_embed::{EmbedError, Embedder};
use docpipe_parse::VectorChunk;
use docpipe_vector::{ChunkRecord, VectorError, VectorIndex};
use std::time::Instant;
use tracing::{info, warn};

pub struct IndexDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub embedder: &'a dyn Embedder,
    pub vectors: &'a dyn VectorIndex,
    pub config: &'a IndexConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexOutcome {
    Indexed {
        doc_id: String,
        run_id: i64,
        chunks: usize,
    },
    Failed {
        doc_id: String,
        run_id: i64,
        reason: String,
    },
    Stale {
        doc_id: String,
        run_id: i64,
        why: String,
    },
    /// The work did not fit this delivery: `done` of `total` chunks are in, recorded on the run,
    /// and the next delivery goes on from there. Progress, not a failure: the caller sends the
    /// job again as a fresh message, so a large document does not spend its queue's receives
    /// (and reach the dead-letter queue) by the number of deliveries it needs.
    Continued {
        doc_id: String,
        run_id: i64,
        done: usize,
        total: usize,
    },
    /// A step of a re-embedding, which the index queue carries too.
    Rebuild(crate::stages::rebuild::RebuildOutcome),
}

fn db_err(e: DbError) -> StageError {
    StageError::from_db(Stage::Index, e)
}

fn vector_err(e: VectorError) -> StageError {
    StageError::transient(Stage::Index, e)
}

/// An embedder's error: a bad input or answer fails the run at `embed`; an unavailable embedder
/// asks for a retry.
fn classify_embed(e: EmbedError) -> StageError {
    if e.is_transient() {
        StageError::transient(Stage::Embed, e)
    } else {
        StageError::failed(Stage::Embed, docpipe_core::error::chain(&e))
    }
}

/// A Milvus error: a refused request fails the run at `index`; an unavailable Milvus asks for a
/// retry.
fn classify_vector(e: VectorError) -> StageError {
    if e.is_transient() {
        vector_err(e)
    } else {
        StageError::failed(Stage::Index, docpipe_core::error::chain(&e))
    }
}

pub async fn index_job(deps: &IndexDeps<'_>, job: &JobMessage) -> Result<IndexOutcome, StageError> {
    let (doc_id, run_id) = (job.doc_id.as_str(), job.run_id);
    let stale = |why: String| {
        info!(doc_id, run_id, stage = "index", why = %why, "stale index message dropped");
        Ok(IndexOutcome::Stale {
            doc_id: doc_id.to_string(),
            run_id,
            why,
        })
    };
    let doc = match super::current::check(deps.db, job).await.map_err(db_err)? {
        Ok(doc) => doc,
        Err(why) => return stale(why),
    };
    if doc.status != DocStatus::Parsed {
        return stale(format!("the document is {}, not parsed", doc.status));
    }
    let Some(lease) = HeldLease::take(deps.db, run_id, Stage::Index, deps.config.clock.lease)
        .await
        .map_err(db_err)?
    else {
        // Another delivery is writing this run's vectors. Come back later: by then it has finished
        // (this message is stale) or died (its lease has run out and this one takes over).
        return Err(StageError::transient(
            Stage::Index,
            format!("run {run_id} is being indexed by another worker"),
        ));
    };

    if let Some(reason) = lease.too_many_abandoned(&deps.config.clock, Stage::Index) {
        let outcome = fail(deps, doc_id, &lease, Stage::Index, reason).await;
        lease.release(deps.db).await;
        return outcome;
    }
    let outcome = match write_vectors(deps, &doc, &lease).await {
        Ok(Some(outcome @ IndexOutcome::Continued { .. })) => Ok(outcome),
        Ok(Some(outcome)) => {
            prune_other_runs(deps, doc_id, run_id, lease.attempt.other_runs).await;
            Ok(outcome)
        }
        Ok(None) => abandon(deps, doc_id, run_id).await,
        Err(StageError::Failed { stage, reason }) => {
            fail(deps, doc_id, &lease, stage, reason).await
        }
        Err(e) => Err(e),
    };
    // Let a redelivery claim at once rather than wait for the lease to run out.
    lease.release(deps.db).await;
    outcome
}

/// Loads, embeds, inserts, checks and commits; `Ok(None)` when the run was lost before the commit
/// (the document was deleted or superseded, or another worker took the lease over).
async fn write_vectors(
    deps: &IndexDeps<'_>,
    doc: &documents::Document,
    lease: &HeldLease,
) -> Result<Option<IndexOutcome>, StageError> {
    let (doc_id, run_id) = (doc.doc_id.as_str(), lease.run_id);
    let started = Instant::now();
    let chunks = load_chunks(deps, doc_id, run_id).await?;
    let mut timings = IndexTimings::default();
    let resume_from = prepare_collection(deps, doc_id, lease, &mut timings).await?;
    let keeper = LeaseKeeper {
        db: deps.db,
        lease,
        lease_for: deps.config.clock.lease,
        doc_id,
    };
    // This delivery stops in time to record its progress and let the next one go on, rather
    // than be killed at its timeout (which would count as a dead attempt).
    let deadline = started + deps.config.clock.index.function_timeout.mul_f64(WORK_SHARE);
    let mut written = Vec::new();
    match embed_and_insert(
        deps,
        doc,
        &chunks,
        resume_from,
        &keeper,
        deadline,
        &mut timings,
        &mut written,
    )
    .await?
    {
        Inserted::All => {}
        Inserted::Lost => return Ok(None),
        Inserted::UpTo(done) => {
            info!(
                doc_id,
                run_id,
                stage = "index",
                done,
                total = chunks.len(),
                resume_from,
                "index goes on in the next delivery"
            );
            return Ok(Some(IndexOutcome::Continued {
                doc_id: doc_id.to_string(),
                run_id,
                done,
                total: chunks.len(),
            }));
        }
    }
    verify_run(deps, doc_id, lease, chunks.len(), &mut timings).await?;
    finish_run(
        deps,
        doc_id,
        lease,
        &written,
        chunks.len(),
        started,
        &timings,
    )
    .await
}

/// The keyword index analysed, then the run committed with what this attempt measured; `None`
/// when the run was lost before the commit.
async fn finish_run(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    lease: &HeldLease,
    written: &[ChunkRecord],
    chunks: usize,
    started: Instant,
    timings: &IndexTimings,
) -> Result<Option<IndexOutcome>, StageError> {
    let t = Instant::now();
    let keywords = analyse_keywords(deps, doc_id).await?;
    let keyword_ms = t.elapsed().as_millis() as u64;
    let version = {
        let client = deps.db.client().await.map_err(db_err)?;
        versions::read(&**client, doc_id, &keywords.title, &keywords.title_key)
            .await
            .map_err(db_err)?
    };
    let metadata = serde_json::json!({
        "index": {
            "chunks": chunks,
            "keyword_blocks": keywords.blocks.len(),
            "keyword_ms": keyword_ms,
            "analyzer": keywords.analyzer,
            "embed_ms": timings.embed_ms as u64,
            "insert_ms": timings.insert_ms as u64,
            "checks_ms": timings.checks_ms as u64,
            "attempt": lease.attempt.attempt,
            "duration_ms": started.elapsed().as_millis() as u64,
        }
    });
    let t = Instant::now();
    let committed = commit(
        deps,
        doc_id,
        lease,
        chunks,
        &keywords,
        version.as_ref(),
        metadata,
    )
    .await
    .map_err(db_err)?;
    let commit_ms = t.elapsed().as_millis() as u64;
    let t = Instant::now();
    let carried = match committed {
        // Its vectors were written answering on every day; now they, and those of the versions
        // its commit superseded, say what the commit decided.
        Committed::Indexed => {
            crate::stages::cleanup::carry_projections(
                deps.db,
                deps.vectors,
                Carry::AfterIndex(
                    Written {
                        doc_id,
                        run_id: lease.run_id,
                        records: written,
                    },
                    PROJECTIONS_AT_ONCE,
                ),
            )
            .await
        }
        Committed::Lost => return Ok(None),
        Committed::VersionCollides(why) => {
            return Err(StageError::failed(
                Stage::Index,
                format!("version-collides: {why}"),
            ))
        }
        Committed::Switched(why) => return Err(StageError::transient(Stage::Index, why)),
    };
    info!(
        doc_id,
        run_id = lease.run_id,
        stage = "index",
        chunks,
        embed_ms = timings.embed_ms as u64,
        insert_ms = timings.insert_ms as u64,
        keyword_ms,
        commit_ms,
        carried,
        carry_ms = t.elapsed().as_millis() as u64,
        "indexed"
    );
    Ok(Some(IndexOutcome::Indexed {
        doc_id: doc_id.to_string(),
        run_id: lease.run_id,
        chunks,
    }))
}

/// The collection exists with the embedder's dimension and model. One set of vectors per run:
/// a retry keeps what an earlier attempt of the run inserted and recorded (`index_progress`)
/// and goes on from there; what it inserted past that (a batch that was never recorded) goes
/// first. If Milvus does not hold exactly the recorded chunks, the attempt starts over. Returns
/// the chunk to go on from.
async fn prepare_collection(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    lease: &HeldLease,
    timings: &mut IndexTimings,
) -> Result<usize, StageError> {
    deps.vectors
        .ensure_collection(deps.embedder.dimension(), deps.embedder.model_id())
        .await
        .map_err(classify_vector)?;
    if lease.attempt.attempt <= 1 {
        return Ok(0);
    }
    let t = Instant::now();
    let run_id = lease.run_id;
    let client = deps.db.client().await.map_err(db_err)?;
    let recorded = runs::get(&**client, run_id)
        .await
        .map_err(db_err)?
        .map_or(0, |r| r.index_progress.max(0) as usize);
    drop(client);
    let mut resume_from = 0;
    if recorded > 0 {
        deps.vectors
            .delete_run_from(doc_id, run_id, recorded as i64)
            .await
            .map_err(classify_vector)?;
        let held = deps
            .vectors
            .count(doc_id, Some(run_id))
            .await
            .map_err(classify_vector)?;
        if held == recorded {
            resume_from = recorded;
        } else {
            warn!(
                doc_id,
                run_id,
                recorded,
                held,
                stage = "index",
                "Milvus does not hold the recorded chunks: starting over"
            );
        }
    }
    if resume_from == 0 {
        deps.vectors
            .delete_run(doc_id, run_id)
            .await
            .map_err(classify_vector)?;
    }
    timings.checks_ms += t.elapsed().as_millis();
    Ok(resume_from)
}

/// Every insert was acknowledged row for row. A retry also reads the run back, to be sure its
/// clean-up and its inserts left exactly one vector per chunk.
async fn verify_run(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    lease: &HeldLease,
    expected: usize,
    timings: &mut IndexTimings,
) -> Result<(), StageError> {
    if lease.attempt.attempt <= 1 {
        return Ok(());
    }
    let run_id = lease.run_id;
    let t = Instant::now();
    let present = deps
        .vectors
        .count(doc_id, Some(run_id))
        .await
        .map_err(classify_vector)?;
    if present != expected {
        return Err(StageError::transient(
            Stage::Index,
            format!("Milvus holds {present} vectors of run {run_id}, expected {expected}"),
        ));
    }
    timings.checks_ms += t.elapsed().as_millis();
    Ok(())
}

#[derive(Default)]
struct IndexTimings {
    embed_ms: u128,
    insert_ms: u128,
    checks_ms: u128,
}

/// The largest chunks artifact the stage reads: far above any document the parse limits let
/// through, and a bound on what a corrupt or hostile object can make it hold in memory.
const MAX_CHUNKS_ARTIFACT_BYTES: u64 = 512 * 1024 * 1024;

/// The run's chunks, from the parse stage's `vector_chunks.json`.
async fn load_chunks(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    run_id: i64,
) -> Result<Vec<VectorChunk>, StageError> {
    read_chunks(deps.objects, &deps.config.bucket, doc_id, run_id).await
}

/// A run's chunks as its parse stored them (the index stage's input, and a rebuild's).
pub(crate) async fn read_chunks(
    objects: &dyn ObjectStore,
    bucket: &str,
    doc_id: &str,
    run_id: i64,
) -> Result<Vec<VectorChunk>, StageError> {
    let key = format!(
        "{}vector_chunks.json",
        artifacts::run_prefix(doc_id, run_id)
    );
    let body = match objects.get(bucket, &key, MAX_CHUNKS_ARTIFACT_BYTES).await {
        Ok(b) => b,
        Err(StorageError::NotFound { .. }) => {
            return Err(StageError::failed(
                Stage::Index,
                format!("the chunks artifact {key} is missing"),
            ))
        }
        Err(StorageError::TooLarge { limit }) => {
            return Err(StageError::failed(
                Stage::Index,
                format!("the chunks artifact {key} is larger than {limit} bytes"),
            ))
        }
        Err(e @ StorageError::AccessDenied { .. }) => {
            return Err(StageError::failed(
                Stage::Index,
                docpipe_core::error::chain(&e),
            ))
        }
        Err(e) => return Err(StageError::transient(Stage::Index, e)),
    };
    let chunks: Vec<VectorChunk> = artifacts::decode_items(&body)
        .map_err(|e| StageError::failed(Stage::Index, format!("{key}: {e}")))?;
    if chunks.is_empty() {
        return Err(StageError::failed(
            Stage::Index,
            "the run has no chunks to index",
        ));
    }
    Ok(chunks)
}

/// Embeds the chunks batch by batch and inserts each batch. False when the lease was lost on the
/// way and the document is gone (nobody else will remove what this attempt wrote).
/// How far one delivery got.
enum Inserted {
    All,
    /// The run was lost (deleted, superseded, taken over).
    Lost,
    /// Time ran short: the first this many chunks are in, and recorded.
    UpTo(usize),
}

/// The share of the function's timeout a delivery spends inserting; the rest is for the checks,
/// the commit, and recording where it stopped.
const WORK_SHARE: f64 = 0.8;

/// A run's vectors a delivery keeps after inserting them, to write the commit's version state
/// onto them without reading them back: about 10 MB at 384 dimensions. A larger run is read back.
const HELD_AT_MOST: usize = 4_096;

/// Embeds and inserts from `resume_from` on; `written` gets what was inserted when this delivery
/// inserts the whole run (from the first chunk, at most [`HELD_AT_MOST`]).
#[allow(clippy::too_many_arguments)]
async fn embed_and_insert(
    deps: &IndexDeps<'_>,
    doc: &documents::Document,
    chunks: &[VectorChunk],
    resume_from: usize,
    keeper: &LeaseKeeper<'_>,
    deadline: Instant,
    timings: &mut IndexTimings,
    written: &mut Vec<ChunkRecord>,
) -> Result<Inserted, StageError> {
    let hold = resume_from == 0 && chunks.len() <= HELD_AT_MOST;
    let tags = document_tags(doc);
    let size = deps.config.embed_batch;
    let mut slowest = std::time::Duration::ZERO;
    for (batch_no, batch) in chunks[resume_from.min(chunks.len())..]
        .chunks(size)
        .enumerate()
    {
        let first = resume_from + batch_no * size;
        // Another batch only if it fits, judged by the slowest one so far.
        if batch_no > 0 && Instant::now() + slowest > deadline {
            return Ok(Inserted::UpTo(first));
        }
        let batch_started = Instant::now();
        let texts: Vec<String> = batch.iter().map(embedding_text).collect();
        let t = Instant::now();
        let vectors = deps
            .embedder
            .embed_passages(&texts)
            .await
            .map_err(classify_embed)?;
        timings.embed_ms += t.elapsed().as_millis();
        if !keeper.still_held().await? {
            return Ok(Inserted::Lost);
        }
        if vectors.len() != batch.len() {
            return Err(StageError::failed(
                Stage::Embed,
                format!(
                    "the embedder returned {} vectors for {} chunks",
                    vectors.len(),
                    batch.len()
                ),
            ));
        }
        let records = chunk_records(doc, keeper.lease.run_id, first, batch, vectors, &tags);
        let t = Instant::now();
        deps.vectors
            .insert(&records)
            .await
            .map_err(classify_vector)?;
        timings.insert_ms += t.elapsed().as_millis();
        if hold {
            written.extend(records);
        }
        let done = (first + batch.len()) as i32;
        let client = deps.db.client().await.map_err(db_err)?;
        if !runs::record_index_progress(&**client, keeper.lease.run_id, &keeper.lease.owner, done)
            .await
            .map_err(db_err)?
        {
            return Ok(Inserted::Lost);
        }
        slowest = slowest.max(batch_started.elapsed());
    }
    Ok(Inserted::All)
}

/// A worker that lost the run must not write another vector: the keeper confirms the lease right
/// before each insert (a takeover can only follow a lease that ran out).
struct LeaseKeeper<'a> {
    db: &'a Db,
    lease: &'a HeldLease,
    lease_for: std::time::Duration,
    doc_id: &'a str,
}

impl LeaseKeeper<'_> {
    /// True while the lease is held. False when it was lost and the document is gone (deleted, or
    /// another run is current); an error asking for a retry when another worker took the run over.
    async fn still_held(&self) -> Result<bool, StageError> {
        if self
            .lease
            .confirm(self.db, self.lease_for)
            .await
            .map_err(db_err)?
        {
            return Ok(true);
        }
        let run_id = self.lease.run_id;
        let client = self.db.client().await.map_err(db_err)?;
        let gone = documents::get(&**client, self.doc_id)
            .await
            .map_err(db_err)?
            .is_none_or(|d| d.deleting_at.is_some() || d.current_run_id != Some(run_id));
        if gone {
            return Ok(false);
        }
        Err(StageError::transient(
            Stage::Index,
            format!("lost the lease on run {run_id} (another worker took over)"),
        ))
    }
}

/// The document's tags, which every one of its vectors carries.
pub(crate) fn document_tags(doc: &documents::Document) -> Vec<String> {
    doc.metadata
        .get("tags")
        .and_then(|t| t.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// One batch's Milvus rows; `first` is the batch's first chunk index in the run.
pub(crate) fn chunk_records(
    doc: &documents::Document,
    run_id: i64,
    first: usize,
    batch: &[VectorChunk],
    vectors: Vec<Vec<f32>>,
    tags: &[String],
) -> Vec<ChunkRecord> {
    let doc_id = doc.doc_id.as_str();
    batch
        .iter()
        .zip(vectors)
        .enumerate()
        .map(|(i, (chunk, embedding))| ChunkRecord {
            chunk_id: format!("{doc_id}:{run_id}:{}", first + i),
            doc_id: doc_id.to_string(),
            organ_id: doc.organ_id.clone(),
            run_id,
            chunk_index: (first + i) as i64,
            doc_name: doc.doc_name.clone(),
            regulation_type: doc.regulation_type.clone(),
            version: doc.version.clone(),
            section_path: chunk.section_path.join(" > "),
            section_title: chunk.section_title.clone(),
            page_start: chunk.page_start as i64,
            page_end: chunk.page_end as i64,
            text: chunk.text.clone(),
            tags: tags.to_vec(),
            embedding,
            // Wider than the truth until the commit says more (see `Projection::ALWAYS`).
            projection: docpipe_vector::Projection::ALWAYS,
        })
        .collect()
}

/// The run's blocks analysed for the keyword index, before the commit that writes them.
async fn analyse_keywords(
    deps: &IndexDeps<'_>,
    doc_id: &str,
) -> Result<AnalysedDocument, StageError> {
    let client = deps.db.client().await.map_err(db_err)?;
    keywords::analyse(&**client, doc_id).await.map_err(db_err)
}

/// Seed 000 §6.4's transaction: under the document's row lock, the run succeeds and the document
/// becomes `indexed`, its keyword rows become this run's, and it becomes a rendition of its
/// version (which then answers: a version answers while one of its documents is indexed),
/// together, and only if this worker still holds the run's lease.
/// How the index commit ended.
enum Committed {
    Indexed,
    /// The run was lost before it: another worker or a newer run has it.
    Lost,
    /// Another upload committed the same version with other dates first: nothing was written.
    VersionCollides(String),
    /// Search switched to another collection while the run was written: nothing was committed.
    Switched(String),
}

#[allow(clippy::too_many_arguments)]
async fn commit(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    lease: &HeldLease,
    chunks: usize,
    keywords: &AnalysedDocument,
    version: Option<&VersionOf>,
    metadata: serde_json::Value,
) -> Result<Committed, DbError> {
    let mut client = deps.db.client().await?;
    let tx = client.transaction().await?;
    if let Some(v) = version {
        if let Some(why) = works::collision(&*tx, doc_id, &v.assignment()).await? {
            return Ok(Committed::VersionCollides(why));
        }
    }
    let locked = documents::lock(&*tx, doc_id).await?.is_some();
    if locked {
        // Search reads another collection now: this run's vectors are written again, there.
        if let Err(why) =
            generations::committing_into(&*tx, deps.vectors.collection(), doc_id).await?
        {
            return Ok(Committed::Switched(why));
        }
    }
    let moved = locked
        && transitions::mark_indexed(
            &*tx,
            doc_id,
            lease.run_id,
            &lease.owner,
            &IndexCounts {
                chunks: chunks as i32,
                embedding_model: deps.embedder.model_id(),
                index_name: deps.vectors.collection(),
                metadata,
            },
        )
        .await?;
    if moved {
        keyword::write(&*tx, lease.run_id, keywords).await?;
        match version {
            Some(v) => {
                // A run its scan blocked is held whatever the mode, until a reviewer resolves it.
                let release = deps.config.release == ReleaseMode::Auto
                    && !docpipe_db::security::blocked(&*tx, lease.run_id).await?;
                works::assign(&*tx, doc_id, lease.run_id, &v.assignment(), release).await?;
            }
            None => {
                works::unassign(&*tx, doc_id).await?;
            }
        }
    } else {
        // The decision that this worker's vectors are not the run's, and the clean-up it owes.
        cleanups::record(&*tx, Kind::VectorsRun, doc_id, Some(lease.run_id), LOST).await?;
    }
    tx.commit().await?;
    Ok(if moved {
        Committed::Indexed
    } else {
        Committed::Lost
    })
}

const LOST: &str = "the run was lost while its vectors were written";

/// Documents whose version state a commit carries to Milvus itself: a law's versions and
/// renditions (8 × 4 at most in any corpus seen), with room; the sweeper carries the rest.
pub const PROJECTIONS_AT_ONCE: i64 = 64;

/// A reindex never leaves two runs' vectors behind. This runs only after the run's commit, so the
/// vectors it removes are never the current run's; if Milvus fails here, search still shows only
/// the current run (it checks every hit), and the reconcile removes the rest.
/// After the commit, the vectors of the document's older runs go. Only older ones: run ids only
/// grow, and a newer run that committed after this one (while this worker was slow to get here)
/// keeps its vectors, which this prune must never touch.
async fn prune_other_runs(deps: &IndexDeps<'_>, doc_id: &str, run_id: i64, other_runs: bool) {
    if !other_runs {
        return;
    }
    if let Err(e) = deps.vectors.delete_runs_up_to(doc_id, run_id - 1).await {
        warn!(doc_id, run_id, stage = "index", error = %docpipe_core::error::chain(&e), "older runs' vectors were not removed; the reconcile will");
    }
}

/// The text a chunk is embedded as: its place in the document, then its words. The path carries
/// the law's name and the chapter, which a bare article does not repeat.
pub fn embedding_text(chunk: &VectorChunk) -> String {
    if chunk.section_path.is_empty() {
        chunk.text.clone()
    } else {
        format!("{}\n{}", chunk.section_path.join(" > "), chunk.text)
    }
}

/// The run was lost while its vectors were written (deleted, superseded, or taken over). What this
/// worker wrote is removed through the clean-up outbox, unless another delivery of the same run
/// committed it: then those vectors are the run's, and they stay. If the removal fails, the
/// outbox keeps it for the sweeper, and this message is done.
async fn abandon(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    run_id: i64,
) -> Result<IndexOutcome, StageError> {
    let cleanup = CleanupDeps {
        db: deps.db,
        objects: deps.objects,
        vectors: Some(deps.vectors),
        artifacts_bucket: &deps.config.bucket,
        clock: &deps.config.clock,
    };
    let carried = record_and_try(&cleanup, Kind::VectorsRun, doc_id, Some(run_id), LOST)
        .await
        .map_err(db_err)?;
    warn!(doc_id, run_id, stage = "index", outcome = ?carried, "run lost during indexing");
    Ok(IndexOutcome::Stale {
        doc_id: doc_id.to_string(),
        run_id,
        why: match carried {
            Carried::NotNeeded(why) => format!("the run was lost here, but {why}"),
            Carried::Removed => "the document moved on while it was indexed".into(),
            Carried::Postponed(why) => format!("the document moved on while it was indexed; {why}"),
        },
    })
}

/// Fails the run, and removes its vectors first so that nothing of it stays searchable. Only
/// while this worker still holds the run's lease: a worker that lost it (stalled past its lease,
/// and another delivery took the run over) must not remove what the new holder wrote; the new
/// holder decides the run's end.
async fn fail(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    lease: &HeldLease,
    stage: Stage,
    reason: String,
) -> Result<IndexOutcome, StageError> {
    let run_id = lease.run_id;
    if !lease
        .confirm(deps.db, deps.config.clock.lease)
        .await
        .map_err(db_err)?
    {
        warn!(doc_id, run_id, stage = stage.as_str(), reason = %reason, "the run would fail, but another worker holds it now: left to that worker");
        return Ok(IndexOutcome::Stale {
            doc_id: doc_id.to_string(),
            run_id,
            why: format!("the lease was taken over before the run could fail ({reason})"),
        });
    }
    deps.vectors
        .delete_run(doc_id, run_id)
        .await
        .map_err(vector_err)?;
    let client = deps.db.client().await.map_err(db_err)?;
    transitions::fail_run(&**client, doc_id, run_id, stage, &reason)
        .await
        .map_err(db_err)?;
    warn!(doc_id, run_id, stage = stage.as_str(), reason = %reason, class = "permanent", "index failed");
    Ok(IndexOutcome::Failed {
        doc_id: doc_id.to_string(),
        run_id,
        reason,
    })
}
