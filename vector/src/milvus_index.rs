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
use crate::{ChunkKey, ChunkRecord, DocRuns, SearchFilters, VectorHit, VectorIndex};

const F_CHUNK_ID: &str = "chunk_id";
const F_DOC_ID: &str = "doc_id";
const F_RUN_ID: &str = "run_id";
const F_CHUNK_INDEX: &str = "chunk_index";
const F_DOC_NAME: &str = "doc_name";
const F_REGULATION_TYPE: &str = "regulation_type";
const F_VERSION: &str = "version";
const F_SECTION_PATH: &str = "section_path";
const F_SECTION_TITLE: &str = "section_title";
const F_PAGE_START: &str = "page_start";
const F_PAGE_END: &str = "page_end";
const F_TEXT: &str = "text";
const F_TAGS: &str = "tags";
const F_EMBEDDING: &str = "embedding";

// Byte limits, as Milvus counts VarChar max_length in bytes.
use crate::limits::{
    DOC_NAME_BYTES as MAX_DOC_NAME, ID_BYTES as MAX_ID,
    REGULATION_TYPE_BYTES as MAX_REGULATION_TYPE, SECTION_PATH_BYTES as MAX_SECTION_PATH,
    SECTION_TITLE_BYTES as MAX_SECTION_TITLE, TAGS as MAX_TAGS, TAG_BYTES as MAX_TAG,
    TEXT_BYTES as MAX_TEXT, VERSION_BYTES as MAX_VERSION,
};

const HNSW_M: &str = "16";
const HNSW_EF_CONSTRUCTION: &str = "200";

/// Records the embedding model in the collection description, so a deployment that switches
/// models cannot silently mix two vector spaces in one collection.
const MODEL_MARKER: &str = "embedding_model=";

/// Milvus 2.3 refuses a query whose limit + offset exceeds this (`maxQueryResultWindow`).
const MAX_QUERY_WINDOW: usize = 16_384;

