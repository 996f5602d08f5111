//! PostgreSQL, the authority on every document, run and status change.
//!
//! Every statement here is sent unnamed (`query_typed`, `execute_typed`) or over the simple protocol
//! (`batch_execute`): RDS Proxy pins a session that prepares a named statement, and PgBouncer in
//! transaction mode hands the next transaction a server that never saw it. No session state either:
//! no `SET`, no temp tables, only transaction-scoped advisory locks.
//!
//! Every statement that writes a table lives in this module, one function per write, so this list
//! answers "who writes what" (the stages above only call these, inside their transactions):
//!
//! | table | written by |
//! | --- | --- |
//! | `documents` | [`transitions`] (status moves), [`documents`] (register, rejected object, delete mark and removal, legacy import) |
//! | `document_processing_runs` | [`transitions`] (open, stored, parsed, indexed, failed; leases and attempts), [`runs`] (re-drives), [`run_events`], [`documents`] (imported runs) |
//! | `document_status_history` | [`transitions`], [`documents`] (imported runs) |
//! | `structure_nodes`, `semantic_blocks`, `document_artifacts`, `article_references` | [`snapshot`] and [`references`] (a run's parse output, replaced whole) |
//! | `keyword_documents`, `keyword_blocks`, `keyword_postings`, `keyword_terms` | [`keyword`] |
//! | `run_events` | [`run_events`], [`transitions`], [`runs`] |
//! | `object_tombstones` | [`tombstones`] |
//! | `cleanups` | [`cleanups`] (the clean-up outbox) |
//! | `idempotency_keys` | [`idempotency`] |
//! | `audit_log` | [`audit`] |
//! | `intake_failures` | [`intake`] |
//! | `upkeep_leases` | [`upkeep`] |
//! | `security_scans`, `security_findings` | [`security`] (the parse commit's scan) |
//! | `event_outbox` | [`outbox`]: recorded by [`announce`] (versions, works), [`transitions`] (indexed, failed) and [`documents`] (removed); sent and pruned by the publishers |

pub mod announce;
pub mod articles;
pub mod audit;
pub mod authority;
pub mod cleanups;
pub mod credentials;
pub mod documents;
pub mod generations;
pub mod idempotency;
pub mod intake;
pub mod keyword;
pub mod migrate;
pub mod outbox;
pub mod projection;
pub mod reconcile;
pub mod references;
pub mod run_events;
pub mod runs;
pub mod security;
pub mod snapshot;
pub mod sweep;
pub mod tenants;
pub(crate) mod tls;
pub mod tombstones;
pub mod transitions;
pub mod upkeep;
pub mod views;
pub mod works;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use docpipe_core::config::DbConfig;
use std::time::Duration;
use tokio_postgres::NoTls;

