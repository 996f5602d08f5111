//! What the API builds once per container (Lambda) or per process (dev runner) and shares with
//! every request: the pool, the AWS clients, the embedder and the vector index, the store service
//! for the webhook, and the configuration read from the environment and validated at start.

use crate::lazy_index::LazyMilvus;
use docpipe_core::config::{AwsConfig, DbConfig, MilvusConfig, Secret, StoreConfig};
use docpipe_core::env::{ConfigError, EnvReader};
use docpipe_db::Db;
use docpipe_embed::Embedder;
use docpipe_pipeline::adapters::generations::{Generations, LiveVectors, OpenCollection};
use docpipe_pipeline::adapters::{aws, secrets, JobQueue, ObjectStore, S3ObjectStore, SqsJobQueue};
use docpipe_pipeline::services::{connect_db, AwsClients, InitError, StoreService};
use docpipe_vector::VectorIndex;
use std::sync::Arc;
use std::time::Duration;

/// Where the caller's identity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorSource {
    /// API Gateway's authorizer context (JWT `sub`, or the IAM principal's ARN). Headers are never
    /// trusted: anyone can send them.
    Lambda,
    /// The dev runner on 127.0.0.1: the `X-Docpipe-Actor` header, or `local`.
    Local,
}

/// The API's own settings.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Where originals are uploaded and artifacts live (`DOCPIPE_BUCKET`).
    pub bucket: String,
    /// Where a retry sends its parse job (`DOCPIPE_PARSE_QUEUE_URL`).
    pub parse_queue_url: String,
    /// Where a rebuild's first step goes (`DOCPIPE_INDEX_QUEUE_URL`).
    pub index_queue_url: String,
    /// How long an upload URL works (`DOCPIPE_UPLOAD_URL_TTL_SECS`, default 900).
    pub upload_url_ttl: Duration,
    /// How long a download or artifact URL works (`DOCPIPE_DOWNLOAD_URL_TTL_SECS`, default 300).
    pub download_url_ttl: Duration,
    /// The bearer token S3-compatible stores send to `POST /notifications/s3`
    /// (`DOCPIPE_WEBHOOK_TOKEN`, or the Secrets Manager secret `DOCPIPE_WEBHOOK_TOKEN_SECRET_ARN`);
    /// unset disables the webhook.
    pub webhook_token: Option<Secret>,
    /// In AWS: the Secrets Manager secret holding the webhook token, fetched at init when
    /// `DOCPIPE_WEBHOOK_TOKEN` is unset.
    pub webhook_token_secret_arn: Option<String>,
    /// A run's deadline per stage (`DOCPIPE_STAGE_DEADLINE_SECS`, default 900).
    pub stage_deadline_secs: i64,
    /// The largest original a retry re-reads (`DOCPIPE_MAX_BYTES`, as the store function's).
    pub max_bytes: u64,
    /// The largest request body accepted (`DOCPIPE_API_MAX_BODY_BYTES`, default 64 KiB).
    pub max_body_bytes: usize,
    /// Deliveries of a job before its queue gives up (`DOCPIPE_MAX_RECEIVE_COUNT`, the template's
    /// `MaxReceiveCount`): the "of 5" in "attempt 2 of 5".
    pub max_receive_count: Option<u32>,
    /// The JWT scope that makes a caller a reviewer, who alone releases and repeals
    /// (`DOCPIPE_REVIEWER_SCOPE`, the template's `ReviewerScope`; default `docpipe/review`).
    pub reviewer_scope: String,
    /// The dev runner's signed mode (`DOCPIPE_DEV_SIGV4_KEYS`, `ACCESS_KEY_ID:SECRET,…`): every
    /// route but the health check and the webhook then wants SigV4 by one of these keys, as a
    /// deployed API with IAM authorization does. Ignored in Lambda, where API Gateway checks.
    pub dev_sigv4_keys: Option<Secret>,
    /// Where a caller's tenant comes from, and what each tenant may use.
    pub tenancy: TenancyConfig,
}

