//! Events out of the outbox ([`docpipe_db::outbox`]) onto the bus. The functions publish right
//! after their batches, so an event reaches the bus within moments of its commit; the sweeper
//! publishes whatever is left (a send that failed, a function that died between its commit and
//! its send). An event leaves the outbox's queue only once the bus took it, so an outage delays
//! events and loses none: they are retried on the template's backoff until the bus answers.

use crate::adapters::event_bus::{BusEntry, EventBus, MAX_CALL_BYTES, MAX_ENTRIES};
use docpipe_core::clock::Clock;
use docpipe_db::{outbox, Db, DbError};
use std::sync::Arc;
use tracing::{info, warn};

/// Events a function publishes after one batch at most: its own (a batch of 10 index jobs records
/// about 40) and some of any backlog, without holding the invocation long.
pub const AFTER_BATCH: usize = 100;
/// Events one sweep publishes at most (an outage's backlog drains over several sweeps).
pub const PER_SWEEP: usize = 2_000;
/// Sent events one sweep prunes at most.
pub const PRUNED_PER_SWEEP: i64 = 10_000;
/// How long sent events stay in the outbox, for reading back, before the sweeper prunes them.
pub const KEEP_SENT_SECS: f64 = 7.0 * 24.0 * 3600.0;

/// The bus a process publishes to, if it was given one (`DOCPIPE_EVENT_BUS`). Without one, events
/// stay in the outbox, unsent, until a process with a bus publishes them.
#[derive(Clone, Default)]
pub struct Publisher {
    bus: Option<Arc<dyn EventBus>>,
}

/// What one publication did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Published {
    pub sent: usize,
    pub failed: usize,
}

impl Publisher {
    pub fn new(bus: Arc<dyn EventBus>) -> Self {
        Publisher { bus: Some(bus) }
    }

    /// A process with no bus.
    pub fn none() -> Self {
        Publisher { bus: None }
    }

    pub fn bus(&self) -> Option<&str> {
        self.bus.as_deref().map(|b| b.name())
    }

    /// Publishes up to `max` due events. Never fails its caller: what was not sent stays due,
    /// and why is logged.
    pub async fn flush(&self, db: &Db, clock: &Clock, max: usize) -> Published {
        let Some(bus) = &self.bus else {
            return Published::default();
        };
        match publish_due(db, bus.as_ref(), clock, max).await {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %docpipe_core::error::chain(&e), "events were not published: the database is unavailable; they stay in the outbox");
                Published::default()
            }
        }
    }
}

/// Takes due events a page at a time and puts them, in calls within EventBridge's limits, until
/// `max` were taken, none is due, or the bus failed a whole call (it is down: the rest waits).
pub async fn publish_due(
    db: &Db,
    bus: &dyn EventBus,
    clock: &Clock,
    max: usize,
) -> Result<Published, DbError> {
    let mut published = Published::default();
    // A taken event is held for a sweep period: if this process dies holding it, the next
    // sweep finds it due again.
    let hold = clock.sweep_period.as_secs_f64().max(1.0);
    let mut taken_total = 0;
    while taken_total < max {
        let page = (max - taken_total).min(MAX_ENTRIES * 5) as i64;
        let events = outbox::take_due(&**db.client().await?, page, hold).await?;
        if events.is_empty() {
            break;
        }
        taken_total += events.len();
        let full_page = events.len() as i64 == page;
        let mut bus_down = false;
        for call in calls(&events) {
            let entries: Vec<BusEntry> = call.iter().map(entry).collect();
            let results = if bus_down {
                // The bus failed a whole call of this page: the rest waits its backoff too.
                vec![
                    Some("not tried: the bus failed the call before it".to_string());
                    entries.len()
                ]
            } else {
                match bus.put(&entries).await {
                    Ok(r) => r,
                    Err(e) => vec![Some(docpipe_core::error::chain(&e)); entries.len()],
                }
            };
            let mut sent = Vec::new();
            let mut failed = Vec::new();
            for (event, result) in call.iter().zip(results) {
                match result {
                    None => sent.push(event.seq),
                    Some(why) => failed.push((event.seq, why, retry_after(clock, event.attempts))),
                }
            }
            bus_down |= sent.is_empty() && !failed.is_empty();
            let client = db.client().await?;
            outbox::mark_sent(&**client, &sent).await?;
            outbox::mark_unsent(&**client, &failed).await?;
            published.sent += sent.len();
            published.failed += failed.len();
            if let Some((_, why, delay)) = failed.first() {
                warn!(bus = bus.name(), failed = failed.len(), sent = sent.len(), retry_in_secs = delay, error = %why, "events not taken by the bus; they stay in the outbox");
            }
        }
        if bus_down || !full_page {
            break;
        }
    }
    if published.sent > 0 {
        info!(
            bus = bus.name(),
            sent = published.sent,
            failed = published.failed,
            "events published"
        );
    }
    Ok(published)
}

