//! Configuration from the environment, validated once at start. Every missing or malformed variable
//! is reported together, so a misconfigured deployment fails with one clear message.

/// A value that must never reach a log line. One type for every credential (database URL, Milvus
/// token, webhook token, embedder API key), defined below both its users, in the embed crate.
pub use docpipe_embed::Secret;

use crate::env::EnvReader;

/// Where PostgreSQL is. `DATABASE_URL` goes through the pooler (RDS Proxy, PgBouncer locally).
#[derive(Debug, Clone)]
pub struct DbConfig {
    pub url: Secret,
    pub pool_size: usize,
    /// In AWS: the Secrets Manager secret (JSON with `username` and `password`, as RDS writes it)
    /// whose credentials replace the URL's, so the password is never in the environment.
    pub secret_arn: Option<String>,
    /// Extra CA certificates (PEM) to trust for TLS, e.g. the RDS CA bundle shipped in a layer.
    /// TLS is on when the URL says `sslmode=require`.
    pub ca_bundle: Option<std::path::PathBuf>,
}

impl DbConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        let url = env.required("DATABASE_URL");
        if !url.is_empty() && !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
            env.problems
                .push("DATABASE_URL must be a postgres:// URL".to_string());
        }
        DbConfig {
            url: Secret::new(url),
            // A Lambda container handles one event at a time: a couple of connections suffice.
            pool_size: env.parsed_or("DOCPIPE_DB_POOL_SIZE", 2usize),
            secret_arn: env.optional("DOCPIPE_DB_SECRET_ARN"),
            ca_bundle: env
                .optional("DOCPIPE_DB_CA_BUNDLE")
                .map(std::path::PathBuf::from),
        }
    }
}

/// The AWS side: the bucket and the queues. `DOCPIPE_AWS_ENDPOINT_URL`, else `AWS_ENDPOINT_URL`,
/// points the SDK at a local emulator. The template declares the first (empty in AWS) so that
/// `sam local invoke --env-vars` can set it: SAM overrides only the variables a function declares,
/// and an empty `AWS_ENDPOINT_URL` would make the SDK warn about an invalid URL.
#[derive(Debug, Clone)]
pub struct AwsConfig {
    pub endpoint_url: Option<String>,
    pub region: String,
    /// How long one attempt of an S3 or SQS call may take.
    pub attempt_timeout_secs: u64,
    /// The EventBridge bus docpipe's events go to (`DOCPIPE_EVENT_BUS`); none: they stay in the
    /// outbox until a process that has one publishes them.
    pub event_bus: Option<String>,
}

impl AwsConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        AwsConfig {
            endpoint_url: env
                .optional("DOCPIPE_AWS_ENDPOINT_URL")
                .or_else(|| env.optional("AWS_ENDPOINT_URL")),
            region: env
                .optional("AWS_REGION")
                .or_else(|| env.optional("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".to_string()),
            attempt_timeout_secs: env.parsed_or("DOCPIPE_AWS_ATTEMPT_TIMEOUT_SECS", 20u64),
            event_bus: env
                .optional("DOCPIPE_EVENT_BUS")
                .filter(|bus| !bus.trim().is_empty()),
        }
    }
}

/// Everything the store stage needs.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub parse_queue_url: String,
    /// The queue store events arrive on (none when S3 invokes the function directly): a failed
    /// event is held back there for its backoff.
    pub store_queue_url: Option<String>,
    pub max_bytes: u64,
    /// How long a registered upload may take to arrive before its run fails ("no upload arrived").
    /// Only a `pending` run has a deadline: waiting in a queue is never a failure.
    pub stage_deadline_secs: i64,
    pub clock: crate::clock::Clock,
}

pub const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;

impl StoreConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        StoreConfig {
            parse_queue_url: env.url("DOCPIPE_PARSE_QUEUE_URL"),
            store_queue_url: env.optional("DOCPIPE_STORE_QUEUE_URL"),
            max_bytes: env.parsed_or("DOCPIPE_MAX_BYTES", DEFAULT_MAX_BYTES),
            stage_deadline_secs: env.parsed_or("DOCPIPE_STAGE_DEADLINE_SECS", 900i64),
            clock: crate::clock::Clock::read(env),
        }
    }
}

/// Everything the parse stage needs.
#[derive(Debug, Clone)]
pub struct ParseConfig {
    /// Where artifacts are written.
    pub bucket: String,
    /// Where parse jobs arrive (a failed one is held back there for its backoff).
    pub parse_queue_url: String,
    pub index_queue_url: String,
    pub max_bytes: u64,
    pub chunk: docpipe_parse::ChunkConfig,
    pub limits: docpipe_parse::Limits,
    pub clock: crate::clock::Clock,
    /// What the sensitive-data scan of each parse does with what it finds.
    pub scan: ScanPolicy,
}

