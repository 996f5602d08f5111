//! Reconcile: finds what PostgreSQL does not vouch for (vectors whose document is gone or whose run
//! is not current, artifacts that have no row) and, when asked, removes it. The default is a dry run
//! that only reports. Runs still in flight are left alone: their writes land before their rows.
//!
//! Both listings are read a page at a time, so what one pass holds is one page, whatever the size
//! of the collection or the bucket: the vector collection in chunk-id order (a document's chunk
//! ids share its id as a prefix, so its vectors are contiguous), the artifacts in key order.
//! `docpipe reconcile` goes through both from the start ([`reconcile`]). The sweeper reads a few
//! pages of each per sweep and goes on from there the next time ([`sweep`]): where it stopped is
//! kept in PostgreSQL (`reconcile_cursors`, migration 0012), and past the end it starts over.

use crate::adapters::{ObjectStore, StorageError};
use docpipe_db::reconcile::{self, Cursor, DocState};
use docpipe_db::{Db, DbError};
use docpipe_vector::{ChunkKey, VectorError, VectorIndex};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Report {
    pub applied: bool,
    /// Documents with vectors but no row (or a row being deleted).
    pub orphan_vector_docs: Vec<String>,
    /// Indexed documents holding vectors of runs other than their current one: (doc, extra).
    pub stale_run_vectors: Vec<(String, usize)>,
    /// Failed documents that still hold vectors (never searchable; just dead weight).
    pub failed_doc_vectors: Vec<String>,
    /// Artifact objects without a `document_artifacts` row.
    pub orphan_artifacts: Vec<String>,
    /// Vectors and artifact keys this reconcile read.
    pub vectors_read: usize,
    pub artifacts_read: usize,
}

impl Report {
    /// Documents and objects this report covers (what it removed, when applied).
    pub fn total(&self) -> usize {
        self.orphan_vector_docs.len()
            + self.stale_run_vectors.len()
            + self.failed_doc_vectors.len()
            + self.orphan_artifacts.len()
    }

