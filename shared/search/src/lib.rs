//! Search, at article level: the dense ranking (query embedded, chunks from Milvus, fused into
//! the articles they were cut from), the keyword ranking (BM25 over `semantic_blocks`,
//! [`docpipe_db::keyword`]), fused by reciprocal rank; an article the query names ("民法典第一千零四十二条")
//! comes first. Milvus has no authority (seed 001): every hit is checked against PostgreSQL (the
//! document exists, is `indexed`, is not being deleted, and the hit belongs to its current run)
//! before it is returned. Stale hits are dropped and counted.

pub mod citations;
pub use docpipe_parse::diff;
pub mod fusion;
pub mod graph;
pub mod law_names;
pub mod references;

use docpipe_core::analyzer::{self, Analyzer};
use docpipe_core::filters::Filters;
use docpipe_db::articles::{self, ChunkPlace, LiveBlock};
use docpipe_db::keyword::{self, ScoredBlock};
use docpipe_db::works::{self, VersionPlace};
use docpipe_db::{documents, Db, DbError};
use docpipe_embed::{EmbedError, Embedder};
use docpipe_parse::article_ref::{article_number, citation};
use docpipe_vector::{SearchFilters, VectorError, VectorHit, VectorIndex, VersionWindow};
use fusion::{distinct, fuse, FusionParameters};
pub use graph::Graph;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MAX_TOP_K: usize = 50;
/// Articles each ranking contributes to the fusion.
pub const CANDIDATES: usize = 100;
/// Chunks the dense ranking asks the vector index for.
pub const DENSE_CHUNKS: usize = CANDIDATES;
/// A term's postings a keyword query reads at most (its best-weighted first): a bound on what one
/// query costs at any corpus size; at the questions corpus's 12,700 articles it cuts only the
/// tails of the most common terms.
pub const POSTINGS_PER_TERM: i64 = 2_000;
/// Distinct terms a keyword query scores at most: its most selective ones (highest BM25 weight,
/// that is rarest in the index, counted by how often the query repeats them); the rest are
/// dropped. With [`POSTINGS_PER_TERM`] it bounds what any query reads, a 2,000-character one
/// included, at 128 × 2,000 postings. Every question of `corpus/questions` has fewer (at most
/// 114, 65 at the 99th percentile), so none of them loses a term.
pub const MAX_QUERY_TERMS: i64 = 128;
/// The score of an article the query names: above any fused score, which is at most
/// `(dense_weight + keyword_weight) / (k + 1)`.
pub(crate) const REFERENCED_SCORE: f64 = 1.0;

/// Which versions of a law a search reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Versions {
    /// Only the version of each law in force on the search's date (and documents of no version).
    #[default]
    InForce,
    /// Every version, each hit saying its status on that date.
    All,
}

/// What a hit says of the version of the law it comes from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HitVersion {
    pub work_id: i64,
    pub work_title: String,
    pub level: String,
    pub version: String,
    pub effective_from: Option<String>,
    /// The day the next version took effect, or the repeal: the end of this one's validity.
    pub effective_to: Option<String>,
    /// On the search's date: in_force, not_yet_in_force, superseded or repealed.
    pub status: String,
    /// For a superseded version: the version that replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
    /// For a repealed law: the law that took its place, when one was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
    /// For a superseded version: whether the article of the same number reads differently in the
    /// version that replaced it (absent when that version has no such article).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_in_replacement: Option<bool>,
    /// Every indexed document of this version (the same text as md, docx, pdf…): one hit stands
    /// for all of them.
    pub documents: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Dense,
    Keyword,
    #[default]
    Hybrid,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Dense => "dense",
            Mode::Keyword => "keyword",
            Mode::Hybrid => "hybrid",
        }
    }
}

/// How a search ranked, as the response states it.
#[derive(Debug, Clone, Serialize)]
pub struct Parameters {
    pub fusion: FusionParameters,
    /// Articles each ranking contributed.
    pub candidates: usize,
    pub analyzer: &'static str,
    pub bm25_k1: f64,
    pub bm25_b: f64,
    pub postings_per_term: i64,
    /// Distinct terms a keyword query scores at most (its most selective).
    pub max_query_terms: i64,
    pub embedding_model: String,
    /// The learned map applied to the query vector (e5-small's built-in one by default), or none.
    pub query_adapter: Option<String>,
}

