//! Which collection a function reads and writes, as PostgreSQL says ([`docpipe_db::generations`]),
//! read at most every [`STALE_AFTER`]: a search embeds its query with the embedder of the
//! collection it reads, an index delivery writes one collection with its embedder, and whatever
//! removes vectors or rewrites their version state does so in every collection still written to
//! (the one being built, the one retired in its grace period), so a rebuild misses no delete.

use docpipe_db::generations::{self, Generation, State};
use docpipe_db::{Db, DbError};
use docpipe_embed::{EmbedError, Embedder};
use docpipe_vector::{
    ChunkKey, ChunkRecord, Projection, ReadBack, RunProjection, SearchFilters, VectorError,
    VectorHit, VectorIndex,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How old a function's idea of the generations may be. A switch retires the old collection
/// for a grace period far longer, so a reader that still reads it finds it whole.
pub const STALE_AFTER: Duration = Duration::from_secs(2);

pub type OpenCollection = Arc<dyn Fn(&str) -> Arc<dyn VectorIndex> + Send + Sync>;
pub type OpenEmbedder =
    Arc<dyn Fn(&serde_json::Value) -> Result<Arc<dyn Embedder>, EmbedError> + Send + Sync>;

/// A collection and the embedder of its vectors.
#[derive(Clone)]
pub struct Side {
    /// `None`: the collection the function is configured with, before any generation was recorded.
    pub generation: Option<i64>,
    pub vectors: Arc<dyn VectorIndex>,
    pub embedder: Arc<dyn Embedder>,
}

/// What one request or delivery works with, read once.
#[derive(Clone)]
pub struct Snapshot {
    pub active: Side,
    /// The generation being built (or built and waiting for its switch).
    pub next: Option<(Generation, Side)>,
    /// Every other collection still written to (next, retired), which removals reach too.
    pub also: Vec<Arc<dyn VectorIndex>>,
}

impl Snapshot {
    /// Reads and inserts the active collection; removes and rewrites version states everywhere.
    pub fn vectors(&self) -> FanOut {
        FanOut {
            active: self.active.vectors.clone(),
            also: self.also.clone(),
        }
    }
}

pub struct Generations {
    db: Db,
    configured: Side,
    open_collection: OpenCollection,
    open_embedder: OpenEmbedder,
    cache: tokio::sync::Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    read_at: Option<Instant>,
    snapshot: Option<Arc<Snapshot>>,
    collections: HashMap<String, Arc<dyn VectorIndex>>,
    embedders: HashMap<i64, Arc<dyn Embedder>>,
}

impl Generations {
    pub fn new(
        db: Db,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        open_collection: OpenCollection,
        open_embedder: OpenEmbedder,
    ) -> Self {
        Generations {
            db,
            configured: Side {
                generation: None,
                vectors,
                embedder,
            },
            open_collection,
            open_embedder,
            cache: Default::default(),
        }
    }

    /// For a function that only removes vectors (the sweeper, the DLQ function): no embedder.
    pub fn vectors_only(
        db: Db,
        vectors: Arc<dyn VectorIndex>,
        open_collection: OpenCollection,
    ) -> Self {
        Generations::new(
            db,
            vectors,
            Arc::new(NoEmbedder),
            open_collection,
            Arc::new(|_: &serde_json::Value| Ok(Arc::new(NoEmbedder) as Arc<dyn Embedder>)),
        )
    }

    /// A collection by name, opened once (a drop of a retired or cancelled one).
    pub async fn collection_named(&self, name: &str) -> Arc<dyn VectorIndex> {
        let mut cache = self.cache.lock().await;
        self.collection(&mut cache, name)
    }

    /// Embedders built from their recorded settings over the process environment.
    pub fn embedders_from_env() -> OpenEmbedder {
        Arc::new(|settings: &serde_json::Value| {
            let settings = settings.clone();
            docpipe_embed::from_vars(move |key| {
                settings
                    .get(key)
                    .and_then(|v| v.as_str())
                    .map(String::from)
                    .or_else(|| std::env::var(key).ok())
            })
        })
    }

    /// The collection and embedder the function was configured with.
    pub fn configured(&self) -> &Side {
        &self.configured
    }

    /// The generations as PostgreSQL said at most [`STALE_AFTER`] ago. A database that cannot be
    /// read fails the caller (it could not check its hits either).
    pub async fn snapshot(&self) -> Result<Arc<Snapshot>, SnapshotError> {
        let mut cache = self.cache.lock().await;
        if let (Some(at), Some(s)) = (cache.read_at, &cache.snapshot) {
            if at.elapsed() < STALE_AFTER {
                return Ok(s.clone());
            }
        }
        let rows = {
            let client = self.db.client().await?;
            generations::written(&**client).await?
        };
        let snapshot = Arc::new(self.assemble(&mut cache, &rows)?);
        cache.read_at = Some(Instant::now());
        cache.snapshot = Some(snapshot.clone());
        Ok(snapshot)
    }

    fn assemble(&self, cache: &mut Cache, rows: &[Generation]) -> Result<Snapshot, SnapshotError> {
        let mut active = self.configured.clone();
        let mut next = None;
        let mut also = Vec::new();
        for g in rows {
            let vectors = self.collection(cache, &g.collection);
            match g.state {
                State::Active => {
                    active = Side {
                        generation: Some(g.generation_id),
                        embedder: self.embedder(cache, g)?,
                        vectors,
                    }
                }
                State::Building | State::Ready => {
                    also.push(vectors.clone());
                    next = Some((
                        g.clone(),
                        Side {
                            generation: Some(g.generation_id),
                            embedder: self.embedder(cache, g)?,
                            vectors,
                        },
                    ));
                }
                _ => also.push(vectors),
            }
        }
        also.retain(|v| v.collection() != active.vectors.collection());
        Ok(Snapshot { active, next, also })
    }

    fn collection(&self, cache: &mut Cache, name: &str) -> Arc<dyn VectorIndex> {
        if name == self.configured.vectors.collection() {
            return self.configured.vectors.clone();
        }
        cache
            .collections
            .entry(name.to_string())
            .or_insert_with(|| (self.open_collection)(name))
            .clone()
    }

    fn embedder(
        &self,
        cache: &mut Cache,
        g: &Generation,
    ) -> Result<Arc<dyn Embedder>, SnapshotError> {
        if g.collection == self.configured.vectors.collection() {
            return Ok(self.configured.embedder.clone());
        }
        if let Some(e) = cache.embedders.get(&g.generation_id) {
            return Ok(e.clone());
        }
        let e = (self.open_embedder)(&g.embedder).map_err(|e| SnapshotError::Embedder {
            generation: g.generation_id,
            source: e,
        })?;
        cache.embedders.insert(g.generation_id, e.clone());
        Ok(e)
    }

    /// Reads again at the next call (a switch or a start this process made itself).
    pub async fn forget(&self) {
        self.cache.lock().await.read_at = None;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read which collection search reads")]
    Db(#[from] DbError),
    #[error("cannot build the embedder of generation {generation}")]
    Embedder {
        generation: i64,
        #[source]
        source: EmbedError,
    },
}

/// What a function that embeds nothing holds in the embedder's place.
struct NoEmbedder;

#[async_trait::async_trait]
impl Embedder for NoEmbedder {
    fn model_id(&self) -> &str {
        "none"
    }
    fn dimension(&self) -> usize {
        0
    }
    async fn embed_passages(&self, _: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::config(
            "DOCPIPE_EMBEDDER",
            "this function embeds nothing",
        ))
    }
    async fn embed_query(&self, _: &str) -> Result<Vec<f32>, EmbedError> {
        Err(EmbedError::config(
            "DOCPIPE_EMBEDDER",
            "this function embeds nothing",
        ))
    }
}

/// The active collection for reads and inserts; removals and version states reach every
/// collection still written to. A collection that went missing (dropped meanwhile) counts as done,
/// as [`VectorIndex`] says of removals.
#[derive(Clone)]
pub struct FanOut {
    active: Arc<dyn VectorIndex>,
    also: Vec<Arc<dyn VectorIndex>>,
}

impl FanOut {
    pub fn of(active: Arc<dyn VectorIndex>) -> Self {
        FanOut {
            active,
            also: Vec::new(),
        }
    }

    async fn everywhere<'a, F, Fut>(&'a self, op: F) -> Result<(), VectorError>
    where
        F: Fn(&'a dyn VectorIndex) -> Fut,
        Fut: std::future::Future<Output = Result<(), VectorError>> + 'a,
    {
        op(self.active.as_ref()).await?;
        for other in &self.also {
            match op(other.as_ref()).await {
                Ok(()) | Err(VectorError::MissingCollection { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl VectorIndex for FanOut {
    fn collection(&self) -> &str {
        self.active.collection()
    }
    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        self.active.ensure_collection(dim, model_id).await
    }
    async fn insert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.active.insert(records).await
    }
    async fn set_projection(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: Projection,
        read: ReadBack,
    ) -> Result<usize, VectorError> {
        let rewrote = self
            .active
            .set_projection(doc_id, run_id, projection, read)
            .await?;
        for other in &self.also {
            match other
                .set_projection(doc_id, run_id, projection, ReadBack::Wait)
                .await
            {
                Ok(_) | Err(VectorError::MissingCollection { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rewrote)
    }
    async fn upsert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.active.upsert(records).await
    }
    async fn drifted(&self, expected: &[RunProjection]) -> Result<Vec<String>, VectorError> {
        self.active.drifted(expected).await
    }
    async fn delete_doc(&self, doc_id: &str) -> Result<(), VectorError> {
        self.everywhere(|v| v.delete_doc(doc_id)).await
    }
    async fn delete_other_runs(&self, doc_id: &str, keep_run: i64) -> Result<(), VectorError> {
        self.everywhere(|v| v.delete_other_runs(doc_id, keep_run))
            .await
    }
    async fn delete_run(&self, doc_id: &str, run_id: i64) -> Result<(), VectorError> {
        self.everywhere(|v| v.delete_run(doc_id, run_id)).await
    }
    async fn delete_run_from(
        &self,
        doc_id: &str,
        run_id: i64,
        from_chunk: i64,
    ) -> Result<(), VectorError> {
        // What an interrupted attempt inserted, which only the active collection received.
        self.active
            .delete_run_from(doc_id, run_id, from_chunk)
            .await
    }
    async fn delete_runs_up_to(&self, doc_id: &str, max_run: i64) -> Result<(), VectorError> {
        self.everywhere(|v| v.delete_runs_up_to(doc_id, max_run))
            .await
    }
    async fn count(&self, doc_id: &str, run_id: Option<i64>) -> Result<usize, VectorError> {
        self.active.count(doc_id, run_id).await
    }
    async fn chunk_page(&self, after: &str, limit: usize) -> Result<Vec<ChunkKey>, VectorError> {
        self.active.chunk_page(after, limit).await
    }
    async fn drop_collection(&self) -> Result<(), VectorError> {
        self.active.drop_collection().await
    }
    async fn search(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.active.search(vector, top_k, filters).await
    }
}

/// Every function's vectors when it holds no snapshot of its own (the sweeper, the DLQ, the
/// clean-ups): each call reads the generations (cached) and fans out as [`FanOut`] does.
pub struct LiveVectors {
    generations: Arc<Generations>,
}

impl LiveVectors {
    pub fn new(generations: Arc<Generations>) -> Self {
        LiveVectors { generations }
    }

    async fn now(&self) -> Result<FanOut, VectorError> {
        self.generations
            .snapshot()
            .await
            .map(|s| s.vectors())
            .map_err(|e| VectorError::Unavailable {
                op: "generations",
                source: Box::new(e),
            })
    }
}

#[async_trait::async_trait]
impl VectorIndex for LiveVectors {
    fn collection(&self) -> &str {
        self.generations.configured.vectors.collection()
    }
    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        self.now().await?.ensure_collection(dim, model_id).await
    }
    async fn insert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.now().await?.insert(records).await
    }
    async fn set_projection(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: Projection,
        read: ReadBack,
    ) -> Result<usize, VectorError> {
        self.now()
            .await?
            .set_projection(doc_id, run_id, projection, read)
            .await
    }
    async fn upsert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.now().await?.upsert(records).await
    }
    async fn drifted(&self, expected: &[RunProjection]) -> Result<Vec<String>, VectorError> {
        self.now().await?.drifted(expected).await
    }
    async fn delete_doc(&self, doc_id: &str) -> Result<(), VectorError> {
        self.now().await?.delete_doc(doc_id).await
    }
    async fn delete_other_runs(&self, doc_id: &str, keep_run: i64) -> Result<(), VectorError> {
        self.now().await?.delete_other_runs(doc_id, keep_run).await
    }
    async fn delete_run(&self, doc_id: &str, run_id: i64) -> Result<(), VectorError> {
        self.now().await?.delete_run(doc_id, run_id).await
    }
    async fn delete_run_from(
        &self,
        doc_id: &str,
        run_id: i64,
        from_chunk: i64,
    ) -> Result<(), VectorError> {
        self.now()
            .await?
            .delete_run_from(doc_id, run_id, from_chunk)
            .await
    }
    async fn delete_runs_up_to(&self, doc_id: &str, max_run: i64) -> Result<(), VectorError> {
        self.now().await?.delete_runs_up_to(doc_id, max_run).await
    }
    async fn count(&self, doc_id: &str, run_id: Option<i64>) -> Result<usize, VectorError> {
        self.now().await?.count(doc_id, run_id).await
    }
    async fn chunk_page(&self, after: &str, limit: usize) -> Result<Vec<ChunkKey>, VectorError> {
        self.now().await?.chunk_page(after, limit).await
    }
    async fn drop_collection(&self) -> Result<(), VectorError> {
        self.now().await?.drop_collection().await
    }
    async fn search(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.now().await?.search(vector, top_k, filters).await
    }
}
