//! The dev runner plays AWS's part locally: it long-polls a queue, builds the same `SqsEvent` Lambda's
//! event source mapping would, calls the same handler the Lambda binary runs, deletes what succeeded
//! and leaves the failures for redelivery after their visibility timeout.

use crate::handlers::sqs::BatchReport;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use std::future::Future;

#[derive(Debug, thiserror::Error)]
#[error("queue {queue_url} is unavailable ({operation})")]
pub struct PollError {
    pub queue_url: String,
    pub operation: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The ARN Lambda would put on each record, derived from a queue URL
/// (`…/{account}/{name}` → `arn:aws:sqs:{region}:{account}:{name}`).
pub fn queue_arn(queue_url: &str, region: &str) -> String {
    let mut parts = queue_url.trim_end_matches('/').rsplit('/');
    let name = parts.next().unwrap_or_default();
    let account = parts.next().unwrap_or_default();
    format!("arn:aws:sqs:{region}:{account}:{name}")
}

/// One receive → handle → delete cycle, taking at most `batch_size` messages (the event source
/// mapping's BatchSize in template.yaml). Returns `None` when the long poll found nothing.
pub async fn pump_once<H, Fut>(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    region: &str,
    wait_seconds: i32,
    batch_size: i32,
    handler: H,
) -> Result<Option<BatchReport>, PollError>
where
    H: FnOnce(SqsEvent) -> Fut,
    Fut: Future<Output = BatchReport>,
{
    let poll_err = |operation, e: Box<dyn std::error::Error + Send + Sync>| PollError {
        queue_url: queue_url.to_string(),
        operation,
        source: e,
    };
    let received = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(batch_size.clamp(1, 10))
        .wait_time_seconds(wait_seconds)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .map_err(|e| poll_err("ReceiveMessage", Box::new(e.into_service_error())))?;
    let messages = received.messages.unwrap_or_default();
    if messages.is_empty() {
        return Ok(None);
    }
    let arn = queue_arn(queue_url, region);
    let mut event = SqsEvent::default();
    let mut receipts = Vec::with_capacity(messages.len());
    for m in messages {
        let mut record = SqsMessage::default();
        record.message_id = m.message_id.clone();
        record.receipt_handle = m.receipt_handle.clone();
        record.body = m.body.clone();
        record.md5_of_body = m.md5_of_body.clone();
        record.attributes = m
            .attributes
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.as_str().to_string(), v))
            .collect();
        record.event_source = Some("aws:sqs".into());
        record.event_source_arn = Some(arn.clone());
        record.aws_region = Some(region.to_string());
        receipts.push((
            m.message_id.unwrap_or_default(),
            m.receipt_handle.unwrap_or_default(),
        ));
        event.records.push(record);
    }
    let report = handler(event).await;
    let failed = report.failed_ids();
    let entries: Vec<_> = receipts
        .iter()
        .enumerate()
        .filter(|(_, (id, _))| !failed.contains(&id.as_str()))
        .map(|(i, (_, receipt))| {
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("m{i}"))
                .receipt_handle(receipt)
                .build()
                .expect("id and receipt handle are set")
        })
        .collect();
    if !entries.is_empty() {
        sqs.delete_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| poll_err("DeleteMessageBatch", Box::new(e.into_service_error())))?;
    }
    Ok(Some(report))
}

#[cfg(test)]
mod tests {
    #[test]
    fn arns_come_from_queue_urls() {
        assert_eq!(
            super::queue_arn(
                "http://127.0.0.1:5000/123456789012/docpipe-parse",
                "us-east-1"
            ),
            "arn:aws:sqs:us-east-1:123456789012:docpipe-parse"
        );
    }
}
