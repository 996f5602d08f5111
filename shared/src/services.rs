//! The clients a function builds once per container, in `main`, and keeps for every invocation.

use crate::adapters::{aws, JobQueue, ObjectStore, S3ObjectStore, SqsJobQueue};
use crate::clock::Clock;
use crate::config::{
    AwsConfig, ConfigError, DbConfig, EnvReader, IndexConfig, MilvusConfig, ParseConfig,
    StoreConfig,
};
use crate::db::{Db, DbError};
use crate::stages::housekeeping::{HousekeepingDeps, HousekeepingReport};
use crate::stages::index::IndexDeps;
use crate::stages::parse::ParseDeps;
use crate::stages::store::StoreDeps;
use crate::stages::sweep::{SweepDeps, SweepError, SweepReport};
use docpipe_embed::Embedder;
use docpipe_vector::{MilvusIndex, VectorIndex};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot set up the database pool")]
    Db(#[from] DbError),
    #[error("cannot set up the embedder")]
    Embedder(#[from] docpipe_embed::EmbedError),
    #[error("cannot connect to the vector index")]
    Vector(#[from] docpipe_vector::VectorError),
    #[error("cannot read a secret: {0}")]
    Secret(String),
}

impl From<crate::adapters::secrets::SecretError> for InitError {
    fn from(e: crate::adapters::secrets::SecretError) -> Self {
        InitError::Secret(crate::error::chain(&e))
    }
}

/// The Milvus collection alone, for the functions that only remove vectors (sweeper, DLQ).
pub async fn connect_vectors(milvus: &MilvusConfig) -> Result<Arc<dyn VectorIndex>, InitError> {
    let token = milvus_token(milvus).await?;
    let index = MilvusIndex::connect(&milvus.url, token, &milvus.collection).await?;
    Ok(Arc::new(index))
}

/// The Milvus token: `MILVUS_TOKEN` when set, else the Secrets Manager secret it names (fetched
/// once per container, at init), else none.
pub async fn milvus_token(milvus: &MilvusConfig) -> Result<Option<String>, InitError> {
    Ok(match (&milvus.token, &milvus.token_secret_arn) {
        (Some(token), _) => Some(token.expose().to_string()),
        (None, Some(arn)) => {
            let sdk = aws::sdk_config(&milvus.aws).await;
            Some(crate::adapters::secrets::fetch_string(&sdk, arn).await?)
        }
        (None, None) => None,
    })
}

/// Builds the pool. With `DOCPIPE_DB_SECRET_ARN` set, the user and password come from Secrets
/// Manager (the JSON RDS writes: `username`, `password`), fetched once per container at init.
pub async fn connect_db(config: &DbConfig, aws: &AwsConfig) -> Result<Db, InitError> {
    let mut pg_config: tokio_postgres::Config = config
        .url
        .expose()
        .parse()
        .map_err(|e| InitError::Db(DbError::BadUrl(e)))?;
    if let Some(arn) = &config.secret_arn {
        let sdk = aws::sdk_config(aws).await;
        let secret = crate::adapters::secrets::fetch_json(&sdk, arn).await?;
        if let Some(user) = secret.get("username").and_then(|v| v.as_str()) {
            pg_config.user(user);
        }
        let password = secret
            .get("password")
            .and_then(|v| v.as_str())
            .ok_or_else(|| InitError::Secret(format!("secret {arn} has no `password` field")))?;
        pg_config.password(password);
    }
    Ok(Db::from_pg_config(
        pg_config,
        config.pool_size,
        config.ca_bundle.as_deref(),
    )?)
}

/// AWS clients, shared by every service of a process.
#[derive(Clone)]
pub struct AwsClients {
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
}

impl AwsClients {
    pub async fn new(config: &AwsConfig) -> Self {
        let sdk = aws::sdk_config(config).await;
        AwsClients {
            s3: aws::s3_client(&sdk, config),
            sqs: aws::sqs_client(&sdk),
        }
    }
}

/// The environment of this process, as every function reads it.
pub type ProcessEnv = EnvReader<fn(&str) -> Option<String>>;

/// How every function starts, once per container: its own variables and the database's and AWS's
/// are read through one [`EnvReader`], so that every problem is reported at once; then the pool,
/// the AWS clients, and the function's own clients.
#[async_trait::async_trait]
pub trait Service: Sized + Send + Sync {
    /// The function's own variables, as read (checked by the reader's `finish`).
    type Config: Send;

    fn read_config(env: &mut ProcessEnv) -> Self::Config;

    /// The function's clients, once its configuration is complete. A function builds the AWS
    /// clients it uses from `aws` (the DLQ function uses none, and so links none).
    async fn connect(db: Db, aws: &AwsConfig, config: Self::Config) -> Result<Self, InitError>;

    /// Reads and validates the environment, then builds the clients.
    async fn from_env() -> Result<Self, InitError> {
        let mut env = EnvReader::from_process();
        let db_config = DbConfig::read(&mut env);
        let aws_config = AwsConfig::read(&mut env);
        let config = Self::read_config(&mut env);
        env.finish()?;
        let db = connect_db(&db_config, &aws_config).await?;
        Self::connect(db, &aws_config, config).await
    }
}

pub struct StoreService {
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
    pub queue: Arc<dyn JobQueue>,
    pub config: StoreConfig,
}

#[async_trait::async_trait]
impl Service for StoreService {
    type Config = StoreConfig;

    fn read_config(env: &mut ProcessEnv) -> StoreConfig {
        StoreConfig::read(env)
    }

    async fn connect(db: Db, aws: &AwsConfig, config: StoreConfig) -> Result<Self, InitError> {
        Ok(Self::new(db, &AwsClients::new(aws).await, config))
    }
}

impl StoreService {
    pub fn new(db: Db, clients: &AwsClients, config: StoreConfig) -> Self {
        StoreService {
            db,
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            config,
        }
    }

    pub fn deps(&self) -> StoreDeps<'_> {
        StoreDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            queue: self.queue.as_ref(),
            config: &self.config,
        }
    }
}

