//! The migrate Lambda, the stack's `Custom::Migrations` resource: runs the migrations on every
//! create and update and answers CloudFormation (see `docpipe_pipeline::handlers::migrate`).
// The handler's future (reqwest, the SDK's secret read, tokio-postgres) nests deeper than rustc's
// default layout limit.
#![recursion_limit = "256"]

use docpipe_pipeline::handlers::migrate::{CustomResourceEvent, MigrateService};
use lambda_runtime::{service_fn, LambdaEvent};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe_core::telemetry::init();
    let (service, init_problem) = MigrateService::from_env();
    let (service, init_problem) = (&service, init_problem.as_deref());
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<CustomResourceEvent>| async move {
            let deadline = instant_of(event.context.deadline);
            service
                .handle(&event.payload, deadline, init_problem)
                .await
                .map(|_| ())
                .map_err(|e| lambda_runtime::Error::from(docpipe_core::error::chain(&e)))
        },
    ))
    .await
}

/// The invocation's deadline (milliseconds since the epoch) on this process's monotonic clock.
fn instant_of(deadline_ms: u64) -> Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}
