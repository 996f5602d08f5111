//! The schema is seed 000's DDL, applied by a runner that is safe to repeat and to race.

use docpipe::db::migrate::{self, MIGRATIONS};
use docpipe_tests::{shared_dir, workspace_root, TestDb};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};

fn seed_000() -> String {
    let dir = shared_dir().join("seeds");
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
    client: &docpipe::db::Client,
    table: &str,
    block: &str,
    col_re: &Regex,
) {
    let rows = client
        .query_typed(
            "SELECT column_name::text, data_type::text, character_maximum_length, is_nullable::text, column_default::text
             FROM information_schema.columns WHERE table_name = $1",
            &[(&table, docpipe::db::Type::TEXT)],
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
    client: &docpipe::db::Client,
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
                &[(&name, docpipe::db::Type::TEXT)],
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
                    (&name, docpipe::db::Type::TEXT),
                    (&table, docpipe::db::Type::TEXT),
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
            docpipe::db::DbError::MigrationChanged { version: 1, .. }
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
