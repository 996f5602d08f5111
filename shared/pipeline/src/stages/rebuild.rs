//! Re-embedding, blue/green: a new collection is filled from the stored chunks (no parse again),
//! in bounded steps through the index queue, while search reads the active one.
//!
//! A step holds the generation's lease and names its step number, so a duplicate or stale message
//! does nothing and a crashed step is redone by its redelivery once the lease ran out. Each step
//! copies the documents on the backlog (indexed behind the walk: the index commit put them there)
//! and then walks on in doc_id order, within a budget of chunks and of the function's time, records
//! how far it got in one transaction and sends the next step. Copies are idempotent: a document's
//! vectors in the new collection are replaced whole, or, for a document larger than one step,
//! written on from the first chunk the last step did not record (what it inserted past that goes
//! first). When the walk and the backlog are done, the
//! check compares the new collection with PostgreSQL, document by document (every live chunk
//! present, nothing else): what differs goes on the backlog; a clean check switches search (one
//! compare-and-set) or waits, ready, for an operator.

use crate::adapters::generations::{Generations, Side};
use crate::adapters::{JobQueue, ObjectStore};
use crate::error::StageError;
use crate::stages::index::{chunk_records, document_tags, embedding_text, read_chunks};
use docpipe_core::config::IndexConfig;
use docpipe_core::model::Stage;
use docpipe_db::generations::{self, Generation, Partial, Progress, State, Switched, ToCopy};
use docpipe_db::{documents, projection, Db, DbError};
use docpipe_vector::VectorError;
use serde::{Deserialize, Serialize};
use std::time::Instant;
use tracing::{info, warn};

pub struct RebuildDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub generations: &'a Generations,
    pub queue: &'a dyn JobQueue,
    pub config: &'a IndexConfig,
}

/// The index queue's other message: go on with a rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildMessage {
    pub v: u32,
    pub rebuild: RebuildStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildStep {
    pub generation: i64,
    pub step: i64,
}

impl RebuildMessage {
    pub fn new(generation: i64, step: i64) -> Self {
        RebuildMessage {
            v: 1,
            rebuild: RebuildStep { generation, step },
        }
    }

    /// A body that is a rebuild step; `None` for anything else (a job, or junk the job decoder
    /// refuses with its reason).
    pub fn decode(body: &str) -> Option<Self> {
        serde_json::from_str::<RebuildMessage>(body)
            .ok()
            .filter(|m| m.v == 1)
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("plain struct")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildOutcome {
    /// Copied this much; the next step was sent.
    Stepped {
        generation: i64,
        docs: i32,
        chunks: i64,
        chunks_done: i64,
        chunks_total: i64,
    },
    /// The check found documents to copy again (they went on the backlog).
    Unchecked { generation: i64, differ: usize },
    /// Complete and checked: switched, or ready for an operator's switch.
    Checked { generation: i64, switched: bool },
    /// A duplicate or stale step, or a generation no longer building.
    Dropped { generation: i64, why: String },
}

impl std::fmt::Display for RebuildOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RebuildOutcome::Stepped {
                generation,
                docs,
                chunks,
                chunks_done,
                chunks_total,
            } => write!(
                f,
                "rebuild {generation}: copied {docs} documents ({chunks} chunks), {chunks_done} of {chunks_total} chunks done"
            ),
            RebuildOutcome::Unchecked { generation, differ } => write!(
                f,
                "rebuild {generation}: the check found {differ} documents to copy again"
            ),
            RebuildOutcome::Checked {
                generation,
                switched,
            } => write!(
                f,
                "rebuild {generation}: complete and checked; {}",
                if *switched {
                    "search switched to it"
                } else {
                    "ready for its switch"
                }
            ),
            RebuildOutcome::Dropped { generation, why } => {
                write!(f, "rebuild {generation}: step dropped: {why}")
            }
        }
    }
}

/// Documents read from PostgreSQL at a time.
const DOCS_PER_READ: i64 = 64;
/// The share of the function's timeout a step spends copying; the rest records it.
const WORK_SHARE: f64 = 0.6;

fn db_err(e: DbError) -> StageError {
    StageError::from_db(Stage::Index, e)
}

