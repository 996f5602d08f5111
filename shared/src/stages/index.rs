//! Seed 000 §6.4: the run's chunks are embedded and written to Milvus, the vectors of older runs are
//! removed, and one transaction marks the run `succeeded` and the document `indexed`.
//!
//! Exactly one set of vectors per run: the stage claims a lease on the run before it writes (two
//! deliveries of one message cannot both insert) and counts its attempts there. Every insert must be
//! acknowledged for all its rows. A retry first deletes whatever an earlier, interrupted attempt of
//! the same run left, and reads the count back with Strong consistency before committing; the first
//! attempt has nothing to clean and skips both, which is most of a small document's time in Milvus.
//! If the document was deleted or superseded meanwhile, the compare-and-set fails and the stage
//! removes the vectors it wrote.

use crate::adapters::{ObjectStore, StorageError};
use crate::artifacts;
use crate::config::IndexConfig;
use crate::db::transitions::{self, IndexAttempt, IndexCounts};
use crate::db::{documents, Db, DbError};
use crate::error::StageError;
use crate::model::{DocStatus, JobMessage, Stage};
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
}

fn db_err(e: DbError) -> StageError {
    StageError::transient(Stage::Index, e)
}

fn vector_err(e: VectorError) -> StageError {
    StageError::transient(Stage::Index, e)
}

/// What a permanent failure of a dependency means for the run.
enum Failure {
    Permanent(Stage, String),
    Transient(StageError),
}

fn classify_embed(e: EmbedError) -> Failure {
    if e.is_transient() {
        Failure::Transient(StageError::transient(Stage::Embed, e))
    } else {
        Failure::Permanent(Stage::Embed, crate::error::chain(&e))
    }
}

