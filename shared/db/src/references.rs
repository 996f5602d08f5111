//! `article_references`: the references between articles a parse read, replaced with the
//! snapshot ([`replace`], called by [`super::snapshot::replace`]), and the reads of one article's
//! references both ways.

use super::{fit, DbError, Type};
use docpipe_parse::article_ref::{article_number, normalize_law_name};
use docpipe_parse::references::{ArticleNo, Reference, Target, EXTRACTOR};
use serde::Serialize;
use tokio_postgres::GenericClient;

/// An article as one integer, so that a span of articles is a range: 第三十九条之一 → 39001.
pub fn ordinal(a: ArticleNo) -> i32 {
    (a.number.min(2_000_000) * 1000 + a.sub.min(999)) as i32
}

/// The article a block titled 第…条 holds, as an ordinal (an inserted 之M article is read inside
/// the block of its article, so a block's ordinal has no 之M); none for any other block.
pub fn block_ordinal(section_title: &str) -> Option<i32> {
    article_number(section_title).map(|n| ordinal(ArticleNo::new(n, 0)))
}

/// The articles a target covers, as ordinals; none for a chapter, section or part.
fn covered(target: &Target) -> (Option<i32>, Option<i32>) {
    match target {
        Target::Article { article, .. }
        | Target::Paragraphs { article, .. }
        | Target::Items { article, .. } => (Some(ordinal(*article)), Some(ordinal(*article))),
        Target::Articles { from, to } => (Some(ordinal(*from)), Some(ordinal(*to))),
        Target::Division { .. } => (None, None),
    }
}