fn vector_err(e: VectorError) -> StageError {
    if e.is_transient() {
        StageError::transient(Stage::Index, e)
    } else {
        // A rebuild has no run to fail: a refusal is said on the generation and retried, so an
        // operator sees it and may cancel.
        StageError::transient(Stage::Index, docpipe_core::error::chain(&e))
    }
}

pub async fn rebuild_step(
    deps: &RebuildDeps<'_>,
    step: RebuildStep,
) -> Result<RebuildOutcome, StageError> {
    // The step's time counts from here: what comes before the copy (the lease, connecting to
    // the new collection) is spent out of the same function timeout.
    let started = Instant::now();
    let id = step.generation;
    let owner = format!("rebuild-{:016x}", rand::random::<u64>());
    // Held for the function's whole timeout: a step does not renew it, and Lambda has ended a
    // step by then for sure.
    let lease_secs = deps.config.clock.index.function_timeout.as_secs_f64();
    let taken = {
        let client = deps.db.client().await.map_err(db_err)?;
        generations::take_step(&**client, id, step.step, &owner, lease_secs)
            .await
            .map_err(db_err)?
    };
    let Some(g) = taken else {
        return dropped_or_busy(deps, step).await;
    };
    let result = work(deps, &g, &owner, started).await;
    if let Err(e) = &result {
        if let Ok(client) = deps.db.client().await {
            let _ = generations::record_error(&**client, id, &owner, &e.to_string()).await;
        }
    }
    if let Ok(client) = deps.db.client().await {
        let _ = generations::release(&**client, id, &owner).await;
    }
    result
}

async fn dropped_or_busy(
    deps: &RebuildDeps<'_>,
    step: RebuildStep,
) -> Result<RebuildOutcome, StageError> {
    let client = deps.db.client().await.map_err(db_err)?;
    let g = generations::get(&**client, step.generation)
        .await
        .map_err(db_err)?;
    let why = match g {
        None => "no such generation".to_string(),
        Some(g) if g.state != State::Building => format!("the generation is {}", g.state.as_str()),
        Some(g) if g.step != step.step => {
            format!(
                "step {} was done (the generation is at {})",
                step.step, g.step
            )
        }
        Some(_) => {
            return Err(StageError::transient(
                Stage::Index,
                format!(
                    "rebuild {} step {} is held by another worker",
                    step.generation, step.step
                ),
            ))
        }
    };
    Ok(RebuildOutcome::Dropped {
        generation: step.generation,
        why,
    })
}

/// The generation's side (collection and embedder), read fresh.
async fn side_of(deps: &RebuildDeps<'_>, g: &Generation) -> Result<Side, StageError> {
    deps.generations.forget().await;
    let snapshot = deps
        .generations
        .snapshot()
        .await
        .map_err(|e| StageError::transient(Stage::Index, e))?;
    match &snapshot.next {
        Some((next, side)) if next.generation_id == g.generation_id => Ok(side.clone()),
        _ => Err(StageError::transient(
            Stage::Index,
            format!("generation {} is not the one being built", g.generation_id),
        )),
    }
}

