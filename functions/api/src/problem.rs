//! Errors as RFC 9457 `application/problem+json`: a stable `type` URI per kind of problem, a
//! `title`, the `status` and a `detail`. Bad input is a 4xx, an unavailable dependency a 503;
//! a 500 is a bug. Domain errors map here, once.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use docpipe_db::DbError;
use docpipe_pipeline::adapters::{QueueError, StorageError};
use docpipe_pipeline::stages::delete::DeleteError;
use docpipe_pipeline::stages::register::RegisterError;
use docpipe_pipeline::stages::retry::RetryError;
use docpipe_search::SearchError;
use docpipe_vector::VectorError;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub(crate) const PROBLEM_BASE: &str = "https://docpipe.dev/problems/";
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// Every problem the API answers with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// A path, query or header value is malformed or out of range.
    #[error("{0}")]
    InvalidParameter(String),
    #[error("the body is not valid JSON: {0}")]
    MalformedJson(String),
    /// Well-formed JSON of the wrong shape: unknown or missing fields, wrong types.
    #[error("{0}")]
    InvalidBody(String),
    /// A field's value is not acceptable.
    #[error("{field}: {reason}")]
    Validation { field: String, reason: String },
    #[error("{0}")]
    Unauthorized(String),
    /// The caller is known but may not do this (releasing and repealing are a reviewer's acts).
    #[error("{0}")]
    Forbidden(String),
    /// The caller's identity names no tenant (no claim, tag or dev header): nothing is readable.
    #[error("{0}")]
    NoTenant(String),
    /// A write to the public library by a caller without the publisher role, or to another
    /// tenant's document the caller may read (the public library's).
    #[error("{0}")]
    PublisherRequired(String),
    /// A tenant's quota is used up: nothing was stored or changed.
    #[error("{detail}")]
    QuotaExceeded {
        quota: &'static str,
        detail: String,
        limit: i64,
    },
    /// A signed request whose SigV4 signature does not hold (the dev runner's signed mode; in
    /// AWS, API Gateway refuses it before docpipe runs).
    #[error("{0}")]
    SignatureRejected(String),
    #[error("{0}")]
    NotFound(String),
    #[error("no route for {method} {path}")]
    RouteNotFound { method: String, path: String },
    /// The document's state forbids the operation now; `kind` names which state.
    #[error("{detail}")]
    Conflict {
        kind: &'static str,
        detail: String,
        extra: serde_json::Map<String, serde_json::Value>,
    },
    #[error("the body is larger than the limit")]
    PayloadTooLarge,
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A dependency is down or misbehaving; the same request may succeed later.
    #[error("{dependency} is unavailable")]
    Unavailable {
        dependency: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The vector index has no collection of the configured name, though documents are indexed:
    /// a deployment's name is wrong or the collection was dropped. Searching it again may work
    /// once an operator acts (or the next index creates it).
    #[error(
        "the vector index has no collection `{collection}`, though documents are indexed: \
         dense search cannot answer (is DOCPIPE_MILVUS_COLLECTION right?)"
    )]
    MissingCollection { collection: String },
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The body of every error answer.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The full error chain of a 5xx, attached to the response for the request log (never sent).
#[derive(Debug, Clone)]
pub(crate) struct ErrorChain(pub String);

