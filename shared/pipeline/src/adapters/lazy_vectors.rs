//! A vector index that connects on first use. The DLQ function and the sweeper touch Milvus only
//! for some of what they do: connecting at init would make every give-up and every sweep wait on
//! Milvus, and a Milvus outage would keep them from starting at all, leaving give-ups unrecorded.
//! A failed connection is not remembered: the next call tries again.

use docpipe_vector::{ChunkKey, SearchFilters, VectorError, VectorHit, VectorIndex};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::OnceCell;

type Connecting = Pin<Box<dyn Future<Output = Result<Arc<dyn VectorIndex>, VectorError>> + Send>>;

pub struct LazyVectorIndex {
    collection: String,
    connect: Box<dyn Fn() -> Connecting + Send + Sync>,
    index: OnceCell<Arc<dyn VectorIndex>>,
}

impl LazyVectorIndex {
    pub fn new<F, Fut>(collection: impl Into<String>, connect: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Arc<dyn VectorIndex>, VectorError>> + Send + 'static,
    {
        LazyVectorIndex {
            collection: collection.into(),
            connect: Box::new(move || Box::pin(connect())),
            index: OnceCell::new(),
        }
    }

    async fn index(&self) -> Result<&Arc<dyn VectorIndex>, VectorError> {
        self.index.get_or_try_init(|| (self.connect)()).await
    }
}

#[async_trait::async_trait]
impl VectorIndex for LazyVectorIndex {
    fn collection(&self) -> &str {
        &self.collection
    }

    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        self.index().await?.ensure_collection(dim, model_id).await
    }

    async fn insert(&self, records: &[docpipe_vector::ChunkRecord]) -> Result<(), VectorError> {
        self.index().await?.insert(records).await
    }

    async fn set_projection(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: docpipe_vector::Projection,
        read: docpipe_vector::ReadBack,
    ) -> Result<usize, VectorError> {
        self.index()
            .await?
            .set_projection(doc_id, run_id, projection, read)
            .await
    }

    async fn upsert(&self, records: &[docpipe_vector::ChunkRecord]) -> Result<(), VectorError> {
        self.index().await?.upsert(records).await
    }

    async fn drifted(
        &self,
        expected: &[docpipe_vector::RunProjection],
    ) -> Result<Vec<String>, VectorError> {
        self.index().await?.drifted(expected).await
    }

    async fn delete_doc(&self, doc_id: &str) -> Result<(), VectorError> {
        self.index().await?.delete_doc(doc_id).await
    }

    async fn delete_other_runs(&self, doc_id: &str, keep_run: i64) -> Result<(), VectorError> {
        self.index()
            .await?
            .delete_other_runs(doc_id, keep_run)
            .await
    }

    async fn delete_run(&self, doc_id: &str, run_id: i64) -> Result<(), VectorError> {
        self.index().await?.delete_run(doc_id, run_id).await
    }

    async fn delete_run_from(
        &self,
        doc_id: &str,
        run_id: i64,
        from_chunk: i64,
    ) -> Result<(), VectorError> {
        self.index()
            .await?
            .delete_run_from(doc_id, run_id, from_chunk)
            .await
    }

    async fn delete_runs_up_to(&self, doc_id: &str, max_run: i64) -> Result<(), VectorError> {
        self.index().await?.delete_runs_up_to(doc_id, max_run).await
    }

    async fn count(&self, doc_id: &str, run_id: Option<i64>) -> Result<usize, VectorError> {
        self.index().await?.count(doc_id, run_id).await
    }

    async fn drop_collection(&self) -> Result<(), VectorError> {
        self.index().await?.drop_collection().await
    }

    async fn chunk_page(&self, after: &str, limit: usize) -> Result<Vec<ChunkKey>, VectorError> {
        self.index().await?.chunk_page(after, limit).await
    }

    async fn search(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.index().await?.search(vector, top_k, filters).await
    }
}
