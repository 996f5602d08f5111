//! A small client of docpipe's HTTP API (`openapi.yaml`): JSON in, JSON out, and every error
//! answer (RFC 9457 problem+json) turned into [`ClientError::Problem`] with its title and detail.
//! The answers stay [`Value`]s so that `--json` prints exactly what the API said; the commands
//! read the fields they show through the typed views in [`crate::model`].

use crate::auth::{Auth, AuthMode};
use clap::Args;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// What the CLI talks to when neither `--api-url` nor `DOCPIPE_API_URL` says otherwise.
pub(crate) const DEFAULT_API_URL: &str = "http://127.0.0.1:8080";

/// The largest page the API serves (`limit` ≤ 200).
pub const MAX_PAGE: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The API answered with a problem document.
    #[error("{title}: {detail}")]
    Problem {
        status: u16,
        /// The last segment of the problem `type` (`not-found`, `run-in-flight`, …).
        kind: String,
        title: String,
        detail: String,
        body: Value,
    },
    /// No answer at all: nothing listens, a timeout, a reset connection.
    #[error("cannot reach the API at {url}: {reason} (is the dev runner up? `make up`)")]
    Unreachable { url: String, reason: String },
    /// An answer that is neither what was asked for nor a problem document.
    #[error("unexpected answer from {url}: HTTP {status}: {body}")]
    Unexpected {
        url: String,
        status: u16,
        body: String,
    },
    /// The request could not be signed or given its token.
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthError),
    /// The presigned upload was refused by the object store.
    #[error("upload to the presigned URL failed: HTTP {status}: {body}")]
    Upload { status: u16, body: String },
    /// The command line names something impossible.
    #[error("{0}")]
    Usage(String),
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Problem { status, .. } | ClientError::Unexpected { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }

    pub fn kind(&self) -> Option<&str> {
        match self {
            ClientError::Problem { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

/// The chain of an error as one line (`reqwest` hides the useful part in its sources).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[derive(Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    auth: Auth,
    /// Sent as `X-Docpipe-Tenant`, which only the dev runner reads: a deployed API takes the
    /// tenant from the caller's JWT claim or IAM principal tag.
    tenant: Option<String>,
}

/// One page of a listing: the documents and the cursor of the next page.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub documents: Vec<Value>,
    pub next_cursor: Option<String>,
}

impl Client {
    /// A client of an open API (the dev runner's).
    pub fn new(base: &str) -> Client {
        Client::with_auth(base, Auth::None)
    }

    /// A client that signs or carries a token as `auth` says.
    pub fn with_auth(base: &str, auth: Auth) -> Client {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(120))
            .build()
            .expect("an HTTP client");
        Client {
            base: base.trim_end_matches('/').to_string(),
            http,
            auth,
            tenant: None,
        }
    }

    /// The same client, naming `tenant` to the dev runner.
    pub fn for_tenant(mut self, tenant: Option<&str>) -> Client {
        self.tenant = tenant.map(String::from);
        self
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request and reads its JSON answer; a problem answer becomes an error. A 204 is
    /// `Value::Null`.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<Value, ClientError> {
        let url = self.url(path);
        let mut req = self.http.request(method, &url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(tenant) = &self.tenant {
            req = req.header("x-docpipe-tenant", tenant);
        }
        let unreachable = |e: reqwest::Error| ClientError::Unreachable {
            url: self.base.clone(),
            reason: chain(&e),
        };
        let mut request = req.build().map_err(unreachable)?;
        // Signed last, over the request exactly as it is sent.
        self.auth.apply(&mut request).await?;
        let resp = self.http.execute(request).await.map_err(unreachable)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| ClientError::Unreachable {
            url: self.base.clone(),
            reason: chain(&e),
        })?;
        if status == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status.is_success() {
            return parsed.ok_or_else(|| ClientError::Unexpected {
                url,
                status: status.as_u16(),
                body: String::from_utf8_lossy(&bytes).chars().take(300).collect(),
            });
        }
        match parsed {
            Some(body) if body.get("title").is_some() => Err(problem(status, body)),
            _ => Err(ClientError::Unexpected {
                url,
                status: status.as_u16(),
                body: String::from_utf8_lossy(&bytes).chars().take(300).collect(),
            }),
        }
    }

    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, ClientError> {
        self.send(Method::GET, path, query, None, &[]).await
    }

    /// `POST /documents`: registers a document and returns the answer with its `upload_url`.
    pub async fn register(&self, request: &Value) -> Result<Value, ClientError> {
        self.send(Method::POST, "/documents", &[], Some(request), &[])
            .await
    }

    /// PUTs the bytes to a presigned URL with the headers the registration asked for. The
    /// Content-Type is always sent: an S3 emulator stores an empty object for a form body.
    pub async fn upload(
        &self,
        registered: &Value,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Result<(), ClientError> {
        let url = registered["upload_url"].as_str().unwrap_or_default();
        let mut req = self.http.put(url);
        let mut has_type = false;
        if let Some(headers) = registered["upload_headers"].as_object() {
            for (k, v) in headers {
                if let Some(v) = v.as_str() {
                    has_type |= k.eq_ignore_ascii_case("content-type");
                    req = req.header(k.as_str(), v);
                }
            }
        }
        if !has_type {
            req = req.header("Content-Type", content_type);
        }
        let resp = req
            .body(bytes)
            .send()
            .await
            .map_err(|e| ClientError::Unreachable {
                url: url.split('?').next().unwrap_or_default().to_string(),
                reason: chain(&e),
            })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body = resp.text().await.unwrap_or_default();
        Err(ClientError::Upload {
            status: status.as_u16(),
            body: body.chars().take(300).collect(),
        })
    }

    pub async fn document(&self, doc_id: &str) -> Result<Value, ClientError> {
        self.get(&format!("/documents/{}", segment(doc_id)), &[])
            .await
    }

    pub async fn resolve_scan(&self, doc_id: &str) -> Result<Value, ClientError> {
        self.send(
            Method::POST,
            &format!("/documents/{}/scan/resolve", segment(doc_id)),
            &[],
            None,
            // A reviewer's act: the dev runner takes the role from this header; a deployed API
            // ignores it and asks the caller's IAM policy or JWT scope.
            &[("x-docpipe-role", "reviewer")],
        )
        .await
    }

    /// `GET /tenant`: the caller's tenant, roles, scan policy and quotas.
    pub async fn tenant(&self) -> Result<Value, ClientError> {
        self.send(Method::GET, "/tenant", &[], None, &[]).await
    }

    /// `PUT /tenant/scan-policy`: a reviewer's act (the dev runner takes the role from the header).
    pub async fn set_scan_policy(&self, policy: Option<&str>) -> Result<Value, ClientError> {
        self.send(
            Method::PUT,
            "/tenant/scan-policy",
            &[],
            Some(&serde_json::json!({ "policy": policy })),
            &[("x-docpipe-role", "reviewer")],
        )
        .await
    }

    /// `GET /index`: the active collection and the rebuild under way.
    pub async fn index(&self) -> Result<Value, ClientError> {
        self.get("/index", &[]).await
    }

    /// `POST /index/rebuild`, `/index/switch`, `/index/rebuild/cancel`: a reviewer's acts (the
    /// dev runner takes the role from the header; a deployed API asks IAM or the JWT scope).
    pub async fn index_act(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.send(
            Method::POST,
            path,
            &[],
            Some(body),
            &[("x-docpipe-role", "reviewer")],
        )
        .await
    }

    pub async fn scan(&self, doc_id: &str) -> Result<Value, ClientError> {
        self.get(&format!("/documents/{}/scan", segment(doc_id)), &[])
            .await
    }

    pub async fn structure(&self, doc_id: &str) -> Result<Value, ClientError> {
        self.get(&format!("/documents/{}/structure", segment(doc_id)), &[])
            .await
    }

    pub async fn retry(&self, doc_id: &str) -> Result<Value, ClientError> {
        self.send(
            Method::POST,
            &format!("/documents/{}/retry", segment(doc_id)),
            &[],
            None,
            &[],
        )
        .await
    }

    pub async fn delete(&self, doc_id: &str) -> Result<(), ClientError> {
        self.send(
            Method::DELETE,
            &format!("/documents/{}", segment(doc_id)),
            &[],
            None,
            &[],
        )
        .await
        .map(|_| ())
    }

    pub async fn search(&self, request: &Value) -> Result<Value, ClientError> {
        self.send(Method::POST, "/search", &[], Some(request), &[])
            .await
    }

    /// `POST /citations/resolve`: one citation → its law, version and text.
    pub async fn resolve_citation(&self, request: &Value) -> Result<Value, ClientError> {
        self.send(Method::POST, "/citations/resolve", &[], Some(request), &[])
            .await
    }

    /// `GET /documents/{doc_id}/articles/{address}`.
    pub async fn article(&self, doc_id: &str, address: &str) -> Result<Value, ClientError> {
        self.get(
            &format!(
                "/documents/{}/articles/{}",
                segment(doc_id),
                segment(address)
            ),
            &[],
        )
        .await
    }

    /// One page of `GET /documents`.
    pub async fn list_page(
        &self,
        filter: &ListFilter,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page, ClientError> {
        let mut query = filter.query();
        query.push(("limit", limit.clamp(1, MAX_PAGE).to_string()));
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        let page = self.get("/documents", &query).await?;
        Ok(Page {
            documents: page["documents"].as_array().cloned().unwrap_or_default(),
            next_cursor: page["next_cursor"].as_str().map(String::from),
        })
    }

    /// Follows the cursor until `limit` documents (all of them when `None`) are read.
    pub async fn list(
        &self,
        filter: &ListFilter,
        limit: Option<usize>,
    ) -> Result<Page, ClientError> {
        let mut out = Page::default();
        let mut cursor: Option<String> = None;
        loop {
            let want = match limit {
                Some(n) => (n - out.documents.len()).min(MAX_PAGE),
                None => MAX_PAGE,
            };
            let page = self.list_page(filter, want, cursor.as_deref()).await?;
            out.documents.extend(page.documents);
            out.next_cursor = page.next_cursor.clone();
            let full = limit.is_some_and(|n| out.documents.len() >= n);
            match page.next_cursor {
                Some(c) if !full => cursor = Some(c),
                _ => return Ok(out),
            }
        }
    }
}

/// What `GET /documents` is restricted to.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<String>,
    pub regulation_type: Option<String>,
    pub version: Option<String>,
    /// RFC 3339, as the API wrote it.
    pub updated_since: Option<String>,
}

impl ListFilter {
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        for (name, value) in [
            ("status", &self.status),
            ("regulation_type", &self.regulation_type),
            ("version", &self.version),
            ("updated_since", &self.updated_since),
        ] {
            if let Some(v) = value {
                q.push((name, v.clone()));
            }
        }
        q
    }
}

