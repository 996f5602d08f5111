//! Per request: its id, who is calling, one JSON log line when it ends, and the guarantee that
//! every error answer is a problem (axum's own 404/405/413 answers included).

use crate::problem::{
    problem_response, ApiError, ErrorChain, Problem, ProblemType, PROBLEM_BASE, PROBLEM_JSON,
};
use crate::state::{ActorSource, ApiState};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

pub(crate) const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");
/// Names the caller when the API is served by the dev runner (ignored in Lambda).
pub(crate) const ACTOR_HEADER: HeaderName = HeaderName::from_static("x-docpipe-actor");
/// `reviewer` makes the caller a reviewer when the API is served by the dev runner (ignored in
/// Lambda, where only the authorizer says so).
pub(crate) const ROLE_HEADER: HeaderName = HeaderName::from_static("x-docpipe-role");
/// Names the caller's tenant when the API is served by the dev runner (ignored in Lambda, where
/// only the authorizer says so).
pub const TENANT_HEADER: HeaderName = HeaderName::from_static("x-docpipe-tenant");

/// Who is calling: recorded in the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `user` (JWT subject), `iam` (IAM principal ARN), `authorizer` (a Lambda authorizer's
    /// principal), `local` (dev runner), `anonymous` (no authorizer context).
    pub actor_type: String,
    pub actor_id: String,
}

/// The request's id and caller, available to handlers as an extractor.
#[derive(Debug, Clone)]
pub(crate) struct RequestMeta {
    pub request_id: String,
    pub actor: Actor,
    /// May release and repeal: a JWT with the reviewer scope, an IAM principal the template's
    /// route policy let through to a reviewer's route, or locally the role header.
    pub reviewer: bool,
    /// The caller's tenant, from the authorizer (a JWT claim), or locally the tenant header or
    /// the dev runner's default; none: the request is refused (403) before any handler runs.
    pub tenant: Option<String>,
    /// May write to the public library: a JWT with the publisher scope, or locally the role
    /// header naming `publisher`.
    pub publisher: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for RequestMeta {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<RequestMeta>()
            .cloned()
            .unwrap_or_else(|| RequestMeta {
                request_id: new_request_id(),
                actor: anonymous(),
                reviewer: false,
                tenant: None,
                publisher: false,
            }))
    }
}

fn anonymous() -> Actor {
    Actor {
        actor_type: "anonymous".into(),
        actor_id: String::new(),
    }
}

fn new_request_id() -> String {
    hex::encode(rand::random::<[u8; 12]>())
}

/// A caller-supplied value, fit for a log and an audit column: no control characters, bounded.
fn sanitize(value: &str, max_chars: usize) -> String {
    value
        .chars()
        .filter(|c| !c.is_control())
        .take(max_chars)
        .collect::<String>()
        .trim()
        .to_string()
}

fn lambda_context(
    req: &Request,
) -> Option<&lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequestContext> {
    match req
        .extensions()
        .get::<lambda_http::request::RequestContext>()?
    {
        lambda_http::request::RequestContext::ApiGatewayV2(ctx) => Some(ctx),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The caller, from API Gateway's authorizer: a JWT's `sub`, an IAM principal's ARN, or a Lambda
/// authorizer's `principalId`/`sub`.
pub(crate) fn lambda_actor(req: &Request) -> Actor {
    let Some(authorizer) = lambda_context(req).and_then(|c| c.authorizer.as_ref()) else {
        return anonymous();
    };
    if let Some(sub) = authorizer
        .jwt
        .as_ref()
        .and_then(|jwt| jwt.claims.get("sub"))
        .filter(|s| !s.is_empty())
    {
        return Actor {
            actor_type: "user".into(),
            actor_id: sanitize(sub, 256),
        };
    }
    if let Some(iam) = &authorizer.iam {
        if let Some(arn) = iam
            .user_arn
            .as_deref()
            .or(iam.caller_id.as_deref())
            .filter(|s| !s.is_empty())
        {
            return Actor {
                actor_type: "iam".into(),
                actor_id: sanitize(arn, 256),
            };
        }
    }
    for key in ["principalId", "sub"] {
        if let Some(id) = authorizer.fields.get(key).and_then(|v| v.as_str()) {
            return Actor {
                actor_type: "authorizer".into(),
                actor_id: sanitize(id, 256),
            };
        }
    }
    anonymous()
}

/// A reviewer in Lambda: with a JWT, its `scope` claim names the reviewer scope (API Gateway
/// also requires it on the reviewer's routes); with IAM, API Gateway let the principal through a
/// route that only the template's reviewer policy grants.
fn lambda_reviewer(req: &Request, reviewer_scope: &str) -> bool {
    let Some(authorizer) = lambda_context(req).and_then(|c| c.authorizer.as_ref()) else {
        return false;
    };
    if let Some(jwt) = &authorizer.jwt {
        return jwt
            .claims
            .get("scope")
            .is_some_and(|scopes| scopes.split_whitespace().any(|s| s == reviewer_scope))
            || jwt
                .scopes
                .as_ref()
                .is_some_and(|s| s.iter().any(|s| s == reviewer_scope));
    }
    authorizer.iam.is_some()
}

/// Whether the dev runner's role header (`reviewer`, `publisher`, or both, comma-separated) names
/// `role`.
fn local_role(req: &Request, role: &str) -> bool {
    req.headers()
        .get(ROLE_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|r| r.trim() == role))
}

fn local_tenant(req: &Request, dev_tenant: Option<&str>) -> Option<String> {
    match req.headers().get(TENANT_HEADER) {
        // A header that names no valid tenant names none: refused, never taken as the default.
        Some(v) => v
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|t| docpipe_core::tenant::is_valid_organ_id(t))
            .map(String::from),
        None => dev_tenant.map(String::from),
    }
}

