//! Reads of `semantic_blocks` for search: which article a chunk belongs to, which articles a query
//! names, and the articles a search returns, each vouched for by its document's row.

use super::{DbError, Type};
use docpipe_core::filters::Filters;
use docpipe_vector::limits;
use tokio_postgres::GenericClient;

/// A chunk that search found, as Milvus describes it.
pub struct ChunkPlace<'a> {
    pub doc_id: &'a str,
    pub run_id: i64,
    pub section_title: &'a str,
    pub section_path: &'a str,
    pub text: &'a str,
}

impl<'a> ChunkPlace<'a> {
    pub fn of(hit: &'a docpipe_vector::VectorHit) -> ChunkPlace<'a> {
        ChunkPlace {
            doc_id: &hit.doc_id,
            run_id: hit.run_id,
            section_title: &hit.section_title,
            section_path: &hit.section_path,
            text: &hit.text,
        }
    }
}

/// The block each chunk was cut from, when PostgreSQL vouches for the chunk: its document is
/// `indexed`, not being deleted, and the chunk is of its current run. `None` marks a stale chunk.
/// Blocks are found by the indexed (doc_id, section_title) pair; when several blocks share a
/// title, the one with the same path and then the one containing the chunk's text wins. One round
/// trip: the authority check and the mapping are one statement.
///
/// The vector index holds a title and a path cut to its byte limits (a heading over 170 CJK
/// characters); a hit's title or path that long may be a cut one, and is matched as a prefix of
/// the block's, character for character (the cut keeps whole characters).
pub async fn live_blocks_of_chunks(
    c: &impl GenericClient,
    chunks: &[ChunkPlace<'_>],
) -> Result<Vec<Option<i64>>, DbError> {
    if chunks.is_empty() {
        return Ok(Vec::new());
    }
    let docs: Vec<&str> = chunks.iter().map(|c| c.doc_id).collect();
    let runs: Vec<i64> = chunks.iter().map(|c| c.run_id).collect();
    let titles: Vec<&str> = chunks.iter().map(|c| c.section_title).collect();
    let paths: Vec<&str> = chunks.iter().map(|c| c.section_path).collect();
    let titles_cut: Vec<bool> = chunks
        .iter()
        .map(|c| may_be_cut(c.section_title, limits::SECTION_TITLE_BYTES))
        .collect();
    let paths_cut: Vec<bool> = chunks
        .iter()
        .map(|c| may_be_cut(c.section_path, limits::SECTION_PATH_BYTES))
        .collect();
    // A prefix picks the block as surely as the whole chunk does (a chunk is cut from one
    // block's text), at a tenth of the bytes sent.
    let texts: Vec<&str> = chunks.iter().map(|c| char_prefix(c.text, 48)).collect();
    // A title the index did not cut is looked up by the (doc_id, section_title) index; a cut
    // one (rare) reads its document's blocks.
    let rows = c
        .query_typed(
            "SELECT u.ord, b.id
             FROM UNNEST($1::varchar[], $2::int8[], $3::varchar[], $4::text[], $5::text[],
                         $6::bool[], $7::bool[])
                  WITH ORDINALITY AS u(doc, run, title, path, txt, title_cut, path_cut, ord)
             JOIN documents d ON d.doc_id = u.doc AND d.current_run_id = u.run
                             AND d.status = 'indexed' AND d.deleting_at IS NULL
             CROSS JOIN LATERAL (
                 SELECT m.id FROM (
                     SELECT sb.id, sb.section_path, sb.text FROM semantic_blocks sb
                     WHERE sb.doc_id = u.doc AND sb.section_title = u.title AND NOT u.title_cut
                     UNION ALL
                     SELECT sb.id, sb.section_path, sb.text FROM semantic_blocks sb
                     WHERE u.title_cut AND sb.doc_id = u.doc
                       AND left(sb.section_title, char_length(u.title)) = u.title
                 ) m
                 CROSS JOIN LATERAL (
                     SELECT array_to_string(
                         ARRAY(SELECT jsonb_array_elements_text(m.section_path)), ' > ') AS path
                 ) p
                 ORDER BY (p.path = u.path
                           OR (u.path_cut AND left(p.path, char_length(u.path)) = u.path)) DESC,
                          (strpos(m.text, u.txt) > 0) DESC, m.id
                 LIMIT 1) b",
            &[
                (&docs, Type::VARCHAR_ARRAY),
                (&runs, Type::INT8_ARRAY),
                (&titles, Type::VARCHAR_ARRAY),
                (&paths, Type::TEXT_ARRAY),
                (&texts, Type::TEXT_ARRAY),
                (&titles_cut, Type::BOOL_ARRAY),
                (&paths_cut, Type::BOOL_ARRAY),
            ],
        )
        .await?;
    let mut out = vec![None; chunks.len()];
    for r in rows {
        let ord: i64 = r.get("ord");
        out[(ord - 1) as usize] = Some(r.get("id"));
    }
    Ok(out)
}

/// Whether the vector index may have cut `stored` to fit `limit` bytes: a cut keeps whole
/// characters, so it leaves at most 3 bytes of the limit unused.
fn may_be_cut(stored: &str, limit: usize) -> bool {
    stored.len() + 3 >= limit
}

/// The first `n` characters of `text`.
fn char_prefix(text: &str, n: usize) -> &str {
    text.char_indices()
        .nth(n)
        .map_or(text, |(at, _)| &text[..at])
}

/// The articles (blocks whose title starts with 第…条) of these documents, as (block id, doc id,
/// section title), for resolving a query that names an article.
pub async fn article_titles(
    c: &impl GenericClient,
    doc_ids: &[&str],
) -> Result<Vec<(i64, String, String)>, DbError> {
    let rows = c
        .query_typed(
            "SELECT id, doc_id, section_title FROM semantic_blocks
             WHERE doc_id = ANY($1) AND section_title LIKE '第%'",
            &[(&doc_ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("id"), r.get("doc_id"), r.get("section_title")))
        .collect())
}

/// A block as search returns it.
#[derive(Debug, Clone)]
pub struct LiveBlock {
    pub block_id: i64,
    pub doc_id: String,
    pub doc_name: String,
    pub semantic_id: String,
    pub block_type: String,
    pub section_path: Vec<String>,
    pub section_title: String,
    pub page_start: i32,
    pub page_end: i32,
    pub text: String,
    /// The law as cited: the keyword index's title for the document, else its name.
    pub law_title: String,
}

/// The blocks among `ids` that PostgreSQL vouches for: their document answers on `as_of` (the
/// authority's one check, [`crate::authority`]: indexed, not being deleted, not held and, when
/// `in_force_only`, in force) and passes the filters, all in this one statement, so that a
/// version held, released or repealed since the ranking began is judged as it is now. Order is
/// not kept; the caller orders.
pub async fn live_blocks(
    c: &impl GenericClient,
    ids: &[i64],
    filters: &Filters,
    as_of: &str,
    in_force_only: bool,
) -> Result<Vec<LiveBlock>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let doc_ids: Option<&Vec<String>> = (!filters.doc_ids.is_empty()).then_some(&filters.doc_ids);
    let tags: Option<&Vec<String>> = (!filters.tags.is_empty()).then_some(&filters.tags);
    let sql = format!(
        "SELECT sb.id, sb.doc_id, d.doc_name, sb.semantic_id, sb.block_type, sb.section_path,
                sb.section_title, sb.page_start, sb.page_end, sb.text,
                COALESCE(kd.title, d.doc_name) AS law_title
         FROM semantic_blocks sb
         JOIN documents d ON d.doc_id = sb.doc_id
         LEFT JOIN keyword_documents kd ON kd.doc_id = d.doc_id
                                       AND kd.run_id = d.current_run_id
         WHERE sb.id = ANY($1) AND {answers}
           AND ($2::varchar[] IS NULL OR d.doc_id = ANY($2))
           AND ($3::varchar IS NULL OR d.regulation_type = $3)
           AND ($4::varchar IS NULL OR d.version = $4)
           AND ($5::text[] IS NULL OR d.metadata -> 'tags' ?| $5)",
        answers = crate::authority::answers("$6::text::date", "$7::bool", "$8"),
    );
    let rows = c
        .query_typed(
            &sql,
            &[
                (&ids, Type::INT8_ARRAY),
                (&doc_ids, Type::VARCHAR_ARRAY),
                (&filters.regulation_type, Type::VARCHAR),
                (&filters.version, Type::VARCHAR),
                (&tags, Type::TEXT_ARRAY),
                (&as_of, Type::TEXT),
                (&in_force_only, Type::BOOL),
                (&filters.organs, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| LiveBlock {
            block_id: r.get("id"),
            doc_id: r.get("doc_id"),
            doc_name: r.get("doc_name"),
            semantic_id: r.get("semantic_id"),
            block_type: r.get("block_type"),
            section_path: serde_json::from_value(r.get("section_path")).unwrap_or_default(),
            section_title: r.get("section_title"),
            page_start: r.get("page_start"),
            page_end: r.get("page_end"),
            text: r.get("text"),
            law_title: r.get("law_title"),
        })
        .collect())
}

/// The article blocks (titled 第…条) of these documents, in each document's order, as the parser
/// made them: what [`docpipe_parse::references::article_texts`] splits into paragraphs and items.
pub async fn article_blocks(
    c: &impl GenericClient,
    doc_ids: &[&str],
) -> Result<Vec<(String, docpipe_parse::SemanticBlock)>, DbError> {
    let rows = c
        .query_typed(
            "SELECT doc_id, semantic_id, block_type, page_start, page_end, section_path::text AS path,
                    section_level, section_title, text
             FROM semantic_blocks
             WHERE doc_id = ANY($1) AND section_title LIKE '第%'
             ORDER BY doc_id, id",
            &[(&doc_ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let path: String = r.get("path");
            (
                r.get("doc_id"),
                docpipe_parse::SemanticBlock {
                    semantic_id: r.get("semantic_id"),
                    block_type: r.get("block_type"),
                    page_start: r.get::<_, i32>("page_start").max(0) as u32,
                    page_end: r.get::<_, i32>("page_end").max(0) as u32,
                    section_path: serde_json::from_str(&path).unwrap_or_default(),
                    section_level: r.get("section_level"),
                    section_title: r.get("section_title"),
                    source_ids: Vec::new(),
                    text: r.get("text"),
                },
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::char_prefix;

    #[test]
    fn a_prefix_counts_characters_not_bytes() {
        assert_eq!(char_prefix("第一条 劳动者", 3), "第一条");
        assert_eq!(char_prefix("短", 48), "短");
        assert_eq!(char_prefix("", 48), "");
        let long = "用人单位".repeat(20);
        assert_eq!(char_prefix(&long, 48).chars().count(), 48);
        assert!(long.starts_with(char_prefix(&long, 48)));
    }
}
