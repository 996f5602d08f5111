//! Tolerant decoding of every shape an upload notification arrives in: S3's own event (direct or
//! inside an SQS message), EventBridge's `Object Created`, and S3-compatible stores such as MinIO.
//!
//! `aws_lambda_events::s3::S3Event` refuses events that lack `userIdentity`, `sequencer` or
//! `versionId`, which moto and MinIO omit, so these structs make every field but the key optional.

use serde::Deserialize;
use serde_json::Value;

/// One object that a notification says was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub bucket: String,
    /// The key, decoded.
    pub key: String,
    /// The key as the notification spelled it, when decoding changed it: a key that really contains
    /// `+` or `%` is tried this way if the decoded one does not exist.
    pub raw_key: Option<String>,
    pub size: Option<u64>,
    pub etag: Option<String>,
    pub event_name: String,
    /// When the event says the object was created (S3's `eventTime`, EventBridge's `time`), in
    /// milliseconds since the epoch; `None` when absent or unreadable.
    pub event_time_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// Objects were created.
    Created(Vec<ObjectRef>),
    /// `s3:TestEvent`, sent when a notification is configured: nothing to do.
    Test,
    /// A well-formed notification this pipeline does not act on (say `ObjectRemoved`), and why.
    Ignored(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an upload notification: {0}")]
pub struct DecodeError(pub String);

/// The most records one notification may carry. S3, EventBridge and MinIO send one per event;
/// a body with thousands (an SQS message holds about 1,900 in 256 KB) would cost a HeadObject and
/// a transaction each and run the function out of time, taking its whole batch with it.
pub const MAX_RECORDS: usize = 100;

/// The longest key S3 allows, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// A key no object can have, or no row can hold, is refused before any lookup: PostgreSQL's text
/// cannot contain NUL, and S3 answers an over-long key with an error that would look transient.
fn check_key(key: &str) -> Result<(), DecodeError> {
    if key.contains('\0') {
        return Err(DecodeError(format!(
            "the object key {key:?} contains a NUL character, which no document can be named by"
        )));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(DecodeError(format!(
            "an object key of {} bytes, longer than the {MAX_KEY_BYTES} bytes S3 allows",
            key.len()
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct Records {
    #[serde(rename = "Records")]
    records: Vec<S3Record>,
}

#[derive(Deserialize)]
struct S3Record {
    #[serde(rename = "eventName", default)]
    event_name: String,
    #[serde(rename = "eventTime", default)]
    event_time: Option<String>,
    s3: S3Entity,
}

#[derive(Deserialize)]
struct S3Entity {
    bucket: BucketEntity,
    object: ObjectEntity,
}

#[derive(Deserialize)]
struct BucketEntity {
    name: String,
}

#[derive(Deserialize)]
struct ObjectEntity {
    key: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    size: Option<u64>,
    #[serde(rename = "eTag", alias = "etag", default)]
    etag: Option<String>,
}

#[derive(Deserialize)]
struct EventBridgeEvent {
    #[serde(rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    time: Option<String>,
    detail: EventBridgeDetail,
}

#[derive(Deserialize)]
struct EventBridgeDetail {
    bucket: BucketEntity,
    object: ObjectEntity,
}

/// Sizes arrive as numbers from S3 and as strings from some S3-compatible stores.
fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    })
}

/// The (bucket, key) pairs a notification names, read as loosely as possible: for the record of a
/// notification that could not be decoded. Keys are decoded as S3 encodes them, and cut so that
/// the record fits.
pub fn named_objects(value: &Value) -> Vec<(String, String)> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let mut named = Vec::new();
    if let Some(records) = value.get("Records").and_then(Value::as_array) {
        for record in records.iter().take(MAX_RECORDS) {
            let s3 = record.get("s3");
            let bucket = text(s3.and_then(|s| s.pointer("/bucket/name")));
            let key = decode_key(&text(s3.and_then(|s| s.pointer("/object/key"))));
            if !bucket.is_empty() || !key.is_empty() {
                named.push((bucket, key.replace('\0', "")));
            }
        }
    } else if let Some(detail) = value.get("detail") {
        let bucket = text(detail.pointer("/bucket/name"));
        let key = text(detail.pointer("/object/key"));
        if !bucket.is_empty() || !key.is_empty() {
            named.push((bucket, key.replace('\0', "")));
        }
    }
    named
}

/// An RFC 3339 time as milliseconds since the epoch.
fn epoch_ms(time: Option<&str>) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(time?)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// S3 notification keys are form-urlencoded: `+` is a space, then percent-decoding.
pub(crate) fn decode_key(raw: &str) -> String {
    form_urlencoded::parse(format!("k={raw}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| raw.to_string())
}

/// Whether a JSON value is an SQS batch (Lambda's SQS trigger) rather than a notification.
pub fn is_sqs_batch(value: &Value) -> bool {
    value
        .get("Records")
        .and_then(|r| r.get(0))
        .and_then(|r| r.get("eventSource"))
        .and_then(Value::as_str)
        == Some("aws:sqs")
}

pub fn decode_notification_str(body: &str) -> Result<Notification, DecodeError> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| DecodeError(format!("body is not JSON: {e}")))?;
    decode_notification(&value)
}

pub fn decode_notification(value: &Value) -> Result<Notification, DecodeError> {
    if !value.is_object() {
        return Err(DecodeError("expected a JSON object".into()));
    }
    if value.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        return Ok(Notification::Test);
    }
    if value.get("detail-type").is_some() {
        return decode_eventbridge(value);
    }
    if value.get("Records").is_some() {
        if is_sqs_batch(value) {
            return Err(DecodeError(
                "an SQS batch, not a notification: hand it to the SQS handler".into(),
            ));
        }
        return decode_records(value);
    }
    Err(DecodeError(
        "no `Records`, `detail-type` or `Event` field".into(),
    ))
}

fn decode_records(value: &Value) -> Result<Notification, DecodeError> {
    let records: Records = serde_json::from_value(value.clone())
        .map_err(|e| DecodeError(format!("malformed S3 records: {e}")))?;
    if records.records.len() > MAX_RECORDS {
        return Err(DecodeError(format!(
            "{} records in one notification, more than {MAX_RECORDS} (S3 sends one per event)",
            records.records.len()
        )));
    }
    let mut created = Vec::new();
    let mut ignored = Vec::new();
    for record in records.records {
        // AWS says `ObjectCreated:Put`, MinIO `s3:ObjectCreated:Put`.
        let name = record.event_name.trim_start_matches("s3:");
        if !name.starts_with("ObjectCreated:") {
            ignored.push(record.event_name.clone());
            continue;
        }
        let key = decode_key(&record.s3.object.key);
        if key.is_empty() {
            return Err(DecodeError("a record has an empty object key".into()));
        }
        check_key(&key)?;
        created.push(ObjectRef {
            bucket: record.s3.bucket.name,
            raw_key: (key != record.s3.object.key).then_some(record.s3.object.key),
            key,
            size: record.s3.object.size,
            etag: record
                .s3
                .object
                .etag
                .map(|e| e.trim_matches('"').to_string()),
            event_name: record.event_name,
            event_time_ms: epoch_ms(record.event_time.as_deref()),
        });
    }
    if created.is_empty() {
        if ignored.is_empty() {
            return Err(DecodeError("`Records` is empty".into()));
        }
        return Ok(Notification::Ignored(format!(
            "not an object creation: {}",
            ignored.join(", ")
        )));
    }
    Ok(Notification::Created(created))
}

fn decode_eventbridge(value: &Value) -> Result<Notification, DecodeError> {
    let event: EventBridgeEvent = serde_json::from_value(value.clone())
        .map_err(|e| DecodeError(format!("malformed EventBridge event: {e}")))?;
    if event.detail_type != "Object Created" {
        return Ok(Notification::Ignored(format!(
            "EventBridge `{}` is not an object creation",
            event.detail_type
        )));
    }
    // EventBridge spells keys as they are; the encoded reading is kept as the fallback.
    let raw = event.detail.object.key;
    if raw.is_empty() {
        return Err(DecodeError("the event has an empty object key".into()));
    }
    check_key(&raw)?;
    let decoded = decode_key(&raw);
    Ok(Notification::Created(vec![ObjectRef {
        bucket: event.detail.bucket.name,
        raw_key: (decoded != raw && check_key(&decoded).is_ok()).then_some(decoded),
        key: raw,
        size: event.detail.object.size,
        etag: event.detail.object.etag,
        event_name: "ObjectCreated:EventBridge".into(),
        event_time_ms: epoch_ms(event.time.as_deref()),
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_all_three_ways() {
        assert_eq!(
            decode_key("incoming%2Freport+2026.pdf"),
            "incoming/report 2026.pdf"
        );
        assert_eq!(
            decode_key("incoming/report+2026.pdf"),
            "incoming/report 2026.pdf"
        );
        assert_eq!(
            decode_key("incoming/report%202026.pdf"),
            "incoming/report 2026.pdf"
        );
        assert_eq!(decode_key("uploads/%E6%B3%95.md"), "uploads/法.md");
    }

    #[test]
    fn test_events_and_removals_are_recognised() {
        let test = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-11-30T00:00:00Z","Bucket":"b","RequestId":"x","HostId":"y"}"#;
        assert_eq!(decode_notification_str(test).unwrap(), Notification::Test);
        let removed = r#"{"Records":[{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}"#;
        assert!(matches!(
            decode_notification_str(removed).unwrap(),
            Notification::Ignored(_)
        ));
    }

    #[test]
    fn junk_is_refused_with_a_reason() {
        for junk in [
            "",
            "null",
            "[]",
            "42",
            "{}",
            r#"{"Records":[]}"#,
            r#"{"Records":[{"eventName":"ObjectCreated:Put"}]}"#,
            r#"{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":""}}}]}"#,
        ] {
            let err = decode_notification_str(junk).unwrap_err();
            assert!(!err.0.is_empty(), "{junk:?}");
        }
    }

    #[test]
    fn keys_no_object_can_have_and_floods_of_records_are_refused() {
        let record = |key: &str| {
            serde_json::json!({"eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "b"}, "object": {"key": key}}})
        };
        for key in ["a%00b", "a\u{0}b", &"k".repeat(MAX_KEY_BYTES + 1)] {
            let event = serde_json::json!({ "Records": [record(key)] });
            let err = decode_notification(&event).unwrap_err();
            assert!(
                err.0.contains("NUL") || err.0.contains("S3 allows"),
                "{err}"
            );
        }
        let eventbridge = serde_json::json!({"detail-type": "Object Created",
            "detail": {"bucket": {"name": "b"}, "object": {"key": "a\u{0}b"}}});
        assert!(decode_notification(&eventbridge).is_err());
        let spelled = serde_json::json!({"detail-type": "Object Created",
            "detail": {"bucket": {"name": "b"}, "object": {"key": "a%00b"}}});
        let Notification::Created(objs) = decode_notification(&spelled).unwrap() else {
            panic!("not created")
        };
        assert_eq!(
            (objs[0].key.as_str(), objs[0].raw_key.as_deref()),
            ("a%00b", None)
        );

        let at_most = vec![record("k"); MAX_RECORDS];
        assert!(decode_notification(&serde_json::json!({ "Records": at_most })).is_ok());
        let flood = vec![record("k"); MAX_RECORDS + 1];
        let err = decode_notification(&serde_json::json!({ "Records": flood })).unwrap_err();
        assert!(err.0.contains("101 records"), "{err}");
    }

    #[test]
    fn minio_records_with_string_sizes_decode() {
        let minio = r#"{"EventName":"s3:ObjectCreated:Put","Key":"docs/uploads/a+b.pdf","Records":[{"eventVersion":"2.0","eventSource":"minio:s3","eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":"docs"},"object":{"key":"uploads%2Fa%2Bb.pdf","size":"12","eTag":"\"abc\""}}}]}"#;
        let Notification::Created(objs) = decode_notification_str(minio).unwrap() else {
            panic!("not created")
        };
        assert_eq!(objs[0].key, "uploads/a+b.pdf");
        assert_eq!(objs[0].size, Some(12));
        assert_eq!(objs[0].etag.as_deref(), Some("abc"));
    }
}
