//! SQS batches with partial batch responses: a message that failed transiently is reported back to
//! be redelivered; one that succeeded or failed permanently is acknowledged, so one bad message never
//! fails its batch.

use crate::adapters::JobQueue;
use crate::clock::Clock;
use crate::db::{run_events, Db};
use crate::error::StageError;
use crate::model::Stage;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use std::future::Future;

/// What happened to each message, for the dev runner's progress lines and for tests.
#[derive(Debug, Default)]
pub struct BatchReport {
    pub response: SqsBatchResponse,
    /// One human-readable line per message: what it did, or why it will be retried.
    pub lines: Vec<String>,
}

impl BatchReport {
    pub fn failed_ids(&self) -> Vec<&str> {
        self.response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }
}

/// Runs `handle` on each message in order. `Ok(line)` and permanent errors acknowledge the message;
/// transient errors report it as a batch item failure.
pub async fn for_each_message<F, Fut>(event: SqsEvent, mut handle: F) -> BatchReport
where
    F: FnMut(SqsMessage) -> Fut,
    Fut: Future<Output = Result<String, StageError>>,
{
    let mut report = BatchReport::default();
    for message in event.records {
        let id = message.message_id.clone().unwrap_or_default();
        match handle(message).await {
            Ok(line) => report.lines.push(line),
            Err(err) if err.is_retryable() && id.is_empty() => {
                // An empty item identifier makes Lambda fail the whole batch, redelivering the
                // messages that succeeded. SQS gives every message an id, so a record without
                // one did not come from a queue and has nowhere to go back to.
                let text = crate::error::chain(&err);
                tracing::error!(error = %text, class = "transient", "a record without a messageId failed: it cannot be returned to its queue");
                report
                    .lines
                    .push(format!("failed, not retried (no messageId): {text}"));
            }
            Err(err) if err.is_retryable() => {
                let text = crate::error::chain(&err);
                tracing::warn!(message_id = %id, error = %text, class = "transient", "message will be redelivered");
                report.lines.push(format!("retry later: {text}"));
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                report.response.batch_item_failures.push(failure);
            }
            Err(err) => {
                let text = crate::error::chain(&err);
                tracing::error!(message_id = %id, error = %text, class = "permanent", "message dropped");
                report.lines.push(format!("dropped: {text}"));
            }
        }
    }
    report
}

/// Which delivery of its message this is, and how to hold it back.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub receipt_handle: String,
    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
}

impl Delivery {
    pub fn of(message: &SqsMessage) -> Delivery {
        Delivery {
            receipt_handle: message.receipt_handle.clone().unwrap_or_default(),
            receive_count: message
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1),
        }
    }
}

/// Where a message that failed transiently goes back to, and on what clock.
pub struct Backoff<'a> {
    pub db: &'a Db,
    pub queue: &'a dyn JobQueue,
    /// The queue the message came from; `None` when nothing queued it (a direct invocation).
    pub queue_url: Option<&'a str>,
    pub clock: &'a Clock,
}

impl Backoff<'_> {
    /// A transient failure backs off: the message stays hidden for the clock's exponential, capped
    /// wait (rather than the queue's whole visibility timeout), and the run records the attempt's
    /// error and when the message comes back. Best effort on both counts: if SQS or PostgreSQL is
    /// what failed, the message still comes back after its visibility timeout.
    pub async fn after_failure(
        &self,
        delivery: &Delivery,
        run: Option<(i64, Stage)>,
        error: &StageError,
    ) {
        let delay = self.clock.backoff(delivery.receive_count);
        if let Some(url) = self
            .queue_url
            .filter(|_| !delivery.receipt_handle.is_empty())
        {
            if let Err(e) = self
                .queue
                .hold_back(url, &delivery.receipt_handle, delay)
                .await
            {
                tracing::warn!(error = %crate::error::chain(&e), "could not set the message's backoff; it returns after its visibility timeout");
            }
        }
        let Some((run_id, stage)) = run else { return };
        let text = crate::error::chain(error);
        let recorded = match self.db.client().await {
            Ok(client) => {
                run_events::record_backoff(
                    &**client,
                    run_id,
                    stage.as_str(),
                    delivery.receive_count as i32,
                    &text,
                    delay.as_secs_f64(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = recorded {
            tracing::warn!(run_id, error = %crate::error::chain(&e), "could not record the backoff");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_record_without_a_message_id_never_spoils_the_batch_response() {
        let mut batch = SqsEvent::default();
        for id in [Some("m-1"), None, Some("m-3")] {
            let mut m = SqsMessage::default();
            m.message_id = id.map(String::from);
            m.body = Some("x".into());
            batch.records.push(m);
        }
        let report = for_each_message(batch, |_| async {
            Err(StageError::transient(Stage::Store, "the database is down"))
        })
        .await;
        let ids: Vec<&str> = report
            .response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["m-1", "m-3"], "no empty identifier");
        assert_eq!(report.lines.len(), 3);
    }
}
