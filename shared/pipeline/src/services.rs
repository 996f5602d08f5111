//! The clients a function builds once per container, in `main`, and keeps for every invocation.

use crate::adapters::event_bus::EventBridgeBus;
use crate::adapters::generations::{Generations, LiveVectors};
use crate::adapters::{aws, JobQueue, ObjectStore, S3ObjectStore, SqsJobQueue};
use crate::publish::Publisher;
use crate::stages::index::IndexDeps;
use crate::stages::parse::ParseDeps;
use crate::stages::store::StoreDeps;
use crate::upkeep::housekeeping::{HousekeepingDeps, HousekeepingReport};
use crate::upkeep::sweep::{SweepDeps, SweepError, SweepReport};
use docpipe_core::clock::Clock;
use docpipe_core::config::{
    AwsConfig, DbConfig, IndexConfig, MilvusConfig, ParseConfig, StoreConfig,
};
use docpipe_core::env::{ConfigError, EnvReader};
use docpipe_db::{Db, DbError};
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
        InitError::Secret(docpipe_core::error::chain(&e))
    }
}

/// The Milvus collection alone, for the functions that only remove vectors (sweeper, DLQ).
pub(crate) async fn connect_vectors(
    milvus: &MilvusConfig,
) -> Result<Arc<dyn VectorIndex>, InitError> {
    let token = milvus_token(milvus).await?;
    let index = MilvusIndex::connect(&milvus.url, token, &milvus.collection).await?;
    Ok(Arc::new(index))
}

/// The Milvus collection, connected on first use (see [`crate::adapters::LazyVectorIndex`]), so
/// that a function starts, and records what it can, while Milvus is away: the sweeper and the DLQ
/// function, whose work mostly needs no Milvus, and the index function, whose jobs then back off.
/// Opens any collection of the same Milvus by name (a generation's), connected on first use.
pub fn open_collections(milvus: MilvusConfig) -> crate::adapters::generations::OpenCollection {
    Arc::new(move |name: &str| {
        lazy_vectors(MilvusConfig {
            collection: name.to_string(),
            ..milvus.clone()
        })
    })
}