/// The caller's tenant in Lambda, from a JWT: the claim the template names.
fn lambda_tenant(req: &Request, claim: &str) -> Option<String> {
    let authorizer = lambda_context(req).and_then(|c| c.authorizer.as_ref())?;
    authorizer
        .jwt
        .as_ref()
        .and_then(|jwt| jwt.claims.get(claim))
        .map(|t| t.trim())
        .filter(|t| docpipe_core::tenant::is_valid_organ_id(t))
        .map(String::from)
}

/// A publisher in Lambda: a JWT whose scopes name the publisher scope.
fn lambda_publisher(req: &Request, publisher_scope: &str) -> bool {
    let Some(jwt) = lambda_context(req)
        .and_then(|c| c.authorizer.as_ref())
        .and_then(|a| a.jwt.as_ref())
    else {
        return false;
    };
    jwt.claims
        .get("scope")
        .is_some_and(|scopes| scopes.split_whitespace().any(|s| s == publisher_scope))
        || jwt
            .scopes
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == publisher_scope))
}

fn local_actor(req: &Request) -> Actor {
    let named = req
        .headers()
        .get(ACTOR_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|v| sanitize(v, 256))
        .filter(|v| !v.is_empty());
    Actor {
        actor_type: "local".into(),
        actor_id: named.unwrap_or_else(|| "local".into()),
    }
}

fn request_id(req: &Request, source: ActorSource) -> String {
    if source == ActorSource::Lambda {
        if let Some(id) = lambda_context(req).and_then(|c| c.request_id.as_deref()) {
            let id = sanitize(id, 128);
            if !id.is_empty() {
                return id;
            }
        }
    }
    req.headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        })
        .map(String::from)
        .unwrap_or_else(new_request_id)
}

/// Routes the template leaves without IAM or JWT authorization: the health check, and the
/// webhook (whose bearer token the handler checks).
fn unsigned_route(path: &str) -> bool {
    matches!(path, "/healthz" | "/notifications/s3")
}

/// The dev runner's signed mode: the request's SigV4 signature, checked over its method, URL,
/// signed headers and body (read here, within the body limit, and put back for the handler).
async fn signed_by(
    keys: &crate::sigv4::LocalKeys,
    req: Request,
    max_body_bytes: usize,
) -> Result<(String, Request), ApiError> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, max_body_bytes)
        .await
        .map_err(|_| ApiError::PayloadTooLarge)?;
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| ApiError::SignatureRejected("the request has no Host header".into()))?;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let url = format!("http://{host}{path_and_query}");
    let access_key_id = keys
        .verify(
            parts.method.as_str(),
            &url,
            &parts.headers,
            &bytes,
            std::time::SystemTime::now(),
        )
        .map_err(|e| ApiError::SignatureRejected(e.to_string()))?;
    Ok((
        access_key_id,
        Request::from_parts(parts, axum::body::Body::from(bytes)),
    ))
}