/// When an event the bus did not take is due again: the template's backoff, but never later than
/// the next sweep, so that events wait for the bus at most a sweep period after it is back (a
/// job's backoff cap, an hour in AWS, would hold them long after an outage ended; a failing call
/// per sweep costs nothing).
fn retry_after(clock: &Clock, attempts: i32) -> f64 {
    clock
        .backoff(attempts.max(1) as u32)
        .min(clock.sweep_period)
        .as_secs_f64()
        .max(1.0)
}

fn entry(e: &outbox::Outgoing) -> BusEntry {
    BusEntry {
        detail_type: e.kind.clone(),
        detail: e.detail().to_string(),
    }
}

/// The events in calls of at most [`MAX_ENTRIES`] and [`MAX_CALL_BYTES`], in order. An event
/// larger than a call alone (the outbox's events are bounded well below) goes alone, and the bus
/// answers why it refused it.
fn calls(events: &[outbox::Outgoing]) -> Vec<&[outbox::Outgoing]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, e) in events.iter().enumerate() {
        let size = entry(e).size();
        if i > start && (i - start == MAX_ENTRIES || bytes + size > MAX_CALL_BYTES) {
            out.push(&events[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < events.len() {
        out.push(&events[start..]);
    }
    out
}

/// Prunes sent events older than [`KEEP_SENT_SECS`], at most `limit`.
pub async fn prune(db: &Db, limit: i64) -> Result<u64, DbError> {
    outbox::prune_sent(&**db.client().await?, KEEP_SENT_SECS, limit).await
}

/// The backlog as a metric (the events-backlog alarm watches its age) and a log line.
pub async fn report_backlog(db: &Db) {
    let backlog = match db.client().await {
        Ok(client) => outbox::backlog(&**client).await,
        Err(e) => Err(e),
    };
    match backlog {
        Ok(b) => {
            docpipe_core::metrics::events_backlog(b.unsent, b.oldest_secs);
            if b.unsent > 0 {
                info!(
                    unsent = b.unsent,
                    oldest_secs = b.oldest_secs,
                    "events wait in the outbox"
                );
            }
        }
        Err(e) => {
            warn!(error = %docpipe_core::error::chain(&e), "the events' backlog could not be read")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i64, detail_bytes: usize) -> outbox::Outgoing {
        outbox::Outgoing {
            seq,
            event_id: format!("e{seq}"),
            kind: "DocumentIndexed".into(),
            body: serde_json::json!({ "pad": "x".repeat(detail_bytes) }),
            created_at: chrono::DateTime::from_timestamp(0, 0).unwrap(),
            organ_id: "default".into(),
            attempts: 1,
        }
    }

    #[test]
    fn calls_hold_at_most_ten_entries_and_256_kb_in_order() {
        let small: Vec<_> = (0..23).map(|i| event(i, 100)).collect();
        let sizes: Vec<usize> = calls(&small).iter().map(|c| c.len()).collect();
        assert_eq!(sizes, vec![10, 10, 3]);

        let big: Vec<_> = (0..5).map(|i| event(i, 100 * 1024)).collect();
        let split = calls(&big);
        assert_eq!(
            split.iter().map(|c| c.len()).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        for call in &split {
            let bytes: usize = call.iter().map(|e| entry(e).size()).sum();
            assert!(bytes <= MAX_CALL_BYTES, "{bytes}");
        }
        let order: Vec<i64> = split.iter().flat_map(|c| c.iter().map(|e| e.seq)).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn an_event_larger_than_a_call_goes_alone() {
        let events = vec![event(0, 10), event(1, 300 * 1024), event(2, 10)];
        let split = calls(&events);
        assert_eq!(
            split.iter().map(|c| c.len()).collect::<Vec<_>>(),
            vec![1, 1, 1]
        );
    }
}
