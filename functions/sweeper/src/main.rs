//! The sweeper Lambda, on the template's schedule: re-drives lost jobs, and fails a run only when
//! its job can no longer exist and the re-drives are used up (see `docpipe_pipeline::handlers::sweep`).

use docpipe_pipeline::services::SweepService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe_pipeline::handlers::lambda::serve::<SweepService>().await
}
