//! How the CLI proves who it is to the API. The dev runner's API is open; a deployed API wants
//! SigV4 (the template's `AuthMode=iam`, the default) or a JWT (`AuthMode=jwt`). SigV4 is signed by
//! the AWS SDK's signer (`docpipe_api_fn::sigv4`) with credentials from the default chain
//! (environment, profile, SSO, process, web identity, the instance or container role).

use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use clap::ValueEnum;
use reqwest::header::{HeaderName, HeaderValue, AUTHORIZATION};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{Mutex, OnceCell};

/// `--auth` / `DOCPIPE_AUTH`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// SigV4 for an API Gateway URL (`*.amazonaws.com`), a bearer token when `DOCPIPE_TOKEN`
    /// is set, else nothing.
    #[default]
    Auto,
    None,
    Sigv4,
    Bearer,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("--auth bearer needs a token: set DOCPIPE_TOKEN (a JWT from the identity provider of the stack's JwtIssuer)")]
    NoToken,
    #[error("no AWS credentials to sign with: {0} (configure a profile, `aws sso login`, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")]
    NoCredentials(String),
    #[error("no AWS region to sign for: the API URL names none, and neither AWS_REGION nor the profile does")]
    NoRegion,
    #[error("{0}")]
    Sign(String),
}

/// What each request carries.
#[derive(Clone, Default)]
pub enum Auth {
    #[default]
    None,
    Bearer(Arc<str>),
    SigV4(Arc<Signer>),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::None => "none",
            Auth::Bearer(_) => "bearer",
            Auth::SigV4(_) => "sigv4",
        })
    }
}

impl Auth {
    /// The mode chosen for an API URL. An API Gateway URL is `https://{id}.execute-api.{region}.amazonaws.com`
    /// (or a custom domain, with `--auth sigv4`).
    pub fn choose(mode: AuthMode, api_url: &str, token: Option<&str>) -> Result<Auth, AuthError> {
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let host = host_of(api_url);
        let signer = || Auth::SigV4(Arc::new(Signer::new(region_of_host(&host))));
        Ok(match mode {
            AuthMode::None => Auth::None,
            AuthMode::Bearer => Auth::Bearer(token.ok_or(AuthError::NoToken)?.into()),
            AuthMode::Sigv4 => signer(),
            AuthMode::Auto => match token {
                Some(t) => Auth::Bearer(t.into()),
                None if host.ends_with(".amazonaws.com") => signer(),
                None => Auth::None,
            },
        })
    }

    /// Adds the request's credentials: a bearer token, or a SigV4 signature over the request as
    /// it will be sent (method, URL, headers, body).
    pub async fn apply(&self, request: &mut reqwest::Request) -> Result<(), AuthError> {
        match self {
            Auth::None => Ok(()),
            Auth::Bearer(token) => {
                let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                    AuthError::Sign("DOCPIPE_TOKEN is not a valid header value".into())
                })?;
                request.headers_mut().insert(AUTHORIZATION, value);
                Ok(())
            }
            Auth::SigV4(signer) => signer.sign(request).await,
        }
    }
}

fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default()
}

/// `{id}.execute-api.{region}.amazonaws.com` → `region`.
fn region_of_host(host: &str) -> Option<String> {
    let labels: Vec<&str> = host.split('.').collect();
    let at = labels.iter().position(|l| *l == "execute-api")?;
    labels
        .get(at + 1)
        .filter(|r| !r.is_empty() && **r != "amazonaws")
        .map(|r| r.to_string())
}

/// Credentials are asked of the chain once and kept until five minutes before they expire.
pub struct Signer {
    region_from_url: Option<String>,
    chain: OnceCell<(
        aws_credential_types::provider::SharedCredentialsProvider,
        Option<String>,
    )>,
    cached: Mutex<Option<Credentials>>,
}

const REFRESH_BEFORE: Duration = Duration::from_secs(300);

