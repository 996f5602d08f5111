//! The index Lambda: index jobs in, indexed documents out (see `docpipe::handlers::index`).

use docpipe::services::IndexService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe::handlers::lambda::serve::<IndexService>().await
}