/// The middleware around every route and fallback.
pub(crate) async fn middleware(
    State(state): State<Arc<ApiState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let request_id = request_id(&req, state.actor_source);
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let tenancy = &state.config.tenancy;
    let (mut actor, reviewer, tenant, publisher) = match state.actor_source {
        ActorSource::Lambda => (
            lambda_actor(&req),
            lambda_reviewer(&req, &state.config.reviewer_scope),
            lambda_tenant(&req, &tenancy.claim),
            lambda_publisher(&req, &tenancy.publisher_scope),
        ),
        ActorSource::Local => (
            local_actor(&req),
            local_role(&req, "reviewer"),
            local_tenant(&req, tenancy.dev_tenant.as_deref()),
            local_role(&req, "publisher"),
        ),
    };
    let mut rejected = None;
    let (tenant, publisher) = match (&state.principal_tags, tenant) {
        // An IAM caller names its tenant by its principal's tag, read from IAM.
        (Some(tags), None)
            if state.actor_source == ActorSource::Lambda && actor.actor_type == "iam" =>
        {
            match tags.of(&actor.actor_id).await {
                Ok(tagged) => (tagged.tenant, tagged.publisher),
                // The account's root, say: no tags, so no tenant (403 below).
                Err(crate::principal_tags::TagError::NotAPrincipal(_)) => (None, false),
                Err(e) => {
                    rejected = Some(ApiError::unavailable("IAM (the caller's tags)", e));
                    (None, false)
                }
            }
        }
        (_, tenant) => (tenant, publisher),
    };
    if let Some(keys) = state.signing.as_deref().filter(|_| !unsigned_route(&path)) {
        match signed_by(keys, req, state.config.max_body_bytes).await {
            Ok((access_key_id, signed)) => {
                actor = Actor {
                    actor_type: "iam".into(),
                    actor_id: sanitize(&format!("local-key/{access_key_id}"), 256),
                };
                req = signed;
            }
            Err(e) => {
                rejected = Some(e);
                req = Request::default();
            }
        }
    }
    if let (None, Some(t)) = (&rejected, &tenant) {
        // A tenant exists once it calls: from then on its uploads under `uploads/{tenant}/` are
        // its own. One write per tenant per container.
        if let Err(e) = state.known_tenants.ensure(&state.db, t).await {
            rejected = Some(e);
        }
    }
    if rejected.is_none() && tenant.is_none() && !unsigned_route(&path) {
        rejected = Some(ApiError::NoTenant(
            "the caller names no tenant: docpipe answers only a caller of a tenant (a JWT's \
             tenant claim, an IAM principal's tenant tag, or the dev runner's X-Docpipe-Tenant)"
                .into(),
        ));
    }
    req.extensions_mut().insert(RequestMeta {
        request_id: request_id.clone(),
        actor: actor.clone(),
        reviewer,
        tenant: tenant.clone(),
        publisher,
    });

    // A panic is a bug: it answers 500 (and is logged) instead of dropping the connection.
    let response = match rejected {
        Some(e) => e.into_response(),
        None => match AssertUnwindSafe(next.run(req)).catch_unwind().await {
            Ok(response) => response,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic".into());
                ApiError::Internal(format!("handler panicked: {what}").into()).into_response()
            }
        },
    };
    let mut response = problemize(response, &method, &path);
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let problem = response.extensions().get::<ProblemType>().map(|p| p.0);
    let chain = response
        .extensions()
        .get::<ErrorChain>()
        .map(|c| c.0.clone());
    if let Some(error) = chain {
        tracing::error!(
            request_id,
            method = %method,
            path,
            status,
            latency_ms,
            actor_type = actor.actor_type,
            actor_id = actor.actor_id,
            tenant,
            problem,
            error,
            "request failed"
        );
    } else {
        tracing::info!(
            request_id,
            method = %method,
            path,
            status,
            latency_ms,
            actor_type = actor.actor_type,
            actor_id = actor.actor_id,
            tenant,
            problem,
            "request"
        );
    }
    response
}

/// Makes any error answer that is not already a problem into one, keeping its headers (a 405's
/// `Allow`, for one). axum answers some requests before a handler runs (unknown method on a known
/// path, an oversized body read outside our extractors); none of those may leak a bare answer.
fn problemize(response: Response, method: &axum::http::Method, path: &str) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    // A problem already, or a JSON answer a handler chose on purpose (`/healthz`'s 503).
    let deliberate = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| {
            v.as_bytes().starts_with(PROBLEM_JSON.as_bytes())
                || v.as_bytes().starts_with(b"application/json")
        });
    if deliberate {
        return response;
    }
    let (kind, detail) = match status.as_u16() {
        404 => ("not-found", format!("no route for {method} {path}")),
        405 => (
            "method-not-allowed",
            format!("{method} is not allowed on {path}"),
        ),
        413 => (
            "payload-too-large",
            "the body is larger than the limit".into(),
        ),
        415 => ("unsupported-media-type", "unsupported Content-Type".into()),
        422 => (
            "invalid-body",
            "the body does not have the expected shape".into(),
        ),
        400..=499 => ("invalid-parameter", "the request is malformed".into()),
        503 => ("service-unavailable", "a dependency is unavailable".into()),
        _ => ("internal", "internal error".into()),
    };
    let (parts, _) = response.into_parts();
    let mut fresh = problem_response(
        status,
        &Problem {
            type_uri: format!("{PROBLEM_BASE}{kind}"),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail,
            extra: Default::default(),
        },
    );
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            fresh.headers_mut().insert(name.clone(), value.clone());
        }
    }
    *fresh.extensions_mut() = parts.extensions;
    fresh.extensions_mut().insert(ProblemType(kind));
    fresh
}
