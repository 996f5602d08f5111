//! Amazon Titan Text Embeddings V2 through Bedrock's InvokeModel. Titan takes one text per call,
//! so a batch becomes a few calls in flight at once.

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::invoke_model::InvokeModelError;
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::Client;

use crate::{check_query, check_texts, l2_normalize, EmbedError, Embedder};

pub const DEFAULT_MODEL_ID: &str = "amazon.titan-embed-text-v2:0";
pub(crate) const DEFAULT_DIMENSION: usize = 1024;
/// Calls in flight per batch: enough to hide latency, small enough not to trip the account's
/// per-minute quota on a burst.
pub(crate) const DEFAULT_CONCURRENCY: usize = 8;
const SERVICE: &str = "bedrock";

pub struct BedrockEmbedder {
    client: tokio::sync::OnceCell<Client>,
    model_id: String,
    dimension: usize,
    concurrency: usize,
}

impl std::fmt::Debug for BedrockEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BedrockEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TitanRequest<'a> {
    pub input_text: &'a str,
    pub dimensions: usize,
    pub normalize: bool,
}

#[derive(Deserialize)]
pub(crate) struct TitanResponse {
    pub embedding: Vec<f32>,
}

impl BedrockEmbedder {
    /// With a client built by the caller (who already loaded the AWS config in `main`).
    pub fn new(
        client: Client,
        model_id: impl Into<String>,
        dimension: usize,
        concurrency: usize,
    ) -> Result<Self, EmbedError> {
        let e = Self::lazy(model_id, dimension, concurrency)?;
        e.client
            .set(client)
            .expect("a fresh OnceCell is always empty");
        Ok(e)
    }

    /// Loads the default AWS config (region, credentials) on first use: [`crate::from_env`] is
    /// synchronous, and loading the config is not.
    pub(crate) fn lazy(
        model_id: impl Into<String>,
        dimension: usize,
        concurrency: usize,
    ) -> Result<Self, EmbedError> {
        let model_id = model_id.into();
        if model_id.trim().is_empty() {
            return Err(EmbedError::config("DOCPIPE_BEDROCK_MODEL_ID", "empty"));
        }
        if model_id.contains("titan-embed-text-v2") && ![256, 512, 1024].contains(&dimension) {
            return Err(EmbedError::config(
                "DOCPIPE_EMBED_DIM",
                format!(
                    "Titan Text Embeddings V2 gives 256, 512 or 1024 dimensions, not {dimension}"
                ),
            ));
        }
        if concurrency == 0 {
            return Err(EmbedError::config(
                "DOCPIPE_BEDROCK_CONCURRENCY",
                "must be positive",
            ));
        }
        Ok(BedrockEmbedder {
            client: tokio::sync::OnceCell::new(),
            model_id,
            dimension,
            concurrency,
        })
    }

    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let cfg = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .http_client(https_client())
                    .load()
                    .await;
                Client::new(&cfg)
            })
            .await
    }

    async fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let body = encode_request(text, self.dimension);
        let out = self
            .client()
            .await
            .invoke_model()
            .model_id(&self.model_id)
            .content_type("application/json")
            .accept("application/json")
            .body(Blob::new(body))
            .send()
            .await
            .map_err(classify)?;
        decode_response(out.body().as_ref(), self.dimension)
    }
}

pub(crate) fn encode_request(text: &str, dimension: usize) -> Vec<u8> {
    serde_json::to_vec(&TitanRequest {
        input_text: text,
        dimensions: dimension,
        normalize: true,
    })
    .expect("a struct of strings and numbers always serialises")
}

pub(crate) fn decode_response(body: &[u8], dimension: usize) -> Result<Vec<f32>, EmbedError> {
    let parsed: TitanResponse =
        serde_json::from_slice(body).map_err(|e| EmbedError::InvalidResponse {
            message: "not a Titan embeddings response".into(),
            source: Some(Box::new(e)),
        })?;
    if parsed.embedding.len() != dimension {
        return Err(EmbedError::DimensionMismatch {
            expected: dimension,
            got: parsed.embedding.len(),
        });
    }
    let mut v = parsed.embedding;
    // Titan already normalises (we ask it to); doing it again costs nothing and guards COSINE.
    l2_normalize(&mut v);
    Ok(v)
}

