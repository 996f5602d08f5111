//! The sweeper's second duty, on the same schedule: what a failure left behind is removed without
//! anyone running a command. Each pass is bounded, and what it did is reported as a metric.
//!
//! 1. The clean-up outbox: removals a stage or a delete decided on but could not finish.
//! 2. The reconcile: vectors and artifacts PostgreSQL does not vouch for, whatever left them; a
//!    few pages of the collection and of the artifacts a pass, going on where the last stopped.
//! 3. Tombstones older than any notification can wait (twice the queue's retention).
//! 4. Keyword rows for documents indexed without them (before the keyword index existed) or by an
//!    older analyzer, rebuilt from PostgreSQL a few documents a pass: an upgrade needs no command.
//! 5. Idempotency keys past their 24 hours ([`idempotency::KEY_TTL_SECS`]), and the tenants'
//!    search counts of minutes an hour gone (the searches-per-minute quota).
//! 6. The search projection: a page of works recomputed a pass ([`projection::audit_next`]),
//!    and a page of indexed documents whose vectors are compared with it
//!    ([`VectorIndex::drifted`]), before the outbox, which then carries what changed or drifted to
//!    Milvus.

use crate::adapters::ObjectStore;
use crate::stages::cleanup::{self, CleanupDeps, CleanupError, CleanupReport};
use crate::upkeep::reconcile::{self, Report};
use docpipe_core::clock::Clock;
use docpipe_db::cleanups::{self, Kind};
use docpipe_db::{idempotency, projection, tombstones, Db, DbError};
use docpipe_vector::VectorIndex;

pub struct HousekeepingDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub vectors: &'a dyn VectorIndex,
    pub bucket: &'a str,
    pub clock: &'a Clock,
}

#[derive(Debug, Default)]
pub struct HousekeepingReport {
    pub cleanups: CleanupReport,
    pub reconciled: Report,
    pub tombstones_pruned: u64,
    pub keywords_rebuilt: usize,
    /// Documents whose article references were read from their stored blocks.
    pub references_read: usize,
    pub idempotency_keys_pruned: u64,
    /// Documents whose search projection the audit found wrong (or missing) and put right.
    pub projection_changed: usize,
    /// Documents whose vectors carried another projection than PostgreSQL's row: carried again.
    pub projection_drifted: usize,
    /// What failed this time (tried again next time).
    pub problems: Vec<String>,
}

impl HousekeepingReport {
    /// Vectors' documents and objects removed by this pass.
    pub fn removed(&self) -> usize {
        self.cleanups.removed + self.reconciled.total()
    }
}

/// Documents whose keyword rows (and, apart, whose references) one pass rebuilds: a few seconds of
/// a sweep at most.
const KEYWORD_DOCUMENTS_PER_PASS: i64 = 20;
/// Expired idempotency keys one pass deletes (one indexed statement, well under a second); a
/// backlog goes over the next passes.
pub(crate) const IDEMPOTENCY_KEYS_PER_PASS: i64 = 10_000;