const HIT_FIELDS: [&str; 9] = [
    F_CHUNK_ID,
    F_DOC_ID,
    F_RUN_ID,
    F_TEXT,
    F_SECTION_PATH,
    F_SECTION_TITLE,
    F_PAGE_START,
    F_PAGE_END,
    F_DOC_NAME,
];

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
        })
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

    fn forget_ensured(&self) {
        *self.ensured.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.known_dim.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// `None` when the collection does not exist.
    async fn collection_dim(&self) -> Result<Option<usize>, VectorError> {
        if let Some(dim) = *self.known_dim.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(Some(dim));
        }
        let request = DescribeCollectionRequest::builder()
            .collection_name(&self.collection)
            .build()
            .map_err(|e| VectorError::from_milvus("describe_collection", e))?;
        let response = match self.client.describe_collection(request).await {
            Ok(response) => response,
            Err(e) if is_collection_missing(&e) => return Ok(None),
            Err(e) => return Err(VectorError::from_milvus("describe_collection", e)),
        };
        let dim = response
            .description()
            .get_schema()
            .get_fields()
            .iter()
            .find(|f| f.get_name() == F_EMBEDDING)
            .map(|f| f.get_dimension() as usize)
            .ok_or_else(|| VectorError::Mismatch {
                collection: self.collection.clone(),
                detail: format!("it has no `{F_EMBEDDING}` field"),
            })?;
        *self.known_dim.lock().unwrap_or_else(|e| e.into_inner()) = Some(dim);
        Ok(Some(dim))
    }

    fn is_ensured(&self, dim: usize, model_id: &str) -> bool {
        let ensured = self.ensured.lock().unwrap_or_else(|e| e.into_inner());
        matches!(&*ensured, Some((d, m)) if *d == dim && m == model_id)
    }

    async fn has_collection(&self) -> Result<bool, VectorError> {
        let request = HasCollectionRequest::builder()
            .collection_name(&self.collection)
            .build()
            .map_err(|e| VectorError::from_milvus("has_collection", e))?;
        self.client
            .has_collection(request)
            .await
            .map(|r| r.exists())
            .map_err(|e| VectorError::from_milvus("has_collection", e))
    }

    fn schema(dim: usize) -> CollectionSchema {
        let varchar = |name: &str, max: usize| {
            FieldSchema::new()
                .name(name)
                .data_type(DataType::VarChar)
                .max_length(max as u32)
        };
        let int64 = |name: &str| FieldSchema::new().name(name).data_type(DataType::Int64);
        CollectionSchema::new()
            .enable_dynamic_field(false)
            .add_field(varchar(F_CHUNK_ID, MAX_ID).primary_key(true).auto_id(false))
            .add_field(varchar(F_DOC_ID, MAX_ID))
            .add_field(int64(F_RUN_ID))
            .add_field(int64(F_CHUNK_INDEX))
            .add_field(varchar(F_DOC_NAME, MAX_DOC_NAME))
            .add_field(varchar(F_REGULATION_TYPE, MAX_REGULATION_TYPE))
            .add_field(varchar(F_VERSION, MAX_VERSION))
            .add_field(varchar(F_SECTION_PATH, MAX_SECTION_PATH))
            .add_field(varchar(F_SECTION_TITLE, MAX_SECTION_TITLE))
            .add_field(int64(F_PAGE_START))
            .add_field(int64(F_PAGE_END))
            .add_field(varchar(F_TEXT, MAX_TEXT))
            .add_field(
                FieldSchema::new()
                    .name(F_TAGS)
                    .data_type(DataType::Array)
                    .element_type(DataType::VarChar)
                    .max_capacity(MAX_TAGS as u32)
                    .max_length(MAX_TAG as u32),
            )
            .add_field(
                FieldSchema::new()
                    .name(F_EMBEDDING)
                    .data_type(DataType::FloatVector)
                    .dimension(dim as u32),
            )
    }

    fn description(dim: usize, model_id: &str) -> String {
        format!("docpipe chunk vectors; dim={dim}; {MODEL_MARKER}{model_id}")
    }

    /// Compares an existing collection with what this code would have created.
    async fn verify(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        let request = DescribeCollectionRequest::builder()
            .collection_name(&self.collection)
            .build()
            .map_err(|e| VectorError::from_milvus("describe_collection", e))?;
        let response = self
            .client
            .describe_collection(request)
            .await
            .map_err(|e| VectorError::from_milvus("describe_collection", e))?;
        let desc = response.description();
        let mismatch = |detail: String| VectorError::Mismatch {
            collection: self.collection.clone(),
            detail,
        };

        let schema = desc.get_schema();
        let description = if desc.get_description().is_empty() {
            schema.get_description()
        } else {
            desc.get_description()
        };
        match description.split_once(MODEL_MARKER) {
            Some((_, recorded)) if recorded == model_id => {}
            Some((_, recorded)) => {
                return Err(mismatch(format!(
                    "it holds vectors of embedding model `{recorded}`, not `{model_id}`"
                )))
            }
            None => {
                return Err(mismatch(format!(
                    "its description records no embedding model (`{description}`); \
                     it was not created by docpipe"
                )))
            }
        }

        let found: HashMap<&str, &FieldSchema> = schema
            .get_fields()
            .iter()
            .map(|f| (f.get_name(), f))
            .collect();
        for expected in Self::schema(dim).get_fields() {
            let Some(actual) = found.get(expected.get_name()) else {
                return Err(mismatch(format!(
                    "field `{}` is missing",
                    expected.get_name()
                )));
            };
            if actual.get_data_type() != expected.get_data_type() {
                return Err(mismatch(format!(
                    "field `{}` is {:?}, expected {:?}",
                    expected.get_name(),
                    actual.get_data_type(),
                    expected.get_data_type()
                )));
            }
            if actual.is_primary_key() != expected.is_primary_key() {
                return Err(mismatch(format!(
                    "field `{}` primary key: {}, expected {}",
                    expected.get_name(),
                    actual.is_primary_key(),
                    expected.is_primary_key()
                )));
            }
        }
        let actual_dim = found
            .get(F_EMBEDDING)
            .map(|f| f.get_dimension())
            .unwrap_or_default();
        *self.known_dim.lock().unwrap_or_else(|e| e.into_inner()) = Some(actual_dim as usize);
        if actual_dim as usize != dim {
            return Err(mismatch(format!(
                "its vectors have dimension {actual_dim}, not {dim}"
            )));
        }
        Ok(())
    }

    async fn create_indexes(&self) -> Result<(), VectorError> {
        let hnsw = IndexParam::new()
            .field_name(F_EMBEDDING)
            .index_name(F_EMBEDDING)
            .index_type(IndexType::Hnsw)
            .metric_type(MetricType::Cosine)
            .extra_params(HashMap::from([
                ("M".to_owned(), HNSW_M.to_owned()),
                ("efConstruction".to_owned(), HNSW_EF_CONSTRUCTION.to_owned()),
            ]));
        // Trie, not INVERTED: Milvus 2.3 has no inverted scalar index.
        let trie = IndexParam::new()
            .field_name(F_DOC_ID)
            .index_name(F_DOC_ID)
            .index_type(IndexType::Trie);
        let request = CreateIndexRequest::builder()
            .collection_name(&self.collection)
            .index_params(vec![hnsw, trie])
            // Loading does not need the build to finish; segments get indexed as they seal.
            .sync(false)
            .build()
            .map_err(|e| VectorError::from_milvus("create_index", e))?;
        // Milvus answers success when an identical index exists, so a racing caller is fine;
        // an index with other parameters is refused.
        self.client
            .create_index(request)
            .await
            .map_err(|e| VectorError::from_milvus("create_index", e))
    }

    async fn load(&self) -> Result<(), VectorError> {
        let request = LoadCollectionRequest::builder()
            .collection_name(&self.collection)
            .sync(true)
            .timeout_ms(self.options.load_timeout.as_millis() as i64)
            .build()
            .map_err(|e| VectorError::from_milvus("load_collection", e))?;
        self.client
            .load_collection(request)
            .await
            .map_err(|e| VectorError::from_milvus("load_collection", e))
    }

    async fn delete_where(&self, op: &'static str, filter: String) -> Result<(), VectorError> {
        // Nothing was ever stored when the collection is missing: the delete's goal holds.
        self.when_loaded(op, || async {
            let request = DeleteRequest::builder()
                .collection_name(&self.collection)
                .filter(filter.clone())
                .build()?;
            self.client.delete(request).await
        })
        .await
        .map(|_| ())
    }

    async fn query(
        &self,
        op: &'static str,
        filter: String,
        output_fields: &[&str],
        limit: Option<usize>,
    ) -> Result<Option<QueryResponse>, VectorError> {
        self.when_loaded(op, || async {
            let mut builder = QueryRequest::builder()
                .collection_name(&self.collection)
                .filter(filter.clone())
                .output_fields(output_fields.iter().copied())
                .consistency_level(ConsistencyLevel::Strong);
            if let Some(limit) = limit {
                builder = builder.limit(limit as i64);
            }
            self.client.query(builder.build()?).await
        })
        .await
    }

    /// Runs a call that needs the collection loaded (a query, a search, a delete by
    /// expression); `None` when the collection does not exist. Milvus answers "not loaded"
    /// between another caller's create and load (a delete racing the first index of a fresh
    /// collection) and after an operator's release. Both end the same way: make it loadable
    /// (creating an identical index is a no-op) and load it, then ask once more.
    async fn when_loaded<T, F, Fut>(
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

    fn missing(&self) -> VectorError {
        self.forget_ensured();
        VectorError::MissingCollection {
            collection: self.collection.clone(),
        }
    }

    fn batches<'a>(&self, records: &'a [ChunkRecord]) -> Vec<&'a [ChunkRecord]> {
        split_batches(
            records,
            self.options.batch_max_bytes,
            self.options.batch_max_rows,
        )
    }

    async fn insert_batch(&self, batch: &[ChunkRecord]) -> Result<(), VectorError> {
        let request = InsertRequest::builder()
            .collection_name(&self.collection)
            .columns(columns(batch))
            .build()
            .map_err(|e| VectorError::from_milvus("insert", e))?;
        match self.client.insert(request).await {
            // The pipeline trusts an acknowledged insert instead of reading it back, so the
            // acknowledgement must cover every row.
            Ok(response) if response.insert_count() == batch.len() as i64 => Ok(()),
            Ok(response) => Err(VectorError::Unavailable {
                op: "insert",
                source: format!(
                    "Milvus acknowledged {} of {} rows",
                    response.insert_count(),
                    batch.len()
                )
                .into(),
            }),
            // Dropped under us: transient, so the retry's ensure_collection recreates it.
            Err(e) if is_collection_missing(&e) => {
                self.forget_ensured();
                Err(VectorError::Unavailable {
                    op: "insert",
                    source: Box::new(e),
                })
            }
            Err(e) => Err(VectorError::from_milvus("insert", e)),
        }
    }
}

