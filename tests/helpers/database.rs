//! A database of each test's own: created through PgBouncer, migrated, dropped with the test.

use crate::*;
use docpipe_core::config::{DbConfig, Secret};
use docpipe_db::Db;

pub fn database_url() -> String {
    env_or(
        "DATABASE_URL",
        "postgres://docpipe:docpipe@127.0.0.1:6432/docpipe",
    )
}

/// A database of the test's own, reached through PgBouncer like production reaches RDS Proxy.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub db: Db,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let t = TestDb::unmigrated().await;
        docpipe_db::migrate::run(&t.db).await.expect("migrations");
        t
    }

    /// A database of the test's own with nothing in it: what a first deploy finds.
    pub async fn unmigrated() -> TestDb {
        let admin_url = database_url();
        let name = unique("docpipe_t_");
        let (client, conn) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL through PgBouncer at {admin_url} (is the stack up? `make up`): {e}"));
        tokio::spawn(conn);
        client
            .simple_query(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        let url = replace_db_name(&admin_url, &name);
        let db = pool(&url, 4);
        TestDb { name, url, db }
    }

    /// A database that outlives the run (a benchmark's corpus, indexed once): created when
    /// missing, migrated, never dropped.
    pub async fn persistent(name: &str) -> TestDb {
        let admin_url = database_url();
        let (client, conn) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {admin_url} (`make up`): {e}"));
        tokio::spawn(conn);
        let exists = client
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
            .await
            .expect("pg_database")
            .is_some();
        if !exists {
            client
                .simple_query(&format!("CREATE DATABASE {name}"))
                .await
                .expect("create the database");
        }
        let url = replace_db_name(&admin_url, name);
        let db = pool(&url, 4);
        docpipe_db::migrate::run(&db).await.expect("migrations");
        TestDb {
            name: name.to_string(),
            url,
            db,
        }
    }

    /// A second, independent pool on the same database: another "process".
    pub fn another_pool(&self, size: usize) -> Db {
        pool(&self.url, size)
    }

    pub async fn client(&self) -> docpipe_db::Client {
        self.db.client().await.expect("db client")
    }

    /// The first column of `sql`'s rows, whose one parameter is a doc_id.
    pub async fn column_for_doc<T>(&self, sql: &str, doc_id: &str) -> Vec<T>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        self.client()
            .await
            .query_typed(sql, &[(&doc_id, docpipe_db::Type::VARCHAR)])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

fn pool(url: &str, size: usize) -> Db {
    Db::connect(&DbConfig {
        url: Secret::new(url.to_string()),
        pool_size: size,
        secret_arn: None,
        ca_bundle: None,
    })
    .expect("pool")
}

fn replace_db_name(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let base = match base.rfind('/') {
        Some(i) if i > "postgres://".len() => &base[..i],
        _ => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// A document's run events, as (stage, kind) pairs in order.
pub async fn run_event_kinds(db: &TestDb, doc_id: &str) -> Vec<(String, String)> {
    docpipe_db::run_events::list_for_doc(&**db.client().await, doc_id)
        .await
        .expect("run events")
        .into_iter()
        .map(|e| (e.stage, e.kind))
        .collect()
}
