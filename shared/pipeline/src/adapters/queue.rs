//! Where parse and index jobs are sent, how a failed delivery is held back (its backoff), and how
//! full a queue is (the sweeper's proof that a job was lost).

use async_trait::async_trait;
use aws_sdk_sqs::types::QueueAttributeName;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[error("queue {queue_url} is unavailable ({operation})")]
pub struct QueueError {
    pub queue_url: String,
    pub operation: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// A queue's messages by state (SQS's approximate counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
}

impl QueueDepth {
    pub fn is_empty(&self) -> bool {
        self.visible + self.in_flight + self.delayed == 0
    }
}

#[async_trait]
pub trait JobQueue: Send + Sync {
    async fn send(&self, queue_url: &str, body: String) -> Result<(), QueueError>;

    /// Keeps a received message hidden for `delay` from now: its backoff before the next delivery.
    async fn hold_back(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        delay: Duration,
    ) -> Result<(), QueueError>;

    async fn depth(&self, queue_url: &str) -> Result<QueueDepth, QueueError>;
}

pub struct SqsJobQueue {
    client: aws_sdk_sqs::Client,
}

impl SqsJobQueue {
    pub fn new(client: aws_sdk_sqs::Client) -> Self {
        SqsJobQueue { client }
    }
}

fn unavailable(
    queue_url: &str,
    operation: &'static str,
    source: impl std::error::Error + Send + Sync + 'static,
) -> QueueError {
    QueueError {
        queue_url: queue_url.to_string(),
        operation,
        source: Box::new(source),
    }
}

#[async_trait]
impl JobQueue for SqsJobQueue {
    async fn send(&self, queue_url: &str, body: String) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(queue_url)
            .message_body(body)
            .send()
            .await
            .map_err(|e| unavailable(queue_url, "SendMessage", e.into_service_error()))?;
        Ok(())
    }

    async fn hold_back(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        delay: Duration,
    ) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(queue_url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(docpipe_core::clock::whole_secs(delay).clamp(0, 43_200))
            .send()
            .await
            .map_err(|e| {
                unavailable(queue_url, "ChangeMessageVisibility", e.into_service_error())
            })?;
        Ok(())
    }

    async fn depth(&self, queue_url: &str) -> Result<QueueDepth, QueueError> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| unavailable(queue_url, "GetQueueAttributes", e.into_service_error()))?;
        let attributes = out.attributes.unwrap_or_default();
        let count = |name: QueueAttributeName| -> u64 {
            attributes
                .get(&name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(QueueDepth {
            visible: count(QueueAttributeName::ApproximateNumberOfMessages),
            in_flight: count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            delayed: count(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        })
    }
}