/// The problem type of a response, attached for the request log.
#[derive(Debug, Clone)]
pub(crate) struct ProblemType(pub &'static str);

impl ApiError {
    pub fn invalid(detail: impl Into<String>) -> Self {
        ApiError::InvalidParameter(detail.into())
    }

    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ApiError::Validation {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn unavailable(
        dependency: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ApiError::Unavailable {
            dependency,
            source: source.into(),
        }
    }

    pub(crate) fn conflict(kind: &'static str, detail: impl Into<String>) -> Self {
        ApiError::Conflict {
            kind,
            detail: detail.into(),
            extra: Default::default(),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidParameter(_) | ApiError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            ApiError::InvalidBody(_) | ApiError::Validation { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_)
            | ApiError::SignatureRejected(_)
            | ApiError::NoTenant(_)
            | ApiError::PublisherRequired(_) => StatusCode::FORBIDDEN,
            ApiError::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) | ApiError::RouteNotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable { .. } | ApiError::MissingCollection { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The last segment of the stable `type` URI.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::InvalidParameter(_) => "invalid-parameter",
            ApiError::MalformedJson(_) => "malformed-json",
            ApiError::InvalidBody(_) => "invalid-body",
            ApiError::Validation { .. } => "validation-failed",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "reviewer-required",
            ApiError::NoTenant(_) => "tenant-required",
            ApiError::PublisherRequired(_) => "publisher-required",
            ApiError::QuotaExceeded { .. } => "quota-exceeded",
            ApiError::SignatureRejected(_) => "signature-invalid",
            ApiError::NotFound(_) | ApiError::RouteNotFound { .. } => "not-found",
            ApiError::Conflict { kind, .. } => kind,
            ApiError::PayloadTooLarge => "payload-too-large",
            ApiError::UnsupportedMediaType(_) => "unsupported-media-type",
            ApiError::Unavailable { .. } | ApiError::MissingCollection { .. } => {
                "service-unavailable"
            }
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn problem(&self) -> Problem {
        let status = self.status();
        let mut extra = serde_json::Map::new();
        match self {
            ApiError::Validation { field, .. } => {
                extra.insert("field".into(), field.clone().into());
            }
            ApiError::Conflict { extra: e, .. } => extra.extend(e.clone()),
            ApiError::QuotaExceeded { quota, limit, .. } => {
                extra.insert("quota".into(), (*quota).into());
                extra.insert("limit".into(), (*limit).into());
            }
            ApiError::Unavailable { dependency, .. } => {
                extra.insert("dependency".into(), (*dependency).into());
            }
            ApiError::MissingCollection { collection } => {
                extra.insert("dependency".into(), "the vector index".into());
                extra.insert("collection".into(), collection.clone().into());
            }
            _ => {}
        }
        Problem {
            type_uri: format!("{PROBLEM_BASE}{}", self.kind()),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: match self {
                ApiError::Unavailable { .. } => {
                    format!("{self}; the request can be repeated later")
                }
                _ => self.to_string(),
            },
            extra,
        }
    }
}

pub(crate) fn problem_response(status: StatusCode, problem: &Problem) -> Response {
    let body = serde_json::to_vec(problem).expect("a problem serialises");
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = problem_response(status, &self.problem());
        if let ApiError::Unauthorized(_) = self {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if status.is_server_error() {
            response
                .extensions_mut()
                .insert(ErrorChain(docpipe_core::error::chain(&self)));
        }
        response.extensions_mut().insert(ProblemType(self.kind()));
        response
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        ApiError::unavailable("the database", e)
    }
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        match e {
            // The API's role may not make the call: a deployment's bug, not an outage to wait out.
            StorageError::AccessDenied { .. } => ApiError::Internal(Box::new(e)),
            e => ApiError::unavailable("object storage", e),
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        ApiError::unavailable("the job queue", e)
    }
}

impl From<VectorError> for ApiError {
    fn from(e: VectorError) -> Self {
        match e {
            VectorError::Unavailable { .. } | VectorError::Mismatch { .. } => {
                ApiError::unavailable("the vector index", e)
            }
            VectorError::MissingCollection { collection } => {
                ApiError::MissingCollection { collection }
            }
            VectorError::Rejected { .. } => ApiError::Internal(Box::new(e)),
        }
    }
}

impl From<RegisterError> for ApiError {
    fn from(e: RegisterError) -> Self {
        match e {
            RegisterError::Invalid { field, reason } => ApiError::validation(field, reason),
            RegisterError::Claim(e) => ApiError::validation(e.field, e.reason),
            RegisterError::Collides(why) => ApiError::conflict("version-collides", why),
            RegisterError::Db(e) => e.into(),
        }
    }
}

impl From<RetryError> for ApiError {
    fn from(e: RetryError) -> Self {
        let detail = e.to_string();
        match e {
            RetryError::NotFound(_) => ApiError::NotFound(detail),
            RetryError::Deleting(_) => ApiError::conflict("document-deleting", detail),
            RetryError::InFlight {
                run_id,
                status,
                deadline,
            } => {
                let mut extra = serde_json::Map::new();
                extra.insert("run_id".into(), run_id.into());
                extra.insert("document_status".into(), status.as_str().into());
                extra.insert("deadline".into(), deadline.into());
                ApiError::Conflict {
                    kind: "run-in-flight",
                    detail,
                    extra,
                }
            }
            RetryError::NotRetryable { .. } => ApiError::conflict("not-retryable", detail),
            RetryError::OriginalMissing { .. } => ApiError::conflict("original-missing", detail),
            RetryError::TooLarge { .. } => ApiError::conflict("original-too-large", detail),
            RetryError::Db(e) => e.into(),
            RetryError::Storage(e) => e.into(),
            RetryError::Queue(e) => e.into(),
            RetryError::Inconsistent(_) => ApiError::conflict("retry-raced", detail),
        }
    }
}

impl From<DeleteError> for ApiError {
    fn from(e: DeleteError) -> Self {
        match e {
            DeleteError::NotFound(id) => {
                ApiError::NotFound(format!("document {id} does not exist"))
            }
            DeleteError::Db(e) => e.into(),
            DeleteError::Storage(e) => e.into(),
            DeleteError::Vector(e) => ApiError::unavailable("the vector index", e),
        }
    }
}

impl From<SearchError> for ApiError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::Embed(docpipe_embed::EmbedError::EmptyInput { .. }) => {
                ApiError::validation("query", "must contain text")
            }
            SearchError::Embed(e) => ApiError::unavailable("the embedder", e),
            SearchError::Vector(e) => e.into(),
            SearchError::Db(e) => e.into(),
        }
    }
}

/// `Json<T>` whose rejections are problems: syntax → 400, shape → 422, size → 413, media type → 415.
pub(crate) struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(
            "the body must be JSON, with Content-Type: application/json".into(),
        ),
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::InvalidBody(rejection.body_text()),
        _ => match rejection {
            JsonRejection::JsonSyntaxError(e) => ApiError::MalformedJson(e.body_text()),
            other => ApiError::MalformedJson(other.body_text()),
        },
    }
}

/// `Query<T>` whose rejections are 400 problems.
pub(crate) struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    ApiError::invalid(rejection.body_text())
}

/// The `{doc_id}` of a path, checked against the id format before anything else sees it.
pub(crate) struct DocId(pub String);

/// Checked against the id format only: whether the caller may see the document is the
/// handler's to ask ([`crate::tenant::gate_document`]), after it has checked the rest of the
/// request, so that a malformed request is a 400 whoever's the document.
impl<S: Send + Sync> FromRequestParts<S> for DocId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(id) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e: PathRejection| ApiError::invalid(e.body_text()))?;
        if !docpipe_core::ids::is_addressable_doc_id(&id) {
            return Err(ApiError::invalid(
                "doc_id must be \"doc_\" followed by 32 lowercase hexadecimal digits",
            ));
        }
        Ok(DocId(id))
    }
}
