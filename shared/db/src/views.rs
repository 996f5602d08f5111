//! Read queries for the API: document listings (keyset pagination over `updated_at DESC, doc_id
//! DESC`, which `idx_documents_updated_at` / `idx_documents_status_updated_at` serve), a document's
//! artifacts, its heading tree and its semantic blocks. Every statement is unnamed and each list is
//! one round trip.

use crate::documents::{self, Document};
use crate::{DbError, Type};
use chrono::{DateTime, Utc};
use docpipe_core::model::DocStatus;
use serde::Serialize;
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

/// What a document listing is restricted to. `None` does not filter; members combine with AND.
#[derive(Debug, Clone, Default)]
pub struct DocumentFilter {
    pub status: Option<DocStatus>,
    pub regulation_type: Option<String>,
    pub version: Option<String>,
    /// Documents updated at or after this instant.
    pub updated_since: Option<DateTime<Utc>>,
    /// Of these tenants; empty: every tenant (the operator's tools).
    pub organs: Vec<String>,
}

/// The position after which a listing continues: the last row of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentCursor {
    pub updated_at: DateTime<Utc>,
    pub doc_id: String,
}

/// Parameters of a statement assembled from optional conditions.
struct Params<'a> {
    values: Vec<(&'a (dyn ToSql + Sync), Type)>,
}

impl<'a> Params<'a> {
    fn push(&mut self, value: &'a (dyn ToSql + Sync), ty: Type) -> String {
        self.values.push((value, ty));
        format!("${}", self.values.len())
    }
}

/// One page of documents, newest update first (ties broken by `doc_id`, descending). Asks for
/// `limit` rows; the caller asks for one more than it shows to know whether a next page exists.
pub async fn list_documents(
    c: &impl GenericClient,
    filter: &DocumentFilter,
    after: Option<&DocumentCursor>,
    limit: i64,
) -> Result<Vec<Document>, DbError> {
    let status = filter.status.map(|s| s.as_str());
    let mut params = Params { values: Vec::new() };
    let mut conditions = Vec::new();
    if !filter.organs.is_empty() {
        conditions.push(format!(
            "organ_id = ANY({})",
            params.push(&filter.organs, Type::VARCHAR_ARRAY)
        ));
    }
    if let Some(status) = &status {
        conditions.push(format!("status = {}", params.push(status, Type::VARCHAR)));
    }
    if let Some(regulation_type) = &filter.regulation_type {
        conditions.push(format!(
            "regulation_type = {}",
            params.push(regulation_type, Type::VARCHAR)
        ));
    }
    if let Some(version) = &filter.version {
        conditions.push(format!("version = {}", params.push(version, Type::VARCHAR)));
    }
    if let Some(since) = &filter.updated_since {
        conditions.push(format!(
            "updated_at >= {}",
            params.push(since, Type::TIMESTAMPTZ)
        ));
    }
    if let Some(cursor) = after {
        let at = params.push(&cursor.updated_at, Type::TIMESTAMPTZ);
        let id = params.push(&cursor.doc_id, Type::VARCHAR);
        conditions.push(format!("(updated_at, doc_id) < ({at}, {id})"));
    }
    let limit_param = params.push(&limit, Type::INT8);
    let where_clause = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql = format!(
        "SELECT {cols} FROM documents {where_clause}
         ORDER BY updated_at DESC, doc_id DESC LIMIT {limit_param}",
        cols = documents::COLUMNS
    );
    let rows = c.query_typed(&sql, &params.values).await?;
    Ok(rows.iter().map(Document::from_row).collect())
}

pub async fn document_exists(c: &impl GenericClient, doc_id: &str) -> Result<bool, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT 1 FROM documents WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.is_some())
}

/// One `document_artifacts` row.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactRow {
    pub artifact_id: i64,
    pub run_id: Option<i64>,
    pub artifact_type: String,
    pub object_name: String,
    pub content_type: String,
    pub byte_size: i64,
    pub checksum: String,
    pub metadata: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// A document's artifacts, newest run first, in the seed's artifact order within a run.