fn problem(status: StatusCode, body: Value) -> ClientError {
    let text = |k: &str| body[k].as_str().unwrap_or_default().to_string();
    let kind = text("type")
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    ClientError::Problem {
        status: status.as_u16(),
        kind,
        title: text("title"),
        detail: text("detail"),
        body,
    }
}

/// A path segment: a doc id the user typed may hold anything, and the API is the one to judge it.
fn segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        out = out.replace('.', "%2E");
    }
    out
}

/// The search request body the API expects.
pub(crate) fn search_request(
    query: &str,
    mode: Option<&str>,
    top_k: Option<u32>,
    doc_ids: &[String],
    regulation_type: Option<&str>,
    version: Option<&str>,
    tags: &[String],
) -> Value {
    let mut body = json!({ "query": query });
    if let Some(m) = mode {
        body["mode"] = json!(m);
    }
    if let Some(k) = top_k {
        body["top_k"] = json!(k);
    }
    let mut filters = serde_json::Map::new();
    if !doc_ids.is_empty() {
        filters.insert("doc_ids".into(), json!(doc_ids));
    }
    if let Some(t) = regulation_type {
        filters.insert("regulation_type".into(), json!(t));
    }
    if let Some(v) = version {
        filters.insert("version".into(), json!(v));
    }
    if !tags.is_empty() {
        filters.insert("tags".into(), json!(tags));
    }
    if !filters.is_empty() {
        body["filters"] = Value::Object(filters);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_escaped() {
        assert_eq!(segment("doc_ab12"), "doc_ab12");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment(""), "");
    }

    #[test]
    fn search_bodies_carry_only_what_was_given() {
        assert_eq!(
            search_request("q", None, None, &[], None, None, &[]),
            json!({"query": "q"})
        );
        assert_eq!(
            search_request(
                "q",
                Some("keyword"),
                Some(3),
                &["doc_1".into()],
                Some("law"),
                None,
                &["a".into()]
            ),
            json!({"query": "q", "mode": "keyword", "top_k": 3,
                   "filters": {"doc_ids": ["doc_1"], "regulation_type": "law", "tags": ["a"]}})
        );
    }
}

