//! The one authority on what text answers: PostgreSQL, never the indexes that mirror it. A
//! document's text answers on a day when the document is indexed and not being deleted, and,
//! when it is a version of a work, that version is released and (for reads of the law as it
//! applies) in force on the day.
//!
//! The conditions are written once, here, as SQL over a `documents` row `d`, and every read
//! path puts them in its own final statement, so that no state can change between a check and
//! the read it vouches for:
//! - search's final check ([`crate::articles::live_blocks`], every mode, `expand: references`);
//! - the keyword ranking's per-candidate check ([`crate::keyword`]'s live check: indexed only;
//!   the final check above decides versions);
//! - the laws a citation can name ([`crate::keyword::law_titles`]: released versions only);
//! - one document's reads ([`standing`]): the article route, a citation's target, blocks,
//!   structure and download.
//!
//! A version's place on a day is decided per document, by correlated lookups on its work's
//! versions: the cost follows the documents asked about, not the library.

use super::{DbError, Type};
use std::collections::HashMap;
use tokio_postgres::GenericClient;

/// Indexed, its current run complete, and no delete begun.
pub(crate) const INDEXED: &str = "d.status = 'indexed' AND d.deleting_at IS NULL";

/// The document is a rendition of a version, and what it holds is not the content released (never
/// released, or overwritten since): it waits for a release of its own.
pub(crate) const HELD: &str = "EXISTS (SELECT 1 FROM version_documents hv
                WHERE hv.doc_id = d.doc_id
                  AND hv.released_sha256 IS DISTINCT FROM d.content_sha256)";

/// The sensitive-data scan of the document's current run blocked it (policy `block`), and no
/// reviewer has resolved its findings: it answers nothing (seed 004's `blocked`). One lookup by
/// the run (`uq_security_scans_run`).
pub(crate) const BLOCKED: &str = "EXISTS (SELECT 1 FROM security_scans bs
                WHERE bs.run_id = d.current_run_id AND bs.status = 'blocked')";

/// The document's version is not in force on the day `{day}` (a placeholder, `$n::text::date`):
/// its work was repealed, it takes effect later, it ended, or a later released version of the
/// work (one with an indexed rendition of released content) took effect by then. The order is the timeline's:
/// effective date (or promulgation, or the beginning of time), then version id.
fn not_in_force(day: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM version_documents fv
                 JOIN work_versions f ON f.version_id = fv.version_id
                 JOIN works fw ON fw.work_id = f.work_id
                 WHERE fv.doc_id = d.doc_id AND (
                     (fw.repealed_on IS NOT NULL AND fw.repealed_on <= {day})
                     OR COALESCE(f.effective_from, f.promulgated_on, '-infinity'::date) > {day}
                     OR (f.effective_to IS NOT NULL AND f.effective_to <= {day})
                     OR EXISTS (
                         SELECT 1 FROM work_versions l
                         WHERE l.work_id = f.work_id AND l.version_id <> f.version_id
                           AND COALESCE(l.effective_from, l.promulgated_on, '-infinity'::date)
                               <= {day}
                           AND (COALESCE(l.effective_from, l.promulgated_on, '-infinity'::date),
                                l.version_id)
                               > (COALESCE(f.effective_from, f.promulgated_on,
                                           '-infinity'::date), f.version_id)
                           AND EXISTS (SELECT 1 FROM version_documents lv
                                       JOIN documents ld ON ld.doc_id = lv.doc_id
                                       WHERE lv.version_id = l.version_id
                                         AND ld.status = 'indexed' AND ld.deleting_at IS NULL
                                         AND lv.released_sha256 = ld.content_sha256))))"
    )
}

/// The document belongs to one of the tenants `{organs}` (a `varchar[]` placeholder; empty: any
/// tenant, for the operator's own tools, never for a caller's request).
pub(crate) fn of_tenants(organs: &str) -> String {
    format!("(cardinality({organs}::varchar[]) = 0 OR d.organ_id = ANY({organs}::varchar[]))")
}

/// The whole check as one predicate on `d`: of the caller's tenants `{organs}`, indexed, not
/// held, not blocked by its scan, and, when `{in_force_only}` (a boolean placeholder) is true, in
/// force on `{day}` (a date placeholder).
pub(crate) fn answers(day: &str, in_force_only: &str, organs: &str) -> String {
    format!(
        "({} AND {INDEXED} AND NOT {HELD} AND NOT {BLOCKED} AND (NOT {in_force_only} OR NOT {}))",
        of_tenants(organs),
        not_in_force(day)
    )
}

/// What a document's text is worth on a day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// It answers: indexed, not being deleted; in force on the day, or no version of any work.
    Live,
    /// Its delete has begun.
    Deleting,
    /// Not indexed (yet, or its run failed): the status it has.
    NotIndexed(String),
    /// A version held for its release: it answers nothing until a reviewer releases it.
    Held,
    /// Its scan blocked it: it answers nothing until a reviewer resolves the findings.
    Blocked,
    /// A released version that is not in force on the day (superseded, not yet in force, ended
    /// or repealed).
    NotInForce,
}

/// The standing of each document on `as_of` (YYYY-MM-DD), from the same conditions as every
/// other read, in one statement; a document that does not exist, or is of none of `organs`, is
/// absent.
pub async fn standing(
    c: &impl GenericClient,
    doc_ids: &[String],
    as_of: &str,
    organs: &[String],
) -> Result<HashMap<String, Standing>, DbError> {
    if doc_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT d.doc_id, d.status::text AS status, d.deleting_at IS NOT NULL AS deleting,
                {HELD} AS held, {BLOCKED} AS blocked, {not_in_force} AS not_in_force
         FROM documents d
         WHERE d.doc_id = ANY($2) AND {tenants}",
        not_in_force = not_in_force("$1::text::date"),
        tenants = of_tenants("$3"),
    );
    let rows = c
        .query_typed(
            &sql,
            &[
                (&as_of, Type::TEXT),
                (&doc_ids, Type::VARCHAR_ARRAY),
                (&organs, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let status: String = r.get("status");
            let standing = if r.get::<_, bool>("deleting") {
                Standing::Deleting
            } else if status != "indexed" {
                Standing::NotIndexed(status)
            } else if r.get::<_, bool>("blocked") {
                Standing::Blocked
            } else if r.get::<_, bool>("held") {
                Standing::Held
            } else if r.get::<_, bool>("not_in_force") {
                Standing::NotInForce
            } else {
                Standing::Live
            };
            (r.get("doc_id"), standing)
        })
        .collect())
}