/// Tenants: where a caller's tenant comes from, and each tenant's quotas (0: no limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenancyConfig {
    /// The JWT claim naming the caller's tenant (`DOCPIPE_TENANT_CLAIM`, the template's
    /// `TenantClaim`; default `organ_id`).
    pub claim: String,
    /// The JWT scope of a publisher, who alone writes to the public library
    /// (`DOCPIPE_PUBLISHER_SCOPE`, the template's `PublisherScope`; default `docpipe/publish`).
    pub publisher_scope: String,
    /// The dev runner only: the tenant of a request without the `X-Docpipe-Tenant` header
    /// (`DOCPIPE_DEV_TENANT`, default `default`; empty: such a request gets 403, as in AWS).
    pub dev_tenant: Option<String>,
    /// Documents a tenant may hold (`DOCPIPE_TENANT_MAX_DOCUMENTS`, `TenantMaxDocuments`).
    pub max_documents: i64,
    /// Bytes of originals a tenant may hold (`DOCPIPE_TENANT_MAX_BYTES`, `TenantMaxBytes`).
    pub max_bytes: i64,
    /// Searches (and citation checks) a tenant may make in a minute
    /// (`DOCPIPE_TENANT_SEARCHES_PER_MINUTE`, `TenantSearchesPerMinute`).
    pub searches_per_minute: i64,
    /// `AuthMode=iam`: the principal tag naming an IAM caller's tenant
    /// (`DOCPIPE_TENANT_TAG_KEY`, `docpipe-organ-id` in the template); unset: IAM callers name none.
    pub tag_key: Option<String>,
    /// Where IAM is asked for a principal's tags (`DOCPIPE_IAM_ENDPOINT`; default the AWS
    /// endpoint override, else IAM's global endpoint).
    pub iam_endpoint: Option<String>,
}

impl Default for TenancyConfig {
    fn default() -> Self {
        TenancyConfig {
            claim: DEFAULT_TENANT_CLAIM.into(),
            publisher_scope: DEFAULT_PUBLISHER_SCOPE.into(),
            dev_tenant: Some(docpipe_core::tenant::DEFAULT.into()),
            max_documents: 0,
            max_bytes: 0,
            searches_per_minute: 0,
            tag_key: None,
            iam_endpoint: None,
        }
    }
}

pub const DEFAULT_TENANT_CLAIM: &str = "organ_id";
pub const DEFAULT_PUBLISHER_SCOPE: &str = "docpipe/publish";

impl TenancyConfig {
    fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Self {
        TenancyConfig {
            claim: env
                .optional("DOCPIPE_TENANT_CLAIM")
                .unwrap_or_else(|| DEFAULT_TENANT_CLAIM.into()),
            publisher_scope: env
                .optional("DOCPIPE_PUBLISHER_SCOPE")
                .unwrap_or_else(|| DEFAULT_PUBLISHER_SCOPE.into()),
            dev_tenant: match env.optional("DOCPIPE_DEV_TENANT") {
                None => Some(docpipe_core::tenant::DEFAULT.into()),
                Some(t) if t.trim().is_empty() => None,
                Some(t) => Some(t.trim().to_string()),
            },
            max_documents: env.parsed_or("DOCPIPE_TENANT_MAX_DOCUMENTS", 0i64),
            max_bytes: env.parsed_or("DOCPIPE_TENANT_MAX_BYTES", 0i64),
            searches_per_minute: env.parsed_or("DOCPIPE_TENANT_SEARCHES_PER_MINUTE", 0i64),
            tag_key: env
                .optional("DOCPIPE_TENANT_TAG_KEY")
                .filter(|k| !k.trim().is_empty()),
            iam_endpoint: env.optional("DOCPIPE_IAM_ENDPOINT"),
        }
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.claim.trim().is_empty() || self.claim.len() > 128 {
            problems.push("DOCPIPE_TENANT_CLAIM must name a claim (1 to 128 characters)".into());
        }
        if let Some(t) = &self.dev_tenant {
            if !docpipe_core::tenant::is_valid_organ_id(t) {
                problems.push(format!(
                    "DOCPIPE_DEV_TENANT {t:?} is no tenant id (a-z, 0-9, - and _, at most 64)"
                ));
            }
        }
        for (name, value) in [
            ("DOCPIPE_TENANT_MAX_DOCUMENTS", self.max_documents),
            ("DOCPIPE_TENANT_MAX_BYTES", self.max_bytes),
            (
                "DOCPIPE_TENANT_SEARCHES_PER_MINUTE",
                self.searches_per_minute,
            ),
        ] {
            if value < 0 {
                problems.push(format!("{name} must be 0 (no limit) or more"));
            }
        }
        problems
    }
}

