//! The event outbox: what docpipe tells the systems downstream, recorded in the transaction of the
//! change it announces and taken from here by a publisher (the pipeline right after its commits,
//! the sweeper for whatever is left). A row leaves the queue only once EventBridge took it: every
//! announced change is delivered at least once, under its stable `event_id`.
//!
//! What each change records is in [`crate::announce`] (versions, works, deletes) and in the
//! status moves of [`crate::transitions`] (indexed, failed), which write theirs in the same
//! statement.

use super::{DbError, Type};
use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

/// EventBridge's `source` of every event docpipe publishes.
pub const SOURCE: &str = "docpipe";

/// The kinds of event, as EventBridge's `detail-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    DocumentIndexed,
    DocumentFailed,
    DocumentDeleted,
    VersionIndexed,
    VersionReleased,
    VersionSuperseded,
    WorkRepealed,
    ArticlesChanged,
}

impl EventType {
    pub const ALL: [EventType; 8] = [
        EventType::DocumentIndexed,
        EventType::DocumentFailed,
        EventType::DocumentDeleted,
        EventType::VersionIndexed,
        EventType::VersionReleased,
        EventType::VersionSuperseded,
        EventType::WorkRepealed,
        EventType::ArticlesChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::DocumentIndexed => "DocumentIndexed",
            EventType::DocumentFailed => "DocumentFailed",
            EventType::DocumentDeleted => "DocumentDeleted",
            EventType::VersionIndexed => "VersionIndexed",
            EventType::VersionReleased => "VersionReleased",
            EventType::VersionSuperseded => "VersionSuperseded",
            EventType::WorkRepealed => "WorkRepealed",
            EventType::ArticlesChanged => "ArticlesChanged",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// An event to record: its stable id (the same announcement always gets the same one), what it
/// is about, and its type's own fields.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub event_id: String,
    pub kind: EventType,
    pub doc_id: Option<&'a str>,
    pub work_id: Option<i64>,
    pub body: serde_json::Value,
}

/// Records `event` in the caller's transaction; a second record of the same id is nothing.
/// Returns whether it was new.
pub async fn record(c: &impl GenericClient, event: &NewEvent<'_>) -> Result<bool, DbError> {
    let n = c
        .execute_typed(
            "INSERT INTO event_outbox (event_id, detail_type, doc_id, work_id, detail, organ_id)
             VALUES ($1, $2, $3, $4, $5,
                     COALESCE((SELECT organ_id FROM documents WHERE doc_id = $3),
                              (SELECT organ_id FROM works WHERE work_id = $4), 'default'))
             ON CONFLICT (event_id) DO NOTHING",
            &[
                (&event.event_id, Type::VARCHAR),
                (&event.kind.as_str(), Type::VARCHAR),
                (&event.doc_id, Type::VARCHAR),
                (&event.work_id, Type::INT8),
                (&event.body, Type::JSONB),
            ],
        )
        .await?;
    Ok(n == 1)
}

/// An event taken for publication.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub seq: i64,
    pub event_id: String,
    pub kind: String,
    /// The type's own fields.
    pub body: serde_json::Value,
    pub created_at: DateTime<Utc>,
    /// The tenant of the document or work it announces: a consumer keeps to its own by it.
    pub organ_id: String,
    /// Publications tried, this one included.
    pub attempts: i32,
}

impl Outgoing {
    fn from_row(r: &tokio_postgres::Row) -> Outgoing {
        Outgoing {
            seq: r.get("seq"),
            event_id: r.get("event_id"),
            kind: r.get("detail_type"),
            body: r.get("detail"),
            created_at: r.get("created_at"),
            organ_id: r.get("organ_id"),
            attempts: r.get("attempts"),
        }
    }

