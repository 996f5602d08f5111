//! The parse Lambda: parse jobs in, parsed documents out (see `docpipe::handlers::parse`).

use docpipe::services::ParseService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe::handlers::lambda::serve::<ParseService>().await
}
