//! Works and their versions (`works`, `work_versions`, `version_documents`, migration 0014): which
//! regulation each indexed document is a version of, and which version was in force on a date.
//!
//! A version *answers* once released (by the index commit, or through the API in the manual
//! release mode) and while one of its documents is indexed and not being deleted. Of the
//! answering versions of a work, the one in force on a day is the one that took effect last on
//! or before it; one that took effect later is not yet in force; the others are superseded; all
//! of a repealed work are repealed from its repeal. Nothing of this is stored: it follows from the
//! dates and from the documents' states at the moment of the query, so it is never stale.

use super::{DbError, Type};
use serde::Serialize;
use std::collections::HashMap;
use tokio_postgres::GenericClient;

/// One document's place among the versions, as the index commit records it.
pub struct Assignment<'a> {
    pub title: &'a str,
    pub title_key: &'a str,
    pub level: &'a str,
    /// "upload" or "title".
    pub level_source: &'a str,
    pub label: &'a str,
    /// "upload", "heading_note", "file_name" or "publication".
    pub label_source: &'a str,
    /// Dates as YYYY-MM-DD, each with its source.
    pub promulgated: Option<(String, &'a str)>,
    pub effective_from: Option<(String, &'a str)>,
    /// Only an upload gives one.
    pub effective_to: Option<(String, &'a str)>,
    pub notes: serde_json::Value,
    pub decisions: serde_json::Value,
}

/// Why `doc_id`'s assignment collides with the version already recorded under its work and label
/// by other live renditions: a date the upload gives, given differently. Serialised per (work,
/// label) by a transaction lock, so of two uploads that claim one version with different dates
/// one commits and the other sees it here. Call inside the index commit's transaction.
pub async fn collision(
    c: &impl GenericClient,
    doc_id: &str,
    a: &Assignment<'_>,
) -> Result<Option<String>, DbError> {
    c.execute_typed(
        "SELECT pg_advisory_xact_lock(hashtextextended($1 || '|' || $2 || '|' || $3, 0))",
        &[
            (&a.title_key, Type::TEXT),
            (&a.level, Type::TEXT),
            (&a.label, Type::TEXT),
        ],
    )
    .await?;
    let row = c
        .query_typed_opt(
            "SELECT v.promulgated_on::text AS promulgated_on,
                    v.effective_from::text AS effective_from, v.effective_to::text AS effective_to,
                    array_agg(d.doc_id ORDER BY d.doc_id) AS documents
             FROM works w
             JOIN work_versions v ON v.work_id = w.work_id
             JOIN version_documents vd ON vd.version_id = v.version_id AND vd.doc_id <> $4
             JOIN documents d ON d.doc_id = vd.doc_id AND d.deleting_at IS NULL
                             AND d.status = 'indexed'
             WHERE w.title_key = $1 AND w.level = $2 AND v.label = $3
               AND w.organ_id = (SELECT organ_id FROM documents WHERE doc_id = $4)
             GROUP BY v.version_id",
            &[
                (&a.title_key, Type::VARCHAR),
                (&a.level, Type::VARCHAR),
                (&a.label, Type::VARCHAR),
                (&doc_id, Type::VARCHAR),
            ],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let documents: Vec<String> = row.get("documents");
    let pairs = [
        ("promulgated", &a.promulgated, "promulgated_on"),
        ("effective_from", &a.effective_from, "effective_from"),
        ("effective_to", &a.effective_to, "effective_to"),
    ];
    for (name, given, column) in pairs {
        let Some((day, "upload")) = given.as_ref().map(|(d, s)| (d.as_str(), *s)) else {
            continue;
        };
        let recorded: Option<String> = row.get(column);
        if let Some(recorded) = recorded.filter(|r| r != day) {
            return Ok(Some(format!(
                "version {:?} of {} is already recorded (documents {}) with {name} {recorded}; \
                 this upload gives {day}: name another version, or give the recorded dates",
                a.label,
                a.title,
                documents.join(", ")
            )));
        }
    }
    Ok(None)
}

/// `doc_id` is no version any more (its new content names and dates none): an overwrite of a
/// version with an undated text leaves that version and shows the document as unassigned.
pub async fn unassign(c: &impl GenericClient, doc_id: &str) -> Result<u64, DbError> {
    let docs = [doc_id.to_string()];
    let was = super::projection::works_of(c, &docs).await?;
    let removed = c
        .execute_typed(
            "DELETE FROM version_documents WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    super::projection::refresh_works_of(c, &docs, &was).await?;
    Ok(removed)
}

/// Records `doc_id` (of run `run_id`) as a rendition of the version the assignment names,
/// creating the work and the version when they are new, and releases the version when `release`
/// (it then answers from this transaction's commit on): the version id.
pub async fn assign(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    a: &Assignment<'_>,
    release: bool,
) -> Result<i64, DbError> {
    let docs = [doc_id.to_string()];
    let was = super::projection::works_of(c, &docs).await?;
    let work_id = upsert_work(c, doc_id, a).await?;
    let version_id = upsert_version(c, work_id, a).await?;
    let released = record_rendition(c, doc_id, run_id, version_id, release).await?;
    super::projection::refresh_works_of(c, &docs, &was).await?;
    super::announce::version_indexed(c, doc_id, run_id, version_id, released.is_some()).await?;
    if let Some(sha256) = released {
        super::announce::version_released(
            c,
            work_id,
            version_id,
            doc_id,
            &sha256,
            RELEASED_BY_COMMIT,
        )
        .await?;
    }
    Ok(version_id)
}

/// The work the assignment names in the document's tenant, created when new: its id. A tenant's
/// own text of a law is a work of that tenant, never a version of the public library's.
async fn upsert_work(
    c: &impl GenericClient,
    doc_id: &str,
    a: &Assignment<'_>,
) -> Result<i64, DbError> {
    let work = c
        .query_typed_one(
            "INSERT INTO works (title, title_key, level, level_source, organ_id)
             VALUES ($1, $2, $3, $4, (SELECT organ_id FROM documents WHERE doc_id = $5))
             ON CONFLICT (organ_id, title_key, level) DO UPDATE SET updated_at = NOW()
             RETURNING work_id",
            &[
                (&a.title, Type::VARCHAR),
                (&a.title_key, Type::VARCHAR),
                (&a.level, Type::VARCHAR),
                (&a.level_source, Type::VARCHAR),
                (&doc_id, Type::VARCHAR),
            ],
        )
        .await?;
    let work_id: i64 = work.get("work_id");
    Ok(work_id)
}

/// The version the assignment names, created when new, its dates updated (never blanked) when
/// not: its id.
async fn upsert_version(
    c: &impl GenericClient,
    work_id: i64,
    a: &Assignment<'_>,
) -> Result<i64, DbError> {
    let (promulgated, promulgated_source) = split(&a.promulgated);
    let (effective, effective_source) = split(&a.effective_from);
    let (effective_to, effective_to_source) = split(&a.effective_to);
    let version = c
        .query_typed_one(
            "INSERT INTO work_versions (work_id, label, label_source, promulgated_on,
                 promulgated_source, effective_from, effective_from_source, notes, decisions,
                 effective_to, effective_to_source)
             VALUES ($1, $2, $3, $4::text::date, $5, $6::text::date, $7, $8, $9,
                     $10::text::date, $11)
             ON CONFLICT (work_id, label) DO UPDATE SET
                 promulgated_on = COALESCE(EXCLUDED.promulgated_on, work_versions.promulgated_on),
                 promulgated_source = CASE WHEN EXCLUDED.promulgated_on IS NULL
                     THEN work_versions.promulgated_source ELSE EXCLUDED.promulgated_source END,
                 effective_from = COALESCE(EXCLUDED.effective_from, work_versions.effective_from),
                 effective_from_source = CASE WHEN EXCLUDED.effective_from IS NULL
                     THEN work_versions.effective_from_source ELSE EXCLUDED.effective_from_source END,
                 effective_to = COALESCE(EXCLUDED.effective_to, work_versions.effective_to),
                 effective_to_source = CASE WHEN EXCLUDED.effective_to IS NULL
                     THEN work_versions.effective_to_source ELSE EXCLUDED.effective_to_source END,
                 notes = EXCLUDED.notes,
                 -- Renditions that disagree on a date: a known date is never blanked, and a
                 -- date replaced by another rendition's is a decision on record.
                 decisions = EXCLUDED.decisions || (
                     SELECT COALESCE(jsonb_agg(d), '[]'::jsonb) FROM (
                         SELECT format('%s: a rendition gives %s (%s) where the version had %s (%s); %s taken',
                                       f.name, f.new_day, f.new_source, f.old_day, f.old_source,
                                       f.new_day) AS d
                         FROM (VALUES
                             ('promulgated', EXCLUDED.promulgated_on, EXCLUDED.promulgated_source,
                              work_versions.promulgated_on, work_versions.promulgated_source),
                             ('effective_from', EXCLUDED.effective_from,
                              EXCLUDED.effective_from_source, work_versions.effective_from,
                              work_versions.effective_from_source),
                             ('effective_to', EXCLUDED.effective_to, EXCLUDED.effective_to_source,
                              work_versions.effective_to, work_versions.effective_to_source))
                             AS f(name, new_day, new_source, old_day, old_source)
                         WHERE f.new_day IS NOT NULL AND f.old_day IS NOT NULL
                           AND f.new_day <> f.old_day) x),
                 updated_at = NOW()
             RETURNING version_id",
            &[
                (&work_id, Type::INT8),
                (&a.label, Type::VARCHAR),
                (&a.label_source, Type::VARCHAR),
                (&promulgated, Type::TEXT),
                (&promulgated_source, Type::VARCHAR),
                (&effective, Type::TEXT),
                (&effective_source, Type::VARCHAR),
                (&a.notes, Type::JSONB),
                (&a.decisions, Type::JSONB),
                (&effective_to, Type::TEXT),
                (&effective_to_source, Type::VARCHAR),
            ],
        )
        .await?;
    let version_id: i64 = version.get("version_id");
    Ok(version_id)
}

/// Who released a rendition the index commit released itself (`RELEASE_MODE=auto`).
const RELEASED_BY_COMMIT: &str = "index commit";

/// `doc_id` becomes a rendition of `version_id`, released when `release`: the content released
/// now, if any.
async fn record_rendition(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    version_id: i64,
    release: bool,
) -> Result<Option<String>, DbError> {
    // A release travels with its content: released now when `release`; kept when the document
    // stays a rendition of the same version (its content is compared at every read); else none.
    let row = c.query_typed_one(
        "INSERT INTO version_documents (doc_id, version_id, run_id, released_sha256, released_by,
                                        released_at)
         SELECT $1, $2, $3, CASE WHEN $4 THEN d.content_sha256 END,
                CASE WHEN $4 THEN $5 END, CASE WHEN $4 THEN NOW() END
         FROM documents d WHERE d.doc_id = $1
         ON CONFLICT (doc_id) DO UPDATE SET version_id = EXCLUDED.version_id,
             run_id = EXCLUDED.run_id, assigned_at = NOW(),
             released_sha256 = CASE WHEN $4 THEN EXCLUDED.released_sha256
                                    WHEN version_documents.version_id = EXCLUDED.version_id
                                        THEN version_documents.released_sha256 END,
             released_by = CASE WHEN $4 THEN EXCLUDED.released_by
                                WHEN version_documents.version_id = EXCLUDED.version_id
                                    THEN version_documents.released_by END,
             released_at = CASE WHEN $4 THEN EXCLUDED.released_at
                                WHEN version_documents.version_id = EXCLUDED.version_id
                                    THEN version_documents.released_at END
         RETURNING CASE WHEN $4 THEN released_sha256 END AS released_now",
        &[
            (&doc_id, Type::VARCHAR),
            (&version_id, Type::INT8),
            (&run_id, Type::INT8),
            (&release, Type::BOOL),
            (&RELEASED_BY_COMMIT, Type::VARCHAR),
        ],
    )
    .await?;
    if release {
        c.execute_typed(
            "UPDATE work_versions SET released_at = NOW()
             WHERE version_id = $1 AND released_at IS NULL",
            &[(&version_id, Type::INT8)],
        )
        .await?;
    }
    Ok(row.get("released_now"))
}

/// A version as recorded, for an upload that names it: its dates, and the documents of it that
/// are not deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedVersion {
    pub work_id: i64,
    pub promulgated_on: Option<String>,
    pub effective_from: Option<String>,
    pub effective_to: Option<String>,
    pub documents: Vec<String>,
}

/// The version `label` of the work with `title_key` and `level`, if one is recorded with a
/// document that is not being deleted.
pub async fn recorded_version(
    c: &impl GenericClient,
    organ_id: &str,
    title_key: &str,
    level: &str,
    label: &str,
) -> Result<Option<RecordedVersion>, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT w.work_id, v.promulgated_on::text AS promulgated_on,
                    v.effective_from::text AS effective_from, v.effective_to::text AS effective_to,
                    array_agg(d.doc_id ORDER BY d.doc_id) AS documents
             FROM works w
             JOIN work_versions v ON v.work_id = w.work_id
             JOIN version_documents vd ON vd.version_id = v.version_id
             JOIN documents d ON d.doc_id = vd.doc_id AND d.deleting_at IS NULL
             WHERE w.title_key = $1 AND w.level = $2 AND v.label = $3 AND w.organ_id = $4
             GROUP BY w.work_id, v.version_id",
            &[
                (&title_key, Type::VARCHAR),
                (&level, Type::VARCHAR),
                (&label, Type::VARCHAR),
                (&organ_id, Type::VARCHAR),
            ],
        )
        .await?;
    Ok(row.map(|r| RecordedVersion {
        work_id: r.get("work_id"),
        promulgated_on: r.get("promulgated_on"),
        effective_from: r.get("effective_from"),
        effective_to: r.get("effective_to"),
        documents: r.get("documents"),
    }))
}

