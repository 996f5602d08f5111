//! Every fixture made by a real client decodes to what it says, and junk is refused with a reason.

use docpipe_core::events::{decode_notification, is_sqs_batch, Notification};
use helpers::{client_events_dir, workspace_root};
use serde_json::Value;

fn load(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn created(value: &Value) -> Vec<(String, String)> {
    match decode_notification(value).unwrap() {
        Notification::Created(objects) => objects.into_iter().map(|o| (o.bucket, o.key)).collect(),
        other => panic!("expected objects, got {other:?}"),
    }
}

#[test]
fn moto_sam_and_sqs_wrapped_events_name_the_same_key() {
    let events = client_events_dir();
    let want = vec![(
        "uploads".to_string(),
        "incoming/report 2026.pdf".to_string(),
    )];
    assert_eq!(
        created(&load(&events.join("s3-event-delivered-by-moto.json"))),
        want
    );
    assert_eq!(created(&load(&events.join("s3-put.json"))), want);

    let wrapped = load(&events.join("sqs-wrapping-s3-put.json"));
    assert!(is_sqs_batch(&wrapped));
    let batch: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_value(wrapped).unwrap();
    for record in batch.records {
        let body: Value = serde_json::from_str(record.body.as_deref().unwrap()).unwrap();
        assert_eq!(created(&body), want);
    }
}

#[test]
fn sqs_bodies_that_are_not_events_are_refused() {
    let events = client_events_dir();
    for name in [
        "sqs-receive-message.json",
        "sqs-receive-message-json-body.json",
    ] {
        let value = load(&events.join(name));
        assert!(is_sqs_batch(&value), "{name} is an SQS batch");
        let batch: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_value(value).unwrap();
        for record in batch.records {
            let body = record.body.unwrap_or_default();
            let decoded = docpipe_core::events::decode_notification_str(&body);
            assert!(decoded.is_err(), "{name}: {body:?} decoded as {decoded:?}");
        }
    }
}

#[test]
fn an_api_gateway_event_is_not_an_upload() {
    let value = load(&client_events_dir().join("apigateway-http-api-proxy.json"));
    let err = decode_notification(&value).unwrap_err();
    assert!(
        err.to_string().contains("not an upload notification"),
        "{err}"
    );
}

#[test]
fn every_store_event_in_the_repo_decodes() {
    let dir = workspace_root().join("events");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("store-") {
            continue;
        }
        seen += 1;
        let value = load(&path);
        if is_sqs_batch(&value) {
            let batch: aws_lambda_events::event::sqs::SqsEvent =
                serde_json::from_value(value).unwrap();
            for r in batch.records {
                let body: Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
                assert!(!created(&body).is_empty(), "{name}");
            }
        } else if name.contains("test-event") {
            assert_eq!(decode_notification(&value).unwrap(), Notification::Test);
        } else {
            let objects = created(&value);
            assert_eq!(objects.len(), 1, "{name}");
            assert!(
                objects[0].1.contains("report 2026.pdf"),
                "{name}: {:?}",
                objects[0]
            );
        }
    }
    assert!(seen >= 6, "only {seen} store events");
}
