//! The four parse artifacts (seed 000 §2): versioned JSON documents at
//! `artifacts/{doc_id}/{run_id}/{layouts|structure_nodes|semantic_blocks|vector_chunks}.json`.
//!
//! Shape (version 1), the same envelope for each:
//! ```json
//! {"schema": "docpipe.artifact", "schema_version": 1, "artifact_type": "layouts",
//!  "doc_id": "doc_…", "run_id": 42, "items": [ … ]}
//! ```
//! `items` are the `docpipe_parse` types (`LayoutBlock`, `StructureNode`, `SemanticBlock`,
//! `VectorChunk`) serialised by serde. The bytes are deterministic for a given parse, so writing an
//! artifact twice leaves the same object and the same checksum.

use docpipe_parse::{ParsedDocument, VectorChunk, ARTIFACT_SCHEMA_VERSION};
use serde::Serialize;
use sha2::{Digest, Sha256};

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    schema: &'static str,
    schema_version: u32,
    artifact_type: &'a str,
    doc_id: &'a str,
    run_id: i64,
    items: &'a [T],
}

/// What the `document_artifacts` row records of one artifact; [`build_all`] hands the bytes
/// beside it, so that writing the object can move them.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub artifact_type: &'static str,
    pub object_name: String,
    pub byte_size: usize,
    pub sha256: String,
    pub item_count: usize,
}

pub fn run_prefix(doc_id: &str, run_id: i64) -> String {
    format!("artifacts/{doc_id}/{run_id}/")
}

pub fn doc_prefix(doc_id: &str) -> String {
    format!("artifacts/{doc_id}/")
}

fn build<T: Serialize>(
    artifact_type: &'static str,
    doc_id: &str,
    run_id: i64,
    items: &[T],
) -> (Artifact, Vec<u8>) {
    let body = serde_json::to_vec(&Envelope {
        schema: "docpipe.artifact",
        schema_version: ARTIFACT_SCHEMA_VERSION,
        artifact_type,
        doc_id,
        run_id,
        items,
    })
    .expect("artifact types always serialise");
    let artifact = Artifact {
        artifact_type,
        object_name: format!("{}{artifact_type}.json", run_prefix(doc_id, run_id)),
        sha256: hex::encode(Sha256::digest(&body)),
        byte_size: body.len(),
        item_count: items.len(),
    };
    (artifact, body)
}

pub fn build_all(
    doc_id: &str,
    run_id: i64,
    parsed: &ParsedDocument,
    chunks: &[VectorChunk],
) -> [(Artifact, Vec<u8>); 4] {
    [
        build("layouts", doc_id, run_id, &parsed.layouts),
        build("structure_nodes", doc_id, run_id, &parsed.structure_nodes),
        build("semantic_blocks", doc_id, run_id, &parsed.semantic_blocks),
        build("vector_chunks", doc_id, run_id, chunks),
    ]
}

/// Reads back the items of an artifact written by [`build_all`].
pub fn decode_items<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<Vec<T>, String> {
    #[derive(serde::Deserialize)]
    struct Owned<T> {
        schema_version: u32,
        items: Vec<T>,
    }
    let env: Owned<T> =
        serde_json::from_slice(body).map_err(|e| format!("malformed artifact: {e}"))?;
    if env.schema_version != ARTIFACT_SCHEMA_VERSION {
        return Err(format!(
            "artifact schema version {} is not {ARTIFACT_SCHEMA_VERSION}",
            env.schema_version
        ));
    }
    Ok(env.items)
}
