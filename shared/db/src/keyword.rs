//! The keyword index (`keyword_documents`, `keyword_blocks`, `keyword_postings`, `keyword_terms`;
//! migration 0009): BM25 over `semantic_blocks`.
//!
//! Who writes it: the index stage's commit ([`write`], in the transaction that makes the document
//! `indexed`), and `docpipe reindex-keywords`. Who removes it: [`remove`], called wherever a
//! document's blocks go (the parse that replaces the snapshot, the delete that removes the row),
//! before they go, so `keyword_terms` counts exactly the postings that exist. Search reads it only
//! through the live documents (indexed, not being deleted, this run), like every vector hit.

use super::authority::{of_tenants, BLOCKED, HELD, INDEXED};
use super::{DbError, Type};
use docpipe_core::analyzer::{BlockTerms, TermId};
use docpipe_core::filters::Filters;
use docpipe_vector::VersionWindow;
use tokio_postgres::GenericClient;

/// With a version window, how many scored candidates per result the live check may look at
/// before the search settles for fewer: a work's versions and renditions (up to eight and a
/// few) share most articles and so most scores, and all but one of them are out of the window.
pub const WINDOW_OVERFETCH: i64 = 16;

/// One block of a document, as the keyword index reads it.
#[derive(Debug, Clone)]
pub struct BlockSource {
    pub block_id: i64,
    pub section_path: Vec<String>,
    pub text: String,
}

/// What the index stage analysed, ready to be written in its commit.
#[derive(Debug, Clone)]
pub struct AnalysedDocument {
    pub doc_id: String,
    pub title: String,
    pub title_key: String,
    pub analyzer: &'static str,
    pub blocks: Vec<(i64, BlockTerms)>,
}

