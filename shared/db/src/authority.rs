//! Whether a document's text may be served as the law that applies: indexed, not being deleted,
//! and, for a version of a work, released and in force on the day asked. The search path checks
//! the same conditions over its blocks; the reads of one document (an article, a citation's
//! target) ask here.

use super::works::TIMELINE;
use super::{DbError, Type};
use std::collections::HashMap;
use tokio_postgres::GenericClient;

/// What a document's text is worth on a day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Indexed and not being deleted; in force on the day, or not a version of any work.
    Live,
    /// Its delete has begun.
    Deleting,
    /// Not indexed (yet, or its run failed): the status it has.
    NotIndexed(String),
    /// A version held for its release: it answers nothing until a reviewer releases it.
    Held,
    /// A released version that is not in force on the day: superseded, not yet in force or
    /// repealed.
    NotInForce(String),
}

/// The standing of each document on `as_of` (YYYY-MM-DD), in one statement; a document that does
/// not exist is absent.
pub async fn standing(
    c: &impl GenericClient,
    doc_ids: &[String],
    as_of: &str,
) -> Result<HashMap<String, Standing>, DbError> {
    if doc_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "{TIMELINE}
         SELECT d.doc_id, d.status::text AS status, d.deleting_at IS NOT NULL AS deleting,
                EXISTS (SELECT 1 FROM version_documents vd WHERE vd.doc_id = d.doc_id) AS versioned,
                (SELECT p.status FROM version_documents vd
                 JOIN placed p ON p.version_id = vd.version_id
                 WHERE vd.doc_id = d.doc_id LIMIT 1) AS version_status
         FROM documents d
         WHERE d.doc_id = ANY($2)"
    );
    let rows = c
        .query_typed(
            &sql,
            &[(&as_of, Type::TEXT), (&doc_ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let status: String = r.get("status");
            let version_status: Option<String> = r.get("version_status");
            let standing = if r.get::<_, bool>("deleting") {
                Standing::Deleting
            } else if status != "indexed" {
                Standing::NotIndexed(status)
            } else if !r.get::<_, bool>("versioned") {
                Standing::Live
            } else {
                match version_status.as_deref() {
                    None => Standing::Held,
                    Some("in_force") => Standing::Live,
                    Some(other) => Standing::NotInForce(other.to_string()),
                }
            };
            (r.get("doc_id"), standing)
        })
        .collect())
}
