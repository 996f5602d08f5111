//! A Milvus index that connects on first use and tries again on the next call when the connection
//! failed, so the API starts (and answers everything that does not need vectors) while Milvus is
//! down.

use docpipe_vector::{
    ChunkRecord, MilvusIndex, SearchFilters, VectorError, VectorHit, VectorIndex,
};
use tokio::sync::OnceCell;

pub struct LazyMilvus {
    url: String,
    token: Option<String>,
    collection: String,
    index: OnceCell<MilvusIndex>,
}

impl LazyMilvus {
    /// `token` is `user:password` or an API key, already resolved (not a secret's ARN).
    pub fn new(
        url: impl Into<String>,
        token: Option<String>,
        collection: impl Into<String>,
    ) -> Self {
        LazyMilvus {
            url: url.into(),
            token,
            collection: collection.into(),
            index: OnceCell::new(),
        }
    }

    async fn get(&self) -> Result<&MilvusIndex, VectorError> {
        self.index
            .get_or_try_init(|| {
                MilvusIndex::connect(&self.url, self.token.clone(), &self.collection)
            })
            .await
    }
}

#[async_trait::async_trait]
impl VectorIndex for LazyMilvus {
    fn collection(&self) -> &str {
        &self.collection
    }
    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        self.get().await?.ensure_collection(dim, model_id).await
    }
    async fn insert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.get().await?.insert(records).await
    }
    async fn set_projection(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: docpipe_vector::Projection,
        read: docpipe_vector::ReadBack,
    ) -> Result<usize, VectorError> {
        self.get()
            .await?
            .set_projection(doc_id, run_id, projection, read)
            .await
    }
    async fn upsert(&self, records: &[docpipe_vector::ChunkRecord]) -> Result<(), VectorError> {
        self.get().await?.upsert(records).await
    }

    async fn drifted(
        &self,
        expected: &[docpipe_vector::RunProjection],
    ) -> Result<Vec<String>, VectorError> {
        self.get().await?.drifted(expected).await
    }

    async fn delete_doc(&self, doc_id: &str) -> Result<(), VectorError> {
        self.get().await?.delete_doc(doc_id).await
    }
    async fn delete_other_runs(&self, doc_id: &str, keep_run: i64) -> Result<(), VectorError> {
        self.get().await?.delete_other_runs(doc_id, keep_run).await
    }
    async fn delete_run(&self, doc_id: &str, run_id: i64) -> Result<(), VectorError> {
        self.get().await?.delete_run(doc_id, run_id).await
    }
    async fn delete_run_from(
        &self,
        doc_id: &str,
        run_id: i64,
        from_chunk: i64,
    ) -> Result<(), VectorError> {
        self.get()
            .await?
            .delete_run_from(doc_id, run_id, from_chunk)
            .await
    }
    async fn delete_runs_up_to(&self, doc_id: &str, max_run: i64) -> Result<(), VectorError> {
        self.get().await?.delete_runs_up_to(doc_id, max_run).await
    }
    async fn count(&self, doc_id: &str, run_id: Option<i64>) -> Result<usize, VectorError> {
        self.get().await?.count(doc_id, run_id).await
    }
    async fn drop_collection(&self) -> Result<(), VectorError> {
        VectorIndex::drop_collection(self.get().await?).await
    }
    async fn chunk_page(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<docpipe_vector::ChunkKey>, VectorError> {
        self.get().await?.chunk_page(after, limit).await
    }
    async fn search(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.get().await?.search(vector, top_k, filters).await
    }
}