fn classify_vector(e: VectorError) -> Failure {
    if e.is_transient() {
        Failure::Transient(vector_err(e))
    } else {
        Failure::Permanent(Stage::Index, crate::error::chain(&e))
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
    let owner = format!("index-{:016x}", rand::random::<u64>());
    let client = deps.db.client().await.map_err(db_err)?;
    let Some(attempt) =
        transitions::start_index_attempt(&**client, run_id, &owner, deps.config.lease_secs)
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
    drop(client);

    let result = write_vectors(deps, &doc, run_id, &owner, attempt).await;
    let outcome = match result {
        Ok(Some(outcome)) => Ok(outcome),
        Ok(None) => abandon(deps, doc_id, run_id).await,
        Err(Failure::Permanent(stage, reason)) => fail(deps, doc_id, run_id, stage, reason).await,
        Err(Failure::Transient(e)) => Err(e),
    };
    if outcome.is_err() {
        // Let a redelivery claim at once rather than wait for the lease to run out.
        if let Ok(client) = deps.db.client().await {
            let _ = transitions::release_lease(&**client, run_id, &owner).await;
        }
    }
    outcome
}

/// Embeds and inserts; `Ok(None)` when the document moved on before the commit.
async fn write_vectors(
    deps: &IndexDeps<'_>,
    doc: &documents::Document,
    run_id: i64,
    owner: &str,
    attempt: IndexAttempt,
) -> Result<Option<IndexOutcome>, Failure> {
    let doc_id = doc.doc_id.as_str();
    let started = Instant::now();
    let key = format!(
        "{}vector_chunks.json",
        artifacts::run_prefix(doc_id, run_id)
    );
    let body = match deps.objects.get(&deps.config.bucket, &key, u64::MAX).await {
        Ok(b) => b,
        Err(StorageError::NotFound { .. }) => {
            return Err(Failure::Permanent(
                Stage::Index,
                format!("the chunks artifact {key} is missing"),
            ))
        }
        Err(e) => return Err(Failure::Transient(StageError::transient(Stage::Index, e))),
    };
    let chunks: Vec<VectorChunk> = artifacts::decode_items(&body)
        .map_err(|e| Failure::Permanent(Stage::Index, format!("{key}: {e}")))?;
    if chunks.is_empty() {
        return Err(Failure::Permanent(
            Stage::Index,
            "the run has no chunks to index".into(),
        ));
    }

    deps.vectors
        .ensure_collection(deps.embedder.dimension(), deps.embedder.model_id())
        .await
        .map_err(classify_vector)?;
    // One set of vectors per run. Only a retry can find some of this run's vectors already
    // there, from an attempt that died between its inserts and its commit: they go first.
    let retry = attempt.attempt > 1;
    let mut checks_ms = 0u128;
    if retry {
        let t = Instant::now();
        deps.vectors
            .delete_run(doc_id, run_id)
            .await
            .map_err(classify_vector)?;
        checks_ms += t.elapsed().as_millis();
    }

    let tags: Vec<String> = doc
        .metadata
        .get("tags")
        .and_then(|t| t.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut embed_ms = 0u128;
    let mut insert_ms = 0u128;
    // The lease was taken just now; it is renewed once a third of it has passed, not per batch. A
    // delete or a takeover in between is still caught by the commit's compare-and-set.
    let renew_every = std::time::Duration::from_secs((deps.config.lease_secs / 3).max(1) as u64);
    let mut renewed = Instant::now();
    for (batch_no, batch) in chunks.chunks(deps.config.embed_batch).enumerate() {
        let texts: Vec<String> = batch.iter().map(embedding_text).collect();
        let t = Instant::now();
        let vectors = deps
            .embedder
            .embed_passages(&texts)
            .await
            .map_err(classify_embed)?;
        embed_ms += t.elapsed().as_millis();
        if vectors.len() != batch.len() {
            return Err(Failure::Permanent(
                Stage::Embed,
                format!(
                    "the embedder returned {} vectors for {} chunks",
                    vectors.len(),
                    batch.len()
                ),
            ));
        }
        let first = batch_no * deps.config.embed_batch;
        let records: Vec<ChunkRecord> = batch
            .iter()
            .zip(vectors)
            .enumerate()
            .map(|(i, (chunk, embedding))| ChunkRecord {
                chunk_id: format!("{doc_id}:{run_id}:{}", first + i),
                doc_id: doc_id.to_string(),
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
                tags: tags.clone(),
                embedding,
            })
            .collect();
        let t = Instant::now();
        deps.vectors
            .insert(&records)
            .await
            .map_err(classify_vector)?;
        insert_ms += t.elapsed().as_millis();
        if renewed.elapsed() < renew_every {
            continue;
        }
        renewed = Instant::now();
        let client = deps
            .db
            .client()
            .await
            .map_err(|e| Failure::Transient(db_err(e)))?;
        let still_ours = transitions::claim_lease(&**client, run_id, owner, deps.config.lease_secs)
            .await
            .map_err(|e| Failure::Transient(db_err(e)))?;
        if !still_ours {
            // A delete cascades the run away, which also ends the lease: then nobody else will
            // remove what this attempt wrote, so the stage does (abandon, below).
            let gone = documents::get(&**client, doc_id)
                .await
                .map_err(|e| Failure::Transient(db_err(e)))?
                .is_none_or(|d| d.deleting_at.is_some());
            if gone {
                return Ok(None);
            }
            return Err(Failure::Transient(StageError::transient(
                Stage::Index,
                format!("lost the lease on run {run_id} (it ended or another worker took over)"),
            )));
        }
    }

    // Every insert above was acknowledged row for row. A retry also reads the run back, to be
    // sure its clean-up and its inserts left exactly one vector per chunk.
    let t = Instant::now();
    if retry {
        let present = deps
            .vectors
            .count(doc_id, Some(run_id))
            .await
            .map_err(classify_vector)?;
        if present != chunks.len() {
            return Err(Failure::Transient(StageError::transient(
                Stage::Index,
                format!(
                    "Milvus holds {present} vectors of run {run_id}, expected {}",
                    chunks.len()
                ),
            )));
        }
    }
    // A reindex never leaves two runs' vectors behind.
    if attempt.other_runs {
        deps.vectors
            .delete_other_runs(doc_id, run_id)
            .await
            .map_err(classify_vector)?;
    }
    checks_ms += t.elapsed().as_millis();

    let client = deps
        .db
        .client()
        .await
        .map_err(|e| Failure::Transient(db_err(e)))?;
    let metadata = serde_json::json!({
        "index": {
            "chunks": chunks.len(),
            "embed_ms": embed_ms as u64,
            "insert_ms": insert_ms as u64,
            "checks_ms": checks_ms as u64,
            "attempt": attempt.attempt,
            "duration_ms": started.elapsed().as_millis() as u64,
        }
    });
    let moved = transitions::mark_indexed(
        &**client,
        doc_id,
        run_id,
        &IndexCounts {
            chunks: chunks.len() as i32,
            embedding_model: deps.embedder.model_id(),
            index_name: deps.vectors.collection(),
            metadata,
        },
    )
    .await
    .map_err(|e| Failure::Transient(db_err(e)))?;
    if !moved {
        return Ok(None);
    }
    info!(
        doc_id,
        run_id,
        stage = "index",
        chunks = chunks.len(),
        embed_ms = embed_ms as u64,
        insert_ms = insert_ms as u64,
        "indexed"
    );
    Ok(Some(IndexOutcome::Indexed {
        doc_id: doc_id.to_string(),
        run_id,
        chunks: chunks.len(),
    }))
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

/// The document was deleted or superseded while its vectors were written: remove them.
async fn abandon(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    run_id: i64,
) -> Result<IndexOutcome, StageError> {
    deps.vectors
        .delete_run(doc_id, run_id)
        .await
        .map_err(vector_err)?;
    warn!(
        doc_id,
        run_id,
        stage = "index",
        "document moved on during indexing: its vectors were removed"
    );
    Ok(IndexOutcome::Stale {
        doc_id: doc_id.to_string(),
        run_id,
        why: "the document moved on while it was indexed".into(),
    })
}

async fn fail(
    deps: &IndexDeps<'_>,
    doc_id: &str,
    run_id: i64,
    stage: Stage,
    reason: String,
) -> Result<IndexOutcome, StageError> {
    // Nothing of a failed run stays searchable.
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