    /// The event's `detail` as published: its id, type and time, then its own fields. Built from
    /// what was recorded only, so every publication of it is the same.
    pub fn detail(&self) -> serde_json::Value {
        let mut detail = serde_json::json!({
            "event_id": self.event_id,
            "type": self.kind,
            "occurred_at": self.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "organ_id": self.organ_id,
        });
        if let (Some(out), Some(own)) = (detail.as_object_mut(), self.body.as_object()) {
            for (k, v) in own {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        detail
    }
}

/// Takes up to `limit` unsent events that are due, oldest first, and holds them for `hold_secs`
/// (another publisher skips them meanwhile; one that dies holding them leaves them due again).
pub async fn take_due(
    c: &impl GenericClient,
    limit: i64,
    hold_secs: f64,
) -> Result<Vec<Outgoing>, DbError> {
    let rows = c
        .query_typed(
            "WITH due AS (
                 SELECT seq FROM event_outbox
                 WHERE sent_at IS NULL AND next_attempt_at <= NOW()
                 ORDER BY next_attempt_at, seq LIMIT $1
                 FOR UPDATE SKIP LOCKED)
             UPDATE event_outbox e
             SET next_attempt_at = NOW() + make_interval(secs => $2), attempts = e.attempts + 1
             FROM due WHERE e.seq = due.seq
             RETURNING e.seq, e.event_id, e.detail_type, e.detail, e.created_at, e.attempts,
                       e.organ_id",
            &[(&limit, Type::INT8), (&hold_secs, Type::FLOAT8)],
        )
        .await?;
    let mut events: Vec<Outgoing> = rows.iter().map(Outgoing::from_row).collect();
    events.sort_by_key(|e| e.seq);
    Ok(events)
}

/// EventBridge took these.
pub async fn mark_sent(c: &impl GenericClient, seqs: &[i64]) -> Result<u64, DbError> {
    if seqs.is_empty() {
        return Ok(0);
    }
    Ok(c.execute_typed(
        "UPDATE event_outbox SET sent_at = NOW(), last_error = ''
         WHERE seq = ANY($1) AND sent_at IS NULL",
        &[(&seqs, Type::INT8_ARRAY)],
    )
    .await?)
}

/// These were not taken: each is due again after its delay, with why.
pub async fn mark_unsent(
    c: &impl GenericClient,
    failed: &[(i64, String, f64)],
) -> Result<u64, DbError> {
    if failed.is_empty() {
        return Ok(0);
    }
    let seqs: Vec<i64> = failed.iter().map(|f| f.0).collect();
    let errors: Vec<String> = failed.iter().map(|f| f.1.clone()).collect();
    let delays: Vec<f64> = failed.iter().map(|f| f.2).collect();
    Ok(c.execute_typed(
        "UPDATE event_outbox e
         SET next_attempt_at = NOW() + make_interval(secs => f.delay), last_error = f.error
         FROM unnest($1::int8[], $2::text[], $3::float8[]) AS f(seq, error, delay)
         WHERE e.seq = f.seq AND e.sent_at IS NULL",
        &[
            (&seqs, Type::INT8_ARRAY),
            (&errors, Type::TEXT_ARRAY),
            (&delays, Type::FLOAT8_ARRAY),
        ],
    )
    .await?)
}

/// Sent events older than `older_than_secs` go (a consumer that needs history keeps its own);
/// unsent ones are never pruned. At most `limit` a call, so one sweep stays bounded.
pub async fn prune_sent(
    c: &impl GenericClient,
    older_than_secs: f64,
    limit: i64,
) -> Result<u64, DbError> {
    Ok(c.execute_typed(
        "DELETE FROM event_outbox WHERE seq IN (
             SELECT seq FROM event_outbox
             WHERE sent_at IS NOT NULL AND sent_at < NOW() - make_interval(secs => $1)
             ORDER BY sent_at LIMIT $2)",
        &[(&older_than_secs, Type::FLOAT8), (&limit, Type::INT8)],
    )
    .await?)
}

/// How far publication is behind: unsent events, and the age of the oldest, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Backlog {
    pub unsent: i64,
    pub oldest_secs: f64,
}

pub async fn backlog(c: &impl GenericClient) -> Result<Backlog, DbError> {
    let row = c
        .query_typed_one(
            "SELECT count(*) AS unsent,
                    COALESCE(EXTRACT(EPOCH FROM NOW() - min(created_at))::float8, 0) AS oldest
             FROM event_outbox WHERE sent_at IS NULL",
            &[],
        )
        .await?;
    Ok(Backlog {
        unsent: row.get("unsent"),
        oldest_secs: row.get("oldest"),
    })
}

/// A recorded event, for reading back (tests, the CLI).
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub outgoing: Outgoing,
    pub sent: bool,
}

/// Every event recorded after `after_seq`, oldest first, at most `limit`.
pub async fn recorded_after(
    c: &impl GenericClient,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<Recorded>, DbError> {
    let rows = c
        .query_typed(
            "SELECT seq, event_id, detail_type, detail, created_at, attempts, organ_id,
                    sent_at IS NOT NULL AS sent
             FROM event_outbox WHERE seq > $1 ORDER BY seq LIMIT $2",
            &[(&after_seq, Type::INT8), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Recorded {
            outgoing: Outgoing::from_row(r),
            sent: r.get("sent"),
        })
        .collect())
}
