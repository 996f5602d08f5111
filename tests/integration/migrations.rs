//! The schema is seed 000's DDL, applied by a runner that is safe to repeat and to race.

use docpipe_db::migrate::{self, MIGRATIONS};
use helpers::{seeds_dir, workspace_root, TestDb};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};

fn seed_000() -> String {
    let dir = seeds_dir();
    let path = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("000_"))
        .expect("seed 000");
    std::fs::read_to_string(path).unwrap()
}

fn seed_sql_blocks() -> Vec<String> {
    let re = Regex::new(r"(?s)```sql\n(.*?)```").unwrap();
    re.captures_iter(&seed_000())
        .map(|c| c[1].to_string())
        .collect()
}

#[test]
fn migration_0001_is_seed_000_verbatim() {
    let blocks = seed_sql_blocks();
    assert_eq!(blocks.len(), 6, "seed 000 has six tables");
    let m1 = std::fs::read_to_string(workspace_root().join("migrations/0001_seed_000_schema.sql"))
        .unwrap();
    for block in &blocks {
        assert!(
            m1.contains(block.trim_end()),
            "0001 lacks seed block:\n{block}"
        );
    }
}

#[test]
fn migration_list_matches_the_folder() {
    let mut files: Vec<String> = std::fs::read_dir(workspace_root().join("migrations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".sql"))
        .map(|n| n.trim_end_matches(".sql").to_string())
        .collect();
    files.sort();
    let listed: Vec<String> = MIGRATIONS.iter().map(|m| m.name.to_string()).collect();
    assert_eq!(files, listed);
    for (i, m) in MIGRATIONS.iter().enumerate() {
        assert_eq!(m.version as usize, i + 1, "versions are 1..n in order");
    }
}

/// Seed type spelling → information_schema's.
fn pg_type(seed: &str) -> (String, Option<i32>) {
    let re = Regex::new(r"^VARCHAR\((\d+)\)$").unwrap();
    if let Some(c) = re.captures(seed) {
        return ("character varying".into(), Some(c[1].parse().unwrap()));
    }
    let t = match seed {
        "BIGSERIAL" | "BIGINT" => "bigint",
        "INTEGER" => "integer",
        "TEXT" => "text",
        "JSONB" => "jsonb",
        "TIMESTAMPTZ" => "timestamp with time zone",
        other => panic!("unmapped seed type {other}"),
    };
    (t.into(), None)
}

#[tokio::test]
async fn schema_has_every_table_column_constraint_and_index_of_seed_000() {
    let t = TestDb::new().await;
    let client = t.client().await;
    let table_re = Regex::new(r"CREATE TABLE IF NOT EXISTS (\w+) \(").unwrap();
    let col_re = Regex::new(
        r"^ {4}(\w+) +(VARCHAR\(\d+\)|BIGSERIAL|BIGINT|INTEGER|TEXT|JSONB|TIMESTAMPTZ)([ ,].*|)$",
    )
    .unwrap();
    let constraint_re = Regex::new(r"CONSTRAINT (\w+)").unwrap();
    let index_re = Regex::new(r"CREATE (?:UNIQUE )?INDEX IF NOT EXISTS (\w+)").unwrap();
    let mut tables = BTreeSet::new();
    for block in seed_sql_blocks() {
        let table = table_re.captures(&block).expect("a CREATE TABLE")[1].to_string();
        tables.insert(table.clone());
        assert_columns_as_seeded(&client, &table, &block, &col_re).await;
        assert_constraints_and_indexes_exist(&client, &table, &block, &constraint_re, &index_re)
            .await;
    }
    assert_eq!(tables.len(), 6);

    // The checks are live: a status outside the seed's five is refused.
    let err = client
        .execute_typed(
            "INSERT INTO documents (doc_id, status) VALUES ('doc_x', 'processing')",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code().unwrap().code(), "23514", "check violation");
}

/// Every column `block` declares for `table` exists with its type, length, nullability and
/// default.
async fn assert_columns_as_seeded(
    client: &docpipe_db::Client,
    table: &str,
    block: &str,
    col_re: &Regex,
) {
    let rows = client
        .query_typed(
            "SELECT column_name::text, data_type::text, character_maximum_length, is_nullable::text, column_default::text
             FROM information_schema.columns WHERE table_name = $1",
            &[(&table, docpipe_db::Type::TEXT)],
        )
        .await
        .unwrap();
    let actual: BTreeMap<String, (String, Option<i32>, String, Option<String>)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3), r.get(4))))
        .collect();
    let mut seen = 0;
    for c in block.lines().filter_map(|line| col_re.captures(line)) {
        seen += 1;
        let (name, ty, rest) = (&c[1], &c[2], &c[3]);
        let (want_type, want_len) = pg_type(ty);
        let got = actual
            .get(name)
            .unwrap_or_else(|| panic!("{table}.{name} is missing"));
        assert_eq!(got.0, want_type, "{table}.{name} type");
        assert_eq!(got.1, want_len, "{table}.{name} length");
        let not_null = rest.contains("NOT NULL") || rest.contains("PRIMARY KEY");
        assert_eq!(got.2 == "NO", not_null, "{table}.{name} nullability");
        if rest.contains("DEFAULT") || ty == "BIGSERIAL" {
            assert!(got.3.is_some(), "{table}.{name} has no default");
        }
    }
    assert!(seen >= 8, "parsed only {seen} columns of {table}");
}

