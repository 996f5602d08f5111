//! The OpenAI-compatible embedder over real HTTP, against a tiny server on 127.0.0.1 that answers
//! with canned responses and records what it was sent.

mod support;

use std::sync::Arc;

use docpipe_embed::openai::{OpenAiConfig, OpenAiEmbedder};
use docpipe_embed::{cosine, EmbedError, Embedder, Secret};
use support::{serve, Reply, Response};
use tokio::net::TcpListener;

/// A well-behaved endpoint: one unnormalised `dim`-vector per input, derived from the text's
/// length, returned in reverse order to check that `index` is honoured.
fn good(dim: usize) -> Reply {
    Arc::new(move |_head, body| {
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let mut data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut v = vec![0.0f32; dim];
                v[t.as_str().unwrap().chars().count() % dim] = 5.0;
                serde_json::json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        data.reverse();
        Response::json(
            200,
            serde_json::json!({"object": "list", "data": data, "model": body["model"]}).to_string(),
        )
    })
}

fn fixed(status: u16, body: &'static str) -> Reply {
    Arc::new(move |_, _| Response::json(status, body))
}

fn embedder(url: &str, dim: usize, key: Option<&str>, batch: usize) -> OpenAiEmbedder {
    let mut cfg = OpenAiConfig::new(format!("{url}/v1"), "bge-m3", dim);
    cfg.api_key = key.map(Secret::new);
    cfg.batch_size = batch;
    OpenAiEmbedder::new(cfg).unwrap()
}

#[tokio::test]
async fn embeds_in_batches_in_order_with_bearer() {
    let srv = serve(good(4)).await;
    let e = embedder(&srv.url, 4, Some("sk-test-key"), 2);
    let texts: Vec<String> = ["a", "bb", "ccc"].iter().map(|s| s.to_string()).collect();
    let v = e.embed_passages(&texts).await.unwrap();
    assert_eq!(v.len(), 3);
    // Text i has length i+1, so its one-hot sits at (i+1) % 4, normalised to 1.0.
    for (i, x) in v.iter().enumerate() {
        let mut want = vec![0.0f32; 4];
        want[(i + 1) % 4] = 1.0;
        assert_eq!(x, &want, "text {i}");
    }
    let q = e.embed_query("dddd").await.unwrap();
    assert!((cosine(&q, &q) - 1.0).abs() < 1e-6);

    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        3,
        "two batches for three passages, one for the query"
    );
    assert!(seen[0].head.starts_with("POST /v1/embeddings HTTP/1.1"));
    assert!(seen[0]
        .head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("authorization: Bearer sk-test-key")));
    assert_eq!(
        seen[0].body,
        serde_json::json!({"model": "bge-m3", "input": ["a", "bb"]})
    );
    assert_eq!(seen[1].body["input"], serde_json::json!(["ccc"]));
    assert_eq!(seen[2].body["input"], serde_json::json!(["dddd"]));
}

#[tokio::test]
async fn no_key_no_authorization_header() {
    let srv = serve(good(4)).await;
    embedder(&srv.url, 4, None, 8)
        .embed_query("x")
        .await
        .unwrap();
    let seen = srv.seen.lock().unwrap().clone();
    assert!(!seen[0].head.to_ascii_lowercase().contains("authorization"));
}

#[tokio::test]
async fn server_error_is_transient() {
    let srv = serve(fixed(500, r#"{"error":{"message":"model crashed"}}"#)).await;
    let err = embedder(&srv.url, 4, None, 8)
        .embed_query("x")
        .await
        .unwrap_err();
    assert!(
        matches!(err, EmbedError::Status { status: 500, .. }),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(err.to_string().contains("model crashed"), "{err}");
}

#[tokio::test]
async fn throttling_is_transient() {
    let srv = serve(fixed(429, r#"{"error":{"message":"rate limit"}}"#)).await;
    let err = embedder(&srv.url, 4, None, 8)
        .embed_query("x")
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn bad_request_is_permanent() {
    let srv = serve(fixed(400, r#"{"error":{"message":"unknown model"}}"#)).await;
    let err = embedder(&srv.url, 4, Some("sk-secret-400"), 8)
        .embed_passages(&["x".to_string()])
        .await
        .unwrap_err();
    assert!(
        matches!(err, EmbedError::Status { status: 400, .. }),
        "{err:?}"
    );
    assert!(err.is_permanent());
    assert!(!format!("{err} {err:?}").contains("sk-secret-400"));
}

#[tokio::test]
async fn dimension_mismatch_is_permanent() {
    let srv = serve(good(8)).await;
    let err = embedder(&srv.url, 4, None, 8)
        .embed_query("x")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            EmbedError::DimensionMismatch {
                expected: 4,
                got: 8
            }
        ),
        "{err:?}"
    );
    assert!(err.is_permanent());
}

#[tokio::test]
async fn garbage_body_is_permanent() {
    let srv = serve(fixed(200, "<html>login page</html>")).await;
    let err = embedder(&srv.url, 4, None, 8)
        .embed_query("x")
        .await
        .unwrap_err();
    assert!(matches!(err, EmbedError::InvalidResponse { .. }), "{err:?}");
    assert!(err.is_permanent());
    assert!(
        std::error::Error::source(&err).is_some(),
        "keeps the JSON error"
    );
}

#[tokio::test]
async fn unreachable_endpoint_is_transient() {
    // Bind then drop: the port is (almost certainly) closed now.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let err = embedder(&format!("http://127.0.0.1:{port}"), 4, None, 8)
        .embed_query("x")
        .await
        .unwrap_err();
    assert!(matches!(err, EmbedError::Network(_)), "{err:?}");
    assert!(err.is_transient());
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn empty_text_never_reaches_the_server() {
    let srv = serve(good(4)).await;
    let err = embedder(&srv.url, 4, None, 8)
        .embed_passages(&["ok".into(), "".into()])
        .await
        .unwrap_err();
    assert!(matches!(err, EmbedError::EmptyInput { index: 1 }));
    assert!(srv.seen.lock().unwrap().is_empty());
}
