//! Reconcile: finds what PostgreSQL does not vouch for (vectors whose document is gone or whose run
//! is not current, artifacts that have no row) and, when asked, removes it. The default is a dry run
//! that only reports. Runs still in flight are left alone: their writes land before their rows.

use crate::adapters::{ObjectStore, StorageError};
use crate::db::{Db, DbError, Type};
use docpipe_vector::{VectorError, VectorIndex};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

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

struct DocState {
    status: String,
    current_run_id: Option<i64>,
    deleting: bool,
}

async fn doc_states(db: &Db, ids: &[String]) -> Result<HashMap<String, DocState>, DbError> {
    let client = db.client().await?;
    let rows = client
        .query_typed(
            "SELECT doc_id, status, current_run_id, deleting_at IS NOT NULL
             FROM documents WHERE doc_id = ANY($1)",
            &[(&ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get(0),
                DocState {
                    status: r.get(1),
                    current_run_id: r.get(2),
                    deleting: r.get(3),
                },
            )
        })
        .collect())
}

/// The newest run id PostgreSQL has handed out. Every removal is bounded by it, so a run opened
/// while the reconcile works (a new upload under a key whose document was just deleted, say) keeps
/// what it writes.
async fn run_horizon(db: &Db) -> Result<i64, DbError> {
    let client = db.client().await?;
    let row = client
        .query_typed_one(
            "SELECT COALESCE(pg_sequence_last_value(
                 pg_get_serial_sequence('document_processing_runs', 'run_id')), 0)",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Finds what PostgreSQL does not vouch for; with `apply`, removes at most `limit` documents' worth
/// of vectors and `limit` artifact objects (the scheduled run is bounded; the rest waits for the
/// next one).
pub async fn reconcile(
    db: &Db,
    objects: &dyn ObjectStore,
    vectors: &dyn VectorIndex,
    bucket: &str,
    apply: bool,
    limit: usize,
) -> Result<Report, ReconcileError> {
    let mut report = Report {
        applied: apply,
        ..Report::default()
    };
    let horizon = run_horizon(db).await?;

    // One pass over the collection gives every document's runs and their counts: no query per
    // document.
    let doc_runs = vectors.doc_runs().await?;
    let ids: Vec<String> = doc_runs.keys().cloned().collect();
    let states = doc_states(db, &ids).await?;
    for id in &ids {
        match states.get(id) {
            None => report.orphan_vector_docs.push(id.clone()),
            Some(s) if s.deleting => report.orphan_vector_docs.push(id.clone()),
            Some(s) if s.status == "indexed" => {
                let current = s.current_run_id.unwrap_or_default();
                let runs = &doc_runs[id];
                let all: usize = runs.values().sum();
                let kept = runs.get(&current).copied().unwrap_or(0);
                if all > kept {
                    report.stale_run_vectors.push((id.clone(), all - kept));
                }
            }
            Some(s) if s.status == "failed" => report.failed_doc_vectors.push(id.clone()),
            // pending, stored, parsed: a run is in flight and the previous vectors still serve.
            Some(_) => {}
        }
    }

    let keys = objects.list(bucket, "artifacts/").await?;
    let client = db.client().await?;
    let recorded: HashSet<String> = client
        .query_typed("SELECT object_name FROM document_artifacts", &[])
        .await
        .map_err(DbError::from)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(client);
    let unrecorded: Vec<&String> = keys.iter().filter(|k| !recorded.contains(*k)).collect();
    let key_docs: Vec<String> = unrecorded
        .iter()
        .filter_map(|k| k.split('/').nth(1).map(String::from))
        .collect();
    let key_states = doc_states(db, &key_docs).await?;
    for key in unrecorded {
        let mut parts = key.split('/').skip(1);
        let (doc, run) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        // The current run's artifacts are never orphans: its parse may commit their rows between
        // the listing and the reads above (it writes the objects first), so a status read after
        // the rows can already say `parsed`. Only a superseded run's, or a deleted document's, go.
        let in_flight = key_states.get(doc).is_some_and(|s| {
            !s.deleting && s.current_run_id.map(|r| r.to_string()).as_deref() == Some(run)
        });
        if !in_flight {
            report.orphan_artifacts.push(key.clone());
        }
    }

    if apply {
        report.orphan_vector_docs.truncate(limit);
        report.failed_doc_vectors.truncate(limit);
        report.stale_run_vectors.truncate(limit);
        report.orphan_artifacts.truncate(limit);
        for id in report
            .orphan_vector_docs
            .iter()
            .chain(&report.failed_doc_vectors)
        {
            vectors.delete_runs_up_to(id, horizon).await?;
        }
        for (id, _) in &report.stale_run_vectors {
            // An indexed document's other vectors are older runs': a newer run would have moved
            // the document out of `indexed`.
            if let Some(run) = states.get(id).and_then(|s| s.current_run_id) {
                vectors.delete_runs_up_to(id, run - 1).await?;
            }
        }
        for key in &report.orphan_artifacts {
            objects.delete(bucket, key).await?;
        }
    }
    tracing::info!(
        applied = apply,
        orphan_vector_docs = report.orphan_vector_docs.len(),
        stale_run_vectors = report.stale_run_vectors.len(),
        failed_doc_vectors = report.failed_doc_vectors.len(),
        orphan_artifacts = report.orphan_artifacts.len(),
        "reconcile"
    );
    Ok(report)
}