#[async_trait::async_trait]
impl VectorIndex for MilvusIndex {
    fn collection(&self) -> &str {
        &self.collection
    }

    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
        if dim == 0 || dim > 32_768 {
            return Err(VectorError::rejected(
                "ensure_collection",
                format!("vector dimension {dim} is outside 1..=32768"),
            ));
        }
        if model_id.is_empty() {
            return Err(VectorError::rejected(
                "ensure_collection",
                "embedding model id is empty",
            ));
        }
        if self.is_ensured(dim, model_id) {
            return Ok(());
        }
        if !self.has_collection().await? {
            let request = CreateCollectionRequest::builder()
                .collection_name(&self.collection)
                .description(Self::description(dim, model_id))
                .schema(Self::schema(dim).description(Self::description(dim, model_id)))
                .build()
                .map_err(|e| VectorError::from_milvus("create_collection", e))?;
            if let Err(error) = self.client.create_collection(request).await {
                let error = VectorError::from_milvus("create_collection", error);
                // Lost a race: someone else created it between our check and our create
                // (Milvus says "already exists" or, for an identical schema, nothing).
                if error.is_transient() || !self.has_collection().await? {
                    return Err(error);
                }
                tracing::debug!(collection = %self.collection, "collection created concurrently");
            } else {
                tracing::info!(collection = %self.collection, dim, model_id, "created collection");
            }
        }
        self.verify(dim, model_id).await?;
        self.create_indexes().await?;
        self.load().await?;
        *self.ensured.lock().unwrap_or_else(|e| e.into_inner()) = Some((dim, model_id.to_owned()));
        Ok(())
    }

    async fn insert(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        validate(records)?;
        for batch in self.batches(records) {
            self.insert_batch(batch).await?;
        }
        Ok(())
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
        let mut filter = expr::doc_eq(doc_id);
        if let Some(run_id) = run_id {
            filter.push_str(&format!(" and {F_RUN_ID} == {run_id}"));
        }
        let Some(response) = self.query("count", filter, &["count(*)"], None).await? else {
            return Ok(0);
        };
        match response.results().get_output_field("count(*)") {
            Some(FieldData::Int64 { values, .. }) => {
                Ok(values.first().copied().unwrap_or(0).max(0) as usize)
            }
            other => Err(VectorError::rejected(
                "count",
                format!("unexpected count(*) column: {other:?}"),
            )),
        }
    }

    async fn chunk_page(&self, after: &str, limit: usize) -> Result<Vec<ChunkKey>, VectorError> {
        let limit = limit.clamp(1, MAX_QUERY_WINDOW);
        // Milvus returns a limited query in primary-key order (2.3's query iterator relies on
        // it), so a key cursor pages through without offsets, whose window is capped.
        let filter = if after.is_empty() {
            format!("{F_CHUNK_ID} >= \"\"")
        } else {
            format!("{F_CHUNK_ID} > {}", quote(after))
        };
        let Some(response) = self
            .query(
                "chunk_page",
                filter,
                &[F_CHUNK_ID, F_DOC_ID, F_RUN_ID],
                Some(limit),
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        let results = response.results();
        let chunk_ids = varchar_column("chunk_page", results.get_output_field(F_CHUNK_ID))?;
        let doc_ids = varchar_column("chunk_page", results.get_output_field(F_DOC_ID))?;
        let run_ids = int64_column("chunk_page", results.get_output_field(F_RUN_ID))?;
        let mut keys: Vec<ChunkKey> = chunk_ids
            .iter()
            .zip(doc_ids)
            .zip(run_ids)
            .map(|((chunk_id, doc_id), run_id)| ChunkKey {
                chunk_id: chunk_id.clone(),
                doc_id: doc_id.clone(),
                run_id: *run_id,
            })
            .collect();
        keys.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
        Ok(keys)
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
        if top_k == 0 {
            return Ok(Vec::new());
        }
        if vector.is_empty() {
            return Err(VectorError::rejected("search", "query vector is empty"));
        }
        match self.collection_dim().await? {
            Some(dim) if dim != vector.len() => {
                return Err(VectorError::rejected(
                    "search",
                    format!(
                        "query vector has {} dimensions, the collection {dim}",
                        vector.len()
                    ),
                ))
            }
            Some(_) => {}
            None => return Err(self.missing()),
        }
        let top_k = top_k.min(MAX_QUERY_WINDOW);
        let ef = self.options.search_ef.max(top_k);
        let mut builder = SearchRequest::builder()
            .collection_name(&self.collection)
            .vector_field(F_EMBEDDING)
            .vectors(SearchVectors::Float(vec![vector.to_vec()]))
            .output_fields(HIT_FIELDS)
            .limit(top_k as i64)
            .metric_type(MetricType::Cosine)
            .extra_params(HashMap::from([("ef".to_owned(), ef.to_string())]))
            .consistency_level(self.options.search_consistency.to_milvus());
        if let Some(filter) = expr::search_filter(filters) {
            builder = builder.filter(filter);
        }
        let request = builder
            .build()
            .map_err(|e| VectorError::from_milvus("search", e))?;
        let search = || async { self.client.search(request.clone()).await };
        let Some(response) = self.when_loaded("search", search).await? else {
            return Err(self.missing());
        };
        match response.results().get_results().first() {
            Some(result) => hits(result),
            None => Ok(Vec::new()),
        }
    }
}

