//! `idempotency_keys`: a request that carries an `Idempotency-Key` answers, when repeated, what it
//! answered the first time, and does its work once.
//!
//! The key is claimed before the work by inserting a placeholder row (`status_code = 0`). The
//! primary key (scope, key) makes the claim race-safe: of two concurrent requests with one key,
//! exactly one inserts the row and does the work; the other sees the placeholder and is told the
//! request is in progress. When the work succeeds its answer replaces the placeholder; when it
//! fails the placeholder is released, so the same key may be tried again. A placeholder older than
//! `stale_after_secs` (its owner died) can be claimed again.
//!
//! A key expires [`KEY_TTL_SECS`] (24 hours) after its request claimed it: from then on the same
//! key is a new request, and the sweeper's housekeeping deletes expired keys ([`prune`]), so the
//! table holds about a day of keys.

use super::{DbError, Type};
use tokio_postgres::GenericClient;

/// The placeholder status of a claimed key whose work has not finished.
pub(crate) const IN_PROGRESS: i32 = 0;

/// How long a key is honoured, from the request that claimed it.
pub const KEY_TTL_SECS: i64 = 24 * 3600;

#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This caller owns the key: do the work, then [`complete`] or [`release`].
    Acquired,
    /// The work was done before: answer this.
    Completed {
        status_code: u16,
        response: serde_json::Value,
    },
    /// Another request holds the key right now.
    InProgress,
}

/// `organ_id` is the caller's tenant: the same key of two tenants never collides.
pub async fn claim(
    c: &impl GenericClient,
    organ_id: &str,
    scope: &str,
    key: &str,
    stale_after_secs: i64,
) -> Result<Claim, DbError> {
    let inserted = c
        .query_typed_opt(
            "INSERT INTO idempotency_keys (scope, key, status_code, response, organ_id)
             VALUES ($1, $2, $3, '{}'::jsonb, $4)
             ON CONFLICT (organ_id, scope, key) DO NOTHING
             RETURNING 1",
            &[
                (&scope, Type::VARCHAR),
                (&key, Type::VARCHAR),
                (&IN_PROGRESS, Type::INT4),
                (&organ_id, Type::VARCHAR),
            ],
        )
        .await?;
    if inserted.is_some() {
        return Ok(Claim::Acquired);
    }
    // The row exists: take it over if its owner died or it expired (the sweeper may not have
    // pruned it yet), otherwise report what it holds.
    let taken_over = c
        .query_typed_opt(
            "UPDATE idempotency_keys SET created_at = NOW(), status_code = $3, response = '{}'
             WHERE scope = $1 AND key = $2
               AND ((status_code = $3 AND created_at < NOW() - make_interval(secs => $4))
                    OR created_at < NOW() - make_interval(secs => $5))
             RETURNING 1",
            &[
                (&scope, Type::VARCHAR),
                (&key, Type::VARCHAR),
                (&IN_PROGRESS, Type::INT4),
                (&(stale_after_secs as f64), Type::FLOAT8),
                (&(KEY_TTL_SECS as f64), Type::FLOAT8),
            ],
        )
        .await?;
    if taken_over.is_some() {
        return Ok(Claim::Acquired);
    }
    let row = c
        .query_typed_opt(
            "SELECT status_code, response FROM idempotency_keys WHERE scope = $1 AND key = $2",
            &[(&scope, Type::VARCHAR), (&key, Type::VARCHAR)],
        )
        .await?;
    Ok(match row {
        // Released between our insert and this read: the caller may simply try again.
        None => Claim::InProgress,
        Some(row) => {
            let status: i32 = row.get("status_code");
            if status == IN_PROGRESS {
                Claim::InProgress
            } else {
                Claim::Completed {
                    status_code: u16::try_from(status).unwrap_or(500),
                    response: row.get("response"),
                }
            }
        }
    })
}

/// Records the answer of the work this caller claimed.
pub async fn complete(
    c: &impl GenericClient,
    scope: &str,
    key: &str,
    status_code: u16,
    response: &serde_json::Value,
) -> Result<(), DbError> {
    let status = i32::from(status_code);
    let response = response.to_string();
    c.execute_typed(
        "UPDATE idempotency_keys SET status_code = $3, response = $4::jsonb
         WHERE scope = $1 AND key = $2",
        &[
            (&scope, Type::VARCHAR),
            (&key, Type::VARCHAR),
            (&status, Type::INT4),
            (&response, Type::TEXT),
        ],
    )
    .await?;
    Ok(())
}

/// Gives a claimed key back without an answer (the work failed and may be tried again).
pub async fn release(c: &impl GenericClient, scope: &str, key: &str) -> Result<(), DbError> {
    c.execute_typed(
        "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND status_code = $3",
        &[
            (&scope, Type::VARCHAR),
            (&key, Type::VARCHAR),
            (&IN_PROGRESS, Type::INT4),
        ],
    )
    .await?;
    Ok(())
}

/// Deletes at most `limit` keys claimed more than `ttl_secs` ago; how many it deleted.
pub async fn prune(c: &impl GenericClient, ttl_secs: i64, limit: i64) -> Result<u64, DbError> {
    Ok(c.execute_typed(
        "DELETE FROM idempotency_keys WHERE (scope, key) IN (
             SELECT scope, key FROM idempotency_keys
             WHERE created_at < NOW() - make_interval(secs => $1)
             ORDER BY created_at LIMIT $2)",
        &[(&(ttl_secs as f64), Type::FLOAT8), (&limit, Type::INT8)],
    )
    .await?)
}