pub async fn artifacts(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: Option<i64>,
) -> Result<Vec<ArtifactRow>, DbError> {
    let rows = c
        .query_typed(
            "SELECT artifact_id, run_id, artifact_type, object_name, content_type, byte_size,
                    checksum, metadata, created_at
             FROM document_artifacts
             WHERE doc_id = $1 AND ($2::int8 IS NULL OR run_id = $2)
             ORDER BY run_id DESC NULLS LAST,
                      array_position(ARRAY['layouts','structure_nodes','semantic_blocks','vector_chunks']::varchar[], artifact_type),
                      artifact_id",
            &[(&doc_id, Type::VARCHAR), (&run_id, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ArtifactRow {
            artifact_id: r.get("artifact_id"),
            run_id: r.get("run_id"),
            artifact_type: r.get("artifact_type"),
            object_name: r.get("object_name"),
            content_type: r.get("content_type"),
            byte_size: r.get("byte_size"),
            checksum: r.get("checksum"),
            metadata: r.get("metadata"),
            created_at: r.get("created_at"),
        })
        .collect())
}

/// One heading of the current snapshot, flat, as stored.
#[derive(Debug, Clone, Serialize)]
pub struct StructureRow {
    pub unique_id: Option<String>,
    pub page: i32,
    pub idx: i32,
    pub level: i32,
    pub title: String,
    #[serde(rename = "type")]
    pub node_type: Option<String>,
    pub sub_type: Option<String>,
}

/// The document's headings in document order (`idx`).
pub async fn structure_nodes(
    c: &impl GenericClient,
    doc_id: &str,
) -> Result<Vec<StructureRow>, DbError> {
    let rows = c
        .query_typed(
            "SELECT unique_id, page, idx, level, title, type, sub_type
             FROM structure_nodes WHERE doc_id = $1 ORDER BY idx, id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| StructureRow {
            unique_id: r.get("unique_id"),
            page: r.get("page"),
            idx: r.get("idx"),
            level: r.get("level"),
            title: r.get("title"),
            node_type: r.get("type"),
            sub_type: r.get("sub_type"),
        })
        .collect())
}

/// A heading with the headings under it.
#[derive(Debug, Clone, Serialize)]
pub struct TreeNode {
    #[serde(flatten)]
    pub node: StructureRow,
    pub children: Vec<TreeNode>,
}

/// The deepest nesting [`nest`] builds; a deeper heading becomes a sibling at this depth (keeps
/// a pathological document from producing a response nobody can serialise or read).
pub const MAX_TREE_DEPTH: usize = 32;

/// Rebuilds the heading tree from document order and levels (`structure_nodes` has no parent
/// column): a heading belongs under the nearest earlier heading of a smaller level.
pub fn nest(nodes: Vec<StructureRow>) -> Vec<TreeNode> {
    fn close(stack: &mut Vec<TreeNode>, roots: &mut Vec<TreeNode>) {
        let done = stack.pop().expect("close is called on a non-empty stack");
        match stack.last_mut() {
            Some(parent) => parent.children.push(done),
            None => roots.push(done),
        }
    }
    let mut roots = Vec::new();
    let mut stack: Vec<TreeNode> = Vec::new();
    for node in nodes {
        while stack.last().is_some_and(|top| top.node.level >= node.level) {
            close(&mut stack, &mut roots);
        }
        if stack.len() >= MAX_TREE_DEPTH {
            close(&mut stack, &mut roots);
        }
        stack.push(TreeNode {
            node,
            children: Vec::new(),
        });
    }
    while !stack.is_empty() {
        close(&mut stack, &mut roots);
    }
    roots
}

/// What a block listing is restricted to.
#[derive(Debug, Clone, Default)]
pub struct BlockFilter {
    pub section_title: Option<String>,
    pub block_type: Option<String>,
    /// One block, as a search hit names it (`semantic_id`): its whole text.
    pub semantic_id: Option<String>,
}