/// The document's blocks and the title it is cited by: its first top-level heading that is a name
/// (a statute's title), else the regulation's name on its first line (a PDF or a text file marks
/// no heading: "中华人民共和国湿地保护法" above its notes), else its name without the file
/// extension. A chapter or an article is never the title: a PDF whose tree starts at 第一章 is
/// not cited as 《第一章 总则》.
pub async fn sources(
    c: &impl GenericClient,
    doc_id: &str,
) -> Result<(String, Vec<BlockSource>), DbError> {
    let row = c
        .query_typed_opt(
            "SELECT (SELECT title FROM structure_nodes
                     WHERE doc_id = $1 AND level <= 1 AND sub_type = 'explicit' AND btrim(title) <> ''
                     ORDER BY idx, id LIMIT 1) AS heading,
                    (SELECT doc_name FROM documents WHERE doc_id = $1) AS name",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    let (heading, name): (Option<String>, Option<String>) =
        row.map_or((None, None), |r| (r.get("heading"), r.get("name")));
    let rows = c
        .query_typed(
            "SELECT id, section_path, text FROM semantic_blocks WHERE doc_id = $1 ORDER BY id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    let blocks = rows
        .iter()
        .map(|r| BlockSource {
            block_id: r.get("id"),
            section_path: serde_json::from_value(r.get("section_path")).unwrap_or_default(),
            text: r.get("text"),
        })
        .collect::<Vec<BlockSource>>();
    let first_line = || {
        blocks
            .first()
            .and_then(|b| docpipe_parse::article_ref::title_line(&b.text))
            .map(str::to_string)
    };
    let title = heading
        .or_else(first_line)
        .or_else(|| name.map(|n| docpipe_parse::without_format_extension(&n).to_string()))
        .unwrap_or_default();
    Ok((title, blocks))
}

/// The document's keyword rows become this run's: the old ones removed, the new ones written, the
/// document frequencies moved by the difference.
pub async fn write(
    c: &impl GenericClient,
    run_id: i64,
    doc: &AnalysedDocument,
) -> Result<(), DbError> {
    remove(c, &doc.doc_id).await?;
    c.execute_typed(
        "INSERT INTO keyword_documents (doc_id, run_id, analyzer, title, title_key, block_count)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            (&doc.doc_id, Type::VARCHAR),
            (&run_id, Type::INT8),
            (&doc.analyzer, Type::VARCHAR),
            (&doc.title, Type::TEXT),
            (&doc.title_key, Type::TEXT),
            (&(doc.blocks.len() as i32), Type::INT4),
        ],
    )
    .await?;
    let ids: Vec<i64> = doc.blocks.iter().map(|(id, _)| *id).collect();
    let lengths: Vec<i32> = doc.blocks.iter().map(|(_, b)| b.length as i32).collect();
    // One text array literal per block: UNNEST cannot take a ragged two-dimensional array.
    let terms: Vec<String> = doc
        .blocks
        .iter()
        .map(|(_, b)| {
            let list: Vec<String> = b.terms.iter().map(|(t, _)| t.to_string()).collect();
            format!("{{{}}}", list.join(","))
        })
        .collect();
    c.execute_typed(
        "INSERT INTO keyword_blocks (block_id, doc_id, length, terms)
         SELECT u.id, $1, u.len, u.terms::int8[]
         FROM UNNEST($2::int8[], $3::int4[], $4::text[]) AS u(id, len, terms)",
        &[
            (&doc.doc_id, Type::VARCHAR),
            (&ids, Type::INT8_ARRAY),
            (&lengths, Type::INT4_ARRAY),
            (&terms, Type::TEXT_ARRAY),
        ],
    )
    .await?;
    let mut posting_terms: Vec<TermId> = Vec::new();
    let mut posting_blocks: Vec<i64> = Vec::new();
    let mut tfs: Vec<i16> = Vec::new();
    let mut impacts: Vec<f32> = Vec::new();
    for (id, block) in &doc.blocks {
        for &(term, tf) in &block.terms {
            posting_terms.push(term);
            posting_blocks.push(*id);
            tfs.push(tf.min(i16::MAX as u32) as i16);
            impacts.push(block.impact(tf) as f32);
        }
    }
    // The postings and document frequencies are the document's tenant's (the row above took it
    // from the document).
    c.execute_typed(
        "INSERT INTO keyword_postings (term, block_id, tf, impact, organ_id)
         SELECT u.*, kd.organ_id
         FROM UNNEST($1::int8[], $2::int8[], $3::int2[], $4::float4[]) AS u
         CROSS JOIN (SELECT organ_id FROM keyword_documents WHERE doc_id = $5) kd",
        &[
            (&posting_terms, Type::INT8_ARRAY),
            (&posting_blocks, Type::INT8_ARRAY),
            (&tfs, Type::INT2_ARRAY),
            (&impacts, Type::FLOAT4_ARRAY),
            (&doc.doc_id, Type::VARCHAR),
        ],
    )
    .await?;
    c.execute_typed(
        "INSERT INTO keyword_terms (organ_id, term, df)
         SELECT kd.organ_id, u.term, count(*) FROM UNNEST($1::int8[]) AS u(term)
         CROSS JOIN (SELECT organ_id FROM keyword_documents WHERE doc_id = $2) kd
         GROUP BY kd.organ_id, u.term ORDER BY u.term
         ON CONFLICT (organ_id, term) DO UPDATE SET df = keyword_terms.df + EXCLUDED.df",
        &[
            (&posting_terms, Type::INT8_ARRAY),
            (&doc.doc_id, Type::VARCHAR),
        ],
    )
    .await?;
    Ok(())
}

