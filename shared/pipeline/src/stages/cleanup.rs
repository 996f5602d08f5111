//! Carrying out the clean-up outbox ([`docpipe_db::cleanups`]). A stage that lost its run records
//! what it wrote and tries the removal at once; the sweeper works off whatever is left. Each
//! removal checks PostgreSQL first, so it never takes what a run that did commit wrote.

use crate::adapters::{ObjectStore, StorageError};
use crate::stages::delete::{self, DeleteDeps, DeleteError};
use docpipe_core::artifacts;
use docpipe_core::clock::Clock;
use docpipe_core::model::RunStatus;
use docpipe_db::cleanups::{self, Cleanup, Kind};
use docpipe_db::projection::{self, ToCarry};
use docpipe_db::{documents, runs, Db, DbError};
use docpipe_vector::{ChunkRecord, ReadBack, VectorError, VectorIndex};

pub(crate) struct CleanupDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    /// `None` in a function that has no Milvus client (parse): a vector clean-up is then left to
    /// the sweeper.
    pub vectors: Option<&'a dyn VectorIndex>,
    pub artifacts_bucket: &'a str,
    pub clock: &'a Clock,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CleanupError {
    #[error("the database is unavailable")]
    Db(#[from] DbError),
    #[error("object storage is unavailable")]
    Storage(#[from] StorageError),
    #[error("the vector index is unavailable")]
    Vector(#[from] VectorError),
    #[error("the delete could not be finished")]
    Delete(#[from] DeleteError),
    #[error("this function has no vector index client; the sweeper does it")]
    NoVectorIndex,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Carried {
    Removed,
    /// Nothing to remove: what was written belongs to a run that committed, or is gone already.
    NotNeeded(&'static str),
    /// The run is still in flight; decide when it has ended.
    Postponed(&'static str),
}

/// What one pass over the outbox did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanupReport {
    pub removed: usize,
    pub not_needed: usize,
    pub postponed: usize,
    /// `kind doc run: error`, for each removal that failed (it stays and is tried again).
    pub failed: Vec<String>,
}

/// Records the clean-up, tries it, and keeps the record if it fails: the caller goes on either way.
pub(crate) async fn record_and_try(
    deps: &CleanupDeps<'_>,
    kind: Kind,
    doc_id: &str,
    run_id: Option<i64>,
    reason: &str,
) -> Result<Carried, DbError> {
    let client = deps.db.client().await?;
    let id = cleanups::record(&**client, kind, doc_id, run_id, reason).await?;
    drop(client);
    let cleanup = Cleanup {
        cleanup_id: id,
        kind,
        doc_id: doc_id.to_string(),
        run_id,
        reason: reason.to_string(),
        attempts: 0,
    };
    match settle(deps, &cleanup).await {
        Ok(carried) => Ok(carried),
        Err(e) => {
            tracing::warn!(doc_id, run_id, kind = kind.as_str(), error = %docpipe_core::error::chain(&e), "clean-up failed: the sweeper will retry it");
            Ok(Carried::Postponed(
                "the removal failed; the sweeper retries it",
            ))
        }
    }
}

/// One pass over the due clean-ups, at most `limit`.
pub(crate) async fn run_due(deps: &CleanupDeps<'_>, limit: i64) -> Result<CleanupReport, DbError> {
    let client = deps.db.client().await?;
    let due = cleanups::due(&**client, limit).await?;
    drop(client);
    let mut report = CleanupReport::default();
    for cleanup in &due {
        match settle(deps, cleanup).await {
            Ok(Carried::Removed) => report.removed += 1,
            Ok(Carried::NotNeeded(_)) => report.not_needed += 1,
            Ok(Carried::Postponed(_)) => report.postponed += 1,
            Err(e) => report.failed.push(format!(
                "{} {} {}: {}",
                cleanup.kind.as_str(),
                cleanup.doc_id,
                cleanup.run_id.map(|r| r.to_string()).unwrap_or_default(),
                docpipe_core::error::chain(&e)
            )),
        }
    }
    Ok(report)
}

/// Carries one clean-up out and updates its record: gone when done, later when postponed or failed.
async fn settle(deps: &CleanupDeps<'_>, cleanup: &Cleanup) -> Result<Carried, CleanupError> {
    let result = carry_out(deps, cleanup).await;
    let client = deps.db.client().await?;
    match &result {
        Ok(Carried::Removed | Carried::NotNeeded(_)) => {
            cleanups::done(&**client, cleanup.cleanup_id).await?
        }
        Ok(Carried::Postponed(why)) => {
            let later = docpipe_core::clock::whole_secs(deps.clock.sweep_period) as i64;
            cleanups::failed(&**client, cleanup.cleanup_id, why, later).await?
        }
        Err(e) => {
            let wait = deps.clock.backoff(cleanup.attempts as u32 + 1).as_secs() as i64;
            cleanups::failed(
                &**client,
                cleanup.cleanup_id,
                &docpipe_core::error::chain(e),
                wait,
            )
            .await?
        }
    }
    result
}

async fn carry_out(deps: &CleanupDeps<'_>, cleanup: &Cleanup) -> Result<Carried, CleanupError> {
    let doc_id = cleanup.doc_id.as_str();
    match (cleanup.kind, cleanup.run_id) {
        (Kind::Document, _) => finish_delete(deps, doc_id).await,
        (Kind::Projection, _) => carry_projection(deps, doc_id).await,
        (Kind::VectorsRun, Some(run_id)) => {
            if let Some(keep) = keep_run(deps.db, doc_id, run_id).await? {
                return Ok(keep);
            }
            let vectors = deps.vectors.ok_or(CleanupError::NoVectorIndex)?;
            vectors.delete_run(doc_id, run_id).await?;
            tracing::info!(
                doc_id,
                run_id,
                stage = "cleanup",
                "vectors of a lost run removed"
            );
            Ok(Carried::Removed)
        }
        (Kind::ArtifactsRun, Some(run_id)) => {
            if let Some(keep) = keep_run(deps.db, doc_id, run_id).await? {
                return Ok(keep);
            }
            let removed = deps
                .objects
                .delete_prefix(
                    deps.artifacts_bucket,
                    &artifacts::run_prefix(doc_id, run_id),
                )
                .await?;
            tracing::info!(
                doc_id,
                run_id,
                removed,
                stage = "cleanup",
                "artifacts of a lost run removed"
            );
            Ok(Carried::Removed)
        }
        (_, None) => Ok(Carried::NotNeeded("a run clean-up without a run")),
    }
}

/// Writes the document's version state onto its current run's vectors: what PostgreSQL says now,
/// whatever state the record was written for.
async fn carry_projection(deps: &CleanupDeps<'_>, doc_id: &str) -> Result<Carried, CleanupError> {
    let vectors = deps.vectors.ok_or(CleanupError::NoVectorIndex)?;
    write_projection(deps.db, vectors, doc_id, Reading::MayWait).await
}

/// Whether a write-back may wait for Milvus to catch up with its latest writes before it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// The sweeper's: it has the time.
    MayWait,
    /// An index delivery's: a read that cannot tell at once that it found the whole run leaves
    /// the write to the sweeper. When Milvus's query nodes lag its write stream
    /// (measured at 2,000 laws), waiting held an index worker up to the client's 20 s timeout.
    Now,
}

async fn write_projection(
    db: &Db,
    vectors: &dyn VectorIndex,
    doc_id: &str,
    reading: Reading,
) -> Result<Carried, CleanupError> {
    let client = db.client().await?;
    let Some(to) = projection::to_carry(&**client, doc_id).await? else {
        return Ok(Carried::NotNeeded("the document is gone or going"));
    };
    drop(client);
    let rewritten = write_back(db, vectors, doc_id, to, reading).await?;
    tracing::debug!(
        doc_id,
        run_id = to.run_id,
        rewritten,
        answering = to.projection.answering,
        stage = "cleanup",
        "version state written onto the vectors"
    );
    Ok(Carried::Removed)
}

/// As [`write_projection`], from the vectors the index delivery holds when they are the current
/// run's, all of them; else read back from Milvus.
async fn write_projection_held(
    db: &Db,
    vectors: &dyn VectorIndex,
    written: Written<'_>,
) -> Result<Carried, CleanupError> {
    let Written {
        doc_id,
        run_id,
        records,
    } = written;
    let client = db.client().await?;
    let Some(to) = projection::to_carry(&**client, doc_id).await? else {
        return Ok(Carried::NotNeeded("the document is gone or going"));
    };
    drop(client);
    if to.run_id != run_id || to.vectors != Some(records.len()) {
        return write_projection(db, vectors, doc_id, Reading::Now).await;
    }
    let projected: Vec<ChunkRecord> = records
        .iter()
        .map(|r| ChunkRecord {
            projection: to.projection,
            ..r.clone()
        })
        .collect();
    vectors.upsert(&projected).await?;
    undo_if_stopped_serving(db, vectors, doc_id, run_id).await?;
    Ok(Carried::Removed)
}

/// Writes `p` onto the run's vectors, then undoes the write if the run stopped serving meanwhile.
async fn write_back(
    db: &Db,
    vectors: &dyn VectorIndex,
    doc_id: &str,
    to: ToCarry,
    reading: Reading,
) -> Result<usize, CleanupError> {
    let read = match (to.vectors, reading) {
        (Some(n), Reading::Now) => ReadBack::WholeOrLater(n),
        (Some(n), Reading::MayWait) => ReadBack::WholeOrWait(n),
        (None, _) => ReadBack::Wait,
    };
    let rewritten = vectors
        .set_projection(doc_id, to.run_id, to.projection, read)
        .await?;
    if rewritten > 0 {
        undo_if_stopped_serving(db, vectors, doc_id, to.run_id).await?;
    }
    Ok(rewritten)
}

/// A write-back upserts vectors, so a delete or a prune that fell between the decision to write
/// and the write would otherwise come back to life (orphan vectors, or a document indexed twice):
/// after writing, the writer asks PostgreSQL whether the run still serves and removes them if not.
async fn undo_if_stopped_serving(
    db: &Db,
    vectors: &dyn VectorIndex,
    doc_id: &str,
    run_id: i64,
) -> Result<(), CleanupError> {
    let serves = projection::still_serves(&**db.client().await?, doc_id, run_id).await?;
    if !serves {
        vectors.delete_run(doc_id, run_id).await?;
        tracing::info!(
            doc_id,
            run_id,
            stage = "cleanup",
            "the run stopped serving during a version-state write: its vectors removed again"
        );
    }
    Ok(())
}

/// Before a release commits: the rendition's vectors answer on every day (wider than the truth,
/// which the carry after the commit then writes), so a search in between finds the version that
/// the release supersedes or the one it releases, never neither. Best effort: if Milvus fails
/// here, the release still commits, and the carry after it (or the sweeper) catches up.
pub async fn widen_before_release(db: &Db, vectors: &dyn VectorIndex, doc_id: &str) {
    let run = match db.client().await {
        Ok(client) => projection::to_carry(&**client, doc_id).await,
        Err(e) => Err(e),
    };
    if let Ok(Some(to)) = run {
        let widest = ToCarry {
            projection: docpipe_vector::Projection::ALWAYS,
            ..to
        };
        if let Err(e) = write_back(db, vectors, doc_id, widest, Reading::MayWait).await {
            tracing::warn!(doc_id, error = %docpipe_core::error::chain(&e), "vectors not widened before the release");
        }
    }
}

/// Which changed version states a caller carries.
#[derive(Debug, Clone, Copy)]
pub enum Carry<'a> {
    /// Any that are due, oldest first, up to this many (a delete, a release, a repeal).
    Due(i64),
    /// Those of this document's work, up to this many: what an index commit changed. Two index
    /// workers then never carry each other's, nor the sweeper's backlog, on the ingest path.
    AroundDocument(&'a str, i64),
    /// As `AroundDocument`, after the index commit of the run whose vectors this delivery
    /// inserted and still holds: those are rewritten from memory, with no read of Milvus (a
    /// read of what was just written waits for Milvus to catch up: 200 to 400 ms a document).
    AfterIndex(Written<'a>, i64),
}

/// The vectors an index delivery inserted, all of its run's.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a> {
    pub doc_id: &'a str,
    pub run_id: i64,
    pub records: &'a [ChunkRecord],
}

/// Carries the version state that changed onto the vectors at once, after the commit that changed
/// it: the number carried. Never fails its caller: what fails here stays in the outbox, due, and
/// the sweeper carries it with its backoff.
pub async fn carry_projections(db: &Db, vectors: &dyn VectorIndex, which: Carry<'_>) -> usize {
    let due = match db.client().await {
        Ok(client) => match which {
            Carry::Due(limit) => cleanups::due_of(&**client, Kind::Projection, limit).await,
            Carry::AroundDocument(doc_id, limit)
            | Carry::AfterIndex(Written { doc_id, .. }, limit) => {
                cleanups::due_projections_around(&**client, doc_id, limit).await
            }
        },
        Err(e) => Err(e),
    };
    let due = due.unwrap_or_else(|e| {
        tracing::warn!(error = %docpipe_core::error::chain(&e), "version state not carried to the vectors; the sweeper will");
        Vec::new()
    });
    let mut carried = 0;
    let written = match which {
        Carry::AfterIndex(written, _) => Some(written),
        _ => None,
    };
    // An act's (a release, a repeal, a delete: rare, and its caller reads the state back) may
    // wait; an index delivery's may not, or a lagging Milvus holds the ingest's workers.
    let reading = match which {
        Carry::Due(_) => Reading::MayWait,
        Carry::AroundDocument(..) | Carry::AfterIndex(..) => Reading::Now,
    };
    for cleanup in &due {
        let wrote = match written {
            Some(w) if w.doc_id == cleanup.doc_id => write_projection_held(db, vectors, w).await,
            _ => write_projection(db, vectors, &cleanup.doc_id, reading).await,
        };
        let done = match wrote {
            Ok(_) => match db.client().await {
                Ok(client) => cleanups::done(&**client, cleanup.cleanup_id).await,
                Err(e) => Err(e),
            },
            Err(e) => {
                tracing::warn!(doc_id = cleanup.doc_id, error = %docpipe_core::error::chain(&e), "version state not carried to the vectors; the sweeper will");
                continue;
            }
        };
        match done {
            Ok(()) => carried += 1,
            Err(e) => {
                tracing::warn!(doc_id = cleanup.doc_id, error = %docpipe_core::error::chain(&e), "version state carried, its record kept; the sweeper settles it")
            }
        }
    }
    carried
}

/// `Some` when what the run wrote must stay (for now). A run that committed keeps its vectors
/// (they serve search until a newer run commits and prunes them); the current run still in flight
/// is decided once it ends. A failed or superseded run, or a document gone or going, keeps nothing.
async fn keep_run(db: &Db, doc_id: &str, run_id: i64) -> Result<Option<Carried>, DbError> {
    let client = db.client().await?;
    let Some(doc) = documents::get(&**client, doc_id).await? else {
        return Ok(None);
    };
    if doc.deleting_at.is_some() {
        return Ok(None);
    }
    let run = runs::get(&**client, run_id).await?;
    Ok(match run.map(|r| r.run_status) {
        Some(RunStatus::Succeeded) => Some(Carried::NotNeeded("the run committed")),
        Some(RunStatus::Running) if doc.current_run_id == Some(run_id) => {
            Some(Carried::Postponed("the run is still in flight"))
        }
        _ => None,
    })
}

async fn finish_delete(deps: &CleanupDeps<'_>, doc_id: &str) -> Result<Carried, CleanupError> {
    let delete_deps = DeleteDeps {
        db: deps.db,
        objects: deps.objects,
        vectors: deps.vectors.ok_or(CleanupError::NoVectorIndex)?,
        artifacts_bucket: deps.artifacts_bucket,
    };
    match delete::finish(&delete_deps, doc_id).await {
        Ok(_) => Ok(Carried::Removed),
        Err(DeleteError::NotFound(_)) => Ok(Carried::NotNeeded("the delete had finished")),
        Err(e) => Err(e.into()),
    }
}
