//! Per-tenant counts the API's quotas read ([`docpipe_core::tenant`]): what a tenant holds, and
//! how many searches it made this minute.

use super::{DbError, Type};
use tokio_postgres::GenericClient;

/// What a tenant holds: documents not being deleted, and their originals' bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holdings {
    pub documents: i64,
    pub bytes: i64,
}

pub async fn holdings(c: &impl GenericClient, organ_id: &str) -> Result<Holdings, DbError> {
    let row = c
        .query_typed_one(
            "SELECT count(*)::int8 AS documents, COALESCE(sum(size_bytes), 0)::int8 AS bytes
             FROM documents WHERE organ_id = $1 AND deleting_at IS NULL",
            &[(&organ_id, Type::VARCHAR)],
        )
        .await?;
    Ok(Holdings {
        documents: row.get("documents"),
        bytes: row.get("bytes"),
    })
}

/// Counts one search of the tenant in the current minute: how many it has made in it, this one
/// included, and the seconds left in the minute.
pub async fn count_search(c: &impl GenericClient, organ_id: &str) -> Result<(i64, i64), DbError> {
    let row = c
        .query_typed_one(
            "INSERT INTO tenant_search_minutes (organ_id, minute, searches)
             VALUES ($1, date_trunc('minute', now()), 1)
             ON CONFLICT (organ_id, minute)
             DO UPDATE SET searches = tenant_search_minutes.searches + 1
             RETURNING searches::int8 AS searches,
                       (60 - extract(second FROM now()))::int8 AS left_secs",
            &[(&organ_id, Type::VARCHAR)],
        )
        .await?;
    Ok((row.get("searches"), row.get("left_secs")))
}

/// Removes the search counts of minutes more than an hour gone (the sweeper's housekeeping).
pub async fn prune_search_minutes(c: &impl GenericClient) -> Result<u64, DbError> {
    Ok(c.execute_typed(
        "DELETE FROM tenant_search_minutes WHERE minute < now() - interval '1 hour'",
        &[],
    )
    .await?)
}

/// The scan policy a tenant chose, if it chose one (else the deployment's applies).
pub async fn scan_policy(
    c: &impl GenericClient,
    organ_id: &str,
) -> Result<Option<String>, DbError> {
    let row = c
        .query_typed_opt(
            "SELECT scan_policy FROM tenants WHERE organ_id = $1",
            &[(&organ_id, Type::VARCHAR)],
        )
        .await?;
    Ok(row.and_then(|r| r.get("scan_policy")))
}

/// Sets (or with `None` clears) the tenant's scan policy, registering the tenant if new. It
/// applies to the parses that start after it.
pub async fn set_scan_policy(
    c: &impl GenericClient,
    organ_id: &str,
    policy: Option<&str>,
) -> Result<(), DbError> {
    c.execute_typed(
        "INSERT INTO tenants (organ_id, scan_policy) VALUES ($1, $2)
         ON CONFLICT (organ_id) DO UPDATE SET scan_policy = EXCLUDED.scan_policy",
        &[(&organ_id, Type::VARCHAR), (&policy, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}
