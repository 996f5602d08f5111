//! Where parse and index jobs are sent.

use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
#[error("cannot send to queue {queue_url}")]
pub struct QueueError {
    pub queue_url: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

#[async_trait]
pub trait JobQueue: Send + Sync {
    async fn send(&self, queue_url: &str, body: String) -> Result<(), QueueError>;
}

pub struct SqsJobQueue {
    client: aws_sdk_sqs::Client,
}

impl SqsJobQueue {
    pub fn new(client: aws_sdk_sqs::Client) -> Self {
        SqsJobQueue { client }
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
            .map_err(|e| QueueError {
                queue_url: queue_url.to_string(),
                source: Box::new(e.into_service_error()),
            })?;
        Ok(())
    }
}