/// Reads hits column by column: `SingleResult::rows()` needs the primary-key and score field
/// names, which Milvus 2.3 does not send (`primary-key or score field name is empty`).
fn hits(result: &SingleResult) -> Result<Vec<VectorHit>, VectorError> {
    const OP: &str = "search";
    let scores = result.get_scores();
    let n = scores.len();
    if n == 0 {
        // An empty result carries no output columns at all.
        return Ok(Vec::new());
    }
    let chunk_ids = match result.get_ids() {
        Ids::VarChar(ids) => ids.as_slice(),
        _ => {
            return Err(VectorError::rejected(
                OP,
                "collection has an integer primary key; expected VarChar chunk ids",
            ))
        }
    };
    let col_s = |name: &str| varchar_column(OP, result.get_output_field(name));
    let col_i = |name: &str| int64_column(OP, result.get_output_field(name));
    let doc_id = col_s(F_DOC_ID)?;
    let run_id = col_i(F_RUN_ID)?;
    let text = col_s(F_TEXT)?;
    let section_path = col_s(F_SECTION_PATH)?;
    let section_title = col_s(F_SECTION_TITLE)?;
    let page_start = col_i(F_PAGE_START)?;
    let page_end = col_i(F_PAGE_END)?;
    let doc_name = col_s(F_DOC_NAME)?;
    let lengths = [
        chunk_ids.len(),
        doc_id.len(),
        run_id.len(),
        text.len(),
        section_path.len(),
        section_title.len(),
        page_start.len(),
        page_end.len(),
        doc_name.len(),
    ];
    if lengths.iter().any(|&len| len != n) {
        return Err(VectorError::rejected(
            OP,
            format!("search result columns disagree in length: {n} scores, columns {lengths:?}"),
        ));
    }
    Ok((0..n)
        .map(|i| VectorHit {
            chunk_id: chunk_ids[i].clone(),
            doc_id: doc_id[i].clone(),
            run_id: run_id[i],
            score: scores[i],
            text: text[i].clone(),
            section_path: section_path[i].clone(),
            section_title: section_title[i].clone(),
            page_start: page_start[i],
            page_end: page_end[i],
            doc_name: doc_name[i].clone(),
        })
        .collect())
}

