//! The current parse snapshot (`structure_nodes`, `semantic_blocks`) and the artifact references of
//! each run. Bulk rows go in one statement per table through `UNNEST` arrays: one round trip
//! whatever the document's size, and no named statements.

use super::{fit, DbError, Type};
use docpipe_core::artifacts::Artifact;
use docpipe_parse::references::Reference;
use docpipe_parse::{SemanticBlock, StructureNode};
use tokio_postgres::GenericClient;

/// Seed 000 §6.3 steps 4–5: the document's snapshot becomes this parse's, replacing the previous one,
/// and with it the references between its articles.
/// The keyword rows of the old blocks go first, with their document frequencies.
pub async fn replace(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    nodes: &[StructureNode],
    blocks: &[SemanticBlock],
    references: &[Reference],
) -> Result<(), DbError> {
    super::keyword::remove(c, doc_id).await?;
    super::references::replace(c, doc_id, run_id, references).await?;
    c.execute_typed(
        "DELETE FROM structure_nodes WHERE doc_id = $1",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    c.execute_typed(
        "DELETE FROM semantic_blocks WHERE doc_id = $1",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    insert_nodes(c, doc_id, nodes).await?;
    insert_blocks(c, doc_id, blocks).await
}

/// The heading tree's rows, in one statement.
async fn insert_nodes(
    c: &impl GenericClient,
    doc_id: &str,
    nodes: &[StructureNode],
) -> Result<(), DbError> {
    let unique_ids: Vec<&str> = nodes.iter().map(|n| fit(&n.unique_id, 128)).collect();
    let pages: Vec<i32> = nodes.iter().map(|n| n.page).collect();
    let idxs: Vec<i32> = nodes.iter().map(|n| n.idx).collect();
    let levels: Vec<i32> = nodes.iter().map(|n| n.level).collect();
    let titles: Vec<&str> = nodes.iter().map(|n| n.title.as_str()).collect();
    let types: Vec<&str> = nodes.iter().map(|n| fit(&n.node_type, 64)).collect();
    let sub_types: Vec<&str> = nodes.iter().map(|n| fit(&n.sub_type, 64)).collect();
    c.execute_typed(
        "INSERT INTO structure_nodes (doc_id, unique_id, page, idx, level, title, type, sub_type)
         SELECT $1, * FROM UNNEST($2::varchar[], $3::int4[], $4::int4[], $5::int4[], $6::text[],
                                  $7::varchar[], $8::varchar[])",
        &[
            (&doc_id, Type::VARCHAR),
            (&unique_ids, Type::VARCHAR_ARRAY),
            (&pages, Type::INT4_ARRAY),
            (&idxs, Type::INT4_ARRAY),
            (&levels, Type::INT4_ARRAY),
            (&titles, Type::TEXT_ARRAY),
            (&types, Type::VARCHAR_ARRAY),
            (&sub_types, Type::VARCHAR_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// The semantic blocks' rows, each with the article it holds as an ordinal, in one statement.
async fn insert_blocks(
    c: &impl GenericClient,
    doc_id: &str,
    blocks: &[SemanticBlock],
) -> Result<(), DbError> {
    let ids: Vec<&str> = blocks.iter().map(|b| fit(&b.semantic_id, 128)).collect();
    let block_types: Vec<&str> = blocks.iter().map(|b| fit(&b.block_type, 64)).collect();
    let starts: Vec<i32> = blocks.iter().map(|b| b.page_start as i32).collect();
    let ends: Vec<i32> = blocks.iter().map(|b| b.page_end as i32).collect();
    let paths: Vec<String> = blocks
        .iter()
        .map(|b| serde_json::to_string(&b.section_path).expect("strings serialise"))
        .collect();
    let section_levels: Vec<i32> = blocks.iter().map(|b| b.section_level).collect();
    let section_titles: Vec<&str> = blocks.iter().map(|b| fit(&b.section_title, 512)).collect();
    let sources: Vec<String> = blocks
        .iter()
        .map(|b| serde_json::to_string(&b.source_ids).expect("strings serialise"))
        .collect();
    let texts: Vec<&str> = blocks.iter().map(|b| b.text.as_str()).collect();
    let ordinals: Vec<Option<i32>> = blocks
        .iter()
        .map(|b| super::references::block_ordinal(&b.section_title))
        .collect();
    c.execute_typed(
        "INSERT INTO semantic_blocks (doc_id, semantic_id, block_type, page_start, page_end,
                                      section_path, section_level, section_title, source_ids, text,
                                      article_ordinal)
         SELECT $1, u.id, u.bt, u.ps, u.pe, u.path::jsonb, u.lvl, u.title, u.src::jsonb, u.txt, u.ord
         FROM UNNEST($2::varchar[], $3::varchar[], $4::int4[], $5::int4[], $6::text[], $7::int4[],
                     $8::varchar[], $9::text[], $10::text[], $11::int4[])
              AS u(id, bt, ps, pe, path, lvl, title, src, txt, ord)",
        &[
            (&doc_id, Type::VARCHAR),
            (&ids, Type::VARCHAR_ARRAY),
            (&block_types, Type::VARCHAR_ARRAY),
            (&starts, Type::INT4_ARRAY),
            (&ends, Type::INT4_ARRAY),
            (&paths, Type::TEXT_ARRAY),
            (&section_levels, Type::INT4_ARRAY),
            (&section_titles, Type::VARCHAR_ARRAY),
            (&sources, Type::TEXT_ARRAY),
            (&texts, Type::TEXT_ARRAY),
            (&ordinals, Type::INT4_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// Seed 000 §6.3 step 6: one `document_artifacts` row per artifact of the run. Recording the same
/// artifacts again updates the rows in place (the unique index is run + type + object).
pub async fn record_artifacts(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    artifacts: &[Artifact],
) -> Result<(), DbError> {
    let types: Vec<&str> = artifacts.iter().map(|a| a.artifact_type).collect();
    let names: Vec<&str> = artifacts.iter().map(|a| a.object_name.as_str()).collect();
    let sizes: Vec<i64> = artifacts.iter().map(|a| a.byte_size as i64).collect();
    let sums: Vec<&str> = artifacts.iter().map(|a| a.sha256.as_str()).collect();
    let metas: Vec<String> = artifacts
        .iter()
        .map(|a| {
            serde_json::json!({ "items": a.item_count, "checksum_algorithm": "sha256" }).to_string()
        })
        .collect();
    c.execute_typed(
        "INSERT INTO document_artifacts (doc_id, run_id, artifact_type, object_name, content_type,
                                         byte_size, checksum, metadata)
         SELECT $1, $2, u.t, u.n, 'application/json', u.s, u.c, u.m::jsonb
         FROM UNNEST($3::varchar[], $4::varchar[], $5::int8[], $6::varchar[], $7::text[])
              AS u(t, n, s, c, m)
         ON CONFLICT (run_id, artifact_type, object_name)
         DO UPDATE SET byte_size = EXCLUDED.byte_size, checksum = EXCLUDED.checksum,
                       metadata = EXCLUDED.metadata",
        &[
            (&doc_id, Type::VARCHAR),
            (&run_id, Type::INT8),
            (&types, Type::VARCHAR_ARRAY),
            (&names, Type::VARCHAR_ARRAY),
            (&sizes, Type::INT8_ARRAY),
            (&sums, Type::VARCHAR_ARRAY),
            (&metas, Type::TEXT_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// The document's semantic blocks as (block type, text), in order: what its version is read from.
pub async fn block_texts(
    c: &impl GenericClient,
    doc_id: &str,
) -> Result<Vec<(String, String)>, DbError> {
    let rows = c
        .query_typed(
            "SELECT block_type, text FROM semantic_blocks WHERE doc_id = $1 ORDER BY id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("block_type"), r.get("text")))
        .collect())
}