/// What became of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// The rendition answers from now on, with the content released.
    Now { label: String, sha256: String },
    /// It already did, with this content.
    Already { label: String, sha256: String },
    /// The document no longer holds the content the reviewer approved: nothing was released.
    ContentChanged { label: String, current: String },
    /// The document is of no version of this work.
    NotOfWork,
    /// The document is not indexed (or is being deleted): its version cannot answer yet.
    NotIndexed { label: String, status: String },
}

/// Releases the rendition `doc_id` of its version, if it belongs to `work_id` and the document is
/// indexed: the content it holds now (its sha256, which must be `approved` when the reviewer named
/// one), by `released_by`. One compare-and-set under the document's row lock, so a search sees
/// the rendition either before or after it, whole, and an overwrite racing it is not released.
/// Call it in a transaction: the release and the search projection it rewrites are one commit
/// (apart, a search between them would rank by the old projection and be checked by the new
/// release).
pub async fn release(
    c: &impl GenericClient,
    work_id: i64,
    doc_id: &str,
    released_by: &str,
    approved: Option<&str>,
) -> Result<Released, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT v.version_id, v.label, vd.released_sha256, d.content_sha256, d.status,
                    d.deleting_at IS NOT NULL AS deleting
             FROM version_documents vd
             JOIN work_versions v ON v.version_id = vd.version_id
             JOIN documents d ON d.doc_id = vd.doc_id
             WHERE vd.doc_id = $1 AND v.work_id = $2
             FOR UPDATE OF d",
            &[(&doc_id, Type::VARCHAR), (&work_id, Type::INT8)],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Released::NotOfWork);
    };
    let (version_id, label): (i64, String) = (row.get("version_id"), row.get("label"));
    let status: String = row.get("status");
    let current: String = row.get("content_sha256");
    if status != "indexed" || row.get::<_, bool>("deleting") {
        return Ok(Released::NotIndexed { label, status });
    }
    if approved.is_some_and(|a| a != current) {
        return Ok(Released::ContentChanged { label, current });
    }
    if row.get::<_, Option<String>>("released_sha256").as_deref() == Some(current.as_str()) {
        return Ok(Released::Already {
            label,
            sha256: current,
        });
    }
    c.execute_typed(
        "UPDATE version_documents SET released_sha256 = $2, released_by = $3, released_at = NOW()
         WHERE doc_id = $1",
        &[
            (&doc_id, Type::VARCHAR),
            (&current, Type::VARCHAR),
            (&released_by, Type::VARCHAR),
        ],
    )
    .await?;
    c.execute_typed(
        "UPDATE work_versions SET released_at = NOW()
         WHERE version_id = $1 AND released_at IS NULL",
        &[(&version_id, Type::INT8)],
    )
    .await?;
    super::projection::refresh_works_of(c, &[], &[work_id]).await?;
    super::announce::version_released(c, work_id, version_id, doc_id, &current, released_by)
        .await?;
    Ok(Released::Now {
        label,
        sha256: current,
    })
}