fn varchar_column<'a>(
    op: &'static str,
    field: Option<&'a FieldData>,
) -> Result<&'a [String], VectorError> {
    match field {
        Some(FieldData::VarChar { values, .. }) => Ok(values),
        other => Err(VectorError::rejected(
            op,
            format!(
                "expected a VarChar column, got {:?}",
                other.map(column_preview)
            ),
        )),
    }
}

fn int64_column<'a>(
    op: &'static str,
    field: Option<&'a FieldData>,
) -> Result<&'a [i64], VectorError> {
    match field {
        Some(FieldData::Int64 { values, .. }) => Ok(values),
        other => Err(VectorError::rejected(
            op,
            format!(
                "expected an Int64 column, got {:?}",
                other.map(column_preview)
            ),
        )),
    }
}

fn column_preview(field: &FieldData) -> String {
    // Debug of a whole column would dump every value into the error message.
    let debug = format!("{field:?}");
    debug.chars().take(80).collect()
}

/// Checks what truncation cannot fix: ids (a cut id would collide or miss its deletes) and
/// vectors of differing length.
fn validate(records: &[ChunkRecord]) -> Result<(), VectorError> {
    let Some(first) = records.first() else {
        return Ok(());
    };
    let dim = first.embedding.len();
    if dim == 0 {
        return Err(VectorError::rejected("insert", "empty embedding"));
    }
    for record in records {
        for (name, value) in [(F_CHUNK_ID, &record.chunk_id), (F_DOC_ID, &record.doc_id)] {
            if value.is_empty() || value.len() > MAX_ID {
                return Err(VectorError::rejected(
                    "insert",
                    format!(
                        "{name} must be 1..={MAX_ID} bytes, got {} bytes (chunk `{}`)",
                        value.len(),
                        truncate_utf8(&record.chunk_id, MAX_ID)
                    ),
                ));
            }
        }
        if record.embedding.len() != dim {
            return Err(VectorError::rejected(
                "insert",
                format!(
                    "chunk `{}` has a {}-dim embedding, the batch is {dim}-dim",
                    record.chunk_id,
                    record.embedding.len()
                ),
            ));
        }
    }
    Ok(())
}