/// One article (one section of one document).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hit {
    pub doc_id: String,
    pub doc_name: String,
    pub semantic_id: String,
    /// As a lawyer writes it: 《中华人民共和国民法典》第一千零四十二条; the section's title when it is
    /// no article.
    pub citation: String,
    pub law_title: String,
    pub section_path: Vec<String>,
    pub page_start: i64,
    pub page_end: i64,
    pub score: f64,
    /// Its rank in each list (from 1), when that list had it.
    pub dense_rank: Option<usize>,
    pub keyword_rank: Option<usize>,
    /// The query named this article.
    pub referenced: bool,
    /// The best-matching chunk: the dense ranking's, else the one with most query terms.
    pub chunk_id: Option<String>,
    pub text: String,
    /// The article around the best passage, at most [`ARTICLE_EXCERPT_CHARS`] characters: a
    /// response must not grow with what was uploaded. The whole article is `article_url` away.
    pub article_excerpt: String,
    /// The whole article's length, in characters.
    pub article_chars: usize,
    /// The excerpt is not the whole article.
    pub article_truncated: bool,
    /// Where the whole article is: the API's blocks of the document, filtered to this one.
    pub article_url: String,
    /// The law and version the article belongs to; absent for a document of no version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<HitVersion>,
    /// With `expand: "references"`: what the article cites, each with its target's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references: Option<Vec<citations::HitReference>>,
}

/// The most of an article a hit carries. A statute's article is rarely longer (the corpus'
/// longest is about 1,500 characters); a block cut from a heading-less upload may be.
pub const ARTICLE_EXCERPT_CHARS: usize = 2_000;

#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    pub mode: Mode,
    /// The date the search was made for (YYYY-MM-DD; today unless asked).
    pub as_of: String,
    pub versions: Versions,
    pub parameters: Parameters,
    pub hits: Vec<Hit>,
    /// The articles the query named, as cited, that were found.
    pub references: Vec<String>,
    /// Hits a ranking returned that PostgreSQL refused (deleted document, old run, not indexed).
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

/// What searches share between requests, per set of tenants a read covers: the live law titles
/// and BM25's N. Either only ranks; every hit is still checked row by row. A value is read again
/// once it is [`CACHE_TTL`] old: off the request, which answers from it meanwhile, up to
/// [`CACHE_STALE_LIMIT`]; past that, before the request answers. At most [`CACHE_TENANT_SETS`]
/// sets are kept (a full cache starts again empty), so what it holds is bounded however many
/// tenants call.
#[derive(Default)]
pub struct SearchCache {
    laws: Keyed<CachedLaws>,
    blocks: Keyed<i64>,
    /// How many times the law titles were read whole: what grows with the library.
    citable_reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

pub(crate) const CACHE_TTL: Duration = Duration::from_secs(30);
/// How old a cached value may be and still answer while it is read again: past it, a request
/// waits for the new one. The titles' reads grow with the library (a whole `keyword_documents`
/// pass, 39 ms at 1,000 laws), so one request in every [`CACHE_TTL`] paying it inline made the
/// library's size every route's p99.
pub const CACHE_STALE_LIMIT: Duration = Duration::from_secs(300);
/// The most tenant sets a [`SearchCache`] keeps values for.
pub const CACHE_TENANT_SETS: usize = 256;

/// The live law titles, read once, as the two lookups use them: by title key (a law the query
/// names) and by work key (a law a citation names).
pub(crate) struct CachedLaws {
    pub(crate) titles: references::LawTitles,
    pub(crate) citable: citations::CitableLaws,
}

/// A value, when it was read, and whether a read of its successor is under way.
struct Entry<T> {
    at: Instant,
    value: std::sync::Arc<T>,
    refreshing: bool,
}

type Entries<T> = std::sync::Arc<Mutex<HashMap<Vec<String>, Entry<T>>>>;

/// Values by the tenants they were read for: fresh for `ttl`, then served while one background
/// read replaces them, up to `stale_limit`.
struct Keyed<T> {
    entries: Entries<T>,
    ttl: Duration,
    stale_limit: Duration,
}

impl<T: Send + Sync + 'static> Default for Keyed<T> {
    fn default() -> Self {
        Keyed::new(CACHE_TTL, CACHE_STALE_LIMIT)
    }
}