/// Where the API is, how to prove who is calling, and how to print.
#[derive(Args, Clone)]
pub struct Conn {
    /// The API's base URL (a deployed stack's `ApiUrl` output, or the dev runner's).
    #[arg(long, env = "DOCPIPE_API_URL", default_value = DEFAULT_API_URL)]
    pub api_url: String,
    /// How requests are authorized: `auto` signs with SigV4 for an API Gateway URL
    /// (`*.amazonaws.com`, credentials from the default AWS chain) and sends DOCPIPE_TOKEN as a
    /// bearer token when it is set.
    #[arg(long, env = "DOCPIPE_AUTH", value_enum, default_value_t = AuthMode::Auto)]
    pub auth: AuthMode,
    /// A bearer token (a JWT) for a stack deployed with AuthMode=jwt.
    #[arg(long, env = "DOCPIPE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The tenant to act as on the dev runner (its X-Docpipe-Tenant header; without it, the dev
    /// runner's default tenant). A deployed API ignores it: the caller's JWT claim or IAM
    /// principal tag names the tenant.
    #[arg(long, env = "DOCPIPE_TENANT")]
    pub tenant: Option<String>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("api_url", &self.api_url)
            .field("auth", &self.auth)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("json", &self.json)
            .field("tenant", &self.tenant)
            .finish()
    }
}

impl Conn {
    pub fn client(&self) -> Result<Client, ClientError> {
        let auth = Auth::choose(self.auth, &self.api_url, self.token.as_deref())?;
        if let Some(t) = self.tenant.as_deref() {
            if !docpipe_core::tenant::is_valid_organ_id(t) {
                return Err(ClientError::Usage(format!(
                    "--tenant {t:?} is no tenant id: lower-case letters, digits, - and _, at most 64"
                )));
            }
        }
        Ok(Client::with_auth(&self.api_url, auth).for_tenant(self.tenant.as_deref()))
    }
}