pub(crate) fn lazy_vectors(milvus: MilvusConfig) -> Arc<dyn VectorIndex> {
    let collection = milvus.collection.clone();
    Arc::new(crate::adapters::LazyVectorIndex::new(
        collection,
        move || {
            let milvus = milvus.clone();
            async move {
                connect_vectors(&milvus).await.map_err(|e| match e {
                    InitError::Vector(e) => e,
                    other => docpipe_vector::VectorError::Unavailable {
                        op: "connect",
                        source: Box::new(other),
                    },
                })
            }
        },
    ))
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
/// Manager (the JSON RDS writes: `username`, `password`), read at init and read again when the
/// database refuses them (a rotation), and the connection must be encrypted.
pub async fn connect_db(config: &DbConfig, aws: &AwsConfig) -> Result<Db, InitError> {
    let mut pg_config: tokio_postgres::Config = config
        .url
        .expose()
        .parse()
        .map_err(|e| InitError::Db(DbError::BadUrl(e)))?;
    let Some(arn) = config.secret_arn.clone() else {
        return Ok(Db::from_pg_config(
            pg_config,
            config.pool_size,
            config.ca_bundle.as_deref(),
        )?);
    };
    require_tls(&mut pg_config).map_err(|problem| {
        InitError::Config(docpipe_core::env::ConfigError {
            problems: vec![problem],
        })
    })?;
    let sdk = aws::sdk_config(aws).await;
    let initial = read_credentials(&sdk, &arn).await?;
    let source = docpipe_db::credentials::credential_source(move || {
        let (sdk, arn) = (sdk.clone(), arn.clone());
        async move {
            read_credentials(&sdk, &arn)
                .await
                .map_err(|e| docpipe_core::error::chain(&e))
        }
    });
    Ok(Db::with_rotating_credentials(
        pg_config,
        config.pool_size,
        config.ca_bundle.as_deref(),
        initial,
        source,
    )?)
}

async fn read_credentials(
    sdk: &aws_config::SdkConfig,
    arn: &str,
) -> Result<docpipe_db::credentials::Credentials, InitError> {
    let secret = crate::adapters::secrets::fetch_json(sdk, arn).await?;
    let password = secret
        .get("password")
        .and_then(|v| v.as_str())
        .ok_or_else(|| InitError::Secret(format!("secret {arn} has no `password` field")))?;
    Ok(docpipe_db::credentials::Credentials {
        user: secret
            .get("username")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        password: password.to_string(),
    })
}

/// A password from a secret crosses the network to RDS Proxy, so it travels over TLS whatever the
/// URL forgot to say (`sslmode=require` is set when the URL leaves it out). A URL that turns TLS
/// off is refused, except to a loopback address, where nothing crosses a network (the local
/// drills of the secret's path).
pub(crate) fn require_tls(pg_config: &mut tokio_postgres::Config) -> Result<(), String> {
    use tokio_postgres::config::{Host, SslMode};
    let loopback = !pg_config.get_hosts().is_empty()
        && pg_config.get_hosts().iter().all(|host| match host {
            Host::Tcp(name) => {
                name == "localhost"
                    || name
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
            #[cfg(unix)]
            Host::Unix(_) => true,
        });
    match pg_config.get_ssl_mode() {
        SslMode::Require => Ok(()),
        _ if loopback => Ok(()),
        SslMode::Disable => Err(
            "DATABASE_URL says sslmode=disable, but with DOCPIPE_DB_SECRET_ARN the password must travel over TLS: use sslmode=require".to_string(),
        ),
        _ => {
            pg_config.ssl_mode(SslMode::Require);
            Ok(())
        }
    }
}

/// AWS clients, shared by every service of a process.
#[derive(Clone)]
pub struct AwsClients {
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// Where events go: the configured bus, or none.
    pub events: Publisher,
}

impl AwsClients {
    pub async fn new(config: &AwsConfig) -> Self {
        let sdk = aws::sdk_config(config).await;
        let events = match &config.event_bus {
            Some(bus) => Publisher::new(Arc::new(EventBridgeBus::new(
                aws::eventbridge_client(&sdk),
                bus.clone(),
            ))),
            None => Publisher::none(),
        };
        AwsClients {
            s3: aws::s3_client(&sdk, config),
            sqs: aws::sqs_client(&sdk),
            events,
        }
    }
}

/// The environment of this process, as every function reads it.
pub(crate) type ProcessEnv = EnvReader<fn(&str) -> Option<String>>;

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
    pub events: Publisher,
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
            events: clients.events.clone(),
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
    pub events: Publisher,
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
            events: clients.events.clone(),
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
    /// Which collection search reads now, and the one being built.
    pub generations: Arc<Generations>,
    pub config: IndexConfig,
    pub events: Publisher,
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
        // Connected on first use: an index function that could not start while Milvus is away
        // would leave its message hidden for the queue's whole visibility timeout, unrecorded,
        // where a job that fails on Milvus backs off on the clock and says why.
        let vectors = lazy_vectors(config.milvus.clone());
        let generations = Arc::new(Generations::new(
            db.clone(),
            vectors.clone(),
            embedder.clone(),
            open_collections(config.milvus),
            Generations::embedders_from_env(),
        ));
        Ok(IndexService {
            db,
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            embedder,
            vectors,
            generations,
            config: config.index,
            events: clients.events.clone(),
        })
    }
}