impl<T: Send + Sync + 'static> Keyed<T> {
    fn new(ttl: Duration, stale_limit: Duration) -> Self {
        Keyed {
            entries: std::sync::Arc::new(Mutex::new(HashMap::new())),
            ttl,
            stale_limit,
        }
    }

    /// The value for `organs`: the held one while fresh; a stale one at once, starting one read
    /// of its successor in the background (unless one runs); none or one past the stale limit,
    /// read by `load` before this returns.
    async fn get_or_load<F, Fut>(
        &self,
        organs: &[String],
        load: F,
    ) -> Result<std::sync::Arc<T>, DbError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, DbError>> + Send + 'static,
    {
        {
            let mut held = self.entries.lock().expect("not poisoned");
            if let Some(entry) = held.get_mut(organs) {
                let age = entry.at.elapsed();
                if age < self.ttl {
                    return Ok(entry.value.clone());
                }
                if age < self.stale_limit {
                    if !entry.refreshing {
                        entry.refreshing = true;
                        let (entries, key, read) = (self.entries.clone(), organs.to_vec(), load());
                        tokio::spawn(async move {
                            let read = read.await;
                            let mut held = entries.lock().expect("not poisoned");
                            match read {
                                Ok(value) => {
                                    store(&mut held, &key, std::sync::Arc::new(value));
                                }
                                Err(e) => {
                                    tracing::warn!(error = %e, "a cached search value was not read again; the next request tries");
                                    if let Some(entry) = held.get_mut(&key) {
                                        entry.refreshing = false;
                                    }
                                }
                            }
                        });
                    }
                    return Ok(entry.value.clone());
                }
            }
        }
        let value = std::sync::Arc::new(load().await?);
        store(
            &mut self.entries.lock().expect("not poisoned"),
            organs,
            value.clone(),
        );
        Ok(value)
    }
}

/// Holds `value` for `organs`, read now; past [`CACHE_TENANT_SETS`] sets the cache starts again.
fn store<T>(
    held: &mut HashMap<Vec<String>, Entry<T>>,
    organs: &[String],
    value: std::sync::Arc<T>,
) {
    if held.len() >= CACHE_TENANT_SETS && !held.contains_key(organs) {
        held.clear();
    }
    held.insert(
        organs.to_vec(),
        Entry {
            at: Instant::now(),
            value,
            refreshing: false,
        },
    );
}

impl SearchCache {
    /// The live law titles a query or a citation can name. A title stays up to
    /// [`CACHE_STALE_LIMIT`] after its law changed: search checks every hit, and the checker
    /// reads each document's standing before it answers from it, and a law it lacks by key.
    pub(crate) async fn laws(
        &self,
        db: &Db,
        organs: &[String],
    ) -> Result<std::sync::Arc<CachedLaws>, DbError> {
        self.laws
            .get_or_load(organs, || {
                let (db, organs, reads) = (db.clone(), organs.to_vec(), self.citable_reads.clone());
                async move {
                    let client = db.client().await?;
                    let titles = keyword::law_titles(&**client, &organs).await?;
                    reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Ok(CachedLaws {
                        citable: citations::citable_laws(&titles),
                        titles: references::LawTitles::new(titles),
                    })
                }
            })
            .await
    }

    /// How many times this cache read the law titles whole.
    pub fn citable_reads(&self) -> u64 {
        self.citable_reads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn block_count(&self, db: &Db, organs: &[String]) -> Result<i64, DbError> {
        let n = self
            .blocks
            .get_or_load(organs, || {
                let (db, organs) = (db.clone(), organs.to_vec());
                async move {
                    let client = db.client().await?;
                    keyword::block_count(&**client, &organs).await
                }
            })
            .await?;
        Ok(*n)
    }
}

pub struct SearchDeps<'a> {
    pub db: &'a Db,
    pub embedder: &'a dyn Embedder,
    pub vectors: &'a dyn VectorIndex,
    pub cache: &'a SearchCache,
}

#[derive(Clone, Copy)]
pub struct Query<'a> {
    pub text: &'a str,
    pub top_k: usize,
    pub mode: Mode,
    pub filters: &'a Filters,
    /// YYYY-MM-DD; none: today.
    pub as_of: Option<&'a str>,
    pub versions: Versions,
    /// How far the article graph reaches into the ranking ([`Graph::DEFAULT`] in the API).
    pub graph: Graph,
}

