//! The store Lambda: upload notifications in, stored documents out (see `docpipe_pipeline::handlers::store`).

use docpipe_pipeline::services::StoreService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe_pipeline::handlers::lambda::serve::<StoreService>().await
}
