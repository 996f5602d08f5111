//! Search. Milvus has no authority (seed 001): every hit is checked against PostgreSQL (the document
//! exists, is `indexed`, is not being deleted, and the hit belongs to its current run) before it is
//! returned. Stale hits are dropped and counted.

use crate::db::{Db, DbError, Type};
use docpipe_embed::{EmbedError, Embedder};
use docpipe_vector::{SearchFilters, VectorError, VectorIndex};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const MAX_TOP_K: usize = 50;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Filters {
    #[serde(default)]
    pub doc_ids: Vec<String>,
    #[serde(default)]
    pub regulation_type: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hit {
    pub doc_id: String,
    pub doc_name: String,
    pub chunk_id: String,
    pub score: f32,
    pub text: String,
    pub section_path: Vec<String>,
    pub page_start: i64,
    pub page_end: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchResult {
    pub hits: Vec<Hit>,
    /// Hits Milvus returned that PostgreSQL refused (deleted document, old run, not indexed).
    pub stale_dropped: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("the query could not be embedded")]
    Embed(#[from] EmbedError),
    #[error("the vector index is unavailable")]
    Vector(#[from] VectorError),
    #[error("the database is unavailable")]
    Db(#[from] DbError),
}

pub async fn search(
    db: &Db,
    embedder: &dyn Embedder,
    vectors: &dyn VectorIndex,
    query: &str,
    top_k: usize,
    filters: &Filters,
) -> Result<SearchResult, SearchError> {
    let top_k = top_k.clamp(1, MAX_TOP_K);
    let vector = embedder.embed_query(query).await?;
    // Ask for more than needed: some hits may be dropped by the authority check.
    let wanted = (top_k * 2 + 10).min(16_384);
    let raw = vectors
        .search(
            &vector,
            wanted,
            &SearchFilters {
                doc_ids: filters.doc_ids.clone(),
                regulation_type: filters.regulation_type.clone(),
                version: filters.version.clone(),
                tags: filters.tags.clone(),
            },
        )
        .await?;
    let mut ids: Vec<&str> = raw.iter().map(|h| h.doc_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let client = db.client().await?;
    let rows = client
        .query_typed(
            "SELECT doc_id, current_run_id, doc_name FROM documents
             WHERE doc_id = ANY($1) AND status = 'indexed' AND deleting_at IS NULL",
            &[(&ids, Type::VARCHAR_ARRAY)],
        )
        .await
        .map_err(DbError::from)?;
    let current: HashMap<String, (Option<i64>, String)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let mut hits = Vec::with_capacity(top_k);
    let mut stale_dropped = 0;
    for h in raw {
        match current.get(&h.doc_id) {
            Some((Some(run), name)) if *run == h.run_id => {
                if hits.len() < top_k {
                    hits.push(Hit {
                        doc_id: h.doc_id,
                        doc_name: name.clone(),
                        chunk_id: h.chunk_id,
                        score: h.score,
                        text: h.text,
                        section_path: h
                            .section_path
                            .split(" > ")
                            .filter(|s| !s.is_empty())
                            .map(String::from)
                            .collect(),
                        page_start: h.page_start,
                        page_end: h.page_end,
                    });
                }
            }
            _ => stale_dropped += 1,
        }
    }
    if stale_dropped > 0 {
        tracing::info!(
            stale_dropped,
            "search dropped hits PostgreSQL does not vouch for"
        );
    }
    Ok(SearchResult {
        hits,
        stale_dropped,
    })
}