/// Each hit's version, and for a superseded one whether its article changed in the version that
/// replaced it.
async fn describe_versions(
    db: &Db,
    hits: &mut [Hit],
    places: &HashMap<String, VersionPlace>,
    live: &HashMap<i64, LiveBlock>,
) -> Result<(), DbError> {
    // The replacing versions' articles, read once each.
    let mut replacing: HashMap<i64, Vec<diff::Article>> = HashMap::new();
    for hit in hits.iter_mut() {
        let Some(place) = places.get(&hit.doc_id) else {
            continue;
        };
        let block = live
            .values()
            .find(|b| b.doc_id == hit.doc_id && b.semantic_id == hit.semantic_id);
        let changed = match (place.replaced_by_id, block) {
            (Some(next), Some(block)) => {
                if let std::collections::hash_map::Entry::Vacant(slot) = replacing.entry(next) {
                    let articles = works::version_articles(&**db.client().await?, next)
                        .await?
                        .unwrap_or_default();
                    slot.insert(
                        articles
                            .into_iter()
                            .map(diff::Article::from_block)
                            .collect(),
                    );
                }
                diff::changed_in(
                    &replacing[&next],
                    &diff::Article::from_block((
                        block.section_title.clone(),
                        Vec::new(),
                        block.text.clone(),
                    )),
                )
            }
            _ => None,
        };
        hit.version = Some(HitVersion {
            work_id: place.work_id,
            work_title: place.work_title.clone(),
            level: place.level.clone(),
            version: place.version.clone(),
            effective_from: place.effective_from.clone(),
            effective_to: place.effective_to.clone(),
            status: place.status.clone(),
            replaced_by: place.replaced_by.clone(),
            successor: place.successor.clone(),
            changed_in_replacement: changed,
            documents: place.documents.clone(),
        });
    }
    Ok(())
}

/// Today, as a search's default date.
pub fn today() -> String {
    chrono::Utc::now().date_naive().to_string()
}

/// The dense ranking at article level: best chunk per article, in chunk order; an article's
/// score is its best chunk's similarity.
pub struct DenseRanking {
    pub blocks: Vec<ScoredBlock>,
    best_chunk: HashMap<i64, VectorHit>,
    pub stale: usize,
}

/// Both rankings of one query, before fusion: what [`search`] fuses, and what the retrieval
/// benchmark records to choose the fusion on.
pub struct Rankings {
    pub dense: Option<DenseRanking>,
    pub keyword: Vec<ScoredBlock>,
}

/// The dense and keyword rankings the mode asks for, run side by side.
pub async fn rankings(deps: &SearchDeps<'_>, q: &Query<'_>) -> Result<Rankings, SearchError> {
    let dense = async {
        match q.mode {
            Mode::Keyword => Ok(None),
            _ => dense_ranking(deps, q).await.map(Some),
        }
    };
    let keyword = async {
        match q.mode {
            Mode::Dense => Ok(Vec::new()),
            _ => keyword_ranking(deps, q).await,
        }
    };
    let (dense, keyword) = tokio::join!(dense, keyword);
    Ok(Rankings {
        dense: dense?,
        keyword: keyword?,
    })
}

pub async fn search(deps: &SearchDeps<'_>, q: &Query<'_>) -> Result<SearchResult, SearchError> {
    let started = Instant::now();
    let top_k = q.top_k.clamp(1, MAX_TOP_K);
    let as_of = q.as_of.map_or_else(today, str::to_string);
    let fusion = fusion::parameters_for(deps.embedder.query_adapter());
    // The rankings and the check are statements apart. PostgreSQL's side of the ranking (the
    // keyword statement, the laws a query names) filters on the projection exactly, so a candidate
    // of it that the check refuses means the version state changed in between: a release that
    // committed meanwhile hands "in force" to a version the ranking did not see. Ranked again
    // once, the search sees the state the check saw (one commit cannot fall between a check and
    // a ranking that starts after it), so it answers with one version, never neither.
    let mut attempt = 0;
    let (dense, named, fused, wanted, live, places, ranked_at) = loop {
        attempt += 1;
        let (ranked, named) = tokio::join!(
            rankings(deps, q),
            references::resolve(deps, q.text, version_window(q), &q.filters.organs)
        );
        let (Rankings { dense, keyword }, named) = (ranked?, named?);
        let ranked_at = started.elapsed();

        let dense_blocks: &[ScoredBlock] =
            dense.as_ref().map(|d| d.blocks.as_slice()).unwrap_or(&[]);
        let fused = lifted_by_graph(deps, q, fuse(dense_blocks, &keyword, &fusion)).await?;
        let order = distinct(
            named
                .iter()
                .map(|(id, _)| *id)
                .chain(fused.iter().map(|f| f.block_id)),
        );
        // Enough to fill top_k after the check, not the whole fused list: the rankings read only
        // what the projection lets through, so little of their head fails the check.
        let wanted: Vec<i64> = order.iter().take(top_k * 2 + 10).copied().collect();
        // The authority: PostgreSQL's version state as it is now, in force included. The
        // projection only narrowed what was ranked, and Milvus's may lag; the vectors of a
        // version being released answer before its commit (seed 001's order).
        let in_force_only = q.versions == Versions::InForce;
        let (live, places) = vouched_for(deps, &wanted, q.filters, &as_of, in_force_only).await?;
        let moved = changed_under_the_ranking(&wanted, &live, &keyword, &named);
        if moved == 0 || attempt == 2 {
            break (dense, named, fused, wanted, live, places, ranked_at);
        }
        tracing::info!(
            refused = moved,
            "the version state changed under the ranking: ranked again"
        );
    };

    let (mut hits, unvouched) = checked_hits(
        q.text,
        &Candidates {
            wanted: &wanted,
            live: &live,
            places: &places,
            fused: &fused,
            dense: dense.as_ref(),
            named: &named,
        },
        top_k,
    );
    describe_versions(deps.db, &mut hits, &places, &live).await?;
    let stale_dropped = dense.as_ref().map_or(0, |d| d.stale) + unvouched;
    log_search(ranked_at, started.elapsed(), stale_dropped);
    Ok(SearchResult {
        mode: q.mode,
        as_of,
        versions: q.versions,
        parameters: Parameters::of(fusion, deps.embedder),
        references: named
            .iter()
            .filter(|(id, _)| live.contains_key(id))
            .map(|(_, c)| c.clone())
            .collect(),
        hits,
        stale_dropped,
    })
}