/// The versions of `work_id` with an indexed document that wait for their release, oldest first.
pub async fn held(c: &impl GenericClient, work_id: i64) -> Result<Vec<VersionRecord>, DbError> {
    let rows = c
        .query_typed(
            "SELECT v.version_id, v.label, v.label_source, v.promulgated_on::text AS promulgated_on,
                    v.promulgated_source, v.effective_from::text AS effective_from,
                    v.effective_from_source, v.effective_to::text AS effective_to,
                    v.effective_to_source, 'held' AS status,
                    v.notes, v.decisions,
                    array_agg(d.doc_id ORDER BY d.doc_id) AS renditions
             FROM work_versions v
             JOIN version_documents vd ON vd.version_id = v.version_id
             JOIN documents d ON d.doc_id = vd.doc_id
             WHERE v.work_id = $1 AND d.status = 'indexed' AND d.deleting_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM version_documents rv
                               JOIN documents rd ON rd.doc_id = rv.doc_id
                               WHERE rv.version_id = v.version_id AND rd.status = 'indexed'
                                 AND rd.deleting_at IS NULL
                                 AND rv.released_sha256 = rd.content_sha256)
             GROUP BY v.version_id
             ORDER BY COALESCE(v.effective_from, v.promulgated_on), v.version_id",
            &[(&work_id, Type::INT8)],
        )
        .await?;
    Ok(rows.iter().map(VersionRecord::from_row).collect())
}