/// Removes the document's keyword rows, if any, and takes their postings out of the document
/// frequencies. Returns how many blocks it removed.
pub async fn remove(c: &impl GenericClient, doc_id: &str) -> Result<u64, DbError> {
    let params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)] = &[(&doc_id, Type::VARCHAR)];
    // Term order, as in `write`, so two transactions never wait on each other's terms in a cycle.
    c.execute_typed(
        "WITH gone AS (
             SELECT unnest(terms) AS term FROM keyword_blocks WHERE doc_id = $1),
         counted AS (SELECT term, count(*) AS n FROM gone GROUP BY term),
         organ AS (SELECT organ_id FROM keyword_documents WHERE doc_id = $1),
         locked AS (
             SELECT t.organ_id, t.term, c.n FROM keyword_terms t
             JOIN counted c USING (term) JOIN organ o ON o.organ_id = t.organ_id
             ORDER BY t.term FOR UPDATE OF t)
         UPDATE keyword_terms t SET df = t.df - l.n FROM locked l
         WHERE t.organ_id = l.organ_id AND t.term = l.term",
        params,
    )
    .await?;
    c.execute_typed(
        "DELETE FROM keyword_postings p
         USING (SELECT block_id, unnest(terms) AS term FROM keyword_blocks WHERE doc_id = $1) g
         WHERE p.term = g.term AND p.block_id = g.block_id",
        params,
    )
    .await?;
    let removed = c
        .execute_typed("DELETE FROM keyword_blocks WHERE doc_id = $1", params)
        .await?;
    c.execute_typed("DELETE FROM keyword_documents WHERE doc_id = $1", params)
        .await?;
    Ok(removed)
}

/// How many blocks the index holds for these tenants (all when empty): BM25's N.
pub async fn block_count(c: &impl GenericClient, organs: &[String]) -> Result<i64, DbError> {
    let row = c
        .query_typed_one(
            "SELECT COALESCE(sum(block_count), 0)::int8 AS blocks FROM keyword_documents
             WHERE cardinality($1::varchar[]) = 0 OR organ_id = ANY($1::varchar[])",
            &[(&organs, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(row.get("blocks"))
}

/// A block the keyword index found, with its BM25 score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredBlock {
    pub block_id: i64,
    pub score: f64,
}

/// The SQL and parameters that keep a search to the live documents the filters allow.
struct LiveFilter {
    clauses: Vec<String>,
    params: Vec<(Box<dyn tokio_postgres::types::ToSql + Sync + Send>, Type)>,
}

impl LiveFilter {
    fn new(filters: &Filters, window: VersionWindow, first_param: usize) -> LiveFilter {
        let mut f = LiveFilter {
            clauses: Vec::new(),
            params: Vec::new(),
        };
        let mut next = first_param;
        let mut param = |f: &mut LiveFilter,
                         clause: &str,
                         value: Box<dyn tokio_postgres::types::ToSql + Sync + Send>,
                         ty: Type| {
            f.clauses.push(clause.replace("{p}", &format!("${next}")));
            f.params.push((value, ty));
            next += 1;
        };
        if !filters.doc_ids.is_empty() {
            param(
                &mut f,
                "d.doc_id = ANY({p})",
                Box::new(filters.doc_ids.clone()),
                Type::VARCHAR_ARRAY,
            );
        }
        // First, so that [`LiveFilter::projection_only`] finds it.
        match window {
            VersionWindow::Any => {}
            VersionWindow::Answering => f.clauses.push(
                "NOT EXISTS (SELECT 1 FROM search_projection sp
                             WHERE sp.doc_id = d.doc_id AND NOT sp.answering)"
                    .to_string(),
            ),
            VersionWindow::InForceOn(day) => param(
                &mut f,
                "NOT EXISTS (SELECT 1 FROM search_projection sp
                             WHERE sp.doc_id = d.doc_id AND NOT (sp.answering
                               AND sp.in_force_from <= {p} AND sp.in_force_to > {p}))",
                Box::new(day),
                Type::INT8,
            ),
        }
        if let Some(rt) = &filters.regulation_type {
            param(
                &mut f,
                "d.regulation_type = {p}",
                Box::new(rt.clone()),
                Type::VARCHAR,
            );
        }
        if let Some(v) = &filters.version {
            param(
                &mut f,
                "d.version = {p}",
                Box::new(v.clone()),
                Type::VARCHAR,
            );
        }
        if !filters.tags.is_empty() {
            param(
                &mut f,
                "d.metadata -> 'tags' ?| {p}",
                Box::new(filters.tags.clone()),
                Type::TEXT_ARRAY,
            );
        }
        f
    }

    /// Whether the version window (the search projection) is the only filter. It is then
    /// checked on the scored candidates, not on each posting: checked per posting it cost two
    /// key lookups a posting, and with one version in four in force, four postings read for
    /// each kept (measured at 2,000 laws: 440 ms at p50 against 41 at 150).
    fn projection_only(&self) -> bool {
        self.clauses.len() == 1 && self.clauses[0].contains("search_projection")
    }

    fn sql(&self) -> String {
        self.clauses
            .iter()
            .map(|c| format!(" AND {c}"))
            .collect::<String>()
    }
}

