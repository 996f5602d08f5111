//! `article_references`: the references between articles a parse read, replaced with the
//! snapshot ([`replace`], called by [`super::snapshot::replace`]), and the reads of one article's
//! references both ways.

use super::snapshot::fit;
use super::{DbError, Type};
use docpipe_parse::article_ref::normalize_law_name;
use docpipe_parse::references::{ArticleNo, Reference, Target};
use serde::Serialize;
use tokio_postgres::GenericClient;

/// An article as one integer, so that a span of articles is a range: 第三十九条之一 → 39001.
pub fn ordinal(a: ArticleNo) -> i32 {
    (a.number.min(2_000_000) * 1000 + a.sub.min(999)) as i32
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

/// The document's references become `references`, the old ones gone in the same transaction.
pub async fn replace(
    c: &impl GenericClient,
    doc_id: &str,
    references: &[Reference],
) -> Result<(), DbError> {
    c.execute_typed(
        "DELETE FROM article_references WHERE doc_id = $1",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    if references.is_empty() {
        return Ok(());
    }
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
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM article_references r
                 WHERE r.doc_id = $1 AND r.from_article = $2
                 ORDER BY r.ref_no LIMIT $3"
            ),
            &[
                (&doc_id, Type::VARCHAR),
                (&from_article, Type::VARCHAR),
                (&limit, Type::INT8),
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
) -> Result<Vec<ReferenceRow>, DbError> {
    let at = ordinal(article);
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM (
                     SELECT r.*, 0 AS side FROM article_references r
                     WHERE r.doc_id = $1 AND r.target_law IS NULL AND NOT r.dangling
                       AND r.target_from <= $2 AND r.target_to >= $2
                     UNION ALL
                     SELECT r.*, 1 AS side FROM article_references r
                     JOIN documents d ON d.doc_id = r.doc_id
                     WHERE r.target_law_key = ANY($3) AND r.doc_id <> $1
                       AND r.target_from <= $2 AND r.target_to >= $2
                       AND d.status = 'indexed' AND d.deleting_at IS NULL
                 ) r
                 ORDER BY r.side, r.doc_id, r.ref_no LIMIT $4"
            ),
            &[
                (&doc_id, Type::VARCHAR),
                (&at, Type::INT4),
                (&law_keys, Type::VARCHAR_ARRAY),
                (&limit, Type::INT8),
            ],
        )
        .await?;
    Ok(rows.iter().map(ReferenceRow::from_row).collect())
}