fn split<'a>(dated: &'a Option<(String, &'a str)>) -> (Option<&'a str>, &'a str) {
    match dated {
        Some((day, source)) => (Some(day.as_str()), source),
        None => (None, ""),
    }
}

/// Every answering (released, with an indexed document) version of the works `works` selects
/// (a predicate on `v.work_id`) with its work, its validity and its status on `$1` (a date): the
/// one query all of this module's reads stand on. A version without any date is taken as in force
/// from the beginning of time (it cannot be placed), and is superseded by any dated one.
///
/// The scope sits in the first step on purpose: the later steps are window functions, which
/// PostgreSQL computes over every version they are given before any outer filter applies, so a
/// read of one page or of a few documents would otherwise cost the whole library. For the same
/// reason a version's answering document is found by a LATERAL with a LIMIT, which the planner
/// never turns into a join: as an EXISTS it was, hashing every answering version of the library
/// for a page of works.
pub(crate) fn timeline_of(works: &str) -> String {
    TIMELINE.replacen("{works}", works, 1)
}

const TIMELINE: &str = "
    WITH answering AS (
        SELECT v.version_id, v.work_id, v.label, v.promulgated_on, v.effective_from,
               v.effective_to AS given_to,
               COALESCE(v.effective_from, v.promulgated_on, '-infinity'::date) AS eff
        FROM work_versions v
        CROSS JOIN LATERAL (SELECT 1 FROM version_documents vd
                      JOIN documents d ON d.doc_id = vd.doc_id
                      WHERE vd.version_id = v.version_id AND d.status = 'indexed'
                        AND d.deleting_at IS NULL AND vd.released_sha256 = d.content_sha256
                      LIMIT 1) answers
        WHERE ({works})
    ), timeline AS (
        SELECT a.*, LEAST(LEAD(a.eff) OVER w, a.given_to) AS eff_to,
               LEAD(a.version_id) OVER w AS next_version,
               LEAD(a.label) OVER w AS next_label
        FROM answering a
        WINDOW w AS (PARTITION BY a.work_id ORDER BY a.eff, a.version_id)
    ), current AS (
        SELECT DISTINCT ON (t.work_id) t.work_id, t.version_id, t.label
        FROM timeline t
        WHERE t.eff <= $1::text::date
        ORDER BY t.work_id, t.eff DESC, t.version_id DESC
    ), placed AS (
        SELECT t.*, w.title, w.level, w.repealed_on, w.successor_work_id,
               c.version_id AS current_version, c.label AS current_label,
               CASE WHEN w.repealed_on IS NOT NULL AND w.repealed_on <= $1::text::date
                        THEN 'repealed'
                    WHEN t.eff > $1::text::date THEN 'not_yet_in_force'
                    WHEN c.version_id = t.version_id AND t.given_to <= $1::text::date
                        THEN 'repealed'
                    WHEN c.version_id = t.version_id THEN 'in_force'
                    ELSE 'superseded' END AS status
        FROM timeline t
        JOIN works w ON w.work_id = t.work_id
        LEFT JOIN current c ON c.work_id = t.work_id
    )";