/// The live check of the scored candidates, one key lookup per candidate. A LATERAL with a
/// LIMIT is never flattened into a join, so the planner cannot choose to read every block of
/// every live document instead: with no statistics yet (a database fresh from a bulk load) it
/// did, a nested loop over all of them per candidate (12 of 13 ms on 450 articles), and with
/// statistics a hash join over all of them (a read that grows with the corpus).
fn live_check() -> String {
    format!(
        "SELECT 1 FROM keyword_blocks kb
         JOIN keyword_documents kd ON kd.doc_id = kb.doc_id
         JOIN documents d ON d.doc_id = kd.doc_id AND d.current_run_id = kd.run_id
         WHERE kb.block_id = c.block_id AND {INDEXED}"
    )
}

/// The best blocks for the query's terms, BM25 with idf from `keyword_terms` and N from
/// `blocks`. The arithmetic is float8 throughout: a bare `0.5` would make it numeric, which made
/// the sum over a query's postings six times slower.
///
/// Only the query's `max_terms` most selective terms are scored (highest weight: rarest in the
/// index, times how often the query says them), and each contributes at most its `per_term`
/// highest-weighted postings: what a query reads is bounded by `max_terms × per_term`, whatever
/// the query's length or the corpus's size. The version window is checked on the scored
/// candidates, best first, at most [`WINDOW_OVERFETCH`] per result; other filters (documents, a
/// type, tags) filter the postings before the bound, so a narrow filter still sees all of its
/// own blocks.
#[allow(clippy::too_many_arguments)]
pub async fn search(
    c: &impl GenericClient,
    terms: &[(TermId, u32)],
    blocks: i64,
    per_term: i64,
    max_terms: i64,
    limit: i64,
    filters: &Filters,
    window: VersionWindow,
) -> Result<Vec<ScoredBlock>, DbError> {
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let statement =
        SearchStatement::new(terms, blocks, per_term, max_terms, limit, filters, window);
    let rows = c.query_typed(&statement.sql, &statement.params()).await?;
    Ok(rows
        .iter()
        .map(|r| ScoredBlock {
            block_id: r.get("block_id"),
            score: r.get("score"),
        })
        .collect())
}

/// The one statement [`search`] runs, with its parameters: apart so that a test can ask the
/// planner what it reads.
pub struct SearchStatement {
    pub sql: String,
    ids: Vec<i64>,
    counts: Vec<f64>,
    blocks: i64,
    per_term: i64,
    max_terms: i64,
    limit: i64,
    checked: i64,
    organs: Vec<String>,
    live: LiveFilter,
}

