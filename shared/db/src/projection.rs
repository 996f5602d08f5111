//! The search projection (`search_projection`, migration 0020): each versioned document's version
//! state as search filters on it before ranking, in PostgreSQL for the keyword index and, through
//! the clean-up outbox, in Milvus (seed 001's searchable fields).
//!
//! Who writes it: [`refresh_works_of`], called by every statement that changes what the version
//! timeline says of a document (an index commit's assignment, a release, a repeal, a delete, a new
//! run), inside its transaction; and the sweeper's [`audit_next`], a page of works per run, which
//! puts right whatever was written before this existed or went astray. A changed row records a
//! `projection` clean-up, which carries it to the document's vectors.
//!
//! It only narrows what is ranked. Search still checks every hit against the version state
//! itself, so a projection that lags can cost a hit its place, never let a wrong one through; and
//! a chunk written before its commit carries [`ALWAYS`](Projection) until the commit says more.

use super::{DbError, Type};
use tokio_postgres::GenericClient;

pub use docpipe_vector::{Projection, RunProjection, VersionWindow};

const FAR_PAST: i64 = Projection::FAR_PAST;
const FAR_FUTURE: i64 = Projection::FAR_FUTURE;

/// The day `YYYY-MM-DD` as days since 1970-01-01, as the projection counts them.
pub fn day_number(day: &str) -> Option<i64> {
    let date = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some((date - epoch).num_days())
}

/// The truth for every document of `$2`'s works: the timeline's verdict, as ranges. A document of a
/// version that does not answer, or not itself released with its content, does not answer.
fn truth_sql() -> String {
    let timeline = super::works::timeline_of("v.work_id = ANY($2)");
    format!(
        "{timeline}
         SELECT vd.doc_id,
                COALESCE(t.version_id IS NOT NULL AND d.status = 'indexed'
                         AND d.deleting_at IS NULL AND vd.released_sha256 = d.content_sha256,
                         false) AS answering,
                CASE WHEN t.version_id IS NULL THEN 0
                     WHEN t.eff = '-infinity'::date THEN {FAR_PAST}
                     ELSE (t.eff - DATE '1970-01-01')::int8 END AS in_force_from,
                CASE WHEN t.version_id IS NULL THEN 0
                     WHEN x.upto IS NULL THEN {FAR_FUTURE}
                     WHEN x.upto = '-infinity'::date THEN {FAR_PAST}
                     ELSE (x.upto - DATE '1970-01-01')::int8 END AS in_force_to
         FROM version_documents vd
         JOIN work_versions v ON v.version_id = vd.version_id AND v.work_id = ANY($2)
         JOIN documents d ON d.doc_id = vd.doc_id
         JOIN works w ON w.work_id = v.work_id
         LEFT JOIN timeline t ON t.version_id = vd.version_id
         CROSS JOIN LATERAL (SELECT LEAST(t.eff_to, w.repealed_on) AS upto) x"
    )
}