/// The reviewer scope when the environment names none.
pub const DEFAULT_REVIEWER_SCOPE: &str = "docpipe/review";

/// The longest a presigned URL may live (S3's SigV4 limit).
pub(crate) const MAX_PRESIGN_SECS: u64 = 7 * 24 * 3600;
pub(crate) const MIN_WEBHOOK_TOKEN_LEN: usize = 16;

impl ApiConfig {
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Result<Self, String> {
        let upload: u64 = env.parsed_or("DOCPIPE_UPLOAD_URL_TTL_SECS", 900);
        let download: u64 = env.parsed_or("DOCPIPE_DOWNLOAD_URL_TTL_SECS", 300);
        let config = ApiConfig {
            bucket: env.required("DOCPIPE_BUCKET"),
            parse_queue_url: env.url("DOCPIPE_PARSE_QUEUE_URL"),
            index_queue_url: env.url("DOCPIPE_INDEX_QUEUE_URL"),
            upload_url_ttl: Duration::from_secs(upload),
            download_url_ttl: Duration::from_secs(download),
            webhook_token: env.optional("DOCPIPE_WEBHOOK_TOKEN").map(Secret::new),
            webhook_token_secret_arn: env.optional("DOCPIPE_WEBHOOK_TOKEN_SECRET_ARN"),
            stage_deadline_secs: env.parsed_or("DOCPIPE_STAGE_DEADLINE_SECS", 900i64),
            max_bytes: env.parsed_or("DOCPIPE_MAX_BYTES", docpipe_core::config::DEFAULT_MAX_BYTES),
            max_body_bytes: env.parsed_or("DOCPIPE_API_MAX_BODY_BYTES", 64 * 1024usize),
            reviewer_scope: env
                .optional("DOCPIPE_REVIEWER_SCOPE")
                .unwrap_or_else(|| DEFAULT_REVIEWER_SCOPE.to_string()),
            max_receive_count: env
                .optional("DOCPIPE_MAX_RECEIVE_COUNT")
                .and_then(|n| n.parse().ok()),
            dev_sigv4_keys: env.optional("DOCPIPE_DEV_SIGV4_KEYS").map(Secret::new),
            tenancy: TenancyConfig::read(env),
        };
        config.check()?;
        Ok(config)
    }

    /// The checks `EnvReader` cannot make alone.
    pub fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        for (name, ttl) in [
            ("DOCPIPE_UPLOAD_URL_TTL_SECS", self.upload_url_ttl),
            ("DOCPIPE_DOWNLOAD_URL_TTL_SECS", self.download_url_ttl),
        ] {
            if ttl.as_secs() == 0 || ttl.as_secs() > MAX_PRESIGN_SECS {
                problems.push(format!("{name} must be 1 to {MAX_PRESIGN_SECS} seconds"));
            }
        }
        if let Some(token) = &self.webhook_token {
            if token.expose().len() < MIN_WEBHOOK_TOKEN_LEN {
                problems.push(format!(
                    "DOCPIPE_WEBHOOK_TOKEN must be at least {MIN_WEBHOOK_TOKEN_LEN} characters"
                ));
            }
        }
        if self.stage_deadline_secs < 10 {
            problems.push("DOCPIPE_STAGE_DEADLINE_SECS must be at least 10".into());
        }
        if !(1024..=16 * 1024 * 1024).contains(&self.max_body_bytes) {
            problems.push("DOCPIPE_API_MAX_BODY_BYTES must be 1 KiB to 16 MiB".into());
        }
        if let Some(keys) = &self.dev_sigv4_keys {
            if let Err(e) = crate::sigv4::LocalKeys::parse(keys.expose()) {
                problems.push(e);
            }
        }
        problems.extend(self.tenancy.problems());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// A registered document waits for its upload at least as long as its upload URL works.
    pub(crate) fn registration_deadline_secs(&self) -> i64 {
        self.stage_deadline_secs
            .max(self.upload_url_ttl.as_secs() as i64 + 60)
    }
}