/// Every constraint `block` names exists, and every index it creates exists on `table`.
async fn assert_constraints_and_indexes_exist(
    client: &docpipe_db::Client,
    table: &str,
    block: &str,
    constraint_re: &Regex,
    index_re: &Regex,
) {
    for c in constraint_re.captures_iter(block) {
        let name = c[1].to_string();
        let found = client
            .query_typed_opt(
                "SELECT 1 FROM pg_constraint WHERE conname = $1",
                &[(&name, docpipe_db::Type::TEXT)],
            )
            .await
            .unwrap();
        assert!(found.is_some(), "constraint {name} missing");
    }
    for c in index_re.captures_iter(block) {
        let name = c[1].to_string();
        let found = client
            .query_typed_opt(
                "SELECT 1 FROM pg_indexes WHERE indexname = $1 AND tablename = $2",
                &[
                    (&name, docpipe_db::Type::TEXT),
                    (&table, docpipe_db::Type::TEXT),
                ],
            )
            .await
            .unwrap();
        assert!(found.is_some(), "index {name} on {table} missing");
    }
}

#[tokio::test]
async fn migrations_are_recorded_and_safe_to_repeat() {
    let t = TestDb::new().await;
    assert!(
        migrate::run(&t.db).await.unwrap().is_empty(),
        "second run applies nothing"
    );
    let rows = t
        .client()
        .await
        .query_typed(
            "SELECT version, checksum FROM docpipe_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), MIGRATIONS.len());
    for (row, m) in rows.iter().zip(MIGRATIONS) {
        assert_eq!(row.get::<_, i32>(0), m.version);
        assert_eq!(row.get::<_, String>(1), m.checksum());
    }
}

#[tokio::test]
async fn a_changed_migration_is_refused() {
    let t = TestDb::new().await;
    t.client()
        .await
        .execute_typed(
            "UPDATE docpipe_migrations SET checksum = 'edited' WHERE version = 1",
            &[],
        )
        .await
        .unwrap();
    let err = migrate::run(&t.db).await.unwrap_err();
    assert!(
        matches!(
            err,
            docpipe_db::DbError::MigrationChanged { version: 1, .. }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_runners_apply_each_migration_once() {
    // A database that has never been migrated, and four "processes" racing to migrate it.
    let t = TestDb::new().await;
    let client = t.client().await;
    client
        .batch_execute(
            "DROP TABLE docpipe_migrations, document_artifacts, document_status_history,
                    semantic_blocks, structure_nodes, document_processing_runs, documents CASCADE",
        )
        .await
        .unwrap();
    let pools: Vec<_> = (0..4).map(|_| t.another_pool(1)).collect();
    let results = futures::future::join_all(pools.iter().map(migrate::run)).await;
    let mut applied = Vec::new();
    for r in results {
        applied.extend(r.expect("every runner succeeds"));
    }
    applied.sort();
    let expected: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(applied, expected, "each migration applied exactly once");
}

// ── The migrations as the stack's custom resource ─────────────────────────────────────────────

mod custom_resource {
    use super::*;
    use docpipe_core::config::{AwsConfig, DbConfig, Secret};
    use docpipe_core::env::EnvReader;
    use docpipe_pipeline::handlers::migrate::{
        CustomResourceEvent, MigrateError, MigrateService, Status,
    };
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// One PUT CloudFormation's response URL received: its content type and its body.
    #[derive(Debug, Clone)]
    struct Answer {
        content_type: Option<String>,
        query: String,
        body: serde_json::Value,
    }

    /// A local stand-in for the presigned S3 URL CloudFormation waits on: it records every PUT
    /// and answers `status`.
    struct ResponseEndpoint {
        url: String,
        answers: Arc<Mutex<Vec<Answer>>>,
    }

    impl ResponseEndpoint {
        async fn start(status: u16) -> ResponseEndpoint {
            use axum::{extract::RawQuery, http::HeaderMap, routing::put, Router};
            let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
            let recorded = answers.clone();
            let app = Router::new().route(
                "/cloudformation-response",
                put(
                    move |headers: HeaderMap, RawQuery(query): RawQuery, body: String| {
                        let recorded = recorded.clone();
                        async move {
                            recorded.lock().unwrap().push(Answer {
                                content_type: headers
                                    .get("content-type")
                                    .map(|v| v.to_str().unwrap().to_string()),
                                query: query.unwrap_or_default(),
                                body: serde_json::from_str(&body).expect("a JSON answer"),
                            });
                            axum::http::StatusCode::from_u16(status).unwrap()
                        }
                    },
                ),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            ResponseEndpoint {
                // Shaped like the presigned URL: the signature is in the query.
                url: format!("http://{addr}/cloudformation-response?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc"),
                answers,
            }
        }

        fn answers(&self) -> Vec<Answer> {
            self.answers.lock().unwrap().clone()
        }
    }

    /// One of events/migrate-cfn-*.json (the create request as `sam local generate-event
    /// cloudformation create-request` writes it; update and delete as AWS documents them),
    /// answering at `url`.
    fn event(kind: &str, url: &str) -> CustomResourceEvent {
        let path = workspace_root().join(format!("events/migrate-cfn-{kind}.json"));
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        value["ResponseURL"] = url.into();
        serde_json::from_value(value).unwrap()
    }

    fn service(url: &str) -> MigrateService {
        MigrateService::new(
            DbConfig {
                url: Secret::new(url.to_string()),
                pool_size: 2,
                secret_arn: None,
                ca_bundle: None,
            },
            AwsConfig::read(&mut EnvReader::from_process()),
        )
    }

    fn a_minute() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    async fn applied_versions(t: &TestDb) -> Vec<i32> {
        t.client()
            .await
            .query_typed(
                "SELECT version FROM docpipe_migrations ORDER BY version",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get("version"))
            .collect()
    }

    #[tokio::test]
    async fn create_migrates_update_finds_it_current_delete_keeps_the_data() {
        let t = TestDb::unmigrated().await;
        let endpoint = ResponseEndpoint::start(200).await;
        let migrate = service(&t.url);
        let all: Vec<String> = MIGRATIONS.iter().map(|m| m.version.to_string()).collect();

        let created = migrate
            .handle(&event("create", &endpoint.url), a_minute(), None)
            .await
            .unwrap();
        assert_eq!(created.status, Status::Success, "{}", created.reason);
        let versions: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(applied_versions(&t).await, versions);

        let updated = migrate
            .handle(&event("update", &endpoint.url), a_minute(), None)
            .await
            .unwrap();
        assert_eq!(updated.status, Status::Success, "{}", updated.reason);
        assert!(
            updated.reason.contains("no migration was pending"),
            "{}",
            updated.reason
        );

        let deleted = migrate
            .handle(&event("delete", &endpoint.url), a_minute(), None)
            .await
            .unwrap();
        assert_eq!(deleted.status, Status::Success);
        assert_eq!(
            applied_versions(&t).await,
            versions,
            "delete removes nothing"
        );

        // What CloudFormation received, in order: one answer per request, at the presigned URL
        // with its query intact and no content type (the URL is signed without one).
        let answers = endpoint.answers();
        assert_eq!(answers.len(), 3, "{answers:?}");
        for (answer, request) in answers.iter().zip(["create", "update", "delete"]) {
            assert!(answer.query.contains("X-Amz-Signature=abc"), "{answer:?}");
            assert!(
                answer
                    .content_type
                    .as_deref()
                    .unwrap_or_default()
                    .is_empty(),
                "{answer:?}"
            );
            assert_eq!(answer.body["Status"], "SUCCESS", "{answer:?}");
            assert_eq!(answer.body["PhysicalResourceId"], "docpipe-migrations");
            assert_eq!(answer.body["LogicalResourceId"], "Migrations");
            assert_eq!(
                answer.body["RequestId"],
                format!("unique id for this {request} request")
            );
            assert!(answer.body["StackId"]
                .as_str()
                .unwrap()
                .starts_with("arn:aws:cloudformation:"));
        }
        assert_eq!(answers[0].body["Data"]["Applied"], all.join(","));
        assert_eq!(answers[1].body["Data"]["Applied"], "");
        assert_eq!(
            answers[1].body["Data"]["SchemaVersion"],
            all.last().unwrap().as_str()
        );
    }

    #[tokio::test]
    async fn a_failed_migration_fails_the_deploy_with_its_error() {
        let t = TestDb::new().await;
        t.client()
            .await
            .execute_typed(
                "UPDATE docpipe_migrations SET checksum = 'edited' WHERE version = 2",
                &[],
            )
            .await
            .unwrap();
        let endpoint = ResponseEndpoint::start(200).await;
        let answer = service(&t.url)
            .handle(&event("update", &endpoint.url), a_minute(), None)
            .await
            .unwrap();
        assert_eq!(answer.status, Status::Failed);
        assert!(
            answer
                .reason
                .contains("migration 2 (0002_pipeline_state) changed after it was applied"),
            "{}",
            answer.reason
        );
        assert_eq!(endpoint.answers()[0].body["Status"], "FAILED");
        assert_eq!(endpoint.answers()[0].body["Reason"], answer.reason.as_str());
    }

    #[tokio::test]
    async fn an_unreachable_database_or_a_bad_environment_fails_in_time() {
        let endpoint = ResponseEndpoint::start(200).await;
        // Nothing listens on port 1: the connection is refused.
        let answer = service("postgres://docpipe:docpipe@127.0.0.1:1/docpipe")
            .handle(&event("create", &endpoint.url), a_minute(), None)
            .await
            .unwrap();
        assert_eq!(answer.status, Status::Failed);
        assert!(
            answer.reason.starts_with("migrations failed: "),
            "{}",
            answer.reason
        );

        // A database that accepts and never answers, and a deadline too close to wait for it:
        // the answer still goes out, before the deadline.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_addr = silent.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                held.push(socket);
            }
        });
        let started = Instant::now();
        let answer = service(&format!("postgres://docpipe:docpipe@{silent_addr}/docpipe"))
            .handle(
                &event("create", &endpoint.url),
                Instant::now() + Duration::from_secs(12),
                None,
            )
            .await
            .unwrap();
        assert_eq!(answer.status, Status::Failed);
        assert!(
            answer.reason.contains("did not finish within"),
            "{}",
            answer.reason
        );
        assert!(started.elapsed() < Duration::from_secs(12));

        // The environment's problem, found at init, is the first request's answer.
        let answer = service("postgres://unused@127.0.0.1:1/x")
            .handle(
                &event("create", &endpoint.url),
                a_minute(),
                Some("invalid configuration: DATABASE_URL is not set"),
            )
            .await
            .unwrap();
        assert_eq!(answer.status, Status::Failed);
        assert!(answer.reason.contains("DATABASE_URL is not set"));
        // ... but a delete never needs the database: the stack can always be removed.
        let answer = service("postgres://unused@127.0.0.1:1/x")
            .handle(
                &event("delete", &endpoint.url),
                a_minute(),
                Some("invalid configuration: DATABASE_URL is not set"),
            )
            .await
            .unwrap();
        assert_eq!(answer.status, Status::Success);
        assert_eq!(endpoint.answers().len(), 4);
    }

    #[tokio::test]
    async fn an_answer_the_url_refuses_fails_the_invocation_so_lambda_retries_it() {
        let t = TestDb::unmigrated().await;
        let endpoint = ResponseEndpoint::start(403).await;
        let err = service(&t.url)
            .handle(&event("create", &endpoint.url), a_minute(), None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, MigrateError::Refused { status: 403, .. }),
            "{err}"
        );
    }
}
