//! Leases of the background jobs (`upkeep_leases`), so that one job never runs twice at once.

use super::{DbError, Type};
use tokio_postgres::GenericClient;

/// Takes the lease `name` for `holder` until `seconds` from now, if nobody holds it or its holder's
/// time ran out. `true` when taken.
pub async fn acquire(
    c: &impl GenericClient,
    name: &str,
    holder: &str,
    seconds: f64,
) -> Result<bool, DbError> {
    let taken = c
        .query_typed_opt(
            "INSERT INTO upkeep_leases (name, holder, expires_at)
             VALUES ($1, $2, NOW() + make_interval(secs => $3))
             ON CONFLICT (name) DO UPDATE
                SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
              WHERE upkeep_leases.expires_at <= NOW()
             RETURNING holder",
            &[
                (&name, Type::VARCHAR),
                (&holder, Type::VARCHAR),
                (&seconds, Type::FLOAT8),
            ],
        )
        .await?;
    Ok(taken.is_some())
}

/// Gives the lease back, if `holder` still holds it.
pub async fn release(c: &impl GenericClient, name: &str, holder: &str) -> Result<(), DbError> {
    c.execute_typed(
        "DELETE FROM upkeep_leases WHERE name = $1 AND holder = $2",
        &[(&name, Type::VARCHAR), (&holder, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}