pub struct ParseService {
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
    pub queue: Arc<dyn JobQueue>,
    pub config: ParseConfig,
}

#[async_trait::async_trait]
impl Service for ParseService {
    type Config = ParseConfig;

    fn read_config(env: &mut ProcessEnv) -> ParseConfig {
        ParseConfig::read(env)
    }

    async fn connect(db: Db, aws: &AwsConfig, config: ParseConfig) -> Result<Self, InitError> {
        Ok(Self::new(db, &AwsClients::new(aws).await, config))
    }
}

impl ParseService {
    pub fn new(db: Db, clients: &AwsClients, config: ParseConfig) -> Self {
        ParseService {
            db,
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            config,
        }
    }

    pub fn deps(&self) -> ParseDeps<'_> {
        ParseDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            queue: self.queue.as_ref(),
            config: &self.config,
        }
    }
}

pub struct IndexService {
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
    /// The index queue, where a failed job is held back for its backoff.
    pub queue: Arc<dyn JobQueue>,
    pub embedder: Arc<dyn Embedder>,
    pub vectors: Arc<dyn VectorIndex>,
    pub config: IndexConfig,
}

/// The index function's own variables: Milvus, the stage's, and the embedder (built as it is read,
/// its problems reported with the others).
pub struct IndexSettings {
    pub milvus: MilvusConfig,
    pub index: IndexConfig,
    pub embedder: Option<Arc<dyn Embedder>>,
}

#[async_trait::async_trait]
impl Service for IndexService {
    type Config = IndexSettings;

    fn read_config(env: &mut ProcessEnv) -> IndexSettings {
        let milvus = MilvusConfig::read(env);
        let index = IndexConfig::read(env);
        let embedder = env.embedder();
        IndexSettings {
            milvus,
            index,
            embedder,
        }
    }

    async fn connect(db: Db, aws: &AwsConfig, config: IndexSettings) -> Result<Self, InitError> {
        let clients = AwsClients::new(aws).await;
        let embedder = config
            .embedder
            .expect("finish reports an embedder that could not be built");
        let vectors = connect_vectors(&config.milvus).await?;
        Ok(IndexService {
            db,
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            embedder,
            vectors,
            config: config.index,
        })
    }
}

