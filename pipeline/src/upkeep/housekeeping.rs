//! The sweeper's second duty, on the same schedule: what a failure left behind is removed without
//! anyone running a command. Each pass is bounded, and what it did is reported as a metric.
//!
//! 1. The clean-up outbox: removals a stage or a delete decided on but could not finish.
//! 2. The reconcile: vectors and artifacts PostgreSQL does not vouch for, whatever left them; a
//!    few pages of the collection and of the artifacts a pass, going on where the last stopped.
//! 3. Tombstones older than any notification can wait (twice the queue's retention).
//! 4. Keyword rows for documents indexed without them (before the keyword index existed) or by an
//!    older analyzer, rebuilt from PostgreSQL a few documents a pass: an upgrade needs no command.
//! 5. Idempotency keys past their 24 hours ([`idempotency::KEY_TTL_SECS`]).

use crate::adapters::ObjectStore;
use crate::stages::cleanup::{self, CleanupDeps, CleanupReport};
use crate::upkeep::reconcile::{self, Report};
use docpipe_core::clock::Clock;
use docpipe_db::{idempotency, tombstones, Db};
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

/// One pass; `limit` bounds the clean-ups and each kind of reconcile removal.
pub async fn housekeeping(deps: &HousekeepingDeps<'_>, limit: usize) -> HousekeepingReport {
    let mut report = HousekeepingReport::default();
    let cleanup_deps = CleanupDeps {
        db: deps.db,
        objects: deps.objects,
        vectors: Some(deps.vectors),
        artifacts_bucket: deps.bucket,
        clock: deps.clock,
    };
    match cleanup::run_due(&cleanup_deps, limit as i64).await {
        Ok(done) => {
            report.problems.extend(done.failed.iter().cloned());
            report.cleanups = done;
        }
        Err(e) => report
            .problems
            .push(format!("clean-ups: {}", docpipe_core::error::chain(&e))),
    }
    match reconcile::sweep(
        deps.db,
        deps.objects,
        deps.vectors,
        deps.bucket,
        limit,
        reconcile::Budget::SWEEP,
    )
    .await
    {
        Ok(found) => report.reconciled = found,
        Err(e) => report
            .problems
            .push(format!("reconcile: {}", docpipe_core::error::chain(&e))),
    }
    let keep = deps.clock.retention.as_secs() as i64 * tombstones::RETENTION_FACTOR;
    match deps.db.client().await {
        Ok(client) => match tombstones::prune(&**client, keep).await {
            Ok(n) => report.tombstones_pruned = n,
            Err(e) => report
                .problems
                .push(format!("tombstones: {}", docpipe_core::error::chain(&e))),
        },
        Err(e) => report
            .problems
            .push(format!("tombstones: {}", docpipe_core::error::chain(&e))),
    }
    match deps.db.client().await {
        Ok(client) => match idempotency::prune(
            &**client,
            idempotency::KEY_TTL_SECS,
            IDEMPOTENCY_KEYS_PER_PASS,
        )
        .await
        {
            Ok(n) => report.idempotency_keys_pruned = n,
            Err(e) => report.problems.push(format!(
                "idempotency keys: {}",
                docpipe_core::error::chain(&e)
            )),
        },
        Err(e) => report.problems.push(format!(
            "idempotency keys: {}",
            docpipe_core::error::chain(&e)
        )),
    }
    match crate::stages::keywords::reindex(deps.db, KEYWORD_DOCUMENTS_PER_PASS).await {
        Ok(done) => report.keywords_rebuilt = done.documents,
        Err(e) => report
            .problems
            .push(format!("keyword rows: {}", docpipe_core::error::chain(&e))),
    }
    match crate::stages::references::reread(deps.db, KEYWORD_DOCUMENTS_PER_PASS).await {
        Ok(done) => report.references_read = done.documents,
        Err(e) => report.problems.push(format!(
            "article references: {}",
            docpipe_core::error::chain(&e)
        )),
    }
    docpipe_core::metrics::housekeeping(
        report.cleanups.removed,
        report.reconciled.total(),
        report.tombstones_pruned as usize,
    );
    report
}