fn capped_tags(tags: &[String]) -> Vec<String> {
    tags.iter()
        .filter(|t| !t.is_empty())
        .take(MAX_TAGS)
        .map(|t| truncate_utf8(t, MAX_TAG).to_owned())
        .collect()
}

/// An upper-bound guess of a row's share of the insert request: every string as it will be
/// sent, the vector, the integers, plus a little protobuf framing per value.
fn estimated_bytes(record: &ChunkRecord) -> usize {
    const FRAMING_PER_VALUE: usize = 4;
    let strings = [
        (record.chunk_id.len(), MAX_ID),
        (record.doc_id.len(), MAX_ID),
        (record.doc_name.len(), MAX_DOC_NAME),
        (record.regulation_type.len(), MAX_REGULATION_TYPE),
        (record.version.len(), MAX_VERSION),
        (record.section_path.len(), MAX_SECTION_PATH),
        (record.section_title.len(), MAX_SECTION_TITLE),
        (record.text.len(), MAX_TEXT),
    ]
    .iter()
    .map(|&(len, max)| len.min(max) + FRAMING_PER_VALUE)
    .sum::<usize>();
    let tags = record
        .tags
        .iter()
        .take(MAX_TAGS)
        .map(|t| t.len().min(MAX_TAG) + FRAMING_PER_VALUE)
        .sum::<usize>()
        + 2 * FRAMING_PER_VALUE;
    strings + tags + 4 * 8 + 4 * record.embedding.len()
}

