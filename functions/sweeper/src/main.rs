//! The sweeper Lambda, on the template's schedule: re-drives lost jobs, and fails a run only when
//! its job can no longer exist and the re-drives are used up (see `docpipe::stages::sweep`).

use docpipe::services::SweepService;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Error> {
    docpipe::telemetry::init();
    let service = SweepService::from_env().await?;
    let service = &service;
    lambda_runtime::run(service_fn(move |_: LambdaEvent<Value>| async move {
        let (report, kept) = service.run_once().await?;
        docpipe::metrics::runs_swept(report.failed());
        docpipe::metrics::runs_redriven(report.redriven());
        for problem in report.problems.iter().chain(&kept.problems) {
            tracing::warn!(problem, "sweep left something for the next run");
        }
        Ok::<Value, Error>(json!({
            "failed": report.failed(),
            "redriven": report.redriven(),
            "cleanups_carried_out": kept.cleanups.removed,
            "reconcile_removed": kept.reconciled.total(),
            "tombstones_pruned": kept.tombstones_pruned,
            "problems": report.problems.iter().chain(&kept.problems).collect::<Vec<_>>(),
        }))
    }))
    .await
}
