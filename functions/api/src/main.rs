//! The API Lambda: build the state once per container, then let `lambda_http` feed API Gateway
//! (HTTP API, payload 2.0) requests to the router.

use docpipe_api_fn::{router, ActorSource, ApiState};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    docpipe_core::telemetry::init();
    let state = match ApiState::from_env(ActorSource::Lambda).await {
        Ok(state) => Arc::new(state),
        Err(e) => {
            let error = docpipe_core::error::chain(&e);
            tracing::error!(error, "the API cannot start");
            return Err(error.into());
        }
    };
    lambda_http::run(router(state)).await
}