impl IndexService {
    pub fn deps(&self) -> IndexDeps<'_> {
        IndexDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            embedder: self.embedder.as_ref(),
            vectors: self.vectors.as_ref(),
            config: &self.config,
        }
    }
}

/// The sweeper's clients: it re-drives lost jobs (SQS) and removes what a failed run wrote (Milvus).
pub struct SweepService {
    pub db: Db,
    pub queue: Arc<dyn JobQueue>,
    pub objects: Arc<dyn ObjectStore>,
    pub vectors: Arc<dyn VectorIndex>,
    /// The documents bucket: artifacts, and the originals a finished delete removes.
    pub bucket: String,
    pub parse_queue_url: String,
    pub index_queue_url: String,
    pub clock: Clock,
}

/// The sweeper's own variables.
pub struct SweepSettings {
    pub milvus: MilvusConfig,
    pub parse_queue_url: String,
    pub index_queue_url: String,
    pub bucket: String,
    pub clock: Clock,
}

#[async_trait::async_trait]
impl Service for SweepService {
    type Config = SweepSettings;

    fn read_config(env: &mut ProcessEnv) -> SweepSettings {
        SweepSettings {
            milvus: MilvusConfig::read(env),
            parse_queue_url: env.url("DOCPIPE_PARSE_QUEUE_URL"),
            index_queue_url: env.url("DOCPIPE_INDEX_QUEUE_URL"),
            bucket: env.required("DOCPIPE_BUCKET"),
            clock: Clock::read(env),
        }
    }

    async fn connect(db: Db, aws: &AwsConfig, config: SweepSettings) -> Result<Self, InitError> {
        let clients = AwsClients::new(aws).await;
        Ok(SweepService {
            db,
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            vectors: connect_vectors(&config.milvus).await?,
            bucket: config.bucket,
            parse_queue_url: config.parse_queue_url,
            index_queue_url: config.index_queue_url,
            clock: config.clock,
        })
    }
}

impl SweepService {
    pub fn deps(&self) -> SweepDeps<'_> {
        SweepDeps {
            db: &self.db,
            queue: self.queue.as_ref(),
            vectors: self.vectors.as_ref(),
            parse_queue_url: &self.parse_queue_url,
            index_queue_url: &self.index_queue_url,
            clock: &self.clock,
        }
    }

    pub fn housekeeping_deps(&self) -> HousekeepingDeps<'_> {
        HousekeepingDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            vectors: self.vectors.as_ref(),
            bucket: &self.bucket,
            clock: &self.clock,
        }
    }

    /// One scheduled run: lost jobs first, then what failures left behind.
    pub async fn run_once(&self) -> Result<(SweepReport, HousekeepingReport), SweepError> {
        let swept = crate::stages::sweep::sweep(&self.deps(), SWEEP_LIMIT).await?;
        let kept = crate::stages::housekeeping::housekeeping(
            &self.housekeeping_deps(),
            HOUSEKEEPING_LIMIT,
        )
        .await;
        Ok((swept, kept))
    }
}

/// Runs per stage one sweep looks at.
pub const SWEEP_LIMIT: i64 = 500;
/// Clean-ups, and each kind of reconcile removal, one sweep carries out.
pub const HOUSEKEEPING_LIMIT: usize = 200;

/// The DLQ function's clients: it fails the run (PostgreSQL) and removes its vectors (Milvus).
pub struct DeadLetterService {
    pub db: Db,
    pub vectors: Arc<dyn VectorIndex>,
}

#[async_trait::async_trait]
impl Service for DeadLetterService {
    type Config = MilvusConfig;

    fn read_config(env: &mut ProcessEnv) -> MilvusConfig {
        MilvusConfig::read(env)
    }

    async fn connect(db: Db, _: &AwsConfig, milvus: MilvusConfig) -> Result<Self, InitError> {
        Ok(DeadLetterService {
            db,
            vectors: connect_vectors(&milvus).await?,
        })
    }
}