async fn work(
    deps: &RebuildDeps<'_>,
    g: &Generation,
    owner: &str,
    started: Instant,
) -> Result<RebuildOutcome, StageError> {
    let side = side_of(deps, g).await?;
    side.vectors
        .ensure_collection(side.embedder.dimension(), side.embedder.model_id())
        .await
        .map_err(vector_err)?;
    let mut limit = Limit {
        deadline: started + deps.config.clock.index.function_timeout.mul_f64(WORK_SHARE),
        // A bounded batch whatever the library, besides the time the step has.
        budget: deps.config.rebuild_batch as i64,
        slowest: std::time::Duration::ZERO,
    };
    let mut progress = Progress::default();
    let mut cursor = g.cursor.clone();
    let mut walked = g.walked;
    // A document an earlier step copied in part goes on first, from where it stopped.
    if let Some(part) = &g.partial {
        let copy = ToCopy {
            doc_id: part.doc_id.clone(),
            run_id: part.run_id,
            chunks: 0,
        };
        match copy_document(
            deps,
            &side,
            &copy,
            part.from.max(0) as usize,
            &mut limit,
            &mut progress,
        )
        .await?
        {
            Copied::Whole => {
                if part.walk {
                    cursor = part.doc_id.clone();
                    progress.docs += 1;
                } else {
                    progress.backlog_done.push(part.doc_id.clone());
                }
            }
            Copied::UpTo(from) => {
                progress.partial = Some(Partial {
                    from: from as i32,
                    ..part.clone()
                });
            }
        }
    }
    // The backlog: documents indexed behind the walk.
    let client = deps.db.client().await.map_err(db_err)?;
    let backlog = generations::backlog(&**client, g.generation_id, DOCS_PER_READ)
        .await
        .map_err(db_err)?;
    drop(client);
    for (doc_id, copy) in backlog {
        if progress.partial.is_some() || limit.reached(&progress) {
            break;
        }
        match copy {
            Some(copy) => {
                if let Copied::UpTo(from) =
                    copy_document(deps, &side, &copy, 0, &mut limit, &mut progress).await?
                {
                    progress.partial = Some(Partial {
                        doc_id: copy.doc_id.clone(),
                        run_id: copy.run_id,
                        from: from as i32,
                        walk: false,
                    });
                    break;
                }
            }
            None => side.vectors.delete_doc(&doc_id).await.map_err(vector_err)?,
        }
        progress.backlog_done.push(doc_id);
    }
    // Then the walk.
    while !walked && progress.partial.is_none() && !limit.reached(&progress) {
        let client = deps.db.client().await.map_err(db_err)?;
        let page = generations::walk(&**client, &cursor, DOCS_PER_READ)
            .await
            .map_err(db_err)?;
        drop(client);
        walked = (page.len() as i64) < DOCS_PER_READ;
        for copy in &page {
            if limit.reached(&progress) {
                walked = false;
                break;
            }
            match copy_document(deps, &side, copy, 0, &mut limit, &mut progress).await? {
                Copied::Whole => {
                    progress.docs += 1;
                    cursor = copy.doc_id.clone();
                }
                Copied::UpTo(from) => {
                    progress.partial = Some(Partial {
                        doc_id: copy.doc_id.clone(),
                        run_id: copy.run_id,
                        from: from as i32,
                        walk: true,
                    });
                    walked = false;
                    break;
                }
            }
        }
    }
    progress.cursor = Some(cursor);
    progress.walked = walked;
    let backlog_left = {
        let mut client = deps.db.client().await.map_err(db_err)?;
        let tx = client.transaction().await.map_err(|e| db_err(e.into()))?;
        if !generations::advance(&*tx, g.generation_id, owner, &progress)
            .await
            .map_err(db_err)?
        {
            return Ok(RebuildOutcome::Dropped {
                generation: g.generation_id,
                why: "the lease was lost during the step".into(),
            });
        }
        tx.commit().await.map_err(|e| db_err(e.into()))?;
        generations::get(&**client, g.generation_id)
            .await
            .map_err(db_err)?
            .map_or(0, |g| g.backlog)
    };
    info!(
        generation = g.generation_id,
        stage = "rebuild",
        docs = progress.docs,
        chunks = progress.chunks,
        backlog_done = progress.backlog_done.len(),
        walked,
        ms = started.elapsed().as_millis() as u64,
        "rebuild step"
    );
    if !walked || backlog_left > 0 || progress.partial.is_some() {
        send_next(deps, g.generation_id, g.step + 1).await?;
        return Ok(RebuildOutcome::Stepped {
            generation: g.generation_id,
            docs: progress.docs,
            chunks: progress.chunks,
            chunks_done: g.chunks_done + progress.chunks,
            chunks_total: g.chunks_total,
        });
    }
    check_and_switch(deps, g, &side, owner).await
}

async fn send_next(deps: &RebuildDeps<'_>, generation: i64, step: i64) -> Result<(), StageError> {
    deps.queue
        .send(
            &deps.config.index_queue_url,
            RebuildMessage::new(generation, step).encode(),
        )
        .await
        .map_err(|e| StageError::transient(Stage::Index, e))
}