/// What a hit says of its version.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionPlace {
    pub work_id: i64,
    pub work_title: String,
    pub level: String,
    pub version_id: i64,
    pub version: String,
    pub effective_from: Option<String>,
    /// The day the next version took effect (exclusive), or the repeal.
    pub effective_to: Option<String>,
    /// On the search's `as_of`: in_force, not_yet_in_force, superseded or repealed.
    pub status: String,
    /// For a superseded version: the version that replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
    /// For a repealed work: the work that took its place, if one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
    #[serde(skip)]
    pub replaced_by_id: Option<i64>,
    /// Every indexed document of this version (its renditions: md, docx, pdf…).
    pub documents: Vec<String>,
}

/// The version each of `doc_ids` belongs to, placed on `as_of`. Documents of no version (not a
/// regulation, or indexed before versions existed) are absent.
pub async fn places(
    c: &impl GenericClient,
    doc_ids: &[String],
    as_of: &str,
) -> Result<HashMap<String, VersionPlace>, DbError> {
    if doc_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let timeline = timeline_of(
        "v.work_id IN (SELECT sv.work_id FROM version_documents sd
                         JOIN work_versions sv ON sv.version_id = sd.version_id
                         WHERE sd.doc_id = ANY($2))",
    );
    let sql = format!(
        "{timeline}
         SELECT vd.doc_id, p.work_id, p.title, p.level, p.version_id, p.label,
                p.effective_from::text AS effective_from,
                COALESCE(LEAST(p.eff_to, p.repealed_on), p.eff_to, p.repealed_on)::text
                    AS effective_to,
                p.status, p.next_version, p.next_label, s.title AS successor,
                (SELECT array_agg(r.doc_id ORDER BY r.doc_id)
                 FROM version_documents r JOIN documents rd ON rd.doc_id = r.doc_id
                 WHERE r.version_id = p.version_id AND rd.status = 'indexed'
                   AND rd.deleting_at IS NULL AND r.released_sha256 = rd.content_sha256) AS renditions
         FROM version_documents vd
         JOIN placed p ON p.version_id = vd.version_id
         LEFT JOIN works s ON s.work_id = p.successor_work_id
         WHERE vd.doc_id = ANY($2)"
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
            let superseded = status == "superseded";
            (
                r.get("doc_id"),
                VersionPlace {
                    work_id: r.get("work_id"),
                    work_title: r.get("title"),
                    level: r.get("level"),
                    version_id: r.get("version_id"),
                    version: r.get("label"),
                    effective_from: r.get("effective_from"),
                    effective_to: r.get("effective_to"),
                    replaced_by: r
                        .get::<_, Option<String>>("next_label")
                        .filter(|_| superseded),
                    replaced_by_id: r
                        .get::<_, Option<i64>>("next_version")
                        .filter(|_| superseded),
                    successor: r.get("successor"),
                    status,
                    documents: r
                        .get::<_, Option<Vec<String>>>("renditions")
                        .unwrap_or_default(),
                },
            )
        })
        .collect())
}