/// One pass; `limit` bounds the clean-ups and each kind of reconcile removal. Each task runs
/// whatever the others did: a failure is one more line in the report's problems.
pub async fn housekeeping(deps: &HousekeepingDeps<'_>, limit: usize) -> HousekeepingReport {
    let mut report = HousekeepingReport::default();
    let cleanup_deps = CleanupDeps {
        db: deps.db,
        objects: deps.objects,
        vectors: Some(deps.vectors),
        artifacts_bucket: deps.bucket,
        clock: deps.clock,
    };
    // Before the outbox, so that what the audit puts right is carried in the same pass.
    let audited = audit_projection(deps.db).await;
    if let Some(done) = noted(&mut report.problems, "search projection", audited) {
        report.projection_changed = done.changed;
    }
    let drifted = check_vectors(deps.db, deps.vectors).await;
    if let Some(drifted) = noted(&mut report.problems, "vectors' projection", drifted) {
        report.projection_drifted = drifted;
    }
    let cleanups = cleanup::run_due(&cleanup_deps, limit as i64).await;
    if let Some(done) = noted(&mut report.problems, "clean-ups", cleanups) {
        report.problems.extend(done.failed.iter().cloned());
        report.cleanups = done;
    }
    let reconciled = reconcile::sweep(
        deps.db,
        deps.objects,
        deps.vectors,
        deps.bucket,
        limit,
        reconcile::Budget::SWEEP,
    )
    .await;
    if let Some(found) = noted(&mut report.problems, "reconcile", reconciled) {
        report.reconciled = found;
    }
    let keep = deps.clock.retention.as_secs() as i64 * tombstones::RETENTION_FACTOR;
    let pruned = prune_tombstones(deps.db, keep).await;
    report.tombstones_pruned = noted(&mut report.problems, "tombstones", pruned).unwrap_or(0);
    let pruned = prune_idempotency_keys(deps.db).await;
    report.idempotency_keys_pruned =
        noted(&mut report.problems, "idempotency keys", pruned).unwrap_or(0);
    let pruned =
        async { docpipe_db::tenants::prune_search_minutes(&**deps.db.client().await?).await }.await;
    noted(&mut report.problems, "search counts", pruned);
    let rebuilt = crate::stages::keywords::reindex(deps.db, KEYWORD_DOCUMENTS_PER_PASS).await;
    if let Some(done) = noted(&mut report.problems, "keyword rows", rebuilt) {
        report.keywords_rebuilt = done.documents;
    }
    let reread = crate::stages::references::reread(deps.db, KEYWORD_DOCUMENTS_PER_PASS).await;
    if let Some(done) = noted(&mut report.problems, "article references", reread) {
        report.references_read = done.documents;
    }
    docpipe_core::metrics::housekeeping(
        report.cleanups.removed,
        report.reconciled.total(),
        report.tombstones_pruned as usize,
    );
    report
}

/// A task's result, its failure written into `problems` under the task's name.
fn noted<T, E: std::error::Error + 'static>(
    problems: &mut Vec<String>,
    task: &str,
    result: Result<T, E>,
) -> Option<T> {
    result
        .map_err(|e| problems.push(format!("{task}: {}", docpipe_core::error::chain(&e))))
        .ok()
}

/// Works whose search projection one pass recomputes: 5,000 laws take 25 passes.
pub(crate) const PROJECTION_WORKS_PER_PASS: i64 = 200;

async fn audit_projection(db: &Db) -> Result<projection::Audited, DbError> {
    projection::audit_next(&**db.client().await?, PROJECTION_WORKS_PER_PASS).await
}

/// Indexed documents whose vectors one pass compares with PostgreSQL (13 queries at most): at the
/// template's 5-minute sweep, 20,000 documents are all compared every 4 hours, which bounds how
/// long a vector write that went astray without a change in PostgreSQL stays wrong.
pub(crate) const PROJECTION_DOCUMENTS_PER_PASS: i64 = 400;

const VECTORS_CURSOR: &str = "projection_vectors";

/// The next page of indexed documents: those whose vectors disagree with PostgreSQL get a
/// `projection` clean-up, which the outbox carries in this same pass. The number found.
async fn check_vectors(db: &Db, vectors: &dyn VectorIndex) -> Result<usize, CleanupError> {
    let client = db.client().await?;
    let cursor = docpipe_db::reconcile::read_cursor(&**client, VECTORS_CURSOR).await?;
    let page =
        projection::expected_after(&**client, &cursor.position, PROJECTION_DOCUMENTS_PER_PASS)
            .await?;
    drop(client);
    let drifted = vectors.drifted(&page).await?;
    let client = db.client().await?;
    for doc_id in &drifted {
        tracing::warn!(
            doc_id,
            "its vectors carry another version state than PostgreSQL's: carried again"
        );
        cleanups::record(
            &**client,
            Kind::Projection,
            doc_id,
            None,
            "its vectors disagreed with PostgreSQL",
        )
        .await?;
    }
    let wrapped = (page.len() as i64) < PROJECTION_DOCUMENTS_PER_PASS;
    let next = match page.last() {
        Some(last) if !wrapped => last.doc_id.as_str(),
        _ => "",
    };
    docpipe_db::reconcile::write_cursor(&**client, VECTORS_CURSOR, next, wrapped).await?;
    Ok(drifted.len())
}

async fn prune_tombstones(db: &Db, older_than_secs: i64) -> Result<u64, DbError> {
    tombstones::prune(&**db.client().await?, older_than_secs).await
}

async fn prune_idempotency_keys(db: &Db) -> Result<u64, DbError> {
    idempotency::prune(
        &**db.client().await?,
        idempotency::KEY_TTL_SECS,
        IDEMPOTENCY_KEYS_PER_PASS,
    )
    .await
}
