//! docpipe's HTTP API as an axum [`Router`]. In Lambda, `lambda_http` runs it (the `api` binary);
//! locally the dev runner serves the very same router on 127.0.0.1 ([`serve`]).
//!
//! ```text
//! POST   /documents                         register; 201 with an upload URL (presigned PUT)
//! GET    /documents                         list: status, regulation_type, version, updated_since; cursor
//! GET    /documents/{doc_id}                state and current run (stage timings, counts, failure)
//! GET    /documents/{doc_id}/runs           every run, newest first
//! GET    /documents/{doc_id}/history        every status change, oldest first
//! GET    /documents/{doc_id}/artifacts      parse artifacts, each with a presigned GET
//! GET    /documents/{doc_id}/structure      the heading tree, nested
//! GET    /documents/{doc_id}/blocks         semantic blocks: section_title, block_type; cursor
//! GET    /documents/{doc_id}/download       a presigned GET of the original
//! POST   /documents/{doc_id}/retry          a new run (202); Idempotency-Key honoured
//! DELETE /documents/{doc_id}                seed 000 §6.7 (204; 204 again once deleted)
//! GET    /intake-failures                   uploads that did not become a document; cursor
//! POST   /search                            validated hits
//! POST   /notifications/s3                  S3-compatible webhook (bearer token)
//! GET    /healthz                           database, S3, Milvus
//! ```
//! Every error is RFC 9457 `application/problem+json` ([`problem`]).

mod articles;
pub mod audit;
mod authority;
mod citations;
pub mod context;
pub mod documents;
pub mod health;
mod health_cache;
pub mod intake;
pub mod lazy_index;
pub mod notifications;
pub mod principal_tags;
pub mod problem;
pub mod progress;
mod quota;
pub mod search;
pub mod sigv4;
pub mod state;
pub mod tenant;
mod tenant_settings;
pub mod vector_index;
pub mod views;
mod works;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::Method;
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::Router;
use problem::ApiError;
use std::sync::Arc;

pub use state::{
    ActorSource, ApiConfig, ApiState, TenancyConfig, DEFAULT_PUBLISHER_SCOPE,
    DEFAULT_REVIEWER_SCOPE, DEFAULT_TENANT_CLAIM,
};

type Routes = Vec<(Method, &'static str, MethodRouter<Arc<ApiState>>)>;

/// The one table the router is built from, so [`routes`] cannot drift from what is served.
fn table() -> Routes {
    let mut routes = document_routes();
    routes.extend(law_routes());
    routes.extend([
        (
            Method::GET,
            "/intake-failures",
            get(intake::list_intake_failures),
        ),
        (
            Method::POST,
            "/notifications/s3",
            post(notifications::s3_notification),
        ),
        (Method::GET, "/healthz", get(health::healthz)),
        (Method::GET, "/index", get(vector_index::show)),
        (Method::POST, "/index/rebuild", post(vector_index::start)),
        (
            Method::POST,
            "/index/rebuild/cancel",
            post(vector_index::cancel),
        ),
        (Method::POST, "/index/switch", post(vector_index::switch)),
        (Method::GET, "/tenant", get(tenant_settings::show)),
        (
            Method::PUT,
            "/tenant/scan-policy",
            put(tenant_settings::set_scan_policy),
        ),
    ]);
    routes
}

/// `/documents` and what hangs below one document.
fn document_routes() -> Routes {
    vec![
        (
            Method::POST,
            "/documents",
            post(documents::register_document),
        ),
        (Method::GET, "/documents", get(documents::list_documents)),
        (
            Method::GET,
            "/documents/{doc_id}",
            get(documents::get_document),
        ),
        (
            Method::DELETE,
            "/documents/{doc_id}",
            delete(documents::delete_document),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/runs",
            get(documents::list_runs),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/history",
            get(documents::history),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/artifacts",
            get(documents::artifacts),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/structure",
            get(documents::structure),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/blocks",
            get(documents::blocks),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/scan",
            get(documents::scan),
        ),
        (
            Method::POST,
            "/documents/{doc_id}/scan/resolve",
            post(documents::resolve_scan),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/articles/{address}",
            get(articles::get_article),
        ),
        (
            Method::GET,
            "/documents/{doc_id}/download",
            get(documents::download),
        ),
        (
            Method::POST,
            "/documents/{doc_id}/retry",
            post(documents::retry_document),
        ),
    ]
}

/// Search, citations and works: what reads the law as it applies.
fn law_routes() -> Routes {
    vec![
        (Method::POST, "/search", post(search::search_chunks)),
        (Method::POST, "/citations/resolve", post(citations::resolve)),
        (
            Method::POST,
            "/citations/verify",
            // A whole passage escaped as JSON encoders may send it (\uXXXX, a surrogate pair
            // for a rare character) can exceed the API's default limit.
            post(citations::verify).layer(DefaultBodyLimit::max(citations::MAX_VERIFY_BODY_BYTES)),
        ),
        (Method::GET, "/works", get(works::list_works)),
        (Method::GET, "/works/{work_id}", get(works::get_work)),
        (
            Method::GET,
            "/works/{work_id}/diff",
            get(works::diff_versions),
        ),
        (
            Method::POST,
            "/works/{work_id}/versions/{doc_id}/release",
            post(works::release_version),
        ),
        (
            Method::POST,
            "/works/{work_id}/repeal",
            post(works::repeal_work),
        ),
    ]
}

/// Every (method, path template) the router serves, in OpenAPI's `{param}` syntax.
pub fn routes() -> Vec<(Method, &'static str)> {
    table().into_iter().map(|(m, p, _)| (m, p)).collect()
}

async fn no_route(request: Request) -> ApiError {
    ApiError::RouteNotFound {
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
    }
}

/// The API. Build the state once per container and share it.
pub fn router(state: Arc<ApiState>) -> Router {
    let mut router = Router::new();
    for (_, path, method_router) in table() {
        router = router.route(path, method_router);
    }
    router
        .fallback(no_route)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            publish_after_writes,
        ))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            context::middleware,
        ))
        .with_state(state)
}