/// What one step may copy: until its share of the function's time, or its batch of chunks.
/// Another embedder batch starts only if it would end within that share, judged by the slowest
/// batch so far: a check at the deadline alone lets a batch that starts just before it run past
/// the function's timeout, and a step killed there records nothing, every time it is redelivered.
struct Limit {
    deadline: Instant,
    budget: i64,
    slowest: std::time::Duration,
}

impl Limit {
    fn reached(&self, progress: &Progress) -> bool {
        progress.chunks >= self.budget || Instant::now() + self.slowest > self.deadline
    }

    fn took(&mut self, batch: std::time::Duration) {
        self.slowest = self.slowest.max(batch);
    }
}

/// How far a document's copy got in this step.
enum Copied {
    /// Every chunk (or nothing to copy: the document moved on).
    Whole,
    /// The chunks before this one are in; the rest goes on in the next step.
    UpTo(usize),
}

/// Copies one document's current run into the generation's collection from chunk `from`, a batch
/// of the embedder at a time, counting into `progress` and stopping at the step's limit (after at
/// least one batch, so every step moves on). Its vectors carry the version state PostgreSQL gives
/// now. From the start, whatever the collection held of the document goes first; from a later
/// chunk, whatever an interrupted step inserted past it. A document that moved on (deleted, or
/// indexed again) loses its copy again: its new run is on the backlog.
async fn copy_document(
    deps: &RebuildDeps<'_>,
    side: &Side,
    copy: &ToCopy,
    from: usize,
    limit: &mut Limit,
    progress: &mut Progress,
) -> Result<Copied, StageError> {
    let (doc_id, run_id) = (copy.doc_id.as_str(), copy.run_id);
    let (doc, state) = {
        let client = deps.db.client().await.map_err(db_err)?;
        let doc = documents::get(&**client, doc_id).await.map_err(db_err)?;
        let state = projection::of(&**client, doc_id).await.map_err(db_err)?;
        (doc, state)
    };
    let Some(doc) = doc.filter(|d| d.deleting_at.is_none() && d.current_run_id == Some(run_id))
    else {
        side.vectors.delete_doc(doc_id).await.map_err(vector_err)?;
        return Ok(Copied::Whole);
    };
    let chunks = read_chunks(deps.objects, &deps.config.bucket, doc_id, run_id).await?;
    let from = from.min(chunks.len());
    if from == 0 {
        side.vectors.delete_doc(doc_id).await.map_err(vector_err)?;
    } else {
        side.vectors
            .delete_run_from(doc_id, run_id, from as i64)
            .await
            .map_err(vector_err)?;
    }
    let tags = document_tags(&doc);
    let size = deps.config.embed_batch.max(1);
    let mut next = from;
    while next < chunks.len() {
        if next > from && limit.reached(progress) {
            break;
        }
        let batch_started = Instant::now();
        let batch = &chunks[next..(next + size).min(chunks.len())];
        let texts: Vec<String> = batch.iter().map(embedding_text).collect();
        let vectors = side
            .embedder
            .embed_passages(&texts)
            .await
            .map_err(|e| StageError::transient(Stage::Embed, docpipe_core::error::chain(&e)))?;
        if vectors.len() != batch.len() {
            return Err(StageError::transient(
                Stage::Embed,
                format!(
                    "the embedder returned {} vectors for {} chunks",
                    vectors.len(),
                    batch.len()
                ),
            ));
        }
        let mut records = chunk_records(&doc, run_id, next, batch, vectors, &tags);
        for r in &mut records {
            r.projection = state;
        }
        side.vectors.insert(&records).await.map_err(vector_err)?;
        next += batch.len();
        progress.chunks += batch.len() as i64;
        limit.took(batch_started.elapsed());
    }
    // Moved on meanwhile? Then the copy goes again (a new run is on the backlog, a delete left
    // nothing to keep).
    let client = deps.db.client().await.map_err(db_err)?;
    let now = documents::get(&**client, doc_id).await.map_err(db_err)?;
    drop(client);
    if now.is_none_or(|d| d.deleting_at.is_some() || d.current_run_id != Some(run_id)) {
        side.vectors
            .delete_run(doc_id, run_id)
            .await
            .map_err(vector_err)?;
        return Ok(Copied::Whole);
    }
    Ok(if next < chunks.len() {
        Copied::UpTo(next)
    } else {
        Copied::Whole
    })
}

