//! The dev runner plays AWS's part locally: it long-polls a queue, builds the same `SqsEvent` Lambda's
//! event source mapping would, calls the same handler the Lambda binary runs, deletes what succeeded
//! and leaves the failures for redelivery after their visibility timeout.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use docpipe_pipeline::handlers::sqs::BatchReport;
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
/// mapping's BatchSize in template.yaml), gathering for up to `batching_window` as Lambda's poller
/// does. Returns `None` when the long poll found nothing.
pub async fn pump_once<O, H, Fut>(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    region: &str,
    wait_seconds: i32,
    batch_size: i32,
    batching_window: std::time::Duration,
    handler: H,
) -> Result<Option<BatchReport<O>>, PollError>
where
    H: FnOnce(SqsEvent) -> Fut,
    Fut: Future<Output = BatchReport<O>>,
{
    let poll_err = |operation, e: Box<dyn std::error::Error + Send + Sync>| PollError {
        queue_url: queue_url.to_string(),
        operation,
        source: e,
    };
    let messages = gather(sqs, queue_url, wait_seconds, batch_size, batching_window)
        .await
        .map_err(|e| poll_err("ReceiveMessage", Box::new(e.into_service_error())))?;
    if messages.is_empty() {
        return Ok(None);
    }
    let (event, receipts) = lambda_event(messages, &queue_arn(queue_url, region), region);
    let report = handler(event).await;
    delete_succeeded(sqs, queue_url, &receipts, &report.failed_ids())
        .await
        .map_err(|e| poll_err("DeleteMessageBatch", Box::new(e.into_service_error())))?;
    Ok(Some(report))
}

/// Up to `batch_size` messages, gathered for up to `batching_window` after the first arrives;
/// none when the long poll found nothing.
async fn gather(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    wait_seconds: i32,
    batch_size: i32,
    batching_window: std::time::Duration,
) -> Result<
    Vec<aws_sdk_sqs::types::Message>,
    aws_sdk_sqs::error::SdkError<aws_sdk_sqs::operation::receive_message::ReceiveMessageError>,
> {
    let gathering = std::time::Instant::now();
    let mut messages = Vec::new();
    loop {
        let want = (batch_size as usize)
            .saturating_sub(messages.len())
            .clamp(1, 10);
        let received = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(want as i32)
            .wait_time_seconds(if messages.is_empty() { wait_seconds } else { 0 })
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await?;
        let got = received.messages.unwrap_or_default();
        let none = got.is_empty();
        messages.extend(got);
        if messages.is_empty()
            || messages.len() >= batch_size as usize
            || gathering.elapsed() >= batching_window
        {
            return Ok(messages);
        }
        if none {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}

/// The batch as Lambda's poller hands it to the function, and each message's id and receipt.
fn lambda_event(
    messages: Vec<aws_sdk_sqs::types::Message>,
    arn: &str,
    region: &str,
) -> (SqsEvent, Vec<(String, String)>) {
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
        record.event_source_arn = Some(arn.to_string());
        record.aws_region = Some(region.to_string());
        receipts.push((
            m.message_id.unwrap_or_default(),
            m.receipt_handle.unwrap_or_default(),
        ));
        event.records.push(record);
    }
    (event, receipts)
}

/// Deletes the messages the function did not report as failed, as Lambda does with a partial
/// batch response.
async fn delete_succeeded(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    receipts: &[(String, String)],
    failed: &[&str],
) -> Result<
    (),
    aws_sdk_sqs::error::SdkError<
        aws_sdk_sqs::operation::delete_message_batch::DeleteMessageBatchError,
    >,
> {
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
            .await?;
    }
    Ok(())
}

/// What CloudFormation sets on a queue from the template, set here on a local queue: the
/// visibility timeout, the retention, and the redrive policy to its dead-letter queue with the
/// template's `maxReceiveCount` (SQS itself then moves a message there, as in AWS).
pub async fn apply_queue_clock(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    dead_letter_queue_url: Option<&str>,
    visibility: std::time::Duration,
    retention: std::time::Duration,
    max_receive_count: u32,
) -> Result<(), PollError> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let poll_err = |operation, e: Box<dyn std::error::Error + Send + Sync>| PollError {
        queue_url: queue_url.to_string(),
        operation,
        source: e,
    };
    let mut request = sqs
        .set_queue_attributes()
        .queue_url(queue_url)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            docpipe_core::clock::whole_secs(visibility).to_string(),
        )
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            docpipe_core::clock::whole_secs(retention).to_string(),
        );
    if let Some(dlq) = dead_letter_queue_url {
        let arn = sqs
            .get_queue_attributes()
            .queue_url(dlq)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| poll_err("GetQueueAttributes", Box::new(e.into_service_error())))?
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .unwrap_or_default();
        let policy = serde_json::json!({
            "deadLetterTargetArn": arn,
            "maxReceiveCount": max_receive_count.to_string(),
        });
        request = request.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
    }
    request
        .send()
        .await
        .map_err(|e| poll_err("SetQueueAttributes", Box::new(e.into_service_error())))?;
    Ok(())
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