/// The works `doc_ids` belong to now.
pub async fn works_of(c: &impl GenericClient, doc_ids: &[String]) -> Result<Vec<i64>, DbError> {
    let rows = c
        .query_typed(
            "SELECT DISTINCT v.work_id FROM version_documents vd
             JOIN work_versions v ON v.version_id = vd.version_id
             WHERE vd.doc_id = ANY($1)",
            &[(&doc_ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get("work_id")).collect())
}

/// Recomputes the rows of every document of `doc_ids`' works and of `also_works`, drops the rows
/// of those of `doc_ids` that are of no version now, and records a `projection` clean-up for each
/// document whose row changed: the documents it changed. Bounded by those works' documents.
pub async fn refresh_works_of(
    c: &impl GenericClient,
    doc_ids: &[String],
    also_works: &[i64],
) -> Result<Vec<String>, DbError> {
    let mut works = works_of(c, doc_ids).await?;
    works.extend_from_slice(also_works);
    works.sort_unstable();
    works.dedup();
    let mut changed = refresh_works(c, &works).await?;
    let dropped = c
        .query_typed(
            "DELETE FROM search_projection sp WHERE sp.doc_id = ANY($1)
               AND NOT EXISTS (SELECT 1 FROM version_documents vd WHERE vd.doc_id = sp.doc_id)
             RETURNING sp.doc_id",
            &[(&doc_ids, Type::VARCHAR_ARRAY)],
        )
        .await?;
    changed.extend(dropped.iter().map(|r| r.get::<_, String>("doc_id")));
    record_changes(c, &changed).await?;
    Ok(changed)
}

/// Recomputes the rows of every document of `works`: the documents whose row changed (no
/// clean-up recorded: see [`refresh_works_of`]).
async fn refresh_works(c: &impl GenericClient, works: &[i64]) -> Result<Vec<String>, DbError> {
    if works.is_empty() {
        return Ok(Vec::new());
    }
    let today = chrono::Utc::now().date_naive().to_string();
    let sql = format!(
        "WITH truth AS (SELECT * FROM ({}) t)
         INSERT INTO search_projection AS sp (doc_id, answering, in_force_from, in_force_to)
         SELECT doc_id, answering, in_force_from, in_force_to FROM truth
         ON CONFLICT (doc_id) DO UPDATE
            SET answering = EXCLUDED.answering, in_force_from = EXCLUDED.in_force_from,
                in_force_to = EXCLUDED.in_force_to, updated_at = NOW()
          WHERE (sp.answering, sp.in_force_from, sp.in_force_to)
                IS DISTINCT FROM (EXCLUDED.answering, EXCLUDED.in_force_from, EXCLUDED.in_force_to)
         RETURNING sp.doc_id",
        truth_sql()
    );
    let rows = c
        .query_typed(&sql, &[(&today, Type::TEXT), (&works, Type::INT8_ARRAY)])
        .await?;
    Ok(rows.iter().map(|r| r.get("doc_id")).collect())
}

/// A `projection` clean-up for each document: a newer one replaces any still waiting, so that
/// a carrier that read the older state never settles the newer.
async fn record_changes(c: &impl GenericClient, doc_ids: &[String]) -> Result<(), DbError> {
    if doc_ids.is_empty() {
        return Ok(());
    }
    c.execute_typed(
        "DELETE FROM cleanups WHERE kind = 'projection' AND doc_id = ANY($1)",
        &[(&doc_ids, Type::VARCHAR_ARRAY)],
    )
    .await?;
    c.execute_typed(
        "INSERT INTO cleanups (kind, doc_id, reason)
         SELECT 'projection', d, 'its version state changed' FROM UNNEST($1::varchar[]) AS d
         ON CONFLICT DO NOTHING",
        &[(&doc_ids, Type::VARCHAR_ARRAY)],
    )
    .await?;
    Ok(())
}

/// What a `projection` clean-up writes onto a document's vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToCarry {
    /// The document's row (none: it answers on every day).
    pub projection: Projection,
    /// The run whose vectors carry it.
    pub run_id: i64,
    /// How many vectors the run holds once whole (its parse's chunk count), when known.
    pub vectors: Option<usize>,
}

/// What a `projection` clean-up writes onto a document's vectors; `None` when the document is
/// gone or going (its vectors go with it) or has no run.
pub async fn to_carry(c: &impl GenericClient, doc_id: &str) -> Result<Option<ToCarry>, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT d.current_run_id, sp.answering, sp.in_force_from, sp.in_force_to,
                    r.vector_chunk_count
             FROM documents d LEFT JOIN search_projection sp ON sp.doc_id = d.doc_id
             LEFT JOIN document_processing_runs r ON r.run_id = d.current_run_id
             WHERE d.doc_id = $1 AND d.deleting_at IS NULL",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.and_then(|r| {
        let run: Option<i64> = r.get("current_run_id");
        let projection = row_of(&r);
        let vectors: Option<i32> = r.get("vector_chunk_count");
        run.map(|run_id| ToCarry {
            projection,
            run_id,
            vectors: vectors.and_then(|n| usize::try_from(n).ok()),
        })
    }))
}

/// Whether `run_id`'s vectors may stay: the document is there and not going, and the run is
/// either its latest committed run or its current run still in flight. A write-back that reads
/// vectors before a prune and writes them after would bring them back; its writer asks this after
/// writing and removes them when the answer is no.
pub async fn still_serves(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
) -> Result<bool, DbError> {
    let row = c
        .query_typed_one(
            "SELECT EXISTS (
                SELECT 1 FROM documents d
                JOIN document_processing_runs r ON r.run_id = $2 AND r.doc_id = d.doc_id
                WHERE d.doc_id = $1 AND d.deleting_at IS NULL
                  AND ((r.run_status = 'running' AND d.current_run_id = r.run_id)
                    OR (r.run_status = 'succeeded' AND NOT EXISTS (
                          SELECT 1 FROM document_processing_runs later
                          WHERE later.doc_id = d.doc_id AND later.run_status = 'succeeded'
                            AND later.run_id > r.run_id)))) AS serves",
            &[(&doc_id, Type::VARCHAR), (&run_id, Type::INT8)],
        )
        .await?;
    Ok(row.get("serves"))
}

/// The row search filters `doc_id` by (none: every day).
pub async fn of(c: &impl GenericClient, doc_id: &str) -> Result<Projection, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT answering, in_force_from, in_force_to FROM search_projection
             WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.map_or(Projection::ALWAYS, |r| Projection {
        answering: r.get("answering"),
        in_force_from: r.get("in_force_from"),
        in_force_to: r.get("in_force_to"),
    }))
}

