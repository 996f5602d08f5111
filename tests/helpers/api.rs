//! The HTTP API over a test's pipeline, served on 127.0.0.1 as the dev runner serves it.

use crate::*;
use std::sync::Arc;
use std::time::Duration;

/// The API's configuration over the pipeline's bucket and queues, with no webhook token.
pub fn api_config(p: &Pipeline) -> docpipe_api_fn::ApiConfig {
    docpipe_api_fn::ApiConfig {
        reviewer_scope: docpipe_api_fn::DEFAULT_REVIEWER_SCOPE.to_string(),
        dev_sigv4_keys: None,
        tenancy: Default::default(),
        bucket: p.aws.bucket.clone(),
        parse_queue_url: p.aws.parse_queue.clone(),
        index_queue_url: p.aws.index_queue.clone(),
        upload_url_ttl: Duration::from_secs(600),
        download_url_ttl: Duration::from_secs(300),
        webhook_token: None,
        webhook_token_secret_arn: None,
        stage_deadline_secs: 900,
        max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
        max_body_bytes: 64 * 1024,
        max_receive_count: Some(p.aws.clock.max_receive_count),
    }
}

/// Serves the API over the pipeline on a port of its own for the rest of the test; its base URL.
pub async fn serve_api(p: &Pipeline) -> String {
    serve_api_with(p, api_config(p)).await
}

/// Serves the API over the pipeline with `config` (the dev runner's signed mode, for one).
pub async fn serve_api_with(p: &Pipeline, config: docpipe_api_fn::ApiConfig) -> String {
    serve_state(Arc::new(
        docpipe_api_fn::ApiState::new(
            p.db.db.clone(),
            &p.aws.clients,
            p.index.embedder.clone(),
            p.milvus.clone(),
            p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
            config,
            docpipe_api_fn::ActorSource::Local,
        )
        .with_collections(open_collection()),
    ))
    .await
}

/// Serves a router over `state` on 127.0.0.1:0 for the rest of the test; its base URL.
pub async fn serve_state(state: Arc<docpipe_api_fn::ApiState>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(docpipe_api_fn::serve(
        listener,
        state,
        std::future::pending(),
    ));
    base
}
