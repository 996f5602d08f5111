//! Where docpipe's events go: an EventBridge bus (`PutEvents`), one call per page of events.

use async_trait::async_trait;

/// One event as EventBridge takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct BusEntry {
    pub detail_type: String,
    /// JSON text.
    pub detail: String,
}

impl BusEntry {
    /// What EventBridge counts against its 256 KB per call: source, detail type and detail.
    pub fn size(&self) -> usize {
        docpipe_db::outbox::SOURCE.len() + self.detail_type.len() + self.detail.len()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("event bus {bus} is unavailable")]
pub struct BusError {
    pub bus: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// EventBridge's limits on one `PutEvents` call.
pub const MAX_ENTRIES: usize = 10;
pub const MAX_CALL_BYTES: usize = 256 * 1024;

#[async_trait]
pub trait EventBus: Send + Sync {
    /// The bus's name, for logs.
    fn name(&self) -> &str;

    /// Puts at most [`MAX_ENTRIES`] entries of at most [`MAX_CALL_BYTES`] together. Per entry: `None`
    /// when the bus took it, else why not (a partial failure: retry that one). `Err` when the call
    /// itself failed: none was taken.
    async fn put(&self, entries: &[BusEntry]) -> Result<Vec<Option<String>>, BusError>;
}

pub struct EventBridgeBus {
    client: aws_sdk_eventbridge::Client,
    bus: String,
}

impl EventBridgeBus {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: String) -> Self {
        EventBridgeBus { client, bus }
    }
}

#[async_trait]
impl EventBus for EventBridgeBus {
    fn name(&self) -> &str {
        &self.bus
    }

    async fn put(&self, entries: &[BusEntry]) -> Result<Vec<Option<String>>, BusError> {
        let fail = |e: Box<dyn std::error::Error + Send + Sync>| BusError {
            bus: self.bus.clone(),
            source: e,
        };
        let request = entries
            .iter()
            .map(|e| {
                aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                    .source(docpipe_db::outbox::SOURCE)
                    .detail_type(&e.detail_type)
                    .detail(&e.detail)
                    .event_bus_name(&self.bus)
                    .build()
            })
            .collect::<Vec<_>>();
        let out = self
            .client
            .put_events()
            .set_entries(Some(request))
            .send()
            .await
            .map_err(|e| fail(Box::new(e)))?;
        let results = out.entries();
        Ok((0..entries.len())
            .map(|i| match results.get(i) {
                Some(r) if r.error_code().is_none() && r.event_id().is_some() => None,
                Some(r) => Some(format!(
                    "{}: {}",
                    r.error_code().unwrap_or("no event id"),
                    r.error_message().unwrap_or_default()
                )),
                None => Some("EventBridge answered for fewer entries than were sent".into()),
            })
            .collect())
    }
}
