//! What a delete leaves behind so that it wins: which object it removed, and when. An
//! `ObjectCreated` for a version of that object created before the delete is stale. The decision is
//! by time, not content: the same bytes uploaded again after the delete are a new document.

use super::{DbError, Type};
use tokio_postgres::GenericClient;

/// How long a tombstone is kept, as a multiple of the store queue's retention: no notification of
/// the deleted object can still be waiting after that.
pub const RETENTION_FACTOR: i64 = 2;

/// When an object version was created, as precisely as the evidence allows. S3's `Last-Modified`
/// has whole seconds; an event time inside that second (S3 and moto give milliseconds) narrows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionTime {
    /// The latest moment the version can have been created, in ms since the epoch.
    pub latest_ms: i64,
}

impl VersionTime {
    /// `None` when nothing dates the version: it is then never judged stale (an upload is never
    /// dropped on a guess).
    pub fn of(last_modified_ms: Option<i64>, event_time_ms: Option<i64>) -> Option<VersionTime> {
        let latest_ms = match (last_modified_ms, event_time_ms) {
            (Some(lm), Some(ev)) if (lm..lm + 1000).contains(&ev) => ev,
            (Some(lm), _) => lm + 999,
            // A notification's own time, from a store that gave no Last-Modified.
            (None, Some(ev)) => ev,
            (None, None) => return None,
        };
        Some(VersionTime { latest_ms })
    }
}

/// Remembers the document's object as deleted at the document's `deleting_at`, in the transaction
/// that marks the delete. A repeated delete keeps the time of the first.
pub async fn record(c: &impl GenericClient, doc_id: &str) -> Result<(), DbError> {
    c.execute_typed(
        "INSERT INTO object_tombstones (bucket, object_name, doc_id, deleted_at)
         SELECT source_bucket, object_name, doc_id, deleting_at FROM documents
         WHERE doc_id = $1 AND deleting_at IS NOT NULL AND source_bucket <> '' AND object_name <> ''
         ON CONFLICT (bucket, object_name)
         DO UPDATE SET doc_id = EXCLUDED.doc_id, deleted_at = EXCLUDED.deleted_at",
        &[(&doc_id, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}

/// When the object was deleted, if that was after this version was created (the version is stale).
pub async fn deleted_after(
    c: &impl GenericClient,
    bucket: &str,
    object_name: &str,
    version: Option<VersionTime>,
) -> Result<Option<String>, DbError> {
    let Some(version) = version else {
        return Ok(None);
    };
    let row = c
        .query_typed_opt(
            "SELECT deleted_at::text AS deleted_at FROM object_tombstones
             WHERE bucket = $1 AND object_name = $2
               AND deleted_at > to_timestamp($3::int8 / 1000.0)",
            &[
                (&bucket, Type::VARCHAR),
                (&object_name, Type::VARCHAR),
                (&version.latest_ms, Type::INT8),
            ],
        )
        .await?;
    Ok(row.map(|r| r.get("deleted_at")))
}

/// Removes tombstones older than `older_than_secs`; returns how many.
pub async fn prune(c: &impl GenericClient, older_than_secs: i64) -> Result<u64, DbError> {
    Ok(c.execute_typed(
        "DELETE FROM object_tombstones
         WHERE deleted_at < NOW() - make_interval(secs => $1::int8)",
        &[(&older_than_secs, Type::INT8)],
    )
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_time_inside_the_last_modified_second_narrows_it() {
        let lm = 1_764_000_000_000;
        assert_eq!(
            VersionTime::of(Some(lm), Some(lm + 218)).unwrap().latest_ms,
            lm + 218
        );
        // sam local generate-event says 1970: the Last-Modified second is all that is known.
        assert_eq!(
            VersionTime::of(Some(lm), Some(0)).unwrap().latest_ms,
            lm + 999
        );
        assert_eq!(VersionTime::of(None, Some(5)).unwrap().latest_ms, 5);
        assert_eq!(VersionTime::of(None, None), None);
    }
}