/// The document's references become `references`, read from `run_id`'s blocks by this extractor;
/// the old ones go in the same transaction.
pub async fn replace(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    references: &[Reference],
) -> Result<(), DbError> {
    c.execute_typed(
        "DELETE FROM article_references WHERE doc_id = $1",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    record_reading(c, doc_id, run_id, references.len()).await?;
    if references.is_empty() {
        return Ok(());
    }
    insert(c, doc_id, references).await
}

/// Which extractor read the document's references, from which run: a document an older
/// extractor read is read again by housekeeping.
async fn record_reading(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    read: usize,
) -> Result<(), DbError> {
    let read = read as i32;
    c.execute_typed(
        "INSERT INTO reference_readings (doc_id, run_id, extractor, references_read)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (doc_id) DO UPDATE SET run_id = EXCLUDED.run_id,
             extractor = EXCLUDED.extractor, references_read = EXCLUDED.references_read,
             read_at = now()",
        &[
            (&doc_id, Type::VARCHAR),
            (&run_id, Type::INT8),
            (&EXTRACTOR, Type::VARCHAR),
            (&read, Type::INT4),
        ],
    )
    .await?;
    Ok(())
}

/// The references as rows, in one statement whatever their number.
async fn insert(
    c: &impl GenericClient,
    doc_id: &str,
    references: &[Reference],
) -> Result<(), DbError> {
    let numbers: Vec<i32> = (1..=references.len() as i32).collect();
    let blocks: Vec<&str> = references
        .iter()
        .map(|r| fit(&r.semantic_id, 128))
        .collect();
    let articles: Vec<String> = references.iter().map(|r| r.article.to_string()).collect();
    let paragraphs: Vec<i32> = references.iter().map(|r| r.paragraph as i32).collect();
    let starts: Vec<i32> = references.iter().map(|r| r.span.start as i32).collect();
    let ends: Vec<i32> = references.iter().map(|r| r.span.end as i32).collect();
    let texts: Vec<&str> = references.iter().map(|r| fit(&r.text, 256)).collect();
    let kinds: Vec<&str> = references.iter().map(|r| r.kind.as_str()).collect();
    let laws: Vec<Option<&str>> = references
        .iter()
        .map(|r| r.law.as_deref().map(|l| fit(l, 256)))
        .collect();
    let law_keys: Vec<Option<String>> = references
        .iter()
        .map(|r| {
            r.law
                .as_deref()
                .map(|l| fit(&normalize_law_name(l), 256).to_string())
        })
        .collect();
    let targets: Vec<String> = references
        .iter()
        .map(|r| fit(&r.target.to_string(), 64).to_string())
        .collect();
    let (froms, tos): (Vec<Option<i32>>, Vec<Option<i32>>) =
        references.iter().map(|r| covered(&r.target)).unzip();
    let dangling: Vec<bool> = references.iter().map(|r| r.dangling).collect();
    c.execute_typed(
        "INSERT INTO article_references (doc_id, ref_no, semantic_id, from_article, from_paragraph,
                                         span_start, span_end, text, kind, target_law,
                                         target_law_key, target, target_from, target_to, dangling)
         SELECT $1, * FROM UNNEST($2::int4[], $3::varchar[], $4::varchar[], $5::int4[], $6::int4[],
                                  $7::int4[], $8::varchar[], $9::varchar[], $10::varchar[],
                                  $11::varchar[], $12::varchar[], $13::int4[], $14::int4[],
                                  $15::bool[])",
        &[
            (&doc_id, Type::VARCHAR),
            (&numbers, Type::INT4_ARRAY),
            (&blocks, Type::VARCHAR_ARRAY),
            (&articles, Type::VARCHAR_ARRAY),
            (&paragraphs, Type::INT4_ARRAY),
            (&starts, Type::INT4_ARRAY),
            (&ends, Type::INT4_ARRAY),
            (&texts, Type::VARCHAR_ARRAY),
            (&kinds, Type::VARCHAR_ARRAY),
            (&laws, Type::VARCHAR_ARRAY),
            (&law_keys, Type::VARCHAR_ARRAY),
            (&targets, Type::VARCHAR_ARRAY),
            (&froms, Type::INT4_ARRAY),
            (&tos, Type::INT4_ARRAY),
            (&dangling, Type::BOOL_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// One stored reference.
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceRow {
    pub doc_id: String,
    pub semantic_id: String,
    pub from_article: String,
    pub from_paragraph: i32,
    pub text: String,
    pub kind: String,
    /// None: the same regulation.
    pub target_law: Option<String>,
    #[serde(skip)]
    pub target_law_key: Option<String>,
    pub target: String,
    #[serde(skip)]
    pub target_from: Option<i32>,
    #[serde(skip)]
    pub target_to: Option<i32>,
    pub dangling: bool,
}

const COLUMNS: &str = "r.doc_id, r.semantic_id, r.from_article, r.from_paragraph, r.text, r.kind,
                       r.target_law, r.target_law_key, r.target, r.target_from, r.target_to,
                       r.dangling";

impl ReferenceRow {
    fn from_row(r: &tokio_postgres::Row) -> ReferenceRow {
        ReferenceRow {
            doc_id: r.get("doc_id"),
            semantic_id: r.get("semantic_id"),
            from_article: r.get("from_article"),
            from_paragraph: r.get("from_paragraph"),
            text: r.get("text"),
            kind: r.get("kind"),
            target_law: r.get("target_law"),
            target_law_key: r.get("target_law_key"),
            target: r.get("target"),
            target_from: r.get("target_from"),
            target_to: r.get("target_to"),
            dangling: r.get("dangling"),
        }
    }
}

/// The references article `from_article` ('39', '39-1') of `doc_id` makes, in text order; at
/// most `limit`.
pub async fn outgoing(
    c: &impl GenericClient,
    doc_id: &str,
    from_article: &str,
    limit: i64,
) -> Result<Vec<ReferenceRow>, DbError> {
    outgoing_of(c, &[(doc_id, from_article)], limit).await
}

/// The references each (document, article) pair makes, in one statement: at most `limit_each` an
/// article, grouped by document and article, each in text order.
pub async fn outgoing_of(
    c: &impl GenericClient,
    articles: &[(&str, &str)],
    limit_each: i64,
) -> Result<Vec<ReferenceRow>, DbError> {
    if articles.is_empty() {
        return Ok(Vec::new());
    }
    let (docs, froms): (Vec<&str>, Vec<&str>) = articles.iter().copied().unzip();
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM (
                     SELECT r.*, row_number() OVER (PARTITION BY r.doc_id, r.from_article
                                                    ORDER BY r.ref_no) AS n
                     FROM article_references r
                     JOIN (SELECT DISTINCT * FROM UNNEST($1::varchar[], $2::varchar[]))
                          AS a(doc_id, from_article)
                       ON r.doc_id = a.doc_id AND r.from_article = a.from_article
                 ) r
                 WHERE r.n <= $3
                 ORDER BY r.doc_id, r.from_article, r.ref_no"
            ),
            &[
                (&docs, Type::VARCHAR_ARRAY),
                (&froms, Type::VARCHAR_ARRAY),
                (&limit_each, Type::INT8),
            ],
        )
        .await?;
    Ok(rows.iter().map(ReferenceRow::from_row).collect())
}

/// The references that point at `article` of `doc_id`: from its own articles, and from other
/// live (indexed, not being deleted) documents that name its law (`law_keys`: the normalised names
/// it goes by); at most `limit`, its own first.
pub async fn incoming(
    c: &impl GenericClient,
    doc_id: &str,
    law_keys: &[String],
    article: ArticleNo,
    limit: i64,
    organs: &[String],
) -> Result<Vec<ReferenceRow>, DbError> {
    let at = ordinal(article);
    let rows = c
        .query_typed(
            &incoming_statement(),
            &[
                (&doc_id, Type::VARCHAR),
                (&at, Type::INT4),
                (&law_keys, Type::VARCHAR_ARRAY),
                (&limit, Type::INT8),
                (&organs, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    Ok(rows.iter().map(ReferenceRow::from_row).collect())
}

/// The statement [`incoming`] runs (`$1` the document, `$2` the article's ordinal, `$3` the law's
/// keys, `$4` the limit, `$5` the caller's tenants): apart so that a test can ask the planner
/// what it reads. Another law's references are found by `article_references_other_law`, which
/// holds only rows with a `target_law`: the statement says so, since the planner cannot tell it
/// from `target_law_key` alone, and without it read the whole table, every reference of the
/// library, on every article read.
pub fn incoming_statement() -> String {
    format!(
        "SELECT {COLUMNS} FROM (
             SELECT r.*, 0 AS side FROM article_references r
             WHERE r.doc_id = $1 AND r.target_law IS NULL AND NOT r.dangling
               AND r.target_from <= $2 AND r.target_to >= $2
             UNION ALL
             SELECT r.*, 1 AS side FROM article_references r
             JOIN documents d ON d.doc_id = r.doc_id
             WHERE r.target_law IS NOT NULL AND r.target_law_key = ANY($3) AND r.doc_id <> $1
               AND r.target_from <= $2 AND r.target_to >= $2
               AND d.status = 'indexed' AND d.deleting_at IS NULL
               AND {tenants}
         ) r
         ORDER BY r.side, r.doc_id, r.ref_no LIMIT $4",
        tenants = crate::authority::of_tenants("$5"),
    )
}

/// Indexed documents whose references were not read from their current run's blocks by this
/// extractor (parsed before the graph existed, or read by an older one), with that run; at most
/// `limit`.
pub async fn stale_documents(
    c: &impl GenericClient,
    limit: i64,
) -> Result<Vec<(String, i64)>, DbError> {
    let rows = c
        .query_typed(
            "SELECT d.doc_id, d.current_run_id FROM documents d
             LEFT JOIN reference_readings rr ON rr.doc_id = d.doc_id
             WHERE d.status = 'indexed' AND d.deleting_at IS NULL AND d.current_run_id IS NOT NULL
               AND (rr.doc_id IS NULL OR rr.extractor <> $1 OR rr.run_id <> d.current_run_id)
             ORDER BY d.doc_id LIMIT $2",
            &[(&EXTRACTOR, Type::VARCHAR), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("doc_id"), r.get("current_run_id")))
        .collect())
}

/// Sets each article block's ordinal from its title: what a snapshot written before migration 0018
/// lacks.
pub async fn place_articles(c: &impl GenericClient, doc_id: &str) -> Result<usize, DbError> {
    let rows = c
        .query_typed(
            "SELECT id, section_title FROM semantic_blocks
             WHERE doc_id = $1 AND section_title LIKE '第%'",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    let (ids, ordinals): (Vec<i64>, Vec<i32>) = rows
        .iter()
        .filter_map(|r| Some((r.get::<_, i64>(0), block_ordinal(r.get(1))?)))
        .unzip();
    c.execute_typed(
        "UPDATE semantic_blocks sb SET article_ordinal = u.ordinal
         FROM UNNEST($1::int8[], $2::int4[]) AS u(id, ordinal) WHERE sb.id = u.id",
        &[(&ids, Type::INT8_ARRAY), (&ordinals, Type::INT4_ARRAY)],
    )
    .await?;
    Ok(ids.len())
}

/// One edge of the article graph at block level: `seed` refers to `target`.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub seed: i64,
    pub target: i64,
    pub kind: String,
}

/// The article blocks the `seeds` blocks refer to: in their own regulation, or in a law they name
/// (its documents found by their title key). Only references to an article or a span of at most
/// `max_span` articles; dangling ones and chapters are not followed, nor a block's references to
/// itself. At most `per_reference` blocks a reference and `limit` in all. Liveness is the caller's
/// check, as for every other candidate.
pub async fn edges_from(
    c: &impl GenericClient,
    seeds: &[i64],
    max_span: i32,
    per_reference: i64,
    limit: i64,
    organs: &[String],
) -> Result<Vec<Edge>, DbError> {
    if seeds.is_empty() {
        return Ok(Vec::new());
    }
    let span = max_span.saturating_sub(1).saturating_mul(1000);
    let rows = c
        .query_typed(
            "SELECT r.seed, t.id AS target, r.kind
             FROM (SELECT s.id AS seed, s.doc_id, r.kind, r.target_law_key, r.ref_no,
                          r.target_from / 1000 * 1000 AS lo, r.target_to AS hi
                   FROM semantic_blocks s
                   JOIN article_references r ON r.doc_id = s.doc_id AND r.semantic_id = s.semantic_id
                   WHERE s.id = ANY($1) AND NOT r.dangling AND r.target_from IS NOT NULL
                     AND r.target_to - r.target_from <= $2) r
             CROSS JOIN LATERAL (
                 SELECT t.id FROM semantic_blocks t
                 WHERE r.target_law_key IS NULL AND t.doc_id = r.doc_id
                   AND t.article_ordinal BETWEEN r.lo AND r.hi
                 UNION ALL
                 SELECT t.id FROM keyword_documents kd
                 JOIN semantic_blocks t ON t.doc_id = kd.doc_id
                 WHERE r.target_law_key IS NOT NULL AND kd.title_key = r.target_law_key
                   AND t.article_ordinal BETWEEN r.lo AND r.hi
                   AND (cardinality($5::varchar[]) = 0 OR kd.organ_id = ANY($5::varchar[]))
                 LIMIT $3
             ) t
             WHERE t.id <> r.seed
             ORDER BY r.seed, r.ref_no
             LIMIT $4",
            &[
                (&seeds, Type::INT8_ARRAY),
                (&span, Type::INT4),
                (&per_reference, Type::INT8),
                (&limit, Type::INT8),
                (&organs, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Edge {
            seed: r.get("seed"),
            target: r.get("target"),
            kind: r.get("kind"),
        })
        .collect())
}