impl Signer {
    fn new(region_from_url: Option<String>) -> Signer {
        Signer {
            region_from_url,
            chain: OnceCell::new(),
            cached: Mutex::new(None),
        }
    }

    async fn chain(
        &self,
    ) -> Result<
        &(
            aws_credential_types::provider::SharedCredentialsProvider,
            Option<String>,
        ),
        AuthError,
    > {
        self.chain
            .get_or_try_init(|| async {
                let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .http_client(docpipe_pipeline::adapters::aws::https_client())
                    .load()
                    .await;
                let provider = sdk.credentials_provider().ok_or_else(|| {
                    AuthError::NoCredentials("the AWS configuration has no credential chain".into())
                })?;
                Ok((provider, sdk.region().map(|r| r.to_string())))
            })
            .await
    }

    async fn credentials(&self) -> Result<(Credentials, String), AuthError> {
        let (provider, region) = self.chain().await?;
        let region = self
            .region_from_url
            .clone()
            .or_else(|| region.clone())
            .ok_or(AuthError::NoRegion)?;
        let mut cached = self.cached.lock().await;
        let fresh = cached.as_ref().is_some_and(|c| {
            c.expiry()
                .is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE)
        });
        if !fresh {
            let credentials = provider
                .provide_credentials()
                .await
                .map_err(|e| AuthError::NoCredentials(docpipe_core::error::chain(&e)))?;
            *cached = Some(credentials);
        }
        Ok((cached.clone().expect("set above"), region))
    }

    async fn sign(&self, request: &mut reqwest::Request) -> Result<(), AuthError> {
        let (credentials, region) = self.credentials().await?;
        let body = match request.body() {
            None => &[][..],
            Some(b) => b
                .as_bytes()
                .ok_or_else(|| AuthError::Sign("a streamed body cannot be signed".into()))?,
        };
        let headers: Vec<(&str, &str)> = request
            .headers()
            .iter()
            .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v)))
            .collect();
        let signed = docpipe_api_fn::sigv4::sign(
            request.method().as_str(),
            request.url().as_str(),
            &headers,
            body,
            &credentials,
            &region,
            SystemTime::now(),
        )
        .map_err(|e| AuthError::Sign(e.to_string()))?;
        for (name, value) in signed.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| AuthError::Sign(e.to_string()))?;
            let value =
                HeaderValue::from_str(&value).map_err(|e| AuthError::Sign(e.to_string()))?;
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_gateway_url_is_signed_for_its_region_and_a_token_wins() {
        let url = "https://abc123.execute-api.eu-central-1.amazonaws.com";
        match Auth::choose(AuthMode::Auto, url, None).unwrap() {
            Auth::SigV4(s) => assert_eq!(s.region_from_url.as_deref(), Some("eu-central-1")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Auth::choose(AuthMode::Auto, url, Some("eyJ")).unwrap(),
            Auth::Bearer(_)
        ));
        assert!(matches!(
            Auth::choose(AuthMode::Auto, "http://127.0.0.1:8080", None).unwrap(),
            Auth::None
        ));
        match Auth::choose(AuthMode::Sigv4, "https://api.example.com", None).unwrap() {
            Auth::SigV4(s) => assert_eq!(s.region_from_url, None),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Auth::choose(AuthMode::Bearer, url, Some("  ")),
            Err(AuthError::NoToken)
        ));
    }

    #[tokio::test]
    async fn a_bearer_token_is_sent_as_the_authorization_header() {
        let url = "https://abc123.execute-api.eu-central-1.amazonaws.com";
        let auth = Auth::choose(AuthMode::Auto, url, Some("eyJ.token")).unwrap();
        let mut request = reqwest::Client::new()
            .get(format!("{url}/documents"))
            .build()
            .unwrap();
        auth.apply(&mut request).await.unwrap();
        assert_eq!(request.headers()["authorization"], "Bearer eyJ.token");
    }
}
