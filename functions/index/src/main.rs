//! The index Lambda: index jobs in, indexed documents out (see `docpipe_pipeline::handlers::index`).

use docpipe_pipeline::services::IndexService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe_pipeline::handlers::lambda::serve::<IndexService>().await
}