/// The tenant a work belongs to, if the work exists.
pub async fn organ_of(c: &impl GenericClient, work_id: i64) -> Result<Option<String>, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT organ_id FROM works WHERE work_id = $1",
            &[(&work_id, Type::INT8)],
        )
        .await?;
    Ok(row.map(|r| r.get("organ_id")))
}

/// One work in a listing.
#[derive(Debug, Clone, Serialize)]
pub struct WorkSummary {
    pub work_id: i64,
    pub title: String,
    pub level: String,
    pub level_source: String,
    /// Versions that answer.
    pub versions: i64,
    /// The version in force today, if any.
    pub current_version: Option<String>,
    pub repealed_on: Option<String>,
    /// The work that took its place, when it was repealed naming one.
    pub successor_work_id: Option<i64>,
}

/// [`list`]'s statement: $1 the day, $2 the work id the page starts after, $3 a level, $4 a
/// title key, $5 the page's size, $6 the tenants (empty: all). Apart so that a test can ask the planner what it reads.
pub fn list_sql() -> String {
    // The page's works, walked in id order and each checked for an answering version as it is
    // reached, until the page is full: a LATERAL with a LIMIT is never flattened into a join, so
    // the planner cannot choose (as it did with EXISTS) to find every work's answering versions
    // first and sort them: 4.5 ms a page at 150 laws, 35 ms at 2,000. The page is an array,
    // computed once, so that its versions are read by their work's key: as an IN (a semi join)
    // the planner read every version and kept the page's.
    let timeline = timeline_of(
        "v.work_id = ANY(ARRAY(SELECT lw.work_id FROM works lw
                         CROSS JOIN LATERAL (
                             SELECT 1 FROM work_versions lv
                             JOIN version_documents lvd ON lvd.version_id = lv.version_id
                             JOIN documents ld ON ld.doc_id = lvd.doc_id
                             WHERE lv.work_id = lw.work_id AND ld.status = 'indexed'
                               AND ld.deleting_at IS NULL
                               AND lvd.released_sha256 = ld.content_sha256
                             LIMIT 1) answers
                         WHERE lw.work_id > $2
                           AND (cardinality($6::varchar[]) = 0 OR lw.organ_id = ANY($6::varchar[]))
                           AND ($3::varchar IS NULL OR lw.level = $3)
                           AND ($4::varchar IS NULL OR strpos(lw.title_key, $4) > 0)
                         ORDER BY lw.work_id LIMIT $5))",
    );
    format!(
        "{timeline}
         SELECT w.work_id, w.title, w.level, w.level_source, w.repealed_on::text AS repealed_on,
                w.successor_work_id,
                count(p.version_id) AS versions, max(p.current_label) AS current_version
         FROM works w JOIN placed p ON p.work_id = w.work_id
         WHERE w.work_id > $2
           AND ($3::varchar IS NULL OR w.level = $3)
           AND ($4::varchar IS NULL OR strpos(w.title_key, $4) > 0)
         GROUP BY w.work_id
         ORDER BY w.work_id LIMIT $5"
    )
}

