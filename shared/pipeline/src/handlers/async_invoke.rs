//! Lambda's asynchronous invocation, the way S3's direct notifications (`NotificationMode=direct`)
//! reach the store function, played locally: nothing here runs store asynchronously otherwise.
//!
//! Faithful to what AWS documents and no more: the event is tried once, then retried up to
//! `MaximumRetryAttempts` times (AWS waits about one minute, then two; the caller passes those
//! waits on its clock), and an event that still fails goes to the function's on-failure
//! destination as an *invocation record*, not as the event itself.

use crate::adapters::JobQueue;
use serde_json::{json, Value};
use std::future::Future;
use std::time::Duration;

/// What AWS waits before each retry of a failed asynchronous invocation.
pub(crate) const RETRY_WAITS: [Duration; 2] = [Duration::from_secs(60), Duration::from_secs(120)];

#[derive(Debug, Clone, PartialEq)]
pub enum AsyncOutcome {
    /// An attempt succeeded; its answer.
    Succeeded { attempts: u32, response: Value },
    /// Every attempt failed: the invocation record went to the destination.
    SentToDestination { attempts: u32 },
}

/// Invokes `handler` with `event` as Lambda's async invocation does. `scale` shrinks the waits
/// between attempts as the dev runner's clock does.
pub async fn invoke<F, Fut, E>(
    function_arn: &str,
    event: Value,
    max_retries: u32,
    scale: f64,
    destination: (&dyn JobQueue, &str),
    mut handler: F,
) -> Result<AsyncOutcome, crate::adapters::QueueError>
where
    F: FnMut(Value) -> Fut,
    Fut: Future<Output = Result<Value, E>>,
    E: std::fmt::Display,
{
    let mut last_error = String::new();
    let attempts = max_retries.min(2) + 1;
    for attempt in 1..=attempts {
        if attempt > 1 {
            let wait = RETRY_WAITS[(attempt - 2) as usize].mul_f64(scale);
            tokio::time::sleep(wait).await;
        }
        match handler(event.clone()).await {
            Ok(response) => {
                return Ok(AsyncOutcome::Succeeded {
                    attempts: attempt,
                    response,
                })
            }
            Err(e) => last_error = e.to_string(),
        }
    }
    let record = invocation_record(function_arn, &event, attempts, &last_error);
    destination
        .0
        .send(destination.1, record.to_string())
        .await?;
    Ok(AsyncOutcome::SentToDestination { attempts })
}

/// The record Lambda sends to an on-failure destination after the retries are exhausted.
pub(crate) fn invocation_record(
    function_arn: &str,
    event: &Value,
    attempts: u32,
    error: &str,
) -> Value {
    json!({
        "version": "1.0",
        "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "requestContext": {
            "requestId": format!("{:032x}", rand::random::<u128>()),
            "functionArn": format!("{function_arn}:$LATEST"),
            "condition": "RetriesExhausted",
            "approximateInvokeCount": attempts,
        },
        "requestPayload": event,
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        },
        "responsePayload": { "errorType": "StageError", "errorMessage": error },
    })
}

/// The parts of an invocation record the DLQ function needs: the original event, how often it was
/// invoked, and the last error. `None` when `body` is not one.
pub(crate) fn decode_invocation_record(body: &Value) -> Option<(Value, u32, String)> {
    let payload = body.get("requestPayload")?.clone();
    let context = body.get("requestContext")?;
    let attempts = context
        .get("approximateInvokeCount")
        .and_then(Value::as_u64)
        .unwrap_or(0) as u32;
    let error = body
        .pointer("/responsePayload/errorMessage")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Some((payload, attempts, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_record_gives_back_its_event_attempts_and_error() {
        let event = json!({"Records": [{"eventName": "ObjectCreated:Put"}]});
        let record = invocation_record(
            "arn:aws:lambda:us-east-1:1:function:store",
            &event,
            3,
            "db down",
        );
        assert_eq!(
            decode_invocation_record(&record),
            Some((event, 3, "db down".to_string()))
        );
        assert_eq!(decode_invocation_record(&json!({"Records": []})), None);
    }
}
