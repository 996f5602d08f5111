//! docpipe's vector index: the chunk vectors that search reads, behind [`VectorIndex`], with
//! a Milvus implementation ([`MilvusIndex`]) that works against Milvus 2.3 through 2.5+.
//!
//! Milvus has no authority over documents: PostgreSQL does. Everything stored here can be
//! rebuilt from the parse artifacts, and every hit is checked against PostgreSQL by the caller.

mod error;
mod expr;
mod milvus_index;

pub use error::{BoxError, VectorError};
pub use expr::truncate_utf8 as cut_to_bytes;

/// The collection's text limits, in bytes of UTF-8: Milvus measures a VarChar's `max_length` in
/// bytes, not characters (a CJK character is 3), and refuses a whole insert batch over it. A
/// longer value is cut at a character boundary on insert ([`cut_to_bytes`]), so whatever compares
/// a stored value with its source (a search filter, the check of a hit against PostgreSQL) must
/// cut the source the same way, or compare by prefix.
pub mod limits {
    pub(crate) const ID_BYTES: usize = 128;
    pub(crate) const DOC_NAME_BYTES: usize = 512;
    /// 42 CJK characters.
    pub const REGULATION_TYPE_BYTES: usize = 128;
    /// 21 CJK characters.
    pub const VERSION_BYTES: usize = 64;
    pub const SECTION_PATH_BYTES: usize = 2048;
    /// 170 CJK characters.
    pub const SECTION_TITLE_BYTES: usize = 512;
    pub(crate) const TEXT_BYTES: usize = 8192;
    pub(crate) const TAGS: usize = 32;
    pub(crate) const TAG_BYTES: usize = 64;
    pub(crate) const ORGAN_ID_BYTES: usize = 64;
}
pub use milvus_index::{MilvusIndex, MilvusOptions, ReadConsistency};

/// One chunk as stored in the index. String fields longer than the schema allows are cut at a
/// character boundary on insert (except the ids, which are refused instead: a cut id would
/// point at the wrong thing).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRecord {
    /// Primary key; at most 128 bytes. Deterministic per (doc, run, chunk) so a replay
    /// produces the same ids.
    pub chunk_id: String,
    pub doc_id: String,
    /// The document's tenant: every search filters on it, so Milvus ranks only the caller's
    /// tenants' vectors (its own and the public library's).
    pub organ_id: String,
    pub run_id: i64,
    pub chunk_index: i64,
    pub doc_name: String,
    pub regulation_type: String,
    pub version: String,
    /// Heading titles joined with `" > "`.
    pub section_path: String,
    pub section_title: String,
    pub page_start: i64,
    pub page_end: i64,
    pub text: String,
    /// At most 32 tags of at most 64 bytes are kept.
    pub tags: Vec<String>,
    pub embedding: Vec<f32>,
    /// Its version's state, as PostgreSQL last said it.
    pub projection: Projection,
}

/// A chunk's version state as Milvus filters on it (seed 001: the searchable fields are a
/// projection of the release, so that a search does not carry lists of version ids). PostgreSQL
/// decides; this only narrows what Milvus ranks, and every hit is checked again.
///
/// What the vectors of one document's run should carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunProjection {
    pub doc_id: String,
    pub run_id: i64,
    pub projection: Projection,
}

/// How [`VectorIndex::set_projection`] reads the vectors it rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBack {
    /// Whatever differs, read at Strong consistency: waits for the index to catch up with its
    /// latest writes (the sweeper, which can wait).
    Wait,
    /// The run holds this many vectors once whole (PostgreSQL's count): a read that finds them
    /// all, without waiting, is taken; else as [`ReadBack::Wait`].
    WholeOrWait(usize),
    /// As [`ReadBack::WholeOrWait`], but never waits: a read that finds fewer writes nothing and
    /// fails as unavailable, for a caller that leaves the write to one that can wait (an index
    /// delivery, which would otherwise hold its worker while the index catches up).
    WholeOrLater(usize),
}