/// Works with at least one answering version, by title, `limit` after `after_id`, narrowed to a
/// level and to titles containing `name` (normalised as the caller normalises).
pub async fn list(
    c: &impl GenericClient,
    today: &str,
    level: Option<&str>,
    name_key: Option<&str>,
    after_id: i64,
    limit: i64,
    organs: &[String],
) -> Result<Vec<WorkSummary>, DbError> {
    let sql = list_sql();
    let rows = c
        .query_typed(
            &sql,
            &[
                (&today, Type::TEXT),
                (&after_id, Type::INT8),
                (&level, Type::VARCHAR),
                (&name_key, Type::VARCHAR),
                (&limit, Type::INT8),
                (&organs, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| WorkSummary {
            work_id: r.get("work_id"),
            title: r.get("title"),
            level: r.get("level"),
            level_source: r.get("level_source"),
            versions: r.get("versions"),
            current_version: r.get("current_version"),
            repealed_on: r.get("repealed_on"),
            successor_work_id: r.get("successor_work_id"),
        })
        .collect())
}

/// One version on a work's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct VersionRecord {
    pub version_id: i64,
    pub version: String,
    pub version_source: String,
    pub promulgated_on: Option<String>,
    pub promulgated_source: String,
    pub effective_from: Option<String>,
    pub effective_from_source: String,
    pub effective_to: Option<String>,
    /// "upload", "next_version" (the day the next version took effect) or "repeal".
    pub effective_to_source: String,
    pub status: String,
    pub notes: serde_json::Value,
    pub decisions: serde_json::Value,
    pub documents: Vec<String>,
}

impl VersionRecord {
    /// A row of the timeline's or the held versions' statement (the same columns).
    fn from_row(r: &tokio_postgres::Row) -> VersionRecord {
        VersionRecord {
            version_id: r.get("version_id"),
            version: r.get("label"),
            version_source: r.get("label_source"),
            promulgated_on: r.get("promulgated_on"),
            promulgated_source: r.get("promulgated_source"),
            effective_from: r.get("effective_from"),
            effective_from_source: r.get("effective_from_source"),
            effective_to: r.get("effective_to"),
            effective_to_source: r.get("effective_to_source"),
            status: r.get("status"),
            notes: r.get("notes"),
            decisions: r.get("decisions"),
            documents: r
                .get::<_, Option<Vec<String>>>("renditions")
                .unwrap_or_default(),
        }
    }
}

/// A work and its answering versions, oldest first, placed on `as_of`, then the versions held for
/// their release (status `held`); none if it has neither.
pub async fn timeline(
    c: &impl GenericClient,
    work_id: i64,
    as_of: &str,
) -> Result<Option<(WorkSummary, Vec<VersionRecord>)>, DbError> {
    let works = list(c, as_of, None, None, work_id - 1, 1, &[]).await?;
    let held = held(c, work_id).await?;
    let work = match works.into_iter().find(|w| w.work_id == work_id) {
        Some(w) => w,
        None if !held.is_empty() => match work_row(c, work_id).await? {
            Some(w) => w,
            None => return Ok(None),
        },
        None => return Ok(None),
    };
    let timeline = timeline_of("v.work_id = $2");
    let sql = format!(
        "{timeline}
         SELECT p.version_id, p.label, v.label_source, p.promulgated_on::text AS promulgated_on,
                v.promulgated_source, p.effective_from::text AS effective_from,
                v.effective_from_source,
                COALESCE(LEAST(p.eff_to, p.repealed_on), p.eff_to, p.repealed_on)::text
                    AS effective_to,
                CASE WHEN p.repealed_on IS NOT NULL
                          AND (p.eff_to IS NULL OR p.repealed_on < p.eff_to) THEN 'repeal'
                     WHEN p.eff_to IS NOT NULL AND p.eff_to = v.effective_to
                         THEN v.effective_to_source
                     WHEN p.eff_to IS NOT NULL THEN 'next_version'
                     ELSE '' END AS effective_to_source,
                p.status, v.notes, v.decisions,
                (SELECT array_agg(r.doc_id ORDER BY r.doc_id)
                 FROM version_documents r JOIN documents rd ON rd.doc_id = r.doc_id
                 WHERE r.version_id = p.version_id AND rd.status = 'indexed'
                   AND rd.deleting_at IS NULL AND r.released_sha256 = rd.content_sha256) AS renditions
         FROM placed p JOIN work_versions v ON v.version_id = p.version_id
         WHERE p.work_id = $2
         ORDER BY p.eff, p.version_id"
    );
    let rows = c
        .query_typed(&sql, &[(&as_of, Type::TEXT), (&work_id, Type::INT8)])
        .await?;
    let versions = rows.iter().map(VersionRecord::from_row).collect::<Vec<_>>();
    let mut versions = versions;
    versions.extend(held);
    Ok(Some((work, versions)))
}