/// Candidates PostgreSQL ranked (keyword, named laws) that the check then refused: each one a
/// change of state between the two statements, since both read the same conditions.
fn changed_under_the_ranking(
    wanted: &[i64],
    live: &HashMap<i64, LiveBlock>,
    keyword: &[ScoredBlock],
    named: &[(i64, String)],
) -> usize {
    let from_postgres: std::collections::HashSet<i64> = keyword
        .iter()
        .map(|b| b.block_id)
        .chain(named.iter().map(|(id, _)| *id))
        .collect();
    wanted
        .iter()
        .filter(|id| from_postgres.contains(id) && !live.contains_key(id))
        .count()
}

/// The versions a search ranks, as the search projection filters them before any ranking is cut:
/// those in force on the search's date (and documents of no version), or, with `versions=all`,
/// every released one. Many versions of one law then cannot push other laws out of the top k, and
/// no list of documents travels with the search, whatever the size of the library.
pub fn version_window(q: &Query<'_>) -> VersionWindow {
    match q.versions {
        Versions::All => VersionWindow::Answering,
        Versions::InForce => {
            let as_of = q.as_of.map_or_else(today, str::to_string);
            match docpipe_db::projection::day_number(&as_of) {
                Some(day) => VersionWindow::InForceOn(day),
                // Not a date the projection counts: rank every released version; the check
                // decides.
                None => VersionWindow::Answering,
            }
        }
    }
}

/// The fused ranking, lifted along the references of its strongest hits when the query asks
/// for the article graph.
async fn lifted_by_graph(
    deps: &SearchDeps<'_>,
    q: &Query<'_>,
    fused: Vec<fusion::Fused>,
) -> Result<Vec<fusion::Fused>, SearchError> {
    if q.graph.is_off() {
        return Ok(fused);
    }
    let seeds: Vec<i64> = fused
        .iter()
        .take(q.graph.seeds)
        .map(|f| f.block_id)
        .collect();
    let edges = docpipe_db::references::edges_from(
        &**deps.db.client().await?,
        &seeds,
        graph::MAX_SPAN,
        graph::PER_REFERENCE,
        graph::MAX_EDGES,
        &q.filters.organs,
    )
    .await?;
    Ok(graph::lift(fused, &edges, &q.graph))
}

/// The authority check: of the blocks wanted, those whose documents answer on `as_of` now (the
/// version state read again in the same statement), under the filters; and their documents'
/// versions on `as_of`.
async fn vouched_for(
    deps: &SearchDeps<'_>,
    wanted: &[i64],
    filters: &Filters,
    as_of: &str,
    in_force_only: bool,
) -> Result<(HashMap<i64, LiveBlock>, HashMap<String, VersionPlace>), SearchError> {
    let client = deps.db.client().await?;
    let live: HashMap<i64, LiveBlock> =
        articles::live_blocks(&**client, wanted, filters, as_of, in_force_only)
            .await?
            .into_iter()
            .map(|b| (b.block_id, b))
            .collect();
    let live_docs: Vec<String> = live.values().map(|b| b.doc_id.clone()).collect();
    let places = works::places(&**client, &live_docs, as_of).await?;
    Ok((live, places))
}

