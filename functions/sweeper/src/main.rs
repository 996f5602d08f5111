//! The sweeper Lambda, on the template's schedule: re-drives lost jobs, and fails a run only when
//! its job can no longer exist and the re-drives are used up (see `docpipe::handlers::sweep`).

use docpipe::services::SweepService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe::handlers::lambda::serve::<SweepService>().await
}