impl IndexService {
    /// The configured collection and embedder, whatever the generations say (tests of the stage).
    pub fn deps(&self) -> IndexDeps<'_> {
        IndexDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            embedder: self.embedder.as_ref(),
            vectors: self.vectors.as_ref(),
            config: &self.config,
        }
    }

    /// An index job into the collection search reads now, with its embedder; removals reach the
    /// collection being built too.
    pub async fn run_job(
        &self,
        job: &docpipe_core::model::JobMessage,
    ) -> Result<crate::stages::index::IndexOutcome, crate::error::StageError> {
        let snapshot = self.generations.snapshot().await.map_err(|e| {
            crate::error::StageError::transient(docpipe_core::model::Stage::Index, e)
        })?;
        let vectors = snapshot.vectors();
        let deps = IndexDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            embedder: snapshot.active.embedder.as_ref(),
            vectors: &vectors,
            config: &self.config,
        };
        crate::stages::index::index_job(&deps, job).await
    }

    pub fn rebuild_deps(&self) -> crate::stages::rebuild::RebuildDeps<'_> {
        crate::stages::rebuild::RebuildDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            generations: &self.generations,
            queue: self.queue.as_ref(),
            config: &self.config,
        }
    }
}

/// The sweeper's clients: it re-drives lost jobs (SQS) and removes what a failed run wrote (Milvus).
pub struct SweepService {
    pub db: Db,
    pub queue: Arc<dyn JobQueue>,
    pub objects: Arc<dyn ObjectStore>,
    /// Every collection still written to (see [`crate::adapters::generations::LiveVectors`]).
    pub vectors: Arc<dyn VectorIndex>,
    /// Rebuilds to keep going, collections to drop.
    pub generations: Arc<Generations>,
    /// The documents bucket: artifacts, and the originals a finished delete removes.
    pub bucket: String,
    pub parse_queue_url: String,
    pub index_queue_url: String,
    pub clock: Clock,
    /// How long one run may hold the sweeper's lease: its function's timeout, after which Lambda
    /// has ended it for sure.
    pub lease: std::time::Duration,
    /// Publishes what the functions did not.
    pub events: Publisher,
}

