//! [`VectorIndex`] over one Milvus collection (milvus-sdk-rust, with the workarounds Milvus 2.3
//! needs): the client and the trait here; the collection's schema and set-up in [`schema`], writes
//! in [`write`], reads in [`read`].

mod project;
mod read;
mod schema;
mod write;

use read::*;
use schema::*;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use milvus::v2::prelude::{
    ClientV2, CollectionSchema, ConnectConfig, ConsistencyLevel, CreateCollectionRequest,
    CreateIndexRequest, DataType, DeleteRequest, DescribeCollectionRequest, FieldData, FieldSchema,
    HasCollectionRequest, Ids, IndexParam, IndexType, InsertRequest, LoadCollectionRequest,
    MetricType, QueryRequest, QueryResponse, RetryConfig, SearchRequest, SearchVectors,
    SingleResult, TelemetryConfig,
};

use milvus::v2::error::Error as MilvusError;

use crate::error::{is_collection_missing, is_not_loaded, VectorError};
use crate::expr::{self, quote, truncate_utf8};
use crate::{
    ChunkKey, ChunkRecord, DocRuns, Projection, RunProjection, SearchFilters, VectorHit,
    VectorIndex,
};

/// How fresh a search must be. Counts are always Strong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadConsistency {
    /// Sees every write acknowledged before the search (waits for the server to catch up).
    Strong,
    /// Sees this client's own writes.
    Session,
    /// May miss writes from the last few seconds; the cheapest for a search API whose hits
    /// are checked against PostgreSQL anyway.
    Bounded,
    Eventually,
}

impl ReadConsistency {
    fn to_milvus(self) -> ConsistencyLevel {
        match self {
            ReadConsistency::Strong => ConsistencyLevel::Strong,
            ReadConsistency::Session => ConsistencyLevel::Session,
            ReadConsistency::Bounded => ConsistencyLevel::Bounded,
            ReadConsistency::Eventually => ConsistencyLevel::Eventually,
        }
    }
}

/// Tuning for [`MilvusIndex`]. The defaults suit a Lambda: fail fast and let the queue retry,
/// rather than spend the invocation's time budget in the SDK's own retry loop.
#[derive(Debug, Clone)]
pub struct MilvusOptions {
    /// How long `connect` waits for the server to answer.
    pub connect_timeout: Duration,
    /// Deadline of one RPC attempt.
    pub rpc_timeout: Duration,
    /// Attempts per idempotent RPC, first one included (the SDK default is 75).
    pub retry_attempts: u32,
    /// Wall-clock budget across those attempts.
    pub retry_budget: Duration,
    /// Upper bound on the estimated encoded size of one insert batch.
    pub batch_max_bytes: usize,
    /// Upper bound on the rows of one insert batch.
    pub batch_max_rows: usize,
    pub search_consistency: ReadConsistency,
    /// HNSW search breadth; raised to `top_k` when smaller, as HNSW requires `ef >= k`.
    pub search_ef: usize,
    /// Rows per page when listing doc ids (at most 16,384 on Milvus 2.3).
    pub page_size: usize,
    /// How long `ensure_collection` waits for the collection to load.
    pub load_timeout: Duration,
}

impl Default for MilvusOptions {
    fn default() -> Self {
        MilvusOptions {
            connect_timeout: Duration::from_secs(10),
            rpc_timeout: Duration::from_secs(30),
            retry_attempts: 3,
            retry_budget: Duration::from_secs(20),
            // A tenth of the 64 MB gRPC limit: the estimate ignores protobuf framing, and a
            // smaller request also bounds what is lost when one times out.
            batch_max_bytes: 6 * 1024 * 1024,
            batch_max_rows: 1_000,
            search_consistency: ReadConsistency::Bounded,
            search_ef: 64,
            page_size: MAX_QUERY_WINDOW,
            load_timeout: Duration::from_secs(120),
        }
    }
}

