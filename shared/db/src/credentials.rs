//! Database credentials that follow a rotated secret. A container reads the secret at init; when
//! Secrets Manager rotates the password, the connections already open keep working, but the next
//! new one is refused. Rather than fail until the container is recycled, a connection refused for
//! its credentials reads the secret again and tries once more with what it holds now.

use deadpool_postgres::Connect;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Config, Error, Socket};

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: Option<String>,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

type Reading = Pin<Box<dyn Future<Output = Result<Credentials, String>> + Send>>;

/// Where fresh credentials come from (the secret, read again).
pub(crate) type CredentialSource = Arc<dyn Fn() -> Reading + Send + Sync>;

pub fn credential_source<F, Fut>(read: F) -> CredentialSource
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Credentials, String>> + Send + 'static,
{
    Arc::new(move || Box::pin(read()))
}

/// A connection refused for who it claimed to be: a wrong password (28P01) or a role that may
/// not log in (28000).
pub(crate) fn is_credential_refusal(error: &Error) -> bool {
    error.code().is_some_and(|code| {
        *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    })
}

/// deadpool's connector, with the credentials of the moment and a way to read them again.
pub(crate) struct RotatingConnect<T> {
    tls: T,
    current: Arc<RwLock<Credentials>>,
    source: CredentialSource,
}

impl<T> RotatingConnect<T> {
    pub fn new(tls: T, initial: Credentials, source: CredentialSource) -> Self {
        RotatingConnect {
            tls,
            current: Arc::new(RwLock::new(initial)),
            source,
        }
    }
}

fn with_credentials(config: &Config, credentials: &Credentials) -> Config {
    let mut config = config.clone();
    if let Some(user) = &credentials.user {
        config.user(user);
    }
    config.password(credentials.password.as_bytes());
    config
}

async fn open<T>(config: Config, tls: T) -> Result<(Client, JoinHandle<()>), Error>
where
    T: MakeTlsConnect<Socket> + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let (client, connection) = config.connect(tls).await?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "database connection ended with an error");
        }
    });
    Ok((client, task))
}

impl<T> Connect for RotatingConnect<T>
where
    T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    fn connect(
        &self,
        pg_config: &Config,
    ) -> Pin<Box<dyn Future<Output = Result<(Client, JoinHandle<()>), Error>> + Send + '_>> {
        let pg_config = pg_config.clone();
        Box::pin(async move {
            let held = self.current.read().expect("credentials lock").clone();
            let refused = match open(with_credentials(&pg_config, &held), self.tls.clone()).await {
                Err(e) if is_credential_refusal(&e) => e,
                other => return other,
            };
            let fresh = match (self.source)().await {
                Ok(fresh) => fresh,
                Err(reason) => {
                    tracing::warn!(%reason, "the database refused the credentials, and the secret could not be read again");
                    return Err(refused);
                }
            };
            if fresh == held {
                return Err(refused);
            }
            tracing::info!("the database refused the credentials; the secret holds new ones (rotated): retrying with them");
            *self.current.write().expect("credentials lock") = fresh.clone();
            open(with_credentials(&pg_config, &fresh), self.tls.clone()).await
        })
    }
}
