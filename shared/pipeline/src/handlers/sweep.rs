//! The sweeper function, on the template's schedule: re-drives lost jobs, and fails a run only when
//! its job can no longer exist and the re-drives are used up (see [`crate::upkeep::sweep`]); then
//! the housekeeping (clean-ups, the reconcile, tombstones).

use super::lambda::Function;
use crate::services::SweepService;
use crate::upkeep::sweep::SweepError;
use serde_json::Value;

/// What one scheduled run did, as the function answers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepSummary {
    pub cleanups_carried_out: usize,
    pub failed: usize,
    pub problems: Vec<String>,
    pub reconcile_removed: usize,
    pub redriven: usize,
    pub tombstones_pruned: u64,
    /// Another sweep held the lease, so this one did nothing.
    pub skipped: bool,
}

/// One scheduled run: the sweep and the housekeeping, counted in the metrics; what either left
/// for the next run is logged.
pub(crate) async fn handle_schedule(service: &SweepService) -> Result<SweepSummary, SweepError> {
    let Some((report, kept)) = service.run_once().await? else {
        return Ok(SweepSummary {
            skipped: true,
            ..SweepSummary::default()
        });
    };
    docpipe_core::metrics::runs_swept(report.failed());
    docpipe_core::metrics::runs_redriven(report.redriven());
    for problem in report.problems.iter().chain(&kept.problems) {
        tracing::warn!(problem, "sweep left something for the next run");
    }
    Ok(SweepSummary {
        cleanups_carried_out: kept.cleanups.removed,
        failed: report.failed(),
        problems: report
            .problems
            .iter()
            .chain(&kept.problems)
            .cloned()
            .collect(),
        reconcile_removed: kept.reconciled.total(),
        redriven: report.redriven(),
        tombstones_pruned: kept.tombstones_pruned,
        skipped: false,
    })
}

#[async_trait::async_trait]
impl Function for SweepService {
    /// The schedule's event, which says nothing the sweep needs.
    type Event = Value;
    type Response = SweepSummary;
    type Error = SweepError;

    async fn invoke(&self, _: Value) -> Result<SweepSummary, SweepError> {
        handle_schedule(self).await
    }
}