/// One semantic block of the current snapshot. `id` orders blocks in document order (they are
/// inserted in one statement, in order) and is the pagination key.
#[derive(Debug, Clone, Serialize)]
pub struct BlockRow {
    #[serde(skip)]
    pub id: i64,
    pub semantic_id: String,
    pub block_type: String,
    pub page_start: i32,
    pub page_end: i32,
    pub section_path: serde_json::Value,
    pub section_level: i32,
    pub section_title: String,
    pub source_ids: serde_json::Value,
    pub text: String,
}

/// A page of the document's blocks in document order, after block `after_id` when given.
pub async fn blocks(
    c: &impl GenericClient,
    doc_id: &str,
    filter: &BlockFilter,
    after_id: Option<i64>,
    limit: i64,
) -> Result<Vec<BlockRow>, DbError> {
    let rows = c
        .query_typed(
            "SELECT id, semantic_id, block_type, page_start, page_end, section_path, section_level,
                    section_title, source_ids, text
             FROM semantic_blocks
             WHERE doc_id = $1
               AND ($2::varchar IS NULL OR section_title = $2)
               AND ($3::varchar IS NULL OR block_type = $3)
               AND ($4::int8 IS NULL OR id > $4)
               AND ($6::varchar IS NULL OR semantic_id = $6)
             ORDER BY id LIMIT $5",
            &[
                (&doc_id, Type::VARCHAR),
                (&filter.section_title, Type::VARCHAR),
                (&filter.block_type, Type::VARCHAR),
                (&after_id, Type::INT8),
                (&limit, Type::INT8),
                (&filter.semantic_id, Type::VARCHAR),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| BlockRow {
            id: r.get("id"),
            semantic_id: r.get("semantic_id"),
            block_type: r.get("block_type"),
            page_start: r.get("page_start"),
            page_end: r.get("page_end"),
            section_path: r.get("section_path"),
            section_level: r.get("section_level"),
            section_title: r.get("section_title"),
            source_ids: r.get("source_ids"),
            text: r.get("text"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(idx: i32, level: i32, title: &str) -> StructureRow {
        StructureRow {
            unique_id: Some(format!("n{idx}")),
            page: 1,
            idx,
            level,
            title: title.into(),
            node_type: None,
            sub_type: None,
        }
    }

    fn shape(nodes: &[TreeNode]) -> String {
        nodes
            .iter()
            .map(|n| {
                if n.children.is_empty() {
                    n.node.title.clone()
                } else {
                    format!("{}({})", n.node.title, shape(&n.children))
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn levels_in_document_order_nest() {
        let tree = nest(vec![
            node(0, 1, "第一章"),
            node(1, 2, "第一节"),
            node(2, 3, "第一条"),
            node(3, 3, "第二条"),
            node(4, 2, "第二节"),
            node(5, 1, "第二章"),
            node(6, 3, "第三条"),
        ]);
        assert_eq!(
            shape(&tree),
            "第一章(第一节(第一条,第二条),第二节),第二章(第三条)"
        );
    }

    #[test]
    fn a_document_that_starts_deep_keeps_every_heading() {
        let tree = nest(vec![node(0, 3, "a"), node(1, 1, "b"), node(2, 2, "c")]);
        assert_eq!(shape(&tree), "a,b(c)");
        assert!(nest(Vec::new()).is_empty());
    }

    #[test]
    fn nesting_is_bounded() {
        let nodes = (0..100).map(|i| node(i, i + 1, "h")).collect();
        fn depth(n: &[TreeNode]) -> usize {
            n.iter().map(|c| 1 + depth(&c.children)).max().unwrap_or(0)
        }
        let tree = nest(nodes);
        assert_eq!(depth(&tree), MAX_TREE_DEPTH);
        fn count(n: &[TreeNode]) -> usize {
            n.iter().map(|c| 1 + count(&c.children)).sum()
        }
        assert_eq!(count(&tree), 100);
    }
}