/// The work's own row, with no answering version.
async fn work_row(c: &impl GenericClient, work_id: i64) -> Result<Option<WorkSummary>, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT work_id, title, level, level_source, repealed_on::text AS repealed_on,
                    successor_work_id
             FROM works WHERE work_id = $1",
            &[(&work_id, Type::INT8)],
        )
        .await?;
    Ok(row.map(|r| WorkSummary {
        work_id: r.get("work_id"),
        title: r.get("title"),
        level: r.get("level"),
        level_source: r.get("level_source"),
        versions: 0,
        current_version: None,
        repealed_on: r.get("repealed_on"),
        successor_work_id: r.get("successor_work_id"),
    }))
}

/// A version of a work by its label, as (version id, work id), or, failing that, by its id.
pub async fn find_version(
    c: &impl GenericClient,
    work_id: i64,
    version: &str,
) -> Result<Option<(i64, i64)>, DbError> {
    let by_id: Option<i64> = version.parse().ok();
    let row = c
        .query_typed_opt(
            "SELECT version_id, work_id FROM work_versions
             WHERE (work_id = $1 AND label = $2) OR version_id = $3
             ORDER BY (work_id = $1 AND label = $2) DESC LIMIT 1",
            &[
                (&work_id, Type::INT8),
                (&version, Type::VARCHAR),
                (&by_id, Type::INT8),
            ],
        )
        .await?;
    Ok(row.map(|r| (r.get("version_id"), r.get("work_id"))))
}

/// The articles of one indexed rendition of `version_id` (the first by doc id), in order, as
/// (section title, section path, text); none when no rendition is indexed.
pub async fn version_articles(
    c: &impl GenericClient,
    version_id: i64,
) -> Result<Option<Vec<(String, Vec<String>, String)>>, DbError> {
    let doc = c
        .query_typed_opt(
            "SELECT vd.doc_id FROM version_documents vd JOIN documents d ON d.doc_id = vd.doc_id
             WHERE vd.version_id = $1 AND d.status = 'indexed' AND d.deleting_at IS NULL
               AND vd.released_sha256 = d.content_sha256
             ORDER BY vd.doc_id LIMIT 1",
            &[(&version_id, Type::INT8)],
        )
        .await?;
    let Some(doc) = doc else {
        return Ok(None);
    };
    let doc_id: String = doc.get("doc_id");
    let rows = c
        .query_typed(
            "SELECT section_title, section_path, text FROM semantic_blocks
             WHERE doc_id = $1 AND block_type = 'article' ORDER BY id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(Some(
        rows.iter()
            .map(|r| {
                (
                    r.get("section_title"),
                    serde_json::from_value(r.get("section_path")).unwrap_or_default(),
                    r.get("text"),
                )
            })
            .collect(),
    ))
}

/// What became of a repeal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repealed {
    Done,
    NoSuchWork,
    NoSuchSuccessor,
}

/// Marks `work_id` repealed from `on` (YYYY-MM-DD; none: not repealed after all), naming the work
/// that took its place. From that day its versions answer as `repealed`, never as in force.
pub async fn repeal(
    c: &impl GenericClient,
    work_id: i64,
    on: Option<&str>,
    successor: Option<i64>,
) -> Result<Repealed, DbError> {
    if let Some(s) = successor {
        let exists = c
            .query_typed_opt(
                "SELECT 1 AS one FROM works WHERE work_id = $1",
                &[(&s, Type::INT8)],
            )
            .await?;
        if exists.is_none() {
            return Ok(Repealed::NoSuchSuccessor);
        }
    }
    let moved = c
        .execute_typed(
            "UPDATE works SET repealed_on = $2::text::date, successor_work_id = $3,
                 updated_at = NOW()
             WHERE work_id = $1",
            &[
                (&work_id, Type::INT8),
                (&on, Type::TEXT),
                (&successor, Type::INT8),
            ],
        )
        .await?;
    super::projection::refresh_works_of(c, &[], &[work_id]).await?;
    if let (1, Some(on)) = (moved, on) {
        super::announce::work_repealed(c, work_id, on, successor).await?;
    }
    Ok(if moved == 1 {
        Repealed::Done
    } else {
        Repealed::NoSuchWork
    })
}