fn split_batches(
    records: &[ChunkRecord],
    max_bytes: usize,
    max_rows: usize,
) -> Vec<&[ChunkRecord]> {
    let max_rows = max_rows.max(1);
    let mut batches = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, record) in records.iter().enumerate() {
        let size = estimated_bytes(record);
        let rows = i - start;
        if rows > 0 && (rows >= max_rows || bytes + size > max_bytes) {
            batches.push(&records[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < records.len() {
        batches.push(&records[start..]);
    }
    batches
}

fn columns(batch: &[ChunkRecord]) -> Vec<FieldData> {
    let strings = |name: &str, max: usize, get: fn(&ChunkRecord) -> &str| FieldData::VarChar {
        name: name.to_owned(),
        values: batch
            .iter()
            .map(|r| truncate_utf8(get(r), max).to_owned())
            .collect(),
    };
    let ints = |name: &str, get: fn(&ChunkRecord) -> i64| FieldData::Int64 {
        name: name.to_owned(),
        values: batch.iter().map(get).collect(),
    };
    vec![
        strings(F_CHUNK_ID, MAX_ID, |r| &r.chunk_id),
        strings(F_DOC_ID, MAX_ID, |r| &r.doc_id),
        ints(F_RUN_ID, |r| r.run_id),
        ints(F_CHUNK_INDEX, |r| r.chunk_index),
        strings(F_DOC_NAME, MAX_DOC_NAME, |r| &r.doc_name),
        strings(F_REGULATION_TYPE, MAX_REGULATION_TYPE, |r| {
            &r.regulation_type
        }),
        strings(F_VERSION, MAX_VERSION, |r| &r.version),
        strings(F_SECTION_PATH, MAX_SECTION_PATH, |r| &r.section_path),
        strings(F_SECTION_TITLE, MAX_SECTION_TITLE, |r| &r.section_title),
        ints(F_PAGE_START, |r| r.page_start),
        ints(F_PAGE_END, |r| r.page_end),
        strings(F_TEXT, MAX_TEXT, |r| &r.text),
        FieldData::ArrayVarChar {
            name: F_TAGS.to_owned(),
            values: batch.iter().map(|r| capped_tags(&r.tags)).collect(),
        },
        FieldData::FloatVector {
            name: F_EMBEDDING.to_owned(),
            values: batch.iter().map(|r| r.embedding.clone()).collect(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: usize, text_len: usize, dim: usize) -> ChunkRecord {
        ChunkRecord {
            chunk_id: format!("c{i}"),
            doc_id: "d".into(),
            run_id: 1,
            chunk_index: i as i64,
            doc_name: "n".into(),
            regulation_type: "law".into(),
            version: "v".into(),
            section_path: "a > b".into(),
            section_title: "b".into(),
            page_start: 1,
            page_end: 1,
            text: "字".repeat(text_len),
            tags: vec![],
            embedding: vec![0.0; dim],
        }
    }

    #[test]
    fn batches_respect_bytes_and_rows() {
        let records: Vec<_> = (0..10).map(|i| record(i, 100, 384)).collect();
        let per_row = estimated_bytes(&records[0]);
        let batches = split_batches(&records, per_row * 3, 100);
        assert_eq!(
            batches.iter().map(|b| b.len()).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        let batches = split_batches(&records, usize::MAX, 4);
        assert_eq!(
            batches.iter().map(|b| b.len()).collect::<Vec<_>>(),
            [4, 4, 2]
        );
        // A single oversized row still goes out alone rather than looping forever.
        let batches = split_batches(&records[..2], 1, 100);
        assert_eq!(batches.len(), 2);
        assert!(split_batches(&[], 10, 10).is_empty());
    }

    #[test]
    fn text_is_capped_in_bytes_and_tags_in_count_and_length() {
        let mut r = record(0, 5000, 4); // 15,000 bytes of CJK
        r.tags = (0..40).map(|i| format!("{i}{}", "标".repeat(30))).collect();
        let cols = columns(std::slice::from_ref(&r));
        let FieldData::VarChar { values, .. } = &cols[11] else {
            panic!("text column")
        };
        assert!(values[0].len() <= MAX_TEXT && values[0].len() > MAX_TEXT - 3);
        let FieldData::ArrayVarChar { values, .. } = &cols[12] else {
            panic!("tags column")
        };
        assert_eq!(values[0].len(), MAX_TAGS);
        assert!(values[0].iter().all(|t| t.len() <= MAX_TAG));
    }

    #[test]
    fn oversized_ids_and_ragged_vectors_are_refused() {
        let mut r = record(0, 1, 4);
        r.chunk_id = "x".repeat(129);
        assert!(matches!(validate(&[r]), Err(VectorError::Rejected { .. })));
        let a = record(0, 1, 4);
        let b = record(1, 1, 5);
        assert!(matches!(
            validate(&[a, b]),
            Err(VectorError::Rejected { .. })
        ));
    }

    #[test]
    fn description_round_trips_the_model_id() {
        let d = MilvusIndex::description(384, "intfloat/multilingual-e5-small");
        assert_eq!(
            d.split_once(MODEL_MARKER).unwrap().1,
            "intfloat/multilingual-e5-small"
        );
    }
}