/// Days count from 1970-01-01. A chunk answers on day `d` when `answering` and
/// `in_force_from <= d < in_force_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection {
    /// Its version is released, with this content, and the document indexed.
    pub answering: bool,
    pub in_force_from: i64,
    /// Exclusive: the day the next version took effect, or the repeal.
    pub in_force_to: i64,
}

impl Projection {
    /// Before every date a law can name.
    pub const FAR_PAST: i64 = -10_000_000;
    /// After every date a law can name.
    pub const FAR_FUTURE: i64 = 10_000_000;
    /// Answers on every day: a document of no version, and what a chunk is written with before
    /// its commit says more (wider than the truth is safe, as every hit is checked; narrower
    /// would lose hits).
    pub const ALWAYS: Projection = Projection {
        answering: true,
        in_force_from: Self::FAR_PAST,
        in_force_to: Self::FAR_FUTURE,
    };
}

/// Which chunks a search reads by their [`Projection`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VersionWindow {
    /// Every chunk, whatever its version's state.
    #[default]
    Any,
    /// Those of versions that answer (released), on any date.
    Answering,
    /// Those of versions in force on this day (days since 1970-01-01).
    InForceOn(i64),
}

/// Restricts a search. Empty / `None` members do not filter; members combine with AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchFilters {
    /// Any of these documents.
    pub doc_ids: Vec<String>,
    pub regulation_type: Option<String>,
    pub version: Option<String>,
    /// Chunks carrying any of these tags.
    pub tags: Vec<String>,
    /// None of these documents.
    pub exclude_doc_ids: Vec<String>,
    pub versions: VersionWindow,
    /// Of these tenants only; empty: every tenant.
    pub organ_ids: Vec<String>,
}

/// One search hit. `score` is cosine similarity: higher is nearer, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHit {
    pub chunk_id: String,
    pub doc_id: String,
    pub run_id: i64,
    pub score: f32,
    pub text: String,
    pub section_path: String,
    pub section_title: String,
    pub page_start: i64,
    pub page_end: i64,
    pub doc_name: String,
}

/// doc_id → run_id → vectors of that run.
pub(crate) type DocRuns =
    std::collections::BTreeMap<String, std::collections::BTreeMap<i64, usize>>;

/// Where a vector belongs, as a listing of the collection gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkKey {
    pub chunk_id: String,
    pub doc_id: String,
    pub run_id: i64,
}

/// The largest page [`VectorIndex::chunk_page`] gives (Milvus 2.3's `maxQueryResultWindow`).
pub const MAX_CHUNK_PAGE: usize = 16_384;

/// The narrow interface the pipeline stages and the API use, so they can be tested without a
/// vector database.
#[async_trait::async_trait]
pub trait VectorIndex: Send + Sync {
    /// The collection this index reads and writes.
    fn collection(&self) -> &str;

    /// Creates the collection, its indexes and loads it, if missing. Safe when several callers
    /// race (one creates, the others find it and proceed). An existing collection with another
    /// vector dimension, another recorded embedding model id or another schema is
    /// [`VectorError::Mismatch`].
    async fn ensure_collection(&self, dim: usize, model_id: &str) -> Result<(), VectorError>;

    /// Inserts in batches bounded by estimated size as well as count, well under the 64 MB
    /// gRPC message limit. Not idempotent on its own (Milvus keeps duplicate primary keys): a
    /// stage that may be replayed calls [`VectorIndex::delete_run`] first.
    async fn insert(&self, records: &[ChunkRecord]) -> Result<(), VectorError>;

    /// Writes `projection` onto every vector of the document's run `run_id` that does not carry
    /// it yet, and returns how many it rewrote. Milvus 2.3 has no partial update, so the vectors
    /// are read back and upserted whole, a page at a time: bounded by the document, not the
    /// library. A missing collection has nothing to rewrite. `read` says whether the read may
    /// wait for the index to catch up with its latest writes ([`ReadBack`]).
    async fn set_projection(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: Projection,
        read: ReadBack,
    ) -> Result<usize, VectorError>;

