//! SQS batches with partial batch responses: a message that failed transiently is reported back to
//! be redelivered; one that succeeded or failed permanently is acknowledged, so one bad message never
//! fails its batch.

use crate::error::StageError;
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