/// Those of `doc_ids` whose version the window lets through (a document of no version always).
pub async fn within(
    c: &impl GenericClient,
    doc_ids: &[String],
    window: VersionWindow,
) -> Result<std::collections::HashSet<String>, DbError> {
    if doc_ids.is_empty() {
        return Ok(Default::default());
    }
    let (answering_only, day) = match window {
        VersionWindow::Any => return Ok(doc_ids.iter().cloned().collect()),
        VersionWindow::Answering => (true, None),
        VersionWindow::InForceOn(day) => (true, Some(day)),
    };
    let rows = c
        .query_typed(
            "SELECT d.doc_id FROM UNNEST($1::varchar[]) AS d(doc_id)
             LEFT JOIN search_projection sp ON sp.doc_id = d.doc_id
             WHERE sp.doc_id IS NULL
                OR ((sp.answering OR NOT $2)
                    AND ($3::int8 IS NULL OR (sp.in_force_from <= $3 AND sp.in_force_to > $3)))",
            &[
                (&doc_ids, Type::VARCHAR_ARRAY),
                (&answering_only, Type::BOOL),
                (&day, Type::INT8),
            ],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get("doc_id")).collect())
}

/// The indexed documents after `after` (by id, up to `limit`), each with what its committed run's
/// vectors should carry (no row: every day): the sweeper's page of the Milvus audit. One indexed
/// range read, bounded by `limit`.
pub async fn expected_after(
    c: &impl GenericClient,
    after: &str,
    limit: i64,
) -> Result<Vec<RunProjection>, DbError> {
    let rows = c
        .query_typed(
            "SELECT d.doc_id, d.current_run_id, sp.answering, sp.in_force_from, sp.in_force_to
             FROM documents d LEFT JOIN search_projection sp ON sp.doc_id = d.doc_id
             WHERE d.doc_id > $1 AND d.status = 'indexed' AND d.deleting_at IS NULL
               AND d.current_run_id IS NOT NULL
             ORDER BY d.doc_id LIMIT $2",
            &[(&after, Type::VARCHAR), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| RunProjection {
            doc_id: r.get("doc_id"),
            run_id: r.get("current_run_id"),
            projection: row_of(r),
        })
        .collect())
}

/// The projection of a row that LEFT JOINed `search_projection` (none: every day).
fn row_of(r: &tokio_postgres::Row) -> Projection {
    match r.get::<_, Option<bool>>("answering") {
        Some(answering) => Projection {
            answering,
            in_force_from: r.get("in_force_from"),
            in_force_to: r.get("in_force_to"),
        },
        None => Projection::ALWAYS,
    }
}

/// What one audit step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Audited {
    pub works: usize,
    pub changed: usize,
    /// The step reached the last work and starts again from the first next time.
    pub wrapped: bool,
}

/// The sweeper's step through the library: recomputes the next `limit` works after where the last
/// step stopped (and the rows of versioned documents whose row is missing, `limit` of them), and
/// records a clean-up for every row that changed. A full pass takes works ÷ `limit` steps, which
/// bounds how long a row that went astray stays wrong.
pub async fn audit_next(c: &impl GenericClient, limit: i64) -> Result<Audited, DbError> {
    let after: i64 = c
        .query_typed_one(
            "SELECT after_work_id FROM search_projection_audit WHERE id",
            &[],
        )
        .await?
        .get("after_work_id");
    let mut works: Vec<i64> = c
        .query_typed(
            "SELECT work_id FROM works WHERE work_id > $1 ORDER BY work_id LIMIT $2",
            &[(&after, Type::INT8), (&limit, Type::INT8)],
        )
        .await?
        .iter()
        .map(|r| r.get("work_id"))
        .collect();
    let wrapped = (works.len() as i64) < limit;
    let next = if wrapped {
        0
    } else {
        works.last().copied().unwrap_or(0)
    };
    let missing = c
        .query_typed(
            "SELECT DISTINCT v.work_id FROM version_documents vd
             JOIN work_versions v ON v.version_id = vd.version_id
             WHERE NOT EXISTS (SELECT 1 FROM search_projection sp WHERE sp.doc_id = vd.doc_id)
             LIMIT $1",
            &[(&limit, Type::INT8)],
        )
        .await?;
    works.extend(missing.iter().map(|r| r.get::<_, i64>("work_id")));
    works.sort_unstable();
    works.dedup();
    let changed = refresh_works(c, &works).await?;
    record_changes(c, &changed).await?;
    c.execute_typed(
        "UPDATE search_projection_audit
            SET after_work_id = $1, passes = passes + CASE WHEN $2 THEN 1 ELSE 0 END,
                updated_at = NOW()
          WHERE id",
        &[(&next, Type::INT8), (&wrapped, Type::BOOL)],
    )
    .await?;
    Ok(Audited {
        works: works.len(),
        changed: changed.len(),
        wrapped,
    })
}