pub use deadpool_postgres::{Object as Client, Transaction};
pub use tokio_postgres::types::Type;
pub use tokio_postgres::GenericClient;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("DATABASE_URL is not a valid connection string")]
    BadUrl(#[source] tokio_postgres::Error),
    #[error("cannot build the connection pool")]
    Build(#[from] deadpool_postgres::BuildError),
    #[error("cannot set up TLS to the database: {0}")]
    Tls(String),
    #[error("no database connection available")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("database statement failed")]
    Statement(#[from] tokio_postgres::Error),
    #[error("migration {version} ({name}) changed after it was applied: recorded checksum {recorded}, file has {current}")]
    MigrationChanged {
        version: i32,
        name: String,
        recorded: String,
        current: String,
    },
}

impl DbError {
    /// The SQLSTATE, when the server answered with one.
    pub(crate) fn sql_state(&self) -> Option<&str> {
        match self {
            DbError::Statement(e) => e.code().map(|c| c.code()),
            _ => None,
        }
    }

    /// The data, not the database, is at fault: a data exception (class 22: a value too long for
    /// its column, bytes that are not valid in the encoding, a number out of range) or a check
    /// violation (23514). Retrying cannot help. A foreign-key violation (23503) is not one: it
    /// means a concurrent delete, and the retry finds the document gone.
    pub fn is_data_error(&self) -> bool {
        self.sql_state()
            .is_some_and(|s| s.starts_with("22") || s == "23514")
    }
}

/// The longest prefix of `value` that fits a `VARCHAR(max_chars)` column (PostgreSQL counts
/// characters, not bytes), cut at a character boundary.
pub fn fit(value: &str, max_chars: usize) -> &str {
    match value.char_indices().nth(max_chars) {
        Some((end, _)) => &value[..end],
        None => value,
    }
}

/// One pool per process, created during init and shared by every invocation the container serves.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

impl Db {
    /// Builds the pool. Connections are opened lazily, so this does not fail when the database is
    /// briefly down: the first statement does, transiently.
    pub fn connect(config: &DbConfig) -> Result<Db, DbError> {
        let pg_config: tokio_postgres::Config =
            config.url.expose().parse().map_err(DbError::BadUrl)?;
        Self::from_pg_config(pg_config, config.pool_size, config.ca_bundle.as_deref())
    }

    /// TLS is used when the config asks for it (`sslmode=require`), verified against the public
    /// web roots (RDS Proxy presents an ACM certificate) plus `ca_bundle` (the RDS CA bundle, for
    /// direct connections to an RDS instance).
    pub fn from_pg_config(
        pg_config: tokio_postgres::Config,
        pool_size: usize,
        ca_bundle: Option<&std::path::Path>,
    ) -> Result<Db, DbError> {
        Self::build(pg_config, pool_size, ca_bundle, None)
    }

    /// As [`Db::from_pg_config`], with credentials from a secret that may be rotated: a new
    /// connection refused for its credentials reads them again from `source` (see
    /// [`credentials`]).
    pub fn with_rotating_credentials(
        pg_config: tokio_postgres::Config,
        pool_size: usize,
        ca_bundle: Option<&std::path::Path>,
        initial: credentials::Credentials,
        source: credentials::CredentialSource,
    ) -> Result<Db, DbError> {
        Self::build(pg_config, pool_size, ca_bundle, Some((initial, source)))
    }

    fn build(
        mut pg_config: tokio_postgres::Config,
        pool_size: usize,
        ca_bundle: Option<&std::path::Path>,
        rotation: Option<(credentials::Credentials, credentials::CredentialSource)>,
    ) -> Result<Db, DbError> {
        pg_config.application_name("docpipe");
        pg_config.connect_timeout(Duration::from_secs(5));
        let manager = if pg_config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            manager(pg_config, tls::connector(ca_bundle)?, rotation)
        } else {
            manager(pg_config, NoTls, rotation)
        };
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(10)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()?;
        Ok(Db { pool })
    }

    pub async fn client(&self) -> Result<Client, DbError> {
        Ok(self.pool.get().await?)
    }

    /// One round trip: the health check's proof that a statement gets an answer.
    pub async fn ping(&self) -> Result<(), DbError> {
        self.client().await?.query_typed("SELECT 1", &[]).await?;
        Ok(())
    }

    pub fn pool_status(&self) -> deadpool_postgres::Status {
        self.pool.status()
    }
}

fn manager<T>(
    pg_config: tokio_postgres::Config,
    tls: T,
    rotation: Option<(credentials::Credentials, credentials::CredentialSource)>,
) -> Manager
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Sync + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
{
    let config = ManagerConfig {
        // `Verified` sends an empty simple query before reuse: it catches a connection that the
        // pooler or a restart closed while the container was frozen.
        recycling_method: RecyclingMethod::Verified,
    };
    match rotation {
        Some((initial, source)) => Manager::from_connect(
            pg_config,
            credentials::RotatingConnect::new(tls, initial, source),
            config,
        ),
        None => Manager::from_config(pg_config, tls, config),
    }
}
