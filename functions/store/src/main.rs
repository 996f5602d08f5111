//! The store Lambda: upload notifications in, stored documents out (see `docpipe::handlers::store`).

use docpipe::services::StoreService;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    docpipe::handlers::lambda::serve::<StoreService>().await
}
