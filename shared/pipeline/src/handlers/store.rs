//! The store function: every shape of upload notification in, stored documents out.

use super::lambda::Function;
use super::sqs::{handle_messages_until, Announce, Backoff, BatchReport, MessageHandler};
use crate::error::StageError;
use crate::services::StoreService;
use crate::stages::store::{store_object, StoreOutcome};
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use docpipe_core::events::{self, Notification};
use docpipe_core::model::Stage;
use serde_json::Value;

/// Lambda's entry: an SQS batch (from the store-events queue), or a notification delivered directly
/// (S3 trigger, EventBridge, an S3-compatible store). A direct invocation that fails transiently
/// returns the error so that Lambda's own retry takes it again.
pub async fn handle_event(service: &StoreService, event: Value) -> Result<Value, StageError> {
    if events::is_sqs_batch(&event) {
        let batch: SqsEvent = serde_json::from_value(event)
            .map_err(|e| StageError::failed(Stage::Store, format!("malformed SQS event: {e}")))?;
        let report = handle_sqs(service, batch).await;
        return Ok(serde_json::to_value(report.response).expect("batch response serialises"));
    }
    let notified = handle_notification(service, &event).await?;
    Ok(serde_json::json!({ "result": notified.to_string() }))
}

/// A batch within the store function's time: it ends before the function's timeout (the
/// template's, as the clock holds it) by leaving the messages it has no time for to another
/// invocation.
pub async fn handle_sqs(service: &StoreService, batch: SqsEvent) -> BatchReport<Notified> {
    let deadline = std::time::Instant::now() + service.config.clock.store.function_timeout;
    handle_sqs_until(service, batch, deadline).await
}

pub async fn handle_sqs_until(
    service: &StoreService,
    batch: SqsEvent,
    deadline: std::time::Instant,
) -> BatchReport<Notified> {
    handle_messages_until(service, batch, Some(deadline)).await
}

/// The slowest rate at which the store stage reads an object (HEAD, then a streaming SHA-256 of
/// the whole body from S3), with room to spare: Lambda's S3 reads at 512 MB run at 50–90 MB/s.
const STORE_BYTES_PER_SEC: f64 = 20.0 * 1024.0 * 1024.0;
/// What storing costs beyond reading the bytes (the lookups, the transaction, the parse job).
const STORE_FIXED_SECS: f64 = 2.0;

/// The time the objects a notification names may take to store, from the sizes it gives.
pub(crate) fn time_to_store(body: &str) -> std::time::Duration {
    let bytes: u64 = match events::decode_notification_str(body) {
        Ok(Notification::Created(objects)) => objects.iter().filter_map(|o| o.size).sum(),
        _ => 0,
    };
    std::time::Duration::from_secs_f64(STORE_FIXED_SECS + bytes as f64 / STORE_BYTES_PER_SEC)
}

#[async_trait::async_trait]
impl MessageHandler for StoreService {
    type Outcome = Notified;

    fn events(&self) -> Option<Announce<'_>> {
        Some(Announce {
            db: &self.db,
            publisher: &self.events,
            clock: &self.config.clock,
        })
    }

    fn backoff(&self) -> Option<Backoff<'_>> {
        Some(Backoff {
            db: &self.db,
            queue: self.queue.as_ref(),
            queue_url: self.config.store_queue_url.as_deref(),
            clock: &self.config.clock,
        })
    }

    /// A store-events message: the notification is its body.
    async fn handle(&self, message: &SqsMessage) -> Result<Notified, StageError> {
        let body = message.body.as_deref().unwrap_or_default();
        let value: Value = serde_json::from_str(body).map_err(|e| {
            StageError::failed(Stage::Store, format!("message body is not JSON: {e}"))
        })?;
        handle_notification(self, &value).await
    }

    fn time_needed(&self, message: &SqsMessage) -> Option<std::time::Duration> {
        Some(time_to_store(message.body.as_deref().unwrap_or_default()))
    }
}

#[async_trait::async_trait]
impl Function for StoreService {
    type Event = Value;
    type Response = Value;
    type Error = StageError;

    async fn invoke(&self, event: Value) -> Result<Value, StageError> {
        handle_event(self, event).await
    }
}

/// What a notification came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notified {
    /// S3's test event.
    Test,
    /// Not an upload, and why.
    Ignored(String),
    /// What became of each object it named, in order.
    Objects(Vec<ObjectStored>),
}

/// One object of a notification: the store stage's outcome, or `Err(reason)` when the stage
/// refused it with no document to fail (recorded as an intake failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectStored {
    pub key: String,
    pub outcome: Result<StoreOutcome, String>,
}

impl Notified {
    /// The objects' outcomes (none for a test or an ignored event).
    pub fn objects(&self) -> &[ObjectStored] {
        match self {
            Notified::Objects(objects) => objects,
            Notified::Test | Notified::Ignored(_) => &[],
        }
    }