/// Everything a request handler needs.
pub struct ApiState {
    pub db: Db,
    /// The S3 client itself, for the health check (`HeadBucket`).
    pub s3: aws_sdk_s3::Client,
    pub objects: Arc<dyn ObjectStore>,
    pub queue: Arc<dyn JobQueue>,
    /// The configured embedder; search embeds with the active generation's.
    pub embedder: Arc<dyn Embedder>,
    /// Every collection still written to (releases, deletes); search reads a snapshot's.
    pub vectors: Arc<dyn VectorIndex>,
    /// Which collection search reads, with which embedder, and the rebuild under way.
    pub generations: Arc<Generations>,
    /// Law titles and BM25's N, shared by searches for a few seconds.
    pub search_cache: docpipe_search::SearchCache,
    /// `/healthz`'s last answer, shared by callers for a few seconds.
    pub health: crate::health_cache::HealthCache,
    /// The store stage, for the S3-compatible webhook.
    pub store: StoreService,
    pub config: ApiConfig,
    pub actor_source: ActorSource,
    /// The keys of the dev runner's signed mode (from `ApiConfig::dev_sigv4_keys`, locally only).
    pub signing: Option<Arc<crate::sigv4::LocalKeys>>,
    /// `AuthMode=iam` in Lambda: where an IAM caller's tenant tag is read.
    pub principal_tags: Option<Arc<crate::principal_tags::PrincipalTags>>,
    pub known_tenants: crate::tenant::KnownTenants,
    /// The deployment's scan policy (`DOCPIPE_SCAN_POLICY`), for `GET /tenant`.
    pub scan_default: docpipe_core::config::ScanAction,
}