fn log_search(ranked_at: Duration, elapsed: Duration, stale_dropped: usize) {
    tracing::debug!(
        rank_ms = ms(ranked_at),
        check_ms = ms(elapsed - ranked_at),
        "search"
    );
    if stale_dropped > 0 {
        tracing::info!(
            stale_dropped,
            "search dropped hits PostgreSQL does not vouch for"
        );
    }
}

/// What the authority check ranks: the fused order's head, the blocks PostgreSQL vouches for,
/// their documents' versions, and what each ranking said of them.
struct Candidates<'a> {
    wanted: &'a [i64],
    live: &'a HashMap<i64, LiveBlock>,
    places: &'a HashMap<String, VersionPlace>,
    fused: &'a [fusion::Fused],
    dense: Option<&'a DenseRanking>,
    named: &'a [(i64, String)],
}

/// The first `top_k` of the wanted blocks that PostgreSQL vouches for, in order, as hits, and how
/// many were passed over because it does not. The same article of one version read from another
/// rendition (its pdf after its md) is the hit already taken, not another one.
fn checked_hits(query: &str, c: &Candidates<'_>, top_k: usize) -> (Vec<Hit>, usize) {
    let fused_at: HashMap<i64, &fusion::Fused> = c.fused.iter().map(|f| (f.block_id, f)).collect();
    let query_words = Analyzer::shared().query_words(query);
    let (mut hits, mut unvouched) = (Vec::with_capacity(top_k), 0);
    let mut taken: std::collections::HashSet<(i64, &str)> = std::collections::HashSet::new();
    for id in c.wanted {
        let Some(block) = c.live.get(id) else {
            // An article only the graph reached may lie outside the filters or the date: not
            // a stale hit, just not a candidate.
            let ranked = fused_at
                .get(id)
                .is_none_or(|f| f.dense_rank.is_some() || f.keyword_rank.is_some());
            if ranked {
                unvouched += 1;
            }
            continue;
        };
        if hits.len() == top_k {
            break;
        }
        if let Some(place) = c.places.get(&block.doc_id) {
            if !taken.insert((place.version_id, block.section_title.as_str())) {
                continue;
            }
        }
        let (named, dense) = (c.named, c.dense);
        let f = fused_at.get(id);
        let best = dense.and_then(|d| d.best_chunk.get(id));
        let referenced = named.iter().any(|(n, _)| n == id);
        hits.push(hit(
            block,
            if referenced {
                REFERENCED_SCORE
            } else {
                f.map_or(0.0, |f| f.score)
            },
            f.and_then(|f| f.dense_rank),
            f.and_then(|f| f.keyword_rank),
            referenced,
            best,
            &query_words,
        ));
    }
    (hits, unvouched)
}

impl Parameters {
    fn of(fusion: FusionParameters, embedder: &dyn Embedder) -> Self {
        Parameters {
            fusion,
            candidates: CANDIDATES,
            analyzer: analyzer::ANALYZER,
            bm25_k1: analyzer::K1,
            bm25_b: analyzer::B,
            postings_per_term: POSTINGS_PER_TERM,
            max_query_terms: MAX_QUERY_TERMS,
            embedding_model: embedder.model_id().to_string(),
            query_adapter: embedder.query_adapter().map(str::to_string),
        }
    }
}

fn hit(
    block: &LiveBlock,
    score: f64,
    dense_rank: Option<usize>,
    keyword_rank: Option<usize>,
    referenced: bool,
    best: Option<&VectorHit>,
    query_words: &[String],
) -> Hit {
    let cited = match article_number(&block.section_title) {
        Some(n) => citation(&block.law_title, n),
        None if block.section_title.is_empty() => format!("《{}》", block.law_title),
        None => format!("《{}》{}", block.law_title, block.section_title),
    };
    let (chunk_id, text) = match best {
        Some(h) => (Some(h.chunk_id.clone()), h.text.clone()),
        None => (None, best_passage(&block.text, query_words)),
    };
    Hit {
        doc_id: block.doc_id.clone(),
        doc_name: block.doc_name.clone(),
        semantic_id: block.semantic_id.clone(),
        citation: cited,
        law_title: block.law_title.clone(),
        section_path: block.section_path.clone(),
        page_start: i64::from(block.page_start),
        page_end: i64::from(block.page_end),
        score,
        dense_rank,
        keyword_rank,
        referenced,
        article_excerpt: excerpt_around(&block.text, &text, ARTICLE_EXCERPT_CHARS).to_string(),
        article_chars: block.text.chars().count(),
        article_truncated: block.text.chars().nth(ARTICLE_EXCERPT_CHARS).is_some(),
        article_url: format!(
            "/documents/{}/blocks?semantic_id={}",
            block.doc_id,
            form_urlencoded::byte_serialize(block.semantic_id.as_bytes()).collect::<String>()
        ),
        chunk_id,
        text,
        version: None,
        references: None,
    }
}