    /// The store outcome of its only object; panics when it named none, several, or one refused.
    #[cfg(any(test, feature = "testing"))]
    pub fn only(&self) -> &StoreOutcome {
        match self.objects() {
            [ObjectStored {
                outcome: Ok(outcome),
                ..
            }] => outcome,
            other => panic!("not one stored object: {other:?}"),
        }
    }
}

impl std::fmt::Display for Notified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notified::Test => f.write_str("test event acknowledged"),
            Notified::Ignored(why) => write!(f, "ignored: {why}"),
            Notified::Objects(objects) => {
                for (i, object) in objects.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    match &object.outcome {
                        Ok(outcome) => f.write_str(&describe(&object.key, outcome))?,
                        Err(reason) => write!(f, "{}: refused: {reason}", object.key)?,
                    }
                }
                Ok(())
            }
        }
    }
}

/// Stores every object a notification names; the outcome says what became of each.
pub async fn handle_notification(
    service: &StoreService,
    value: &Value,
) -> Result<Notified, StageError> {
    let notification = match events::decode_notification(value) {
        Ok(notification) => notification,
        Err(e) => {
            // A notification that names an object (say, with a key no row can hold) is an
            // upload that reached the store function: it is recorded, not just logged.
            let reason = e.to_string();
            for (bucket, key) in events::named_objects(value) {
                record_intake_failure(service, &bucket, &key, &reason, 0).await?;
            }
            return Err(StageError::failed(Stage::Store, reason));
        }
    };
    let objects = match notification {
        Notification::Test => {
            tracing::info!(stage = "store", "s3:TestEvent acknowledged");
            return Ok(Notified::Test);
        }
        Notification::Ignored(why) => {
            tracing::info!(stage = "store", reason = %why, "notification ignored");
            return Ok(Notified::Ignored(why));
        }
        Notification::Created(objects) => objects,
    };
    let deps = service.deps();
    let mut stored = Vec::with_capacity(objects.len());
    for object in &objects {
        let started = std::time::Instant::now();
        let outcome = match store_object(&deps, object).await {
            Ok(outcome) => outcome,
            Err(e) => {
                docpipe_core::metrics::stage_failed(Stage::Store, e.class());
                if e.is_retryable() {
                    return Err(e);
                }
                // Failed with no document to fail (a value the schema refuses, say): the
                // upload ends as a recorded intake failure, and the other objects go on.
                let reason = docpipe_core::error::chain(&e);
                record_intake_failure(service, &object.bucket, &object.key, &reason, 0).await?;
                stored.push(ObjectStored {
                    key: object.key.clone(),
                    outcome: Err(reason),
                });
                continue;
            }
        };
        match &outcome {
            StoreOutcome::Stored { .. } => docpipe_core::metrics::stage_completed(
                Stage::Store,
                started.elapsed().as_millis() as u64,
            ),
            StoreOutcome::Rejected { .. }
            | StoreOutcome::ObjectMissing {
                failed_run: Some(_),
                ..
            } => docpipe_core::metrics::stage_failed(Stage::Store, "permanent"),
            _ => {}
        }
        stored.push(ObjectStored {
            key: object.key.clone(),
            outcome: Ok(outcome),
        });
    }
    Ok(Notified::Objects(stored))
}

/// Records an upload that did not become a document. A database that cannot take the record makes
/// the event transient: it comes back rather than vanish.
pub(crate) async fn record_intake_failure(
    service: &StoreService,
    bucket: &str,
    key: &str,
    reason: &str,
    deliveries: i32,
) -> Result<(), StageError> {
    let client = service
        .db
        .client()
        .await
        .map_err(|e| StageError::transient(Stage::Store, e))?;
    docpipe_db::intake::record(&**client, bucket, key, reason, deliveries)
        .await
        .map_err(|e| StageError::transient(Stage::Store, e))?;
    tracing::error!(
        stage = "store",
        bucket,
        key,
        reason,
        "upload refused: recorded as an intake failure"
    );
    Ok(())
}

fn describe(key: &str, outcome: &StoreOutcome) -> String {
    match outcome {
        StoreOutcome::Stored { doc_id, run_id } => {
            format!("{doc_id} run {run_id}: stored ({key}), parse queued")
        }
        StoreOutcome::Duplicate {
            doc_id,
            run_id,
            parse_resent,
        } => format!(
            "{doc_id} run {}: duplicate event, no new run{}",
            run_id.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            if *parse_resent {
                ", parse re-queued"
            } else {
                ""
            }
        ),
        StoreOutcome::Rejected {
            doc_id,
            run_id,
            reason,
        } => format!("{doc_id} run {run_id}: failed at store: {reason}"),
        StoreOutcome::Stale { doc_id, why } => format!("{doc_id}: stale event dropped: {why}"),
        StoreOutcome::ObjectMissing { doc_id, failed_run } => match failed_run {
            Some(run) => format!("{doc_id} run {run}: failed at store: {key} no longer exists"),
            None => format!("{doc_id}: {key} no longer exists, nothing to do"),
        },
    }
}