impl ApiState {
    /// The deployment's scan policy (the template's `ScanPolicy`), which a tenant may override.
    pub(crate) fn store_scan_default(&self) -> &'static str {
        self.scan_default.as_str()
    }

    /// Reads and validates the environment (every problem reported at once), then builds the
    /// clients. Milvus is connected on first use, so a Milvus outage at cold start degrades search
    /// and `/healthz` instead of taking the whole API down.
    pub async fn from_env(actor_source: ActorSource) -> Result<Self, InitError> {
        let mut env = EnvReader::from_process();
        let db_config = DbConfig::read(&mut env);
        let aws_config = AwsConfig::read(&mut env);
        let milvus = MilvusConfig::read(&mut env);
        let store_config = StoreConfig::read(&mut env);
        let api = ApiConfig::read(&mut env);
        let embedder = env.embedder();
        let mut problems = match env.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.problems,
        };
        if let Err(p) = &api {
            problems.push(p.clone());
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems }.into());
        }
        let mut config = api.expect("checked above");
        let db = connect_db(&db_config, &aws_config).await?;
        let clients = AwsClients::new(&aws_config).await;
        // Secrets come from Secrets Manager once per container when their ARN is configured.
        let milvus_token = docpipe_pipeline::services::milvus_token(&milvus).await?;
        if let (None, Some(arn)) = (&config.webhook_token, &config.webhook_token_secret_arn) {
            let sdk = aws::sdk_config(&aws_config).await;
            config.webhook_token = Some(Secret::new(secrets::fetch_string(&sdk, arn).await?));
            config
                .check()
                .map_err(|p| ConfigError { problems: vec![p] })?;
        }
        let embedder = embedder.expect("finish reports an embedder that could not be built");
        let principal_tags = match &config.tenancy.tag_key {
            Some(tag_key) => {
                let sdk = aws::sdk_config(&aws_config).await;
                let credentials = sdk.credentials_provider().ok_or_else(|| ConfigError {
                    problems: vec![
                        "DOCPIPE_TENANT_TAG_KEY is set, but the AWS configuration has no \
                         credentials to read principal tags with"
                            .into(),
                    ],
                })?;
                let endpoint = config
                    .tenancy
                    .iam_endpoint
                    .clone()
                    .or_else(|| aws_config.endpoint_url.clone())
                    .unwrap_or_else(|| crate::principal_tags::IAM_ENDPOINT.to_string());
                Some(Arc::new(crate::principal_tags::PrincipalTags::new(
                    &endpoint,
                    tag_key,
                    credentials,
                )))
            }
            None => None,
        };
        let vectors: Arc<dyn VectorIndex> = Arc::new(LazyMilvus::new(
            milvus.url.clone(),
            milvus_token,
            milvus.collection.clone(),
        ));
        let mut state = Self::new(
            db,
            &clients,
            embedder,
            vectors,
            store_config,
            config,
            actor_source,
        )
        .with_collections(docpipe_pipeline::services::open_collections(milvus));
        state.principal_tags = principal_tags;
        Ok(state)
    }

    /// Builds the state from clients the caller made (tests, the dev runner).
    pub fn new(
        db: Db,
        clients: &AwsClients,
        embedder: Arc<dyn Embedder>,
        vectors: Arc<dyn VectorIndex>,
        store_config: StoreConfig,
        config: ApiConfig,
        actor_source: ActorSource,
    ) -> Self {
        let generations = Arc::new(Generations::new(
            db.clone(),
            vectors.clone(),
            embedder.clone(),
            Arc::new(unopened),
            Generations::embedders_from_env(),
        ));
        ApiState {
            store: StoreService::new(db.clone(), clients, store_config),
            vectors: Arc::new(LiveVectors::new(generations.clone())),
            generations,
            db,
            s3: clients.s3.clone(),
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            embedder,
            search_cache: Default::default(),
            health: Default::default(),
            signing: match (actor_source, &config.dev_sigv4_keys) {
                (ActorSource::Local, Some(keys)) => crate::sigv4::LocalKeys::parse(keys.expose())
                    .ok()
                    .map(Arc::new),
                _ => None,
            },
            config,
            actor_source,
            principal_tags: None,
            known_tenants: Default::default(),
            scan_default: docpipe_core::config::ScanPolicy::read(
                &mut docpipe_core::env::EnvReader::from_process(),
            )
            .action,
        }
    }
}

impl ApiState {
    /// Opens other collections of the same Milvus (a rebuild's) with `open`; without it the state
    /// reads and writes its configured collection only.
    /// Reads IAM callers' tenants from their principal tags (`AuthMode=iam` in Lambda).
    pub fn with_principal_tags(mut self, tags: Arc<crate::principal_tags::PrincipalTags>) -> Self {
        self.principal_tags = Some(tags);
        self
    }

    pub fn with_collections(mut self, open: OpenCollection) -> Self {
        let configured = self.generations.configured().clone();
        self.generations = Arc::new(Generations::new(
            self.db.clone(),
            configured.vectors,
            configured.embedder,
            open,
            Generations::embedders_from_env(),
        ));
        self.vectors = Arc::new(LiveVectors::new(self.generations.clone()));
        self
    }
}

/// A collection a state built without [`ApiState::with_collections`] cannot reach: each call
/// fails as unavailable, naming it.
fn unopened(name: &str) -> Arc<dyn VectorIndex> {
    let name = name.to_string();
    Arc::new(docpipe_pipeline::adapters::LazyVectorIndex::new(
        name.clone(),
        move || {
            let name = name.clone();
            async move {
                Err(docpipe_vector::VectorError::Unavailable {
                    op: "open",
                    source: format!("this API opens no collection but its own, not {name}").into(),
                })
            }
        },
    ))
}
