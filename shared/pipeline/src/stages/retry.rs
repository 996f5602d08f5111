//! Seed 000 §6.6: a retry keeps the document, opens a new run (`trigger_type='retry'`) and walks
//! the same path. The original is already stored, so the new run is checked and marked `stored` at
//! once and its parse job goes out; the snapshot is replaced when the new run parses.
//!
//! Allowed from `failed` and `indexed` (reprocess). While a run is in flight the answer is
//! [`RetryError::InFlight`], unless that run is past its deadline: then it is failed as abandoned
//! and the retry proceeds.

use crate::adapters::{ContentDigest, JobQueue, ObjectHead, ObjectStore};
use docpipe_core::model::{DocStatus, JobMessage, RunStatus, Stage, Trigger};
use docpipe_db::transitions::{self, StoredObject};
use docpipe_db::{documents, keyword, runs, Db, DbError};
use tokio_postgres::GenericClient;

pub struct RetryDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub queue: &'a dyn JobQueue,
    pub parse_queue_url: &'a str,
    pub stage_deadline_secs: i64,
    /// The largest original the retry re-reads.
    pub max_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error("document {0} does not exist")]
    NotFound(String),
    #[error("document {0} is being deleted")]
    Deleting(String),
    #[error("run {run_id} is still in flight (document is {status}); retry after it ends or after its deadline {deadline}")]
    InFlight {
        run_id: i64,
        status: DocStatus,
        deadline: String,
    },
    #[error(
        "document {doc_id} cannot be retried from status {status}: it has no stored original yet"
    )]
    NotRetryable { doc_id: String, status: DocStatus },
    #[error("the original is larger than the limit of {limit} bytes (DOCPIPE_MAX_BYTES): upload a smaller one")]
    TooLarge { limit: u64 },
    #[error("the original s3://{bucket}/{key} no longer exists: upload it again")]
    OriginalMissing { bucket: String, key: String },
    #[error("the database is unavailable")]
    Db(#[from] DbError),
    #[error("the document changed under the retry: {0}")]
    Inconsistent(String),
    #[error("object storage is unavailable")]
    Storage(#[from] crate::adapters::StorageError),
    #[error("the parse queue is unavailable")]
    Queue(#[from] crate::adapters::QueueError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retried {
    pub doc_id: String,
    pub run_id: i64,
    /// The in-flight run that was past its deadline and was failed to make way.
    pub abandoned_run: Option<i64>,
}

pub async fn retry(deps: &RetryDeps<'_>, doc_id: &str) -> Result<Retried, RetryError> {
    let (head, digest) = read_original(deps, doc_id).await?;
    let (run_id, abandoned_run) = open_stored_run(deps, doc_id, &head, &digest).await?;
    // The run is committed with its job marked unsent: if this send fails, the caller hears it
    // (503), and the sweeper sends the job after its grace rather than leave the run waiting.
    deps.queue
        .send(
            deps.parse_queue_url,
            JobMessage::new(doc_id, run_id).encode(),
        )
        .await?;
    // Best effort: a job still marked unsent is at worst sent twice, which a stage takes as a
    // duplicate.
    let sent = match deps.db.client().await {
        Ok(client) => runs::job_sent(&**client, run_id).await,
        Err(e) => Err(e),
    };
    if let Err(e) = sent {
        tracing::warn!(doc_id, run_id, error = %docpipe_core::error::chain(&e), "the retry's job was sent but not marked so; the sweeper may send it again");
    }
    tracing::info!(
        doc_id,
        run_id,
        stage = "retry",
        abandoned_run,
        "retry opened a new run"
    );
    Ok(Retried {
        doc_id: doc_id.to_string(),
        run_id,
        abandoned_run,
    })
}

/// A stored original is all a retry needs: it reads it again (an imported record has no digest
/// yet). The object under the key may have been replaced since it was stored (its own event may
/// still be on its way), and the run records what it will parse.
async fn read_original(
    deps: &RetryDeps<'_>,
    doc_id: &str,
) -> Result<(ObjectHead, ContentDigest), RetryError> {
    let client = deps.db.client().await?;
    let doc = documents::get(&**client, doc_id)
        .await?
        .ok_or_else(|| RetryError::NotFound(doc_id.to_string()))?;
    drop(client);
    if doc.object_name.is_empty()
        || doc.source_bucket.is_empty()
        || doc.status == DocStatus::Pending
    {
        return Err(RetryError::NotRetryable {
            doc_id: doc_id.to_string(),
            status: doc.status,
        });
    }
    let head = deps
        .objects
        .head(&doc.source_bucket, &doc.object_name)
        .await?
        .ok_or_else(|| RetryError::OriginalMissing {
            bucket: doc.source_bucket.clone(),
            key: doc.object_name.clone(),
        })?;
    let digest = match deps
        .objects
        .sha256(&doc.source_bucket, &doc.object_name, deps.max_bytes)
        .await
    {
        Ok(digest) => digest,
        Err(crate::adapters::StorageError::NotFound { bucket, key }) => {
            return Err(RetryError::OriginalMissing { bucket, key })
        }
        Err(crate::adapters::StorageError::TooLarge { limit }) => {
            return Err(RetryError::TooLarge { limit })
        }
        Err(e) => return Err(e.into()),
    };
    Ok((head, digest))
}

/// One transaction under the document's row lock: an overdue run in flight is abandoned, the old
/// run's keyword rows go, and the new run opens and is marked stored at once. The new run's id,
/// and the run it abandoned.
async fn open_stored_run(
    deps: &RetryDeps<'_>,
    doc_id: &str,
    head: &ObjectHead,
    digest: &ContentDigest,
) -> Result<(i64, Option<i64>), RetryError> {
    let mut client = deps.db.client().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    let doc = documents::lock(&*tx, doc_id)
        .await?
        .ok_or_else(|| RetryError::NotFound(doc_id.to_string()))?;
    if doc.deleting_at.is_some() {
        return Err(RetryError::Deleting(doc_id.to_string()));
    }
    let abandoned_run = abandon_overdue_run(&*tx, &doc).await?;
    // The old run's keyword rows go with it, as its vectors stop counting for search.
    keyword::remove(&*tx, doc_id).await?;
    let run_id = transitions::open_run(
        &*tx,
        doc_id,
        Trigger::Retry,
        "retry requested",
        deps.stage_deadline_secs,
    )
    .await?;
    let stored = transitions::mark_stored(
        &*tx,
        doc_id,
        run_id,
        &StoredObject {
            bucket: &doc.source_bucket,
            key: &doc.object_name,
            file_name: &doc.file_name,
            content_type: &doc.content_type,
            size_bytes: digest.bytes as i64,
            sha256: &digest.sha256,
            etag: &head.etag,
            metadata: &serde_json::json!({}),
            version: "",
            regulation_type: "",
        },
    )
    .await?;
    if !stored {
        // Impossible under the row lock on a run just opened; refuse rather than commit a run
        // that is pending with nobody to move it.
        return Err(RetryError::Inconsistent(format!(
            "run {run_id} of {doc_id} was not pending when it was stored"
        )));
    }
    runs::job_unsent(&*tx, run_id).await?;
    tx.commit().await.map_err(DbError::from)?;
    Ok((run_id, abandoned_run))
}

/// The document's run in flight, if any: refused while before its deadline, failed as abandoned
/// after it (its id returned).
async fn abandon_overdue_run(
    tx: &impl GenericClient,
    doc: &documents::Document,
) -> Result<Option<i64>, RetryError> {
    let Some(current) = doc.current_run_id else {
        return Ok(None);
    };
    let Some(run) = runs::get(tx, current).await? else {
        return Ok(None);
    };
    if run.run_status != RunStatus::Running {
        return Ok(None);
    }
    let overdue = run.deadline_at.is_some_and(|d| d < chrono::Utc::now());
    if !overdue {
        return Err(RetryError::InFlight {
            run_id: current,
            status: doc.status,
            deadline: run
                .deadline_at
                .map(|d| d.to_rfc3339())
                .unwrap_or_else(|| "none".into()),
        });
    }
    transitions::fail_run(
        tx,
        &doc.doc_id,
        current,
        Stage::Retry,
        "abandoned: past its deadline, replaced by a retry",
    )
    .await?;
    Ok(Some(current))
}