/// The check: PostgreSQL's live documents against what the new collection holds, page by page of
/// documents (the collection's side read whole once, in pages: a background step bounded by the
/// library, never a request). What differs goes on the backlog; a clean check switches or waits.
async fn check_and_switch(
    deps: &RebuildDeps<'_>,
    g: &Generation,
    side: &Side,
    owner: &str,
) -> Result<RebuildOutcome, StageError> {
    let held = side.vectors.doc_runs().await.map_err(vector_err)?;
    let mut differ = Vec::new();
    let (mut docs, mut chunks) = (0i64, 0i64);
    let mut seen = std::collections::HashSet::new();
    let mut cursor = String::new();
    loop {
        let client = deps.db.client().await.map_err(db_err)?;
        let page = generations::live_page(&**client, &cursor, 1_000)
            .await
            .map_err(db_err)?;
        drop(client);
        for doc in &page {
            docs += 1;
            chunks += i64::from(doc.chunks);
            seen.insert(doc.doc_id.clone());
            let runs = held.get(&doc.doc_id);
            let whole = runs.is_some_and(|runs| {
                runs.len() == 1 && runs.get(&doc.run_id) == Some(&(doc.chunks.max(0) as usize))
            });
            if !whole {
                differ.push(doc.doc_id.clone());
            }
        }
        match page.last() {
            Some(last) if page.len() == 1_000 => cursor = last.doc_id.clone(),
            _ => break,
        }
    }
    // Vectors of documents PostgreSQL no longer has indexed: removed here.
    let mut extra = 0usize;
    for doc_id in held.keys().filter(|d| !seen.contains(*d)) {
        side.vectors.delete_doc(doc_id).await.map_err(vector_err)?;
        extra += 1;
    }
    let mut client = deps.db.client().await.map_err(db_err)?;
    if !differ.is_empty() {
        generations::add_backlog(&**client, g.generation_id, &differ)
            .await
            .map_err(db_err)?;
        warn!(
            generation = g.generation_id,
            stage = "rebuild",
            differ = differ.len(),
            "the check found documents to copy again"
        );
        send_next(deps, g.generation_id, g.step + 1).await?;
        return Ok(RebuildOutcome::Unchecked {
            generation: g.generation_id,
            differ: differ.len(),
        });
    }
    let report = serde_json::json!({
        "docs": docs,
        "chunks": chunks,
        "missing": 0,
        "extra_removed": extra,
        "checked_at": chrono::Utc::now(),
    });
    let tx = client.transaction().await.map_err(|e| db_err(e.into()))?;
    if !generations::mark_checked(&*tx, g.generation_id, owner, &report)
        .await
        .map_err(db_err)?
    {
        // A commit put a document on the backlog meanwhile (or the lease was lost): go on.
        drop(tx);
        send_next(deps, g.generation_id, g.step + 1).await?;
        return Ok(RebuildOutcome::Unchecked {
            generation: g.generation_id,
            differ: 0,
        });
    }
    let switched = if g.auto_switch {
        match generations::switch(&*tx, g.generation_id, &[State::Building])
            .await
            .map_err(db_err)?
        {
            Switched::Switched { .. } => true,
            Switched::Refused(why) => {
                // A commit put a document on the backlog since the check: copy it, then again.
                warn!(generation = g.generation_id, stage = "rebuild", why = %why, "not switched yet");
                tx.commit().await.map_err(|e| db_err(e.into()))?;
                send_next(deps, g.generation_id, g.step + 1).await?;
                return Ok(RebuildOutcome::Unchecked {
                    generation: g.generation_id,
                    differ: 0,
                });
            }
        }
    } else {
        false
    };
    tx.commit().await.map_err(|e| db_err(e.into()))?;
    deps.generations.forget().await;
    info!(
        generation = g.generation_id,
        stage = "rebuild",
        docs,
        chunks,
        extra,
        switched,
        "rebuild complete and checked"
    );
    Ok(RebuildOutcome::Checked {
        generation: g.generation_id,
        switched,
    })
}