    /// Writes `records` whole over the vectors of the same chunk ids: a writer that still holds
    /// what it inserted rewrites it (its projection, say) without reading it back.
    async fn upsert(&self, records: &[ChunkRecord]) -> Result<(), VectorError>;

    /// The documents of `expected` whose run holds a vector carrying another projection: the
    /// sweeper's check that Milvus says what PostgreSQL does. Reads at Strong consistency, a few
    /// queries per call, bounded by `expected`. A missing collection has none.
    async fn drifted(&self, expected: &[RunProjection]) -> Result<Vec<String>, VectorError>;

    /// Deletes every vector of a document. A missing collection counts as success.
    async fn delete_doc(&self, doc_id: &str) -> Result<(), VectorError>;

    /// Deletes the document's vectors from every run but `keep_run`, so a reindex leaves
    /// exactly one run's vectors.
    async fn delete_other_runs(&self, doc_id: &str, keep_run: i64) -> Result<(), VectorError>;

    /// Deletes the vectors of one run of a document.
    async fn delete_run(&self, doc_id: &str, run_id: i64) -> Result<(), VectorError>;

    /// Deletes the vectors of one run of a document from chunk `from_chunk` on (its
    /// `chunk_index`): what an index attempt inserted past the progress it recorded.
    async fn delete_run_from(
        &self,
        doc_id: &str,
        run_id: i64,
        from_chunk: i64,
    ) -> Result<(), VectorError>;

    /// Deletes the document's vectors of every run up to and including `max_run`. Run ids only
    /// grow, so a background job that read PostgreSQL when `max_run` was the newest run can never
    /// remove what a run opened after that wrote.
    async fn delete_runs_up_to(&self, doc_id: &str, max_run: i64) -> Result<(), VectorError>;

    /// Drops the collection and everything in it: a rebuild's collection that was cancelled, or a
    /// retired one past its grace period. A missing collection counts as success.
    async fn drop_collection(&self) -> Result<(), VectorError>;

    /// Counts a document's vectors (optionally of one run) with Strong consistency, so it
    /// sees every write acknowledged before the call.
    async fn count(&self, doc_id: &str, run_id: Option<i64>) -> Result<usize, VectorError>;

    /// One page of the collection in chunk-id order: at most `limit` (capped at
    /// [`MAX_CHUNK_PAGE`]) vectors whose chunk id sorts after `after` (from the start when it is
    /// empty). A page shorter than `limit` is the last. A missing collection has no pages. What a
    /// background job that pages through the collection across runs reads, one bounded page at a
    /// time, with the last chunk id as its cursor.
    async fn chunk_page(&self, after: &str, limit: usize) -> Result<Vec<ChunkKey>, VectorError>;

    /// How many vectors each run of each document holds, documents sorted: every page of the
    /// whole collection, held at once, so it is for tools and tests, not for request paths or a
    /// scheduled job (the sweeper's reconcile pages with [`VectorIndex::chunk_page`]).
    async fn doc_runs(&self) -> Result<DocRuns, VectorError> {
        doc_runs_in_pages(self, MAX_CHUNK_PAGE).await
    }

    /// The `top_k` nearest chunks to `vector` that pass `filters`, best first. A collection that
    /// does not exist is [`VectorError::MissingCollection`], not an empty answer.
    async fn search(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError>;
}

/// [`VectorIndex::doc_runs`] by pages of `page` vectors.
pub(crate) async fn doc_runs_in_pages<I: VectorIndex + ?Sized>(
    index: &I,
    page: usize,
) -> Result<DocRuns, VectorError> {
    let page = page.clamp(1, MAX_CHUNK_PAGE);
    let mut docs = DocRuns::new();
    let mut after = String::new();
    loop {
        let keys = index.chunk_page(&after, page).await?;
        for key in &keys {
            *docs
                .entry(key.doc_id.clone())
                .or_default()
                .entry(key.run_id)
                .or_default() += 1;
        }
        match keys.last() {
            Some(last) if keys.len() == page && last.chunk_id > after => {
                after = last.chunk_id.clone()
            }
            _ => return Ok(docs),
        }
    }
}