/// At most `max` characters of `article`, taken around `passage` when the article holds it
/// (else from its start), cut at character boundaries.
fn excerpt_around<'a>(article: &'a str, passage: &str, max: usize) -> &'a str {
    let total = article.chars().count();
    if total <= max {
        return article;
    }
    let passage_at = article
        .find(passage)
        .map(|byte| article[..byte].chars().count())
        .unwrap_or(0);
    let passage_chars = passage.chars().count();
    // The passage in the middle of the window, the window inside the article.
    let start = passage_at
        .saturating_sub(max.saturating_sub(passage_chars) / 2)
        .min(total - max);
    let byte_at = |chars: usize| {
        article
            .char_indices()
            .nth(chars)
            .map_or(article.len(), |(b, _)| b)
    };
    &article[byte_at(start)..byte_at(start + max)]
}

/// The chunk of the article (cut as the index cut it) holding most of the query's words.
fn best_passage(text: &str, words: &[String]) -> String {
    let pieces = docpipe_parse::chunk_text(text, &docpipe_parse::ChunkConfig::default());
    pieces
        .into_iter()
        .enumerate()
        .max_by_key(|(i, p)| {
            let found = words.iter().filter(|w| p.contains(w.as_str())).count();
            (found, std::cmp::Reverse(*i))
        })
        .map(|(_, p)| p)
        .unwrap_or_default()
}

async fn dense_ranking(deps: &SearchDeps<'_>, q: &Query<'_>) -> Result<DenseRanking, SearchError> {
    let started = Instant::now();
    let vector = deps.embedder.embed_query(q.text).await?;
    let embedded = started.elapsed();
    // Chunks, not articles: a long article has several, so this gives fewer articles than
    // CANDIDATES. Twice as many chunks found the same articles in the top 10 and 50 of the
    // questions benchmark and cost 1-2.6 ms more (the vector search and its check both grow).
    let raw = match deps
        .vectors
        .search(
            &vector,
            DENSE_CHUNKS,
            &SearchFilters {
                doc_ids: q.filters.doc_ids.clone(),
                regulation_type: q.filters.regulation_type.clone(),
                version: q.filters.version.clone(),
                tags: q.filters.tags.clone(),
                exclude_doc_ids: Vec::new(),
                versions: version_window(q),
                organ_ids: q.filters.organs.clone(),
            },
        )
        .await
    {
        Ok(raw) => raw,
        // Nothing indexed yet anywhere (a fresh deployment): no collection is the truth, and the
        // dense list is empty. Once PostgreSQL says something is indexed, a missing collection
        // is an error the caller sees (a wrong name, a dropped collection), never an empty list
        // that reads as "nothing found".
        Err(VectorError::MissingCollection { .. })
            if !documents::any_indexed(&**deps.db.client().await?).await? =>
        {
            Vec::new()
        }
        Err(e) => return Err(e.into()),
    };
    let searched = started.elapsed();
    let places: Vec<ChunkPlace> = raw.iter().map(ChunkPlace::of).collect();
    let client = deps.db.client().await?;
    let blocks = articles::live_blocks_of_chunks(&**client, &places).await?;
    drop(client);
    let mut ranking = DenseRanking {
        blocks: Vec::new(),
        best_chunk: HashMap::new(),
        stale: 0,
    };
    for (h, block) in raw.into_iter().zip(blocks) {
        let Some(block) = block else {
            ranking.stale += 1;
            continue;
        };
        if let std::collections::hash_map::Entry::Vacant(e) = ranking.best_chunk.entry(block) {
            ranking.blocks.push(ScoredBlock {
                block_id: block,
                score: f64::from(h.score),
            });
            e.insert(h);
        }
    }
    ranking.blocks.truncate(CANDIDATES);
    tracing::debug!(
        embed_ms = ms(embedded),
        vector_ms = ms(searched - embedded),
        authority_ms = ms(started.elapsed() - searched),
        "dense ranking"
    );
    Ok(ranking)
}