/// What a finding of the sensitive-data scan does (`DOCPIPE_SCAN_POLICY`), and the deployment's
/// own rules besides the built-in kinds (`DOCPIPE_SCAN_RULES`, a JSON object of name → regular
/// expression).
#[derive(Debug, Clone, Default)]
pub struct ScanPolicy {
    pub action: ScanAction,
    pub rules: Vec<docpipe_parse::sensitive::CustomRule>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScanAction {
    /// Indexed as is; the findings are shown.
    #[default]
    Warn,
    /// Indexed with every value masked in blocks, chunks and artifacts.
    Mask,
    /// Indexed as is but withheld: it answers nothing (and a version is not released) until a
    /// reviewer resolves the findings.
    Block,
}

impl ScanAction {
    /// By its name (`warn`, `mask`, `block`).
    pub fn named(name: &str) -> Option<ScanAction> {
        match name {
            "warn" => Some(ScanAction::Warn),
            "mask" => Some(ScanAction::Mask),
            "block" => Some(ScanAction::Block),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ScanAction::Warn => "warn",
            ScanAction::Mask => "mask",
            ScanAction::Block => "block",
        }
    }
}

impl ScanPolicy {
    /// Longest pattern a rule may have, in bytes: a rule is configuration, not data.
    pub const MAX_RULE_BYTES: usize = 512;
    pub const MAX_RULES: usize = 32;

    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        let action = match set(env.optional("DOCPIPE_SCAN_POLICY")).as_deref() {
            None | Some("warn") => ScanAction::Warn,
            Some("mask") => ScanAction::Mask,
            Some("block") => ScanAction::Block,
            Some(other) => {
                env.problems.push(format!(
                    "DOCPIPE_SCAN_POLICY is {other:?}: it must be warn, mask or block"
                ));
                ScanAction::Warn
            }
        };
        let rules = match set(env.optional("DOCPIPE_SCAN_RULES")) {
            None => Vec::new(),
            Some(json) => match Self::rules_of(&json) {
                Ok(rules) => rules,
                Err(why) => {
                    env.problems.push(format!("DOCPIPE_SCAN_RULES: {why}"));
                    Vec::new()
                }
            },
        };
        ScanPolicy { action, rules }
    }

    /// `{"name": "regex", …}`, each compiled with a bounded size.
    pub fn rules_of(json: &str) -> Result<Vec<docpipe_parse::sensitive::CustomRule>, String> {
        let map: std::collections::BTreeMap<String, String> = serde_json::from_str(json)
            .map_err(|e| format!("a JSON object of rule name to regular expression: {e}"))?;
        if map.len() > Self::MAX_RULES {
            return Err(format!(
                "at most {} rules, not {}",
                Self::MAX_RULES,
                map.len()
            ));
        }
        map.into_iter()
            .map(|(name, pattern)| {
                if name.is_empty() || name.len() > 64 {
                    return Err(format!("rule name {name:?} must be 1 to 64 bytes"));
                }
                if pattern.len() > Self::MAX_RULE_BYTES {
                    return Err(format!(
                        "rule {name}: a pattern of at most {} bytes",
                        Self::MAX_RULE_BYTES
                    ));
                }
                let pattern = regex::RegexBuilder::new(&pattern)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| format!("rule {name}: {e}"))?;
                Ok(docpipe_parse::sensitive::CustomRule { name, pattern })
            })
            .collect()
    }
}

impl ParseConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        let defaults = docpipe_parse::ChunkConfig::default();
        let chunk = docpipe_parse::ChunkConfig {
            max_tokens: env.parsed_or("DOCPIPE_CHUNK_MAX_TOKENS", defaults.max_tokens),
            overlap_tokens: env.parsed_or("DOCPIPE_CHUNK_OVERLAP_TOKENS", defaults.overlap_tokens),
        };
        if chunk.max_tokens < 16 || chunk.overlap_tokens >= chunk.max_tokens {
            env.problems.push(format!(
                "DOCPIPE_CHUNK_MAX_TOKENS ({}) must be at least 16 and above DOCPIPE_CHUNK_OVERLAP_TOKENS ({})",
                chunk.max_tokens, chunk.overlap_tokens
            ));
        }
        let limit_defaults = docpipe_parse::Limits::default();
        let config = ParseConfig {
            bucket: env.required("DOCPIPE_BUCKET"),
            parse_queue_url: env.url("DOCPIPE_PARSE_QUEUE_URL"),
            index_queue_url: env.url("DOCPIPE_INDEX_QUEUE_URL"),
            max_bytes: env.parsed_or("DOCPIPE_MAX_BYTES", DEFAULT_MAX_BYTES),
            chunk,
            limits: docpipe_parse::Limits {
                max_pages: env.parsed_or("DOCPIPE_MAX_PAGES", limit_defaults.max_pages),
                max_ocr_pages: env.parsed_or("DOCPIPE_MAX_OCR_PAGES", limit_defaults.max_ocr_pages),
                max_chunks: env.parsed_or("DOCPIPE_MAX_CHUNKS", limit_defaults.max_chunks),
                ..limit_defaults
            },
            clock: crate::clock::Clock::read(env),
            scan: ScanPolicy::read(env),
        };
        if config.limits.max_chunks == 0 {
            env.problems.push(
                "DOCPIPE_MAX_CHUNKS must be at least 1: 0 would refuse every document".into(),
            );
        }
        config
    }
}