impl SearchStatement {
    pub fn new(
        terms: &[(TermId, u32)],
        blocks: i64,
        per_term: i64,
        max_terms: i64,
        limit: i64,
        filters: &Filters,
        window: VersionWindow,
    ) -> SearchStatement {
        let live = LiveFilter::new(filters, window, 9);
        // Unfiltered, or filtered by the version window alone, the bound applies to the raw
        // postings (an index-only scan per term) and the live check, window included, to the
        // scored candidates, best first, until `limit` pass. Filtered otherwise (documents, a
        // type, tags: filters that may keep a few blocks out of many), each posting is checked
        // as it is read, so a narrow filter still sees all of its own blocks.
        // Postings are read per tenant (`o`, the caller's one or two): each tenant's best
        // `per_term` for a term, so a tenant's own articles are never crowded out of the bound by
        // a larger library's.
        let postings = if live.clauses.is_empty() || live.projection_only() {
            "SELECT p.block_id, p.impact FROM keyword_postings p
             WHERE p.organ_id = o.organ AND p.term = q.term ORDER BY p.impact DESC LIMIT $4"
                .to_string()
        } else {
            format!(
                "SELECT p.block_id, p.impact FROM keyword_postings p
                 JOIN keyword_blocks kb ON kb.block_id = p.block_id
                 JOIN keyword_documents kd ON kd.doc_id = kb.doc_id
                 JOIN documents d ON d.doc_id = kd.doc_id AND d.current_run_id = kd.run_id
                                 AND d.status = 'indexed' AND d.deleting_at IS NULL
                 WHERE p.organ_id = o.organ AND p.term = q.term{}
                 ORDER BY p.impact DESC LIMIT $4",
                live.sql()
            )
        };
        // The candidates are checked in score order and the outer LIMIT stops the checks once
        // `limit` pass: the plan keeps `c`'s order through the nested loop, so no candidate past
        // the last one needed is looked up. `$7` bounds how many are checked at all.
        let sql = format!(
            "WITH o AS (
                 SELECT unnest(CASE WHEN cardinality($8::varchar[]) = 0
                                    THEN ARRAY(SELECT organ_id FROM tenants)
                                    ELSE $8::varchar[] END) AS organ),
             q AS (
                 SELECT u.term,
                        u.n * ln(1.0::float8 + (greatest($3::int8, t.df) - t.df + 0.5::float8)
                                               / (t.df + 0.5::float8)) AS w
                 FROM UNNEST($1::int8[], $2::float8[]) AS u(term, n)
                 CROSS JOIN LATERAL (
                     SELECT sum(kt.df)::int8 AS df FROM keyword_terms kt
                     WHERE kt.organ_id IN (SELECT organ FROM o) AND kt.term = u.term) t
                 WHERE t.df > 0
                 ORDER BY w DESC, u.term LIMIT $6),
             c AS (
                 SELECT p.block_id, sum(q.w * p.impact::float8) AS score
                 FROM q CROSS JOIN o CROSS JOIN LATERAL ({postings}) p
                 GROUP BY p.block_id ORDER BY score DESC, p.block_id LIMIT $7)
             SELECT c.block_id, c.score FROM c
             CROSS JOIN LATERAL ({live_check}{live_sql} LIMIT 1) live
             ORDER BY c.score DESC, c.block_id LIMIT $5",
            live_check = live_check(),
            live_sql = live.sql(),
        );
        // Without a window, the candidates a live check may drop (a document mid-delete, a run
        // replaced) are few. With one, each work's other versions and renditions score as its
        // answering one does (the same articles), and they are checked and dropped first.
        let checked = if matches!(window, VersionWindow::Any) {
            limit * 2 + 20
        } else {
            (limit * WINDOW_OVERFETCH).max(limit * 2 + 20)
        };
        SearchStatement {
            sql,
            ids: terms.iter().map(|(t, _)| *t).collect(),
            counts: terms.iter().map(|(_, n)| f64::from(*n)).collect(),
            blocks,
            per_term,
            max_terms,
            limit,
            checked,
            organs: filters.organs.clone(),
            live,
        }
    }

    pub fn params(&self) -> Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> {
        let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> = vec![
            (&self.ids, Type::INT8_ARRAY),
            (&self.counts, Type::FLOAT8_ARRAY),
            (&self.blocks, Type::INT8),
            (&self.per_term, Type::INT8),
            (&self.limit, Type::INT8),
            (&self.max_terms, Type::INT8),
            (&self.checked, Type::INT8),
            (&self.organs, Type::VARCHAR_ARRAY),
        ];
        for (value, ty) in &self.live.params {
            params.push((
                value.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync),
                ty.clone(),
            ));
        }
        params
    }
}

