//! A small migration runner: pending migrations in order, one transaction each, recorded with a
//! checksum. Two processes may run it at once: a transaction-scoped advisory lock (which survives a
//! transaction-mode pooler, unlike a session lock) makes the second wait and then find nothing to do.

use super::{Db, DbError, Type};
use sha2::{Digest, Sha256};

pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every file in `migrations/`, in order. A test checks that this list and the folder agree.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_seed_000_schema",
        sql: include_str!("../../../migrations/0001_seed_000_schema.sql"),
    },
    Migration {
        version: 2,
        name: "0002_pipeline_state",
        sql: include_str!("../../../migrations/0002_pipeline_state.sql"),
    },
    Migration {
        version: 3,
        name: "0003_leases_and_tombstones",
        sql: include_str!("../../../migrations/0003_leases_and_tombstones.sql"),
    },
    Migration {
        version: 4,
        name: "0004_audit_and_idempotency",
        sql: include_str!("../../../migrations/0004_audit_and_idempotency.sql"),
    },
    Migration {
        version: 5,
        name: "0005_wider_idempotency_scope",
        sql: include_str!("../../../migrations/0005_wider_idempotency_scope.sql"),
    },
    Migration {
        version: 6,
        name: "0006_index_attempts",
        sql: include_str!("../../../migrations/0006_index_attempts.sql"),
    },
    Migration {
        version: 7,
        name: "0007_liveness",
        sql: include_str!("../../../migrations/0007_liveness.sql"),
    },
    Migration {
        version: 8,
        name: "0008_tombstones_cleanups_intake",
        sql: include_str!("../../../migrations/0008_tombstones_cleanups_intake.sql"),
    },
    Migration {
        version: 9,
        name: "0009_keyword_index",
        sql: include_str!("../../../migrations/0009_keyword_index.sql"),
    },
    Migration {
        version: 10,
        name: "0010_upkeep_leases",
        sql: include_str!("../../../migrations/0010_upkeep_leases.sql"),
    },
    Migration {
        version: 11,
        name: "0011_job_outbox",
        sql: include_str!("../../../migrations/0011_job_outbox.sql"),
    },
    Migration {
        version: 12,
        name: "0012_reconcile_cursors_and_key_expiry",
        sql: include_str!("../../../migrations/0012_reconcile_cursors_and_key_expiry.sql"),
    },
    Migration {
        version: 13,
        name: "0013_index_progress",
        sql: include_str!("../../../migrations/0013_index_progress.sql"),
    },
    Migration {
        version: 14,
        name: "0014_works_and_versions",
        sql: include_str!("../../../migrations/0014_works_and_versions.sql"),
    },
    Migration {
        version: 15,
        name: "0015_version_release",
        sql: include_str!("../../../migrations/0015_version_release.sql"),
    },
    Migration {
        version: 16,
        name: "0016_version_effective_to",
        sql: include_str!("../../../migrations/0016_version_effective_to.sql"),
    },
    Migration {
        version: 17,
        name: "0017_article_references",
        sql: include_str!("../../../migrations/0017_article_references.sql"),
    },
    Migration {
        version: 18,
        name: "0018_article_places",
        sql: include_str!("../../../migrations/0018_article_places.sql"),
    },
    Migration {
        version: 19,
        name: "0019_release_of_content",
        sql: include_str!("../../../migrations/0019_release_of_content.sql"),
    },
    Migration {
        version: 20,
        name: "0020_search_projection",
        sql: include_str!("../../../migrations/0020_search_projection.sql"),
    },
    Migration {
        version: 21,
        name: "0021_law_title_prefix",
        sql: include_str!("../../../migrations/0021_law_title_prefix.sql"),
    },
    Migration {
        version: 22,
        name: "0022_event_outbox",
        sql: include_str!("../../../migrations/0022_event_outbox.sql"),
    },
    Migration {
        version: 23,
        name: "0023_security_scans",
        sql: include_str!("../../../migrations/0023_security_scans.sql"),
    },
    Migration {
        version: 24,
        name: "0024_vector_generations",
        sql: include_str!("../../../migrations/0024_vector_generations.sql"),
    },
    Migration {
        version: 25,
        name: "0025_rebuild_partial_document",
        sql: include_str!("../../../migrations/0025_rebuild_partial_document.sql"),
    },
    Migration {
        version: 26,
        name: "0026_tenants",
        sql: include_str!("../../../migrations/0026_tenants.sql"),
    },
];

const LOCK_KEY: i64 = 0x0064_6f63_7069_7065; // "docpipe" in ASCII

impl Migration {
    pub fn checksum(&self) -> String {
        hex::encode(Sha256::digest(self.sql.as_bytes()))
    }
}

/// Applies what is pending and returns the versions it applied.
pub async fn run(db: &Db) -> Result<Vec<i32>, DbError> {
    let mut applied = Vec::new();
    let mut client = db.client().await?;
    for migration in MIGRATIONS {
        let tx = client.transaction().await?;
        // Created only when missing: `CREATE TABLE IF NOT EXISTS` would send a NOTICE for every
        // migration on every run, which a person reads as noise.
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({LOCK_KEY});
             DO $$ BEGIN
               IF to_regclass('docpipe_migrations') IS NULL THEN
                 CREATE TABLE docpipe_migrations (
                     version    INTEGER PRIMARY KEY,
                     name       TEXT        NOT NULL,
                     checksum   TEXT        NOT NULL,
                     applied_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
                 );
               END IF;
             END $$;"
        ))
        .await?;
        let recorded = tx
            .query_typed_opt(
                "SELECT checksum FROM docpipe_migrations WHERE version = $1",
                &[(&migration.version, Type::INT4)],
            )
            .await?;
        let checksum = migration.checksum();
        if let Some(row) = recorded {
            let recorded: String = row.get("checksum");
            if recorded != checksum {
                return Err(DbError::MigrationChanged {
                    version: migration.version,
                    name: migration.name.to_string(),
                    recorded,
                    current: checksum,
                });
            }
            tx.commit().await?;
            continue;
        }
        tx.batch_execute(migration.sql).await?;
        tx.execute_typed(
            "INSERT INTO docpipe_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[
                (&migration.version, Type::INT4),
                (&migration.name, Type::TEXT),
                (&checksum, Type::TEXT),
            ],
        )
        .await?;
        tx.commit().await?;
        tracing::debug!(
            version = migration.version,
            name = migration.name,
            "migration applied"
        );
        applied.push(migration.version);
    }
    Ok(applied)
}