/// When a newly indexed version starts to answer searches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReleaseMode {
    /// With the index commit that completes it.
    #[default]
    Auto,
    /// When someone releases it (`POST /works/{id}/versions/{doc_id}/release`): a review gate.
    Manual,
}

impl ReleaseMode {
    fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        match env.optional("DOCPIPE_RELEASE_MODE").as_deref() {
            None | Some("") | Some("auto") => ReleaseMode::Auto,
            Some("manual") => ReleaseMode::Manual,
            Some(other) => {
                env.problem(format!(
                    "DOCPIPE_RELEASE_MODE must be auto or manual, not {other:?}"
                ));
                ReleaseMode::Auto
            }
        }
    }
}

/// Everything the index stage needs besides the embedder and the vector index.
#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// Where the parse artifacts are read from.
    pub bucket: String,
    /// Where index jobs arrive (a failed one is held back there for its backoff).
    pub index_queue_url: String,
    /// Chunks per embedder call.
    pub embed_batch: usize,
    /// The lease (renewed every third of it, shorter than the queue's visibility timeout so that
    /// the redelivery of a crashed worker's message can take over) and the backoff.
    pub clock: crate::clock::Clock,
    pub release: ReleaseMode,
    /// Chunks one step of a rebuild (re-embedding into a new collection) copies at most
    /// (`DOCPIPE_REBUILD_BATCH_CHUNKS`, the template's `RebuildBatchChunks`).
    pub rebuild_batch: usize,
}

/// Chunks per rebuild step when the environment names none (the template's default).
pub const DEFAULT_REBUILD_BATCH_CHUNKS: usize = 1_024;

impl IndexConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        IndexConfig {
            bucket: env.required("DOCPIPE_BUCKET"),
            index_queue_url: env.url("DOCPIPE_INDEX_QUEUE_URL"),
            embed_batch: env.parsed_or("DOCPIPE_EMBED_BATCH", 32usize).max(1),
            clock: crate::clock::Clock::read(env),
            release: ReleaseMode::read(env),
            rebuild_batch: env
                .parsed_or("DOCPIPE_REBUILD_BATCH_CHUNKS", DEFAULT_REBUILD_BATCH_CHUNKS)
                .max(1),
        }
    }
}

/// Where Milvus is and which collection holds the chunk vectors.
#[derive(Debug, Clone)]
pub struct MilvusConfig {
    pub url: String,
    pub token: Option<Secret>,
    /// In AWS: the Secrets Manager secret holding the token (plain string).
    pub token_secret_arn: Option<String>,
    pub collection: String,
    pub aws: AwsConfig,
}

fn milvus_collection<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> String {
    let name = env
        .optional("DOCPIPE_MILVUS_COLLECTION")
        .unwrap_or_else(|| "docpipe_chunks".to_string());
    let valid = !name.is_empty()
        && name.len() <= 255
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        env.problems.push(format!(
            "DOCPIPE_MILVUS_COLLECTION {name:?} must be letters, digits and underscores"
        ));
    }
    name
}