    pub fn is_clean(&self) -> bool {
        self.orphan_vector_docs.is_empty()
            && self.stale_run_vectors.is_empty()
            && self.failed_doc_vectors.is_empty()
            && self.orphan_artifacts.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the database is unavailable")]
    Db(#[from] DbError),
    #[error("object storage is unavailable")]
    Storage(#[from] StorageError),
    #[error("the vector index is unavailable")]
    Vector(#[from] VectorError),
}

/// How much of each listing one call reads: `pages` pages of `page` entries each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub vector_page: usize,
    pub vector_pages: usize,
    pub artifact_page: usize,
    pub artifact_pages: usize,
}

impl Budget {
    /// One sweep's share: 4 pages of 16,384 vectors (Milvus's largest query window; about 2 MB of
    /// ids held at a time, four queries) and 10 pages of 1,000 artifact keys (S3's largest
    /// listing page, ten requests), about a second or two of the sweeper's time. The sweeper
    /// goes through 65,536 vectors and 10,000 artifacts a sweep: with the template's 5-minute
    /// period, about 19 million vectors and 2.9 million artifacts a day.
    pub const SWEEP: Budget = Budget {
        vector_page: docpipe_vector::MAX_CHUNK_PAGE,
        vector_pages: 4,
        artifact_page: 1_000,
        artifact_pages: 10,
    };
}

/// The cursors' names: the collection and the bucket they page through, so a new collection (a
/// new embedding model) or another bucket starts at its beginning.
pub fn vector_cursor_name(collection: &str) -> String {
    format!("vectors:{collection}")
}

pub fn artifact_cursor_name(bucket: &str) -> String {
    format!("artifacts:{bucket}")
}

/// Where [`sweep`] stopped in the listing `name`.
pub async fn read_cursor(db: &Db, name: &str) -> Result<Cursor, DbError> {
    reconcile::read_cursor(&**db.client().await?, name).await
}

async fn write_cursor(db: &Db, name: &str, position: &str, wrapped: bool) -> Result<(), DbError> {
    reconcile::write_cursor(&**db.client().await?, name, position, wrapped).await
}

async fn doc_states(db: &Db, ids: &[String]) -> Result<HashMap<String, DocState>, DbError> {
    reconcile::doc_states(&**db.client().await?, ids).await
}

/// The newest run id PostgreSQL has handed out. Every removal is bounded by it, so a run opened
/// while the reconcile works (a new upload under a key whose document was just deleted, say) keeps
/// what it writes.
async fn run_horizon(db: &Db) -> Result<i64, DbError> {
    reconcile::run_horizon(&**db.client().await?).await
}

/// How one page ended.
enum PageEnd {
    /// Read whole; the listing goes on after this position.
    More(String),
    /// The removal limit was reached: the listing goes on after this position (the first entry
    /// that was not dealt with comes next).
    Limited(String),
    /// The listing is over.
    End,
}

/// One reconcile's state across pages: what it found, and what it may still remove.
struct Scan<'a> {
    db: &'a Db,
    objects: &'a dyn ObjectStore,
    vectors: &'a dyn VectorIndex,
    bucket: &'a str,
    apply: bool,
    limit: usize,
    horizon: i64,
    report: Report,
}

impl<'a> Scan<'a> {
    async fn new(
        db: &'a Db,
        objects: &'a dyn ObjectStore,
        vectors: &'a dyn VectorIndex,
        bucket: &'a str,
        apply: bool,
        limit: usize,
    ) -> Result<Scan<'a>, ReconcileError> {
        Ok(Scan {
            db,
            objects,
            vectors,
            bucket,
            apply,
            limit,
            horizon: run_horizon(db).await?,
            report: Report {
                applied: apply,
                ..Report::default()
            },
        })
    }

    /// One page of the collection after `after`: each document's vectors judged against its row,
    /// and, when applying, removed, up to the limit of each kind.
    async fn vector_page(&mut self, after: &str, size: usize) -> Result<PageEnd, ReconcileError> {
        let page = self.vectors.chunk_page(after, size).await?;
        self.report.vectors_read += page.len();
        let full = page.len() >= size;
        let Some(last) = page.last().map(|k| k.chunk_id.clone()) else {
            return Ok(PageEnd::End);
        };
        // Documents in the order of their first chunk, with their runs and their last chunk.
        let mut order: Vec<String> = Vec::new();
        let mut docs: HashMap<String, (BTreeMap<i64, usize>, String)> = HashMap::new();
        for ChunkKey {
            chunk_id,
            doc_id,
            run_id,
        } in page
        {
            let entry = docs.entry(doc_id.clone()).or_insert_with(|| {
                order.push(doc_id.clone());
                Default::default()
            });
            *entry.0.entry(run_id).or_default() += 1;
            if chunk_id > entry.1 {
                entry.1 = chunk_id;
            }
        }
        let states = doc_states(self.db, &order).await?;
        let mut done_through = after.to_string();
        for id in &order {
            let (runs, last_chunk) = &docs[id];
            let kind = match states.get(id) {
                None => Some(Kind::Orphan),
                Some(s) if s.deleting => Some(Kind::Orphan),
                Some(s) if s.status == "indexed" => {
                    let current = s.current_run_id.unwrap_or_default();
                    let all: usize = runs.values().sum();
                    let kept = runs.get(&current).copied().unwrap_or(0);
                    (all > kept).then_some(Kind::StaleRuns(all - kept, current))
                }
                Some(s) if s.status == "failed" => Some(Kind::Failed),
                // pending, stored, parsed: a run is in flight and the previous vectors still serve.
                Some(_) => None,
            };
            if let Some(kind) = kind {
                if !self.take(id, kind).await? {
                    return Ok(PageEnd::Limited(done_through));
                }
            }
            done_through.clone_from(last_chunk);
        }
        Ok(if full {
            PageEnd::More(last)
        } else {
            PageEnd::End
        })
    }

    /// Records (and, applying, removes) one document's vectors; false when its kind's limit is
    /// used up. A document whose vectors straddle two pages is recorded once.
    async fn take(&mut self, id: &str, kind: Kind) -> Result<bool, ReconcileError> {
        let report = &mut self.report;
        let list_len = match kind {
            Kind::Orphan => report.orphan_vector_docs.len(),
            Kind::Failed => report.failed_doc_vectors.len(),
            Kind::StaleRuns(..) => report.stale_run_vectors.len(),
        };
        let seen = match kind {
            Kind::Orphan => report.orphan_vector_docs.last().is_some_and(|d| d == id),
            Kind::Failed => report.failed_doc_vectors.last().is_some_and(|d| d == id),
            Kind::StaleRuns(..) => report
                .stale_run_vectors
                .last()
                .is_some_and(|(d, _)| d == id),
        };
        if !seen && self.apply && list_len >= self.limit {
            return Ok(false);
        }
        match kind {
            Kind::Orphan | Kind::Failed => {
                if self.apply {
                    self.vectors.delete_runs_up_to(id, self.horizon).await?;
                }
                let list = if matches!(kind, Kind::Orphan) {
                    &mut self.report.orphan_vector_docs
                } else {
                    &mut self.report.failed_doc_vectors
                };
                if !seen {
                    list.push(id.to_string());
                }
            }
            Kind::StaleRuns(extra, current) => {
                // An indexed document's other vectors are older runs': a newer run would have
                // moved the document out of `indexed`.
                if self.apply {
                    self.vectors.delete_runs_up_to(id, current - 1).await?;
                }
                match self.report.stale_run_vectors.last_mut() {
                    Some((d, n)) if seen && d == id => *n += extra,
                    _ => self.report.stale_run_vectors.push((id.to_string(), extra)),
                }
            }
        }
        Ok(true)
    }

    /// One page of the artifacts after `after`: keys without a row, unless they are the current
    /// run's, recorded and, when applying, removed, up to the limit.
    async fn artifact_page(&mut self, after: &str, size: usize) -> Result<PageEnd, ReconcileError> {
        let (keys, more) = self
            .objects
            .list_page(self.bucket, "artifacts/", after, size)
            .await?;
        self.report.artifacts_read += keys.len();
        let Some(last) = keys.last().cloned() else {
            return Ok(PageEnd::End);
        };
        let recorded = reconcile::recorded_artifacts(&**self.db.client().await?, &keys).await?;
        let unrecorded: Vec<&String> = keys.iter().filter(|k| !recorded.contains(*k)).collect();
        let key_docs: Vec<String> = unrecorded
            .iter()
            .filter_map(|k| k.split('/').nth(1).map(String::from))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let key_states = doc_states(self.db, &key_docs).await?;
        let mut done_through = after.to_string();
        for key in &keys {
            if recorded.contains(key) {
                done_through.clone_from(key);
                continue;
            }
            let mut parts = key.split('/').skip(1);
            let (doc, run) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            // The current run's artifacts are never orphans: its parse may commit their rows
            // between the listing and the reads above (it writes the objects first), so a status
            // read after the rows can already say `parsed`. Only a superseded run's, or a deleted
            // document's, go.
            let in_flight = key_states.get(doc).is_some_and(|s| {
                !s.deleting && s.current_run_id.map(|r| r.to_string()).as_deref() == Some(run)
            });
            if !in_flight {
                if self.apply {
                    if self.report.orphan_artifacts.len() >= self.limit {
                        return Ok(PageEnd::Limited(done_through));
                    }
                    self.objects.delete(self.bucket, key).await?;
                }
                self.report.orphan_artifacts.push(key.clone());
            }
            done_through.clone_from(key);
        }
        Ok(if more {
            PageEnd::More(last)
        } else {
            PageEnd::End
        })
    }

    fn log(&self, what: &'static str) {
        let r = &self.report;
        tracing::info!(
            applied = self.apply,
            vectors_read = r.vectors_read,
            artifacts_read = r.artifacts_read,
            orphan_vector_docs = r.orphan_vector_docs.len(),
            stale_run_vectors = r.stale_run_vectors.len(),
            failed_doc_vectors = r.failed_doc_vectors.len(),
            orphan_artifacts = r.orphan_artifacts.len(),
            "{what}"
        );
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Orphan,
    Failed,
    /// Extra vectors, and the current run.
    StaleRuns(usize, i64),
}

/// Goes through the whole collection and every artifact, a page at a time; with `apply`, removes
/// at most `limit` documents' worth of vectors of each kind and `limit` artifact objects (the rest
/// waits for the next run). What `docpipe reconcile` runs.
pub async fn reconcile(
    db: &Db,
    objects: &dyn ObjectStore,
    vectors: &dyn VectorIndex,
    bucket: &str,
    apply: bool,
    limit: usize,
) -> Result<Report, ReconcileError> {
    let mut scan = Scan::new(db, objects, vectors, bucket, apply, limit).await?;
    let mut after = String::new();
    while let PageEnd::More(next) = scan.vector_page(&after, Budget::SWEEP.vector_page).await? {
        after = next;
    }
    let mut after = String::new();
    while let PageEnd::More(next) = scan
        .artifact_page(&after, Budget::SWEEP.artifact_page)
        .await?
    {
        after = next;
    }
    scan.log("reconcile");
    Ok(scan.report)
}

/// The sweeper's share of a reconcile: from where the last sweep stopped, at most `budget`'s pages
/// of each listing, removing at most `limit` of each kind; where it stopped is kept for the next.
pub async fn sweep(
    db: &Db,
    objects: &dyn ObjectStore,
    vectors: &dyn VectorIndex,
    bucket: &str,
    limit: usize,
    budget: Budget,
) -> Result<Report, ReconcileError> {
    let mut scan = Scan::new(db, objects, vectors, bucket, true, limit).await?;

    let name = vector_cursor_name(vectors.collection());
    let mut after = read_cursor(db, &name).await?.position;
    let mut wrapped = false;
    for _ in 0..budget.vector_pages.max(1) {
        match scan.vector_page(&after, budget.vector_page).await? {
            PageEnd::More(next) => after = next,
            PageEnd::Limited(next) => {
                after = next;
                break;
            }
            PageEnd::End => {
                after.clear();
                wrapped = true;
                break;
            }
        }
    }
    write_cursor(db, &name, &after, wrapped).await?;

    let name = artifact_cursor_name(bucket);
    let mut after = read_cursor(db, &name).await?.position;
    let mut wrapped = false;
    for _ in 0..budget.artifact_pages.max(1) {
        match scan.artifact_page(&after, budget.artifact_page).await? {
            PageEnd::More(next) => after = next,
            PageEnd::Limited(next) => {
                after = next;
                break;
            }
            PageEnd::End => {
                after.clear();
                wrapped = true;
                break;
            }
        }
    }
    write_cursor(db, &name, &after, wrapped).await?;
    scan.log("reconcile sweep");
    Ok(scan.report)
}