fn classify<R>(err: SdkError<InvokeModelError, R>) -> EmbedError
where
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let (transient, message) = match &err {
        SdkError::ServiceError(se) => {
            let e = se.err();
            // Display gives "ThrottlingException: Too many requests".
            let message = e.to_string();
            if e.is_throttling_exception()
                || e.is_service_quota_exceeded_exception()
                || e.code() == Some("ThrottlingException")
            {
                return EmbedError::Throttled {
                    message,
                    source: Some(Box::new(err)),
                };
            }
            let transient = e.is_internal_server_exception()
                || e.is_service_unavailable_exception()
                || e.is_model_timeout_exception()
                || e.is_model_not_ready_exception()
                || e.is_model_error_exception()
                || matches!(
                    e.code(),
                    Some("InternalServerException" | "ServiceUnavailableException")
                );
            (transient, message)
        }
        // Network, timeouts and garbled answers: the next attempt may get through.
        SdkError::TimeoutError(_) => (true, "request timed out".into()),
        SdkError::DispatchFailure(df) => {
            let detail = DisplayErrorContext(&err).to_string();
            // No credentials (or a provider that cannot give any) is a setup error that no retry
            // fixes; the SDK reports it as an "other" dispatch failure, with no typed kind to
            // match, so its auth resolver's error names are what tells it apart.
            let no_identity = format!("{df:?}");
            let no_identity = no_identity.contains("NoMatchingAuthScheme")
                || no_identity.contains("NoIdentityResolver");
            let transient = df.is_io() || df.is_timeout() || !(df.is_user() || no_identity);
            let what = if no_identity {
                "no AWS credentials could be resolved"
            } else {
                "request could not be sent"
            };
            (transient, format!("{what}: {detail}"))
        }
        SdkError::ResponseError(_) => (true, "unreadable response".into()),
        // The request could not even be built: credentials or region missing, a bad model id.
        SdkError::ConstructionFailure(_) => (false, "request could not be built".into()),
        _ => (true, "unexpected SDK error".into()),
    };
    EmbedError::Service {
        service: SERVICE,
        message,
        transient,
        source: Some(Box::new(err)),
    }
}

#[async_trait::async_trait]
impl Embedder for BedrockEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_texts(texts)?;
        // Collected first: a lazy `map` closure trips the compiler's higher-ranked lifetime
        // check on async_trait's Send bound. `buffered` keeps the input order while up to
        // `concurrency` calls run.
        let calls: Vec<_> = texts.iter().map(|t| self.embed_one(t)).collect();
        futures::stream::iter(calls)
            .buffered(self.concurrency)
            .try_collect()
            .await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        check_query(text)?;
        self.embed_one(text).await
    }
}

/// rustls on ring, the TLS stack the rest of docpipe uses (the SDK's default would bring aws-lc).
/// Every client built from a hand-made `Config` needs it: without it the SDK has no HTTP client.
pub fn https_client() -> aws_sdk_bedrockruntime::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_bedrockruntime::types::error::{ThrottlingException, ValidationException};

    #[test]
    fn request_json() {
        let body = encode_request("第一条 \"quoted\"", 512);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"inputText": "第一条 \"quoted\"", "dimensions": 512, "normalize": true})
        );
    }

    #[test]
    fn response_json() {
        let body = br#"{"embedding":[0.6,0.8],"inputTextTokenCount":3,"embeddingsByType":{"float":[0.6,0.8]}}"#;
        assert_eq!(decode_response(body, 2).unwrap(), vec![0.6, 0.8]);
        let err = decode_response(body, 1024).unwrap_err();
        assert!(matches!(
            err,
            EmbedError::DimensionMismatch {
                expected: 1024,
                got: 2
            }
        ));
        assert!(err.is_permanent());
        assert!(decode_response(b"{\"message\":\"x\"}", 2)
            .unwrap_err()
            .is_permanent());
    }

    #[test]
    fn dimension_validation() {
        assert!(BedrockEmbedder::lazy(DEFAULT_MODEL_ID, 1024, 8).is_ok());
        assert!(BedrockEmbedder::lazy(DEFAULT_MODEL_ID, 256, 8).is_ok());
        assert!(BedrockEmbedder::lazy(DEFAULT_MODEL_ID, 768, 8).is_err());
        assert!(BedrockEmbedder::lazy("", 1024, 8).is_err());
        assert!(BedrockEmbedder::lazy(DEFAULT_MODEL_ID, 1024, 0).is_err());
    }

    fn service_error(e: InvokeModelError) -> EmbedError {
        // The raw response is only carried along; a unit stands in for the HTTP response.
        classify(SdkError::service_error(e, ()))
    }

    #[test]
    fn throttling_is_transient_validation_is_not() {
        let t = service_error(InvokeModelError::ThrottlingException(
            ThrottlingException::builder()
                .message("Too many requests")
                .build(),
        ));
        assert!(t.is_transient(), "{t}");
        assert!(matches!(t, EmbedError::Throttled { .. }));
        let v = service_error(InvokeModelError::ValidationException(
            ValidationException::builder()
                .message("Malformed input request")
                .build(),
        ));
        assert!(v.is_permanent(), "{v}");
        assert!(v.to_string().contains("Malformed input request"), "{v}");
        // The chain goes down to the SDK error.
        assert!(std::error::Error::source(&v).is_some());
    }
}

#[cfg(test)]
mod no_credentials {
    use super::*;

    // No credentials provider: the SDK fails before sending anything, so this needs no network.
    #[tokio::test]
    async fn missing_credentials_fail_without_network() {
        let conf = aws_sdk_bedrockruntime::Config::builder()
            .region(aws_sdk_bedrockruntime::config::Region::new("us-east-1"))
            .behavior_version(aws_sdk_bedrockruntime::config::BehaviorVersion::latest())
            .http_client(https_client())
            .build();
        let e = BedrockEmbedder::new(Client::from_conf(conf), DEFAULT_MODEL_ID, 1024, 2).unwrap();
        let err = e.embed_query("x").await.unwrap_err();
        assert!(err.is_permanent(), "{err}");
        assert!(err.to_string().contains("credentials"), "{err}");
    }
}
