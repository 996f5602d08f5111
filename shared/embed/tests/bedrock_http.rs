//! The Bedrock embedder through the real AWS SDK (signing, REST-JSON error decoding), pointed at a
//! tiny server on 127.0.0.1 that plays InvokeModel for Titan Text Embeddings V2.

mod support;

use std::sync::Arc;

use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use docpipe_embed::bedrock::DEFAULT_MODEL_ID;
use docpipe_embed::{BedrockEmbedder, EmbedError, Embedder};
use support::{serve, Reply, Response};

fn embedder(url: &str, dim: usize) -> BedrockEmbedder {
    let conf = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "AKIDTEST",
            "not-a-secret",
            None,
            None,
            "test",
        ))
        .endpoint_url(url)
        .http_client(docpipe_embed::bedrock::https_client())
        // The SDK's own retries would only slow the error tests down.
        .retry_config(RetryConfig::disabled())
        .build();
    BedrockEmbedder::new(
        aws_sdk_bedrockruntime::Client::from_conf(conf),
        DEFAULT_MODEL_ID,
        dim,
        4,
    )
    .unwrap()
}

/// Titan: a one-hot at (characters of inputText) % dimensions, scaled (Titan's own output is
/// already normalised; the embedder must not depend on it).
fn titan() -> Reply {
    Arc::new(|_head, body| {
        let dim = body["dimensions"].as_u64().unwrap() as usize;
        let n = body["inputText"].as_str().unwrap().chars().count();
        let mut v = vec![0.0f32; dim];
        v[n % dim] = 3.0;
        Response::json(
            200,
            serde_json::json!({"embedding": v, "inputTextTokenCount": n}).to_string(),
        )
    })
}

fn error(status: u16, kind: &'static str, message: &'static str) -> Reply {
    Arc::new(move |_, _| Response {
        status,
        headers: vec![format!("x-amzn-ErrorType: {kind}")],
        body: serde_json::json!({ "message": message }).to_string(),
    })
}

#[tokio::test]
async fn invokes_titan_once_per_text_in_order() {
    let srv = serve(titan()).await;
    let e = embedder(&srv.url, 256);
    let texts: Vec<String> = ["一", "二二", "三三三", "four", "five5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let v = e.embed_passages(&texts).await.unwrap();
    for (i, x) in v.iter().enumerate() {
        let mut want = vec![0.0f32; 256];
        want[(i + 1) % 256] = 1.0;
        assert_eq!(x, &want, "text {i}");
    }
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    for s in &seen {
        let line = s.head.lines().next().unwrap();
        assert!(
            line.starts_with("POST /model/amazon.titan-embed-text-v2") && line.contains("/invoke "),
            "{line}"
        );
        assert!(
            s.head
                .to_ascii_lowercase()
                .contains("authorization: aws4-hmac-sha256"),
            "signed request"
        );
        assert_eq!(s.body["dimensions"], 256);
        assert_eq!(s.body["normalize"], true);
    }
    let mut sent: Vec<&str> = seen
        .iter()
        .map(|s| s.body["inputText"].as_str().unwrap())
        .collect();
    sent.sort();
    let mut want: Vec<&str> = texts.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(sent, want);
}

#[tokio::test]
async fn throttling_is_transient() {
    let srv = serve(error(429, "ThrottlingException", "Too many requests")).await;
    let err = embedder(&srv.url, 256).embed_query("x").await.unwrap_err();
    assert!(matches!(err, EmbedError::Throttled { .. }), "{err:?}");
    assert!(err.is_transient());
}

#[tokio::test]
async fn unavailable_is_transient() {
    let srv = serve(error(503, "ServiceUnavailableException", "try later")).await;
    let err = embedder(&srv.url, 256).embed_query("x").await.unwrap_err();
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn validation_is_permanent() {
    let srv = serve(error(
        400,
        "ValidationException",
        "400 Bad Request: Too many input tokens",
    ))
    .await;
    let err = embedder(&srv.url, 256)
        .embed_passages(&["x".into()])
        .await
        .unwrap_err();
    assert!(err.is_permanent(), "{err}");
    assert!(err.to_string().contains("Too many input tokens"), "{err}");
}

#[tokio::test]
async fn wrong_dimension_is_permanent() {
    // The model answers 1024 values while 512 were configured (e.g. a different model id).
    let srv = serve(Arc::new(|_, _| {
        Response::json(
            200,
            serde_json::json!({"embedding": vec![0.1f32; 1024]}).to_string(),
        )
    }))
    .await;
    let err = embedder(&srv.url, 512).embed_query("x").await.unwrap_err();
    assert!(
        matches!(
            err,
            EmbedError::DimensionMismatch {
                expected: 512,
                got: 1024
            }
        ),
        "{err:?}"
    );
    assert!(err.is_permanent());
}