/// After a request that may have changed something (a release, a repeal, a delete, a webhook's
/// upload), the events it recorded go onto the bus before it answers, so a consumer hears of a
/// change about when its caller does; what is not sent stays in the outbox for the sweeper.
async fn publish_after_writes(
    axum::extract::State(state): axum::extract::State<Arc<ApiState>>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let writes = may_write(request.method(), request.uri().path());
    let response = next.run(request).await;
    if writes && !response.status().is_client_error() {
        state
            .store
            .events
            .flush(
                &state.db,
                &state.store.config.clock,
                docpipe_pipeline::publish::AFTER_BATCH,
            )
            .await;
    }
    response
}

/// Whether a request may change something: not a GET, nor a search or a citation check, which
/// are POSTs for their bodies only (each search would otherwise pay a read of the outbox).
fn may_write(method: &Method, path: &str) -> bool {
    let reads = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        || (*method == Method::POST && (path == "/search" || path.starts_with("/citations/")));
    !reads
}

/// Serves the router on a bound listener until `shutdown` completes (the dev runner, tests).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The `host:port` to listen on, from a URL such as `DOCPIPE_API_URL` (`http://127.0.0.1:8080`).
pub fn listen_addr(url: &str) -> Result<std::net::SocketAddr, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url:?} must be an http:// URL"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let authority = authority.replacen("localhost:", "127.0.0.1:", 1);
    authority.parse().map_err(|_| {
        format!("{url:?} must name an IP address and port, like http://127.0.0.1:8080")
    })
}

#[cfg(test)]
mod tests {
    use axum::http::Method;

    #[test]
    fn searches_and_citation_checks_are_reads_though_they_are_posts() {
        for (method, path, writes) in [
            (Method::POST, "/search", false),
            (Method::POST, "/citations/verify", false),
            (Method::POST, "/citations/resolve", false),
            (Method::GET, "/documents/doc_x/scan", false),
            (Method::POST, "/works/1/repeal", true),
            (Method::POST, "/documents/doc_x/scan/resolve", true),
            (Method::DELETE, "/documents/doc_x", true),
            (Method::POST, "/notifications/s3", true),
        ] {
            assert_eq!(super::may_write(&method, path), writes, "{method} {path}");
        }
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(
            super::listen_addr("http://127.0.0.1:8080")
                .unwrap()
                .to_string(),
            "127.0.0.1:8080"
        );
        assert_eq!(
            super::listen_addr("http://localhost:9000/")
                .unwrap()
                .to_string(),
            "127.0.0.1:9000"
        );
        assert!(super::listen_addr("https://example.com").is_err());
    }
}