impl MilvusConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        MilvusConfig {
            url: env.url("MILVUS_URL"),
            token: env.optional("MILVUS_TOKEN").map(Secret::new),
            token_secret_arn: env.optional("DOCPIPE_MILVUS_TOKEN_SECRET_ARN"),
            collection: milvus_collection(env),
            aws: AwsConfig::read(env),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reader(vars: &[(&str, &str)]) -> EnvReader<impl Fn(&str) -> Option<String>> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EnvReader::with_lookup(move |k| map.get(k).cloned())
    }

    #[test]
    fn the_scan_policy_and_rules_are_read_and_bad_ones_refused_with_why() {
        let mut env = reader(&[
            ("DOCPIPE_SCAN_POLICY", "mask"),
            ("DOCPIPE_SCAN_RULES", r#"{"contract_number": "HT\\d{14}"}"#),
        ]);
        let policy = ScanPolicy::read(&mut env);
        assert!(env.finish().is_ok());
        assert_eq!(policy.action, ScanAction::Mask);
        assert_eq!(policy.rules.len(), 1);
        assert!(policy.rules[0].pattern.is_match("HT20240101000123"));

        let mut env = reader(&[("DOCPIPE_SCAN_POLICY", ""), ("DOCPIPE_SCAN_RULES", "")]);
        let policy = ScanPolicy::read(&mut env);
        assert!(env.finish().is_ok());
        assert_eq!((policy.action, policy.rules.len()), (ScanAction::Warn, 0));

        let long = format!(r#"{{"x": "{}"}}"#, "a".repeat(600));
        let many = format!(
            "{{{}}}",
            (0..40)
                .map(|i| format!(r#""r{i}": "a""#))
                .collect::<Vec<_>>()
                .join(",")
        );
        for (policy, rules, why) in [
            ("hold", "", "must be warn, mask or block"),
            ("warn", "[1, 2]", "a JSON object of rule name"),
            ("warn", r#"{"bad": "(unclosed"}"#, "rule bad:"),
            ("warn", long.as_str(), "at most 512 bytes"),
            ("warn", many.as_str(), "at most 32 rules"),
        ] {
            let mut env = reader(&[
                ("DOCPIPE_SCAN_POLICY", policy),
                ("DOCPIPE_SCAN_RULES", rules),
            ]);
            let _ = ScanPolicy::read(&mut env);
            let err = env.finish().unwrap_err().to_string();
            assert!(err.contains(why), "{policy} {rules}: {err}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let mut env = reader(&[("DOCPIPE_MAX_BYTES", "lots")]);
        let _ = DbConfig::read(&mut env);
        let _ = StoreConfig::read(&mut env);
        let err = env.finish().unwrap_err().to_string();
        assert!(err.contains("DATABASE_URL is not set"), "{err}");
        assert!(err.contains("DOCPIPE_PARSE_QUEUE_URL is not set"), "{err}");
        assert!(
            err.contains("DOCPIPE_MAX_BYTES has an invalid value"),
            "{err}"
        );
    }

    #[test]
    fn the_chunk_limit_is_read_from_the_environment() {
        let base = [
            ("DOCPIPE_BUCKET", "b"),
            ("DOCPIPE_PARSE_QUEUE_URL", "http://127.0.0.1:5000/1/p"),
            ("DOCPIPE_INDEX_QUEUE_URL", "http://127.0.0.1:5000/1/i"),
        ];
        let mut env = reader(&base);
        let parse = ParseConfig::read(&mut env);
        assert_eq!(parse.limits.max_chunks, docpipe_parse::DEFAULT_MAX_CHUNKS);
        assert_eq!(parse.limits.max_chunks, 20_000);

        let mut env = reader(&[base.as_slice(), &[("DOCPIPE_MAX_CHUNKS", "31000")]].concat());
        assert_eq!(ParseConfig::read(&mut env).limits.max_chunks, 31_000);

        let mut env = reader(&[base.as_slice(), &[("DOCPIPE_MAX_CHUNKS", "0")]].concat());
        let _ = ParseConfig::read(&mut env);
        let err = env.finish().unwrap_err().to_string();
        assert!(
            err.contains("DOCPIPE_MAX_CHUNKS must be at least 1"),
            "{err}"
        );
    }

    #[test]
    fn secrets_do_not_print() {
        let mut env = reader(&[("DATABASE_URL", "postgres://u:hunter2@h/db")]);
        let db = DbConfig::read(&mut env);
        assert!(env.finish().is_ok());
        assert!(!format!("{db:?}").contains("hunter2"));
        assert_eq!(db.pool_size, 2);
    }

    #[test]
    fn the_endpoint_override_is_docpipes_own_name_first() {
        let mut env = reader(&[
            ("DOCPIPE_AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("AWS_ENDPOINT_URL", "http://elsewhere:1"),
        ]);
        assert_eq!(
            AwsConfig::read(&mut env).endpoint_url.as_deref(),
            Some("http://127.0.0.1:5000")
        );
        let mut env = reader(&[("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")]);
        assert_eq!(
            AwsConfig::read(&mut env).endpoint_url.as_deref(),
            Some("http://127.0.0.1:5000")
        );
        // Empty, as the template declares it for AWS: no override (the process reader drops
        // empty values).
        assert_eq!(AwsConfig::read(&mut reader(&[])).endpoint_url, None);
    }
}