async fn keyword_ranking(
    deps: &SearchDeps<'_>,
    q: &Query<'_>,
) -> Result<Vec<ScoredBlock>, SearchError> {
    let terms = Analyzer::shared().query_terms(q.text);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let started = Instant::now();
    let n = deps.cache.block_count(deps.db, &q.filters.organs).await?;
    let client = deps.db.client().await?;
    let scored = keyword::search(
        &**client,
        &terms,
        n,
        POSTINGS_PER_TERM,
        MAX_QUERY_TERMS,
        CANDIDATES as i64,
        q.filters,
        version_window(q),
    )
    .await?;
    tracing::debug!(keyword_ms = ms(started.elapsed()), "keyword ranking");
    Ok(scored)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod cache_tests {
    use super::{DbError, Keyed};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A loader that counts its reads and answers the count.
    fn counting(reads: &Arc<AtomicU64>) -> impl Fn() -> std::future::Ready<Result<u64, DbError>> {
        let reads = reads.clone();
        move || std::future::ready(Ok(reads.fetch_add(1, Ordering::SeqCst) + 1))
    }

    /// Past its freshness a value still answers at once while one read of its successor runs
    /// off the request; a request before that read lands gets the old value and starts no second
    /// read. Before, the request that found it old read the library's titles inline: one
    /// request in every 30 s paid a read that grows with the library.
    #[tokio::test]
    async fn a_stale_value_answers_while_one_read_replaces_it() {
        let keyed: Keyed<u64> = Keyed::new(Duration::from_millis(20), Duration::from_secs(600));
        let reads = Arc::new(AtomicU64::new(0));
        let organs = vec!["default".to_string()];
        assert_eq!(
            *keyed.get_or_load(&organs, counting(&reads)).await.unwrap(),
            1
        );
        assert_eq!(
            *keyed.get_or_load(&organs, counting(&reads)).await.unwrap(),
            1
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1, "fresh: read once");
        tokio::time::sleep(Duration::from_millis(40)).await;
        // Stale: the old value at once, one read started, never a second beside it.
        let slow = || {
            let reads = reads.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(reads.fetch_add(1, Ordering::SeqCst) + 1)
            }
        };
        assert_eq!(*keyed.get_or_load(&organs, slow).await.unwrap(), 1);
        assert_eq!(*keyed.get_or_load(&organs, slow).await.unwrap(), 1);
        for _ in 0..100 {
            if reads.load(Ordering::SeqCst) == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2, "one background read");
        assert_eq!(
            *keyed.get_or_load(&organs, counting(&reads)).await.unwrap(),
            2,
            "the read's value answers once it lands"
        );
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    /// A value past the stale limit is read again before the request answers, and a failed
    /// read is the request's error, never a cached one.
    #[tokio::test]
    async fn a_value_past_the_stale_limit_is_read_before_answering() {
        let keyed: Keyed<u64> = Keyed::new(Duration::from_millis(5), Duration::from_millis(10));
        let reads = Arc::new(AtomicU64::new(0));
        let organs = vec!["default".to_string()];
        assert_eq!(
            *keyed.get_or_load(&organs, counting(&reads)).await.unwrap(),
            1
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            *keyed.get_or_load(&organs, counting(&reads)).await.unwrap(),
            2
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
        let failing =
            || std::future::ready(Err::<u64, _>(DbError::Tls("the database is down".into())));
        assert!(keyed.get_or_load(&organs, failing).await.is_err());
    }
}

#[cfg(test)]
mod excerpt_tests {
    use super::excerpt_around;

    #[test]
    fn an_excerpt_is_bounded_and_holds_the_passage() {
        let article = format!("{}关键的一段话{}", "前".repeat(5_000), "后".repeat(5_000));
        let excerpt = excerpt_around(&article, "关键的一段话", 2_000);
        assert_eq!(excerpt.chars().count(), 2_000);
        assert!(excerpt.contains("关键的一段话"));
        // A short article is whole; a passage it lacks gives its start.
        assert_eq!(excerpt_around("短条文", "无", 2_000), "短条文");
        let start = excerpt_around(&article, "不在其中", 10);
        assert_eq!(start, "前".repeat(10));
        // The passage at the very end: the window ends with the article.
        let tail = format!("{}末尾", "字".repeat(3_000));
        assert!(excerpt_around(&tail, "末尾", 100).ends_with("末尾"));
    }
}