/// [`VectorIndex`] over one Milvus collection. Cheap to clone the inner client; build one per
/// container and share it.
#[derive(Clone)]
pub struct MilvusIndex {
    client: ClientV2,
    collection: String,
    options: MilvusOptions,
    /// The (dim, model) `ensure_collection` last verified, so a warm container pays its five
    /// round trips once rather than per invocation. Cleared when the collection turns out
    /// to be gone.
    ensured: Arc<Mutex<Option<(usize, String)>>>,
    /// The collection's vector dimension once seen: Milvus 2.3 answers a query vector of the
    /// wrong length with an empty result rather than an error, so search checks it here.
    known_dim: Arc<Mutex<Option<usize>>>,
    /// The collection has the `organ_id` field: every collection docpipe creates does;
    /// one created before tenants does not, and is written and searched without it (its hits
    /// are kept to the caller's tenants by PostgreSQL's check) until a rebuild replaces it.
    has_organ: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for MilvusIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MilvusIndex")
            .field("collection", &self.collection)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl MilvusIndex {
    /// Connects with [`MilvusOptions::default`]. `token` is `user:password` or an API key.
    pub async fn connect(
        url: &str,
        token: Option<String>,
        collection: &str,
    ) -> Result<Self, VectorError> {
        Self::connect_with(url, token, collection, MilvusOptions::default()).await
    }

    pub async fn connect_with(
        url: &str,
        token: Option<String>,
        collection: &str,
        options: MilvusOptions,
    ) -> Result<Self, VectorError> {
        if collection.is_empty() {
            return Err(VectorError::rejected("connect", "collection name is empty"));
        }
        let retry = RetryConfig::new()
            .max_attempts(options.retry_attempts.max(1))
            .max_retry_timeout(options.retry_budget)
            .initial_backoff(Duration::from_millis(50))
            .max_backoff(Duration::from_secs(2));
        let mut config = ConnectConfig::new()
            .uri(url)
            .connect_timeout(options.connect_timeout)
            .rpc_timeout(options.rpc_timeout)
            .retry(retry)
            // The heartbeat calls an RPC Milvus 2.3 lacks, and a Lambda should not run
            // background tasks between invocations.
            .telemetry(TelemetryConfig::new().enabled(false));
        if let Some(token) = token.filter(|t| !t.is_empty()) {
            config = config.token(token);
        }
        let client = ClientV2::new(&config)
            .await
            .map_err(|e| VectorError::from_milvus("connect", e))?;
        Ok(MilvusIndex {
            client,
            collection: collection.to_owned(),
            options,
            ensured: Arc::new(Mutex::new(None)),
            known_dim: Arc::new(Mutex::new(None)),
            has_organ: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        })
    }

    /// Whether the collection has the `organ_id` field, as last described.
    pub fn has_organ(&self) -> bool {
        self.has_organ.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn options(&self) -> &MilvusOptions {
        &self.options
    }

    /// Drops the collection and everything in it (tests and benchmarks clean up with this).
    pub async fn drop_collection(&self) -> Result<(), VectorError> {
        let request = milvus::v2::prelude::DropCollectionRequest::builder()
            .collection_name(&self.collection)
            .build()
            .map_err(|e| VectorError::from_milvus("drop_collection", e))?;
        self.forget_ensured();
        match self.client.drop_collection(request).await {
            Ok(()) => Ok(()),
            Err(e) if is_collection_missing(&e) => Ok(()),
            Err(e) => Err(VectorError::from_milvus("drop_collection", e)),
        }
    }

    pub(super) fn forget_ensured(&self) {
        *self.ensured.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.known_dim.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Runs a call that needs the collection loaded (a query, a search, a delete by
    /// expression); `None` when the collection does not exist. Milvus answers "not loaded"
    /// between another caller's create and load (a delete racing the first index of a fresh
    /// collection) and after an operator's release. Both end the same way: make it loadable
    /// (creating an identical index is a no-op) and load it, then ask once more.
    pub(super) async fn when_loaded<T, F, Fut>(
        &self,
        op: &'static str,
        call: F,
    ) -> Result<Option<T>, VectorError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, MilvusError>>,
    {
        match call().await {
            Ok(answer) => return Ok(Some(answer)),
            Err(e) if is_collection_missing(&e) => return Ok(None),
            Err(e) if is_not_loaded(&e) => {
                tracing::info!(collection = %self.collection, op, "collection not loaded; loading it");
            }
            Err(e) => return Err(VectorError::from_milvus(op, e)),
        }
        self.create_indexes().await?;
        self.load().await?;
        match call().await {
            Ok(answer) => Ok(Some(answer)),
            Err(e) if is_collection_missing(&e) => Ok(None),
            Err(e) => Err(VectorError::from_milvus(op, e)),
        }
    }

    pub(super) fn missing(&self) -> VectorError {
        self.forget_ensured();
        VectorError::MissingCollection {
            collection: self.collection.clone(),
        }
    }
}

#[async_trait::async_trait]
impl VectorIndex for MilvusIndex {
    fn collection(&self) -> &str {
        &self.collection
    }

    async fn drop_collection(&self) -> Result<(), VectorError> {
        MilvusIndex::drop_collection(self).await
    }
    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        self.ensure(dim, model_id).await
    }

    async fn insert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.insert_records(records).await
    }

    async fn set_projection(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: Projection,
        read: crate::ReadBack,
    ) -> Result<usize, VectorError> {
        self.project_run(doc_id, run_id, projection, read).await
    }

    async fn drifted(&self, expected: &[RunProjection]) -> Result<Vec<String>, VectorError> {
        self.drifted_runs(expected).await
    }

    async fn upsert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        self.upsert_records("upsert", records).await
    }

    async fn delete_doc(&self, doc_id: &str) -> Result<(), VectorError> {
        self.delete_where("delete_doc", expr::doc_eq(doc_id)).await
    }

    async fn delete_other_runs(&self, doc_id: &str, keep_run: i64) -> Result<(), VectorError> {
        let filter = format!("{} and {F_RUN_ID} != {keep_run}", expr::doc_eq(doc_id));
        self.delete_where("delete_other_runs", filter).await
    }

    async fn delete_run(&self, doc_id: &str, run_id: i64) -> Result<(), VectorError> {
        let filter = format!("{} and {F_RUN_ID} == {run_id}", expr::doc_eq(doc_id));
        self.delete_where("delete_run", filter).await
    }

    async fn delete_run_from(
        &self,
        doc_id: &str,
        run_id: i64,
        from_chunk: i64,
    ) -> Result<(), VectorError> {
        let filter = format!(
            "{} and {F_RUN_ID} == {run_id} and {F_CHUNK_INDEX} >= {from_chunk}",
            expr::doc_eq(doc_id)
        );
        self.delete_where("delete_run_from", filter).await
    }

    async fn delete_runs_up_to(&self, doc_id: &str, max_run: i64) -> Result<(), VectorError> {
        let filter = format!("{} and {F_RUN_ID} <= {max_run}", expr::doc_eq(doc_id));
        self.delete_where("delete_runs_up_to", filter).await
    }

    async fn count(&self, doc_id: &str, run_id: Option<i64>) -> Result<usize, VectorError> {
        self.count_vectors(doc_id, run_id).await
    }

    async fn chunk_page(&self, after: &str, limit: usize) -> Result<Vec<ChunkKey>, VectorError> {
        self.page_of_chunks(after, limit).await
    }

    async fn doc_runs(&self) -> Result<DocRuns, VectorError> {
        crate::doc_runs_in_pages(self, self.options.page_size).await
    }

    async fn search(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.search_vectors(vector, top_k, filters).await
    }
}