/// A live document's citable title, for resolving a law that a query names.
#[derive(Debug, Clone)]
pub struct LawTitle {
    pub doc_id: String,
    pub title: String,
    pub title_key: String,
    pub indexed_at: chrono::DateTime<chrono::Utc>,
}

impl LawTitle {
    /// A row of the titles' statements (`doc_id`, `title`, `title_key`, `indexed_at`).
    fn from_row(r: &tokio_postgres::Row) -> LawTitle {
        LawTitle {
            doc_id: r.get("doc_id"),
            title: r.get("title"),
            title_key: r.get("title_key"),
            indexed_at: r.get("indexed_at"),
        }
    }
}

/// The law `doc_id` is cited as (its keyword row's title), once it is indexed.
pub async fn title_of(c: &impl GenericClient, doc_id: &str) -> Result<Option<String>, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT title FROM keyword_documents WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.map(|r| r.get("title")))
}

/// The laws a citation or a query can name: every indexed document's title, but those of a
/// version held for its release (the authority's conditions, [`crate::authority`]).
pub async fn law_titles(
    c: &impl GenericClient,
    organs: &[String],
) -> Result<Vec<LawTitle>, DbError> {
    let rows = c
        .query_typed(
            &format!(
                "SELECT kd.doc_id, kd.title, kd.title_key, kd.indexed_at FROM keyword_documents kd
                 JOIN documents d ON d.doc_id = kd.doc_id AND d.current_run_id = kd.run_id
                 WHERE {INDEXED} AND NOT {HELD} AND NOT {BLOCKED} AND {tenants}",
                tenants = of_tenants("$1")
            ),
            &[(&organs, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows.iter().map(LawTitle::from_row).collect())
}

/// As [`law_titles`], for one law: the documents whose title key is `key`, or `key` followed by
/// a bracketed date (a version's title), read by the title key's index. What a citation of a law
/// the cached titles lack costs: the documents of one work, however large the library.
pub async fn law_titles_of(
    c: &impl GenericClient,
    key: &str,
    organs: &[String],
) -> Result<Vec<LawTitle>, DbError> {
    let escaped = key
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    let (ascii, wide) = (format!("{escaped}(%"), format!("{escaped}（%"));
    let rows = c
        .query_typed(
            &format!(
                "SELECT kd.doc_id, kd.title, kd.title_key, kd.indexed_at FROM keyword_documents kd
                 JOIN documents d ON d.doc_id = kd.doc_id AND d.current_run_id = kd.run_id
                 WHERE (kd.title_key = $1 OR kd.title_key LIKE $2 OR kd.title_key LIKE $3)
                   AND {INDEXED} AND NOT {HELD} AND NOT {BLOCKED} AND {tenants}",
                tenants = of_tenants("$4")
            ),
            &[
                (&key, Type::TEXT),
                (&ascii, Type::TEXT),
                (&wide, Type::TEXT),
                (&organs, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    Ok(rows.iter().map(LawTitle::from_row).collect())
}

/// Documents whose keyword rows an analyzer other than `current` wrote, or that are indexed
/// without any: what `docpipe reindex-keywords` re-analyses.
pub async fn stale_documents(
    c: &impl GenericClient,
    current: &str,
    limit: i64,
) -> Result<Vec<(String, i64)>, DbError> {
    let rows = c
        .query_typed(
            "SELECT d.doc_id, d.current_run_id FROM documents d
             LEFT JOIN keyword_documents kd ON kd.doc_id = d.doc_id
             WHERE d.status = 'indexed' AND d.deleting_at IS NULL AND d.current_run_id IS NOT NULL
               AND (kd.doc_id IS NULL OR kd.analyzer <> $1 OR kd.run_id <> d.current_run_id)
             ORDER BY d.doc_id LIMIT $2",
            &[(&current, Type::VARCHAR), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("doc_id"), r.get("current_run_id")))
        .collect())
}
