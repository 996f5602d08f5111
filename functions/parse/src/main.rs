//! The parse Lambda: parse jobs in, parsed documents out (see `docpipe_pipeline::handlers::parse`).

use docpipe_pipeline::services::ParseService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe_pipeline::handlers::lambda::serve::<ParseService>().await
}
