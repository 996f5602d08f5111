//! The collection: its schema, its description (which records the embedding model), the check
//! of an existing collection against both, its indexes and its loading.

use super::*;

pub(super) const F_CHUNK_ID: &str = "chunk_id";
pub(super) const F_DOC_ID: &str = "doc_id";
pub(super) const F_ORGAN_ID: &str = "organ_id";
pub(super) const F_RUN_ID: &str = "run_id";
pub(super) const F_CHUNK_INDEX: &str = "chunk_index";
pub(super) const F_DOC_NAME: &str = "doc_name";
pub(super) const F_REGULATION_TYPE: &str = "regulation_type";
pub(super) const F_VERSION: &str = "version";
pub(super) const F_SECTION_PATH: &str = "section_path";
pub(super) const F_SECTION_TITLE: &str = "section_title";
pub(super) const F_PAGE_START: &str = "page_start";
pub(super) const F_PAGE_END: &str = "page_end";
pub(super) const F_TEXT: &str = "text";
pub(super) const F_TAGS: &str = "tags";
pub(super) const F_EMBEDDING: &str = "embedding";
pub(super) const F_ANSWERING: &str = "answering";
pub(super) const F_IN_FORCE_FROM: &str = "in_force_from";
pub(super) const F_IN_FORCE_TO: &str = "in_force_to";

// Byte limits, as Milvus counts VarChar max_length in bytes.
pub(super) use crate::limits::{
    DOC_NAME_BYTES as MAX_DOC_NAME, ID_BYTES as MAX_ID, ORGAN_ID_BYTES as MAX_ORGAN_ID,
    REGULATION_TYPE_BYTES as MAX_REGULATION_TYPE, SECTION_PATH_BYTES as MAX_SECTION_PATH,
    SECTION_TITLE_BYTES as MAX_SECTION_TITLE, TAGS as MAX_TAGS, TAG_BYTES as MAX_TAG,
    TEXT_BYTES as MAX_TEXT, VERSION_BYTES as MAX_VERSION,
};

pub(super) const HNSW_M: &str = "16";
pub(super) const HNSW_EF_CONSTRUCTION: &str = "200";

/// Records the embedding model in the collection description, so a deployment that switches
/// models cannot silently mix two vector spaces in one collection.
pub(super) const MODEL_MARKER: &str = "embedding_model=";

impl MilvusIndex {
    /// `None` when the collection does not exist.
    pub(super) async fn collection_dim(&self) -> Result<Option<usize>, VectorError> {
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
        let fields = response.description().get_schema().get_fields();
        self.has_organ.store(
            fields.iter().any(|f| f.get_name() == F_ORGAN_ID),
            std::sync::atomic::Ordering::Relaxed,
        );
        let dim = fields
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

    pub(super) fn is_ensured(&self, dim: usize, model_id: &str) -> bool {
        let ensured = self.ensured.lock().unwrap_or_else(|e| e.into_inner());
        matches!(&*ensured, Some((d, m)) if *d == dim && m == model_id)
    }

    pub(super) async fn has_collection(&self) -> Result<bool, VectorError> {
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

    pub(super) fn schema(dim: usize) -> CollectionSchema {
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
            // A scalar filtered on, not the partition key: Milvus 2.3.5's upsert (the projection's
            // write-back) puts a partition-key collection's rows where a search filtered by that
            // key does not find them (`the_tenant_filter_holds_through_an_upsert`
            // fails so). Indexed (Trie) as doc_id is.
            .add_field(varchar(F_ORGAN_ID, MAX_ORGAN_ID))
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
                    .name(F_ANSWERING)
                    .data_type(DataType::Bool),
            )
            .add_field(int64(F_IN_FORCE_FROM))
            .add_field(int64(F_IN_FORCE_TO))
            .add_field(
                FieldSchema::new()
                    .name(F_EMBEDDING)
                    .data_type(DataType::FloatVector)
                    .dimension(dim as u32),
            )
    }

    pub(super) fn description(dim: usize, model_id: &str) -> String {
        format!("docpipe chunk vectors; dim={dim}; {MODEL_MARKER}{model_id}")
    }

    /// Compares an existing collection with what this code would have created.
    pub(super) async fn verify(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
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
        let has_organ = found.contains_key(F_ORGAN_ID);
        self.has_organ
            .store(has_organ, std::sync::atomic::Ordering::Relaxed);
        for expected in Self::schema(dim).get_fields() {
            if expected.get_name() == F_ORGAN_ID && !has_organ {
                // Made before tenants: taken as it is (see `has_organ`).
                tracing::warn!(
                    collection = %self.collection,
                    "the collection has no organ_id field: searches are kept to their \
                     tenants by PostgreSQL alone until a rebuild (docpipe reindex) replaces it"
                );
                continue;
            }
            let Some(actual) = found.get(expected.get_name()) else {
                return Err(mismatch(format!(
                    "field `{}` is missing (a collection made before it: drop it and retry the \
                     documents, which rebuilds it from their stored chunks' text)",
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

    pub(super) async fn create_indexes(&self) -> Result<(), VectorError> {
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
        let organ = IndexParam::new()
            .field_name(F_ORGAN_ID)
            .index_name(F_ORGAN_ID)
            .index_type(IndexType::Trie);
        let mut params = vec![hnsw, trie];
        // Whether the collection has the field (one made before tenants does not).
        self.collection_dim().await?;
        if self.has_organ() {
            params.push(organ);
        }
        let request = CreateIndexRequest::builder()
            .collection_name(&self.collection)
            .index_params(params)
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

    pub(super) async fn load(&self) -> Result<(), VectorError> {
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

    pub(super) async fn ensure(&self, dim: usize, model_id: &str) -> Result<(), VectorError> {
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
}