/// The sweeper's own variables.
pub struct SweepSettings {
    pub milvus: MilvusConfig,
    pub parse_queue_url: String,
    pub index_queue_url: String,
    pub bucket: String,
    pub clock: Clock,
    pub lease: std::time::Duration,
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
            // The template sets it from the sweeper's `Timeout`; 60 s is Lambda's own default.
            lease: std::time::Duration::from_secs_f64(
                env.parsed_or("DOCPIPE_SWEEPER_TIMEOUT_SECS", 60.0f64)
                    .max(1.0),
            ),
        }
    }

    async fn connect(db: Db, aws: &AwsConfig, config: SweepSettings) -> Result<Self, InitError> {
        let clients = AwsClients::new(aws).await;
        let generations = Arc::new(Generations::vectors_only(
            db.clone(),
            lazy_vectors(config.milvus.clone()),
            open_collections(config.milvus),
        ));
        Ok(SweepService {
            db,
            queue: Arc::new(SqsJobQueue::new(clients.sqs.clone())),
            objects: Arc::new(S3ObjectStore::new(clients.s3.clone())),
            vectors: Arc::new(LiveVectors::new(generations.clone())),
            generations,
            bucket: config.bucket,
            parse_queue_url: config.parse_queue_url,
            index_queue_url: config.index_queue_url,
            clock: config.clock,
            lease: config.lease,
            events: clients.events.clone(),
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

    pub(crate) fn housekeeping_deps(&self) -> HousekeepingDeps<'_> {
        HousekeepingDeps {
            db: &self.db,
            objects: self.objects.as_ref(),
            vectors: self.vectors.as_ref(),
            bucket: &self.bucket,
            clock: &self.clock,
        }
    }

    /// One scheduled run: lost jobs first, then what failures left behind. `None` when another
    /// run holds the sweeper's lease (EventBridge retries an invocation it thinks failed, and a
    /// slow sweep may still run when the next is due): two sweeps at once would re-drive the same
    /// lost job twice.
    pub async fn run_once(&self) -> Result<Option<(SweepReport, HousekeepingReport)>, SweepError> {
        let holder = format!(
            "sweeper-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        let taken = docpipe_db::upkeep::acquire(
            &**self.db.client().await?,
            SWEEPER_LEASE,
            &holder,
            self.lease.as_secs_f64(),
        )
        .await?;
        if !taken {
            tracing::info!("another sweep holds the sweeper's lease: this one does nothing");
            return Ok(None);
        }
        let swept = crate::upkeep::sweep::sweep(&self.deps(), SWEEP_LIMIT).await;
        let kept = match &swept {
            Ok(_) => Some(
                crate::upkeep::housekeeping::housekeeping(
                    &self.housekeeping_deps(),
                    HOUSEKEEPING_LIMIT,
                )
                .await,
            ),
            Err(_) => None,
        };
        // What the functions did not publish (a failed send, a function that died after its
        // commit, a dead letter's failure), and the sent events past their keeping.
        self.events
            .flush(&self.db, &self.clock, crate::publish::PER_SWEEP)
            .await;
        if let Err(e) = crate::publish::prune(&self.db, crate::publish::PRUNED_PER_SWEEP).await {
            tracing::warn!(error = %docpipe_core::error::chain(&e), "sent events were not pruned; the next sweep will");
        }
        crate::publish::report_backlog(&self.db).await;
        crate::upkeep::rebuilds::tend(self).await;
        // Best effort: a lease not given back expires with the function's timeout.
        let released = match self.db.client().await {
            Ok(client) => docpipe_db::upkeep::release(&**client, SWEEPER_LEASE, &holder).await,
            Err(e) => Err(e),
        };
        if let Err(e) = released {
            tracing::warn!(error = %docpipe_core::error::chain(&e), "could not give the sweeper's lease back; it expires by itself");
        }
        Ok(Some((
            swept?,
            kept.expect("housekeeping ran after a sweep"),
        )))
    }
}

/// The lease one sweep holds while it runs.
pub const SWEEPER_LEASE: &str = "sweeper";

/// Runs per stage one sweep looks at.
pub(crate) const SWEEP_LIMIT: i64 = 500;
/// Clean-ups, and each kind of reconcile removal, one sweep carries out.
pub(crate) const HOUSEKEEPING_LIMIT: usize = 200;

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
        let generations = Arc::new(Generations::vectors_only(
            db.clone(),
            lazy_vectors(milvus.clone()),
            open_collections(milvus),
        ));
        Ok(DeadLetterService {
            db,
            vectors: Arc::new(LiveVectors::new(generations)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::require_tls;
    use tokio_postgres::config::SslMode;

    fn mode(url: &str) -> Result<SslMode, String> {
        let mut config: tokio_postgres::Config = url.parse().unwrap();
        require_tls(&mut config).map(|()| config.get_ssl_mode())
    }

    #[test]
    fn a_secret_s_password_travels_over_tls() {
        // The URL of the template's example, and one that forgot to say it.
        let proxy = "postgres://docpipe@docpipe.proxy-x.eu-west-1.rds.amazonaws.com:5432/docpipe";
        assert_eq!(
            mode(&format!("{proxy}?sslmode=require")),
            Ok(SslMode::Require)
        );
        assert_eq!(mode(proxy), Ok(SslMode::Require));
        assert_eq!(
            mode(&format!("{proxy}?sslmode=prefer")),
            Ok(SslMode::Require)
        );
        let refused = mode(&format!("{proxy}?sslmode=disable")).unwrap_err();
        assert!(refused.contains("must travel over TLS"), "{refused}");
        // Loopback: nothing crosses a network.
        assert_eq!(
            mode("postgres://docpipe@127.0.0.1:6432/docpipe?sslmode=disable"),
            Ok(SslMode::Disable)
        );
        assert_eq!(
            mode("postgres://docpipe@localhost:6432/docpipe"),
            Ok(SslMode::Prefer)
        );
    }
}
