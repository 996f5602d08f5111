//! Every upload that reaches the store function ends as a document or as a recorded intake
//! failure; data errors are permanent; dead letters point at the right run. Real PostgreSQL
//! through PgBouncer, moto's S3 and SQS, the handlers the Lambda binaries run.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use docpipe_core::model::{DocStatus, Stage};
use docpipe_db::{documents, intake};
use docpipe_pipeline::error::StageError;
use docpipe_pipeline::handlers::dlq::{DeadLetterOutcome, GaveUp};
use docpipe_pipeline::handlers::store::{handle_notification, ObjectStored};
use docpipe_pipeline::stages::store::StoreOutcome;
use docpipe_pipeline::upkeep::give_up::GiveUpOutcome;
use helpers::{law_paths, read_law, s3_put_event, Pipeline};
use serde_json::json;

async fn intake_failures(p: &Pipeline) -> Vec<intake::IntakeFailure> {
    intake::list(&**p.db.client().await, "default", 100, None)
        .await
        .unwrap()
}

async fn put_with_content_type(p: &Pipeline, key: &str, body: &[u8], content_type: &[u8]) {
    // Presigned without the Content-Type, so that the header can carry any bytes a client sends.
    let url = p
        .aws
        .clients
        .s3
        .put_object()
        .bucket(&p.aws.bucket)
        .key(key)
        .presigned(
            aws_sdk_s3::presigning::PresigningConfig::expires_in(std::time::Duration::from_secs(
                300,
            ))
            .unwrap(),
        )
        .await
        .unwrap();
    let answer = reqwest::Client::new()
        .put(url.uri())
        .header(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_bytes(content_type).unwrap(),
        )
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
}

#[tokio::test]
async fn values_wider_than_their_column_are_cut_at_a_character_and_kept_whole_in_metadata() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, law) = read_law(&law_paths()[0]);
    // A 230-character Content-Type (the probe that failed the store forever), and a file name of
    // 600 characters, 200 of them three bytes long in UTF-8: a 1,005-byte key, under S3's 1,024.
    let content_type = format!("text/markdown; x-note={}", "a".repeat(208));
    assert_eq!(content_type.chars().count(), 230);
    let file_name = format!("{}{}.md", "法".repeat(200), "b".repeat(397));
    assert_eq!(file_name.chars().count(), 600);
    let key = format!("wide/{file_name}");
    assert!(key.len() <= 1024);
    put_with_content_type(&p, &key, law.as_bytes(), content_type.as_bytes()).await;
    let notified = handle_notification(&p.store, &s3_put_event(&p.aws.bucket, &key))
        .await
        .expect("a wide value is not an error");
    assert!(
        matches!(notified.only(), StoreOutcome::Stored { .. }),
        "{notified}"
    );

    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, &key);
    let doc = p.doc(&doc_id).await.expect("a document");
    assert_eq!(doc.status, DocStatus::Stored);
    assert_eq!(
        doc.content_type,
        content_type.chars().take(128).collect::<String>()
    );
    assert_eq!(doc.file_name.chars().count(), 512);
    assert!(
        file_name.ends_with(&doc.file_name),
        "cut at a character, keeping the extension"
    );
    assert_eq!(doc.doc_name, doc.file_name);
    assert_eq!(doc.object_name, key, "the key is kept whole");
    assert_eq!(
        doc.metadata["original"]["content_type"],
        json!(content_type)
    );
    assert_eq!(doc.metadata["original"]["file_name"], json!(file_name));
    p.drive(&doc_id).await;
    assert_eq!(p.doc(&doc_id).await.unwrap().status, DocStatus::Indexed);
    p.cleanup().await;
}

#[tokio::test]
async fn a_content_type_holding_non_ascii_bytes_is_stored_not_retried_forever() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, law) = read_law(&law_paths()[1]);
    let key = "wide/non-ascii-content-type.md";
    put_with_content_type(
        &p,
        key,
        law.as_bytes(),
        "text/markdown; 名称=法律".as_bytes(),
    )
    .await;
    let notified = handle_notification(&p.store, &s3_put_event(&p.aws.bucket, key))
        .await
        .unwrap_or_else(|e| panic!("{}", docpipe_core::error::chain(&e)));
    assert!(
        matches!(notified.only(), StoreOutcome::Stored { .. }),
        "{notified}"
    );
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    let doc = p.doc(&doc_id).await.expect("a document");
    assert!(!doc.content_type.is_empty(), "{doc:?}");
    p.cleanup().await;
}

#[tokio::test]
async fn postgres_data_errors_are_permanent_and_a_concurrent_delete_is_not() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let client = p.db.client().await;
    let error_of = |sql: &'static str| {
        let client = &client;
        async move {
            let e = client.batch_execute(sql).await.expect_err(sql);
            let state = e.code().map(|c| c.code().to_string()).unwrap_or_default();
            (state, StageError::from_db(Stage::Store, e.into()))
        }
    };
    for sql in [
        // value too long for type character varying(128)
        "INSERT INTO documents (doc_id, content_type) VALUES ('too-wide', repeat('x', 230))",
        // invalid input syntax
        "SELECT 'not a number'::int",
        // a check violation
        "INSERT INTO documents (doc_id) VALUES ('doc-ck');
         INSERT INTO run_events (doc_id, run_id, stage, kind) VALUES ('doc-ck', 1, 'parse', 'no-such-kind')",
    ] {
        let (state, err) = error_of(sql).await;
        assert!(
            state.starts_with("22") || state == "23514",
            "{sql}: {state}"
        );
        assert!(!err.is_retryable(), "{sql} ({state}) is permanent: {err}");
    }
    let (state, err) = error_of(
        "INSERT INTO document_processing_runs (doc_id, trigger_type, run_status)
         VALUES ('deleted-meanwhile', 'upload', 'running')",
    )
    .await;
    assert_eq!(state, "23503");
    assert!(
        err.is_retryable(),
        "a foreign-key violation is a concurrent delete: the retry finds the document gone"
    );
}

#[tokio::test]
async fn an_upload_the_schema_refuses_ends_as_a_recorded_intake_failure_not_a_retry() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // A real check violation (23514), from this test's own database.
    p.db.client()
        .await
        .batch_execute(
            "ALTER TABLE documents ADD CONSTRAINT ck_test_refused CHECK (file_name <> 'refused.md')",
        )
        .await
        .unwrap();
    let (_, law) = read_law(&law_paths()[2]);
    let key = "intake/refused.md";
    p.aws.put(key, law.as_bytes()).await;
    let notified = handle_notification(&p.store, &s3_put_event(&p.aws.bucket, key))
        .await
        .expect("a permanent refusal is an answer, not an error to retry");
    assert!(
        matches!(
            notified.objects(),
            [ObjectStored {
                outcome: Err(_),
                ..
            }]
        ),
        "{notified}"
    );
    assert!(p
        .doc(&docpipe_core::ids::derived_doc_id(&p.aws.bucket, key))
        .await
        .is_none());
    let failures = intake_failures(&p).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        (
            failures[0].bucket.as_str(),
            failures[0].object_name.as_str()
        ),
        (p.aws.bucket.as_str(), key)
    );
    assert!(
        failures[0].reason.contains("ck_test_refused"),
        "{}",
        failures[0].reason
    );
}

#[tokio::test]
async fn an_event_naming_a_key_no_row_can_hold_is_recorded_with_its_bucket_and_key() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let long_key = format!("intake/{}.md", "k".repeat(1100));
    for key in ["intake/nul\u{0}.md", long_key.as_str()] {
        let err = handle_notification(&p.store, &s3_put_event(&p.aws.bucket, key))
            .await
            .expect_err("refused");
        assert!(!err.is_retryable(), "{err}");
    }
    let failures = intake_failures(&p).await;
    assert_eq!(failures.len(), 2, "{failures:?}");
    let names: Vec<&str> = failures.iter().map(|f| f.object_name.as_str()).collect();
    assert!(names.contains(&"intake/nul.md"), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("intake/kkk") && n.chars().count() == 1024),
        "{names:?}"
    );
    assert!(failures.iter().all(|f| f.bucket == p.aws.bucket));
    assert!(failures.iter().any(|f| f.reason.contains("NUL")));
    assert!(failures.iter().any(|f| f.reason.contains("1024 bytes")));
}

fn dead_letter(body: String, id: &str, receive_count: u32) -> SqsEvent {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.into());
    m.body = Some(body);
    m.event_source = Some("aws:sqs".into());
    m.attributes
        .insert("ApproximateReceiveCount".into(), receive_count.to_string());
    let mut event = SqsEvent::default();
    event.records.push(m);
    event
}

#[tokio::test]
async fn a_dead_lettered_registered_upload_fails_its_own_waiting_run() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let registered = p.register("registered.md").await;
    let event = s3_put_event(&p.aws.bucket, &registered.object_name).to_string();
    let report = docpipe_pipeline::handlers::dlq::handle_sqs(
        &p.dead_letters(),
        dead_letter(event, "m-1", 8),
    )
    .await;
    assert!(
        report.response.batch_item_failures.is_empty(),
        "{:?}",
        report.lines
    );
    assert!(
        matches!(
            report.done()[..],
            [Some(DeadLetterOutcome::Recorded(ref ends))]
                if matches!(ends[..], [GaveUp::Run { outcome: GiveUpOutcome::Failed { .. }, attempts: 8 }])
        ),
        "{:?}",
        report.lines
    );
    let doc = p.doc(&registered.doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed, "{:?}", report.lines);
    assert!(
        doc.error_message.contains("gave up"),
        "{}",
        doc.error_message
    );
    assert!(intake_failures(&p).await.is_empty(), "its run records it");
}

#[tokio::test]
async fn a_dead_lettered_upload_with_no_run_is_an_intake_failure_and_a_healthy_run_is_left_alone() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // An upload that never became a document.
    let event = s3_put_event(&p.aws.bucket, "intake/never-stored.md").to_string();
    let report = docpipe_pipeline::handlers::dlq::handle_sqs(
        &p.dead_letters(),
        dead_letter(event, "m-1", 8),
    )
    .await;
    assert!(report.response.batch_item_failures.is_empty());
    assert!(
        matches!(
            report.done()[..],
            [Some(DeadLetterOutcome::Recorded(ref ends))]
                if matches!(ends[..], [GaveUp::IntakeFailure { .. }])
        ),
        "{:?}",
        report.lines
    );
    let failures = intake_failures(&p).await;
    assert_eq!(failures.len(), 1, "{:?}", report.lines);
    assert_eq!(failures[0].object_name, "intake/never-stored.md");
    assert_eq!(failures[0].deliveries, 8);

    // A document whose current run is healthy and done: a late dead letter for its key fails
    // nothing.
    let (_, law) = read_law(&law_paths()[4]);
    let doc_id = p.ingest("intake/healthy.md", law.as_bytes()).await;
    let event = s3_put_event(&p.aws.bucket, "intake/healthy.md").to_string();
    docpipe_pipeline::handlers::dlq::handle_sqs(&p.dead_letters(), dead_letter(event, "m-2", 8))
        .await;
    let doc = documents::get(&**p.db.client().await, &doc_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(doc.status, DocStatus::Indexed);
    p.cleanup().await;
}

/// `MaximumRetryAttempts` of the store function's asynchronous invocations, from template.yaml.
fn template_async_retries() -> u32 {
    let text = std::fs::read_to_string(helpers::workspace_root().join("template.yaml")).unwrap();
    // serde_yaml keeps the template's short-form tags (`!Ref`, `!GetAtt`) as tagged values.
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    template["Resources"]["StoreFunction"]["Properties"]["EventInvokeConfig"]
        ["MaximumRetryAttempts"]
        .as_u64()
        .expect("the store function has an on-failure destination") as u32
}

/// NotificationMode=direct: S3 invokes store asynchronously. A store that fails every time (its
/// database is unreachable) is retried as Lambda retries it, then its invocation record reaches
/// the store DLQ, which the DLQ function decodes: the registered upload's run fails with the
/// store's error, and an upload with no document is an intake failure.
#[tokio::test]
async fn in_direct_mode_a_store_that_always_fails_ends_as_a_recorded_failure() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let failing_store = store_with_an_unreachable_database(&p);
    let registered = p.register("direct.md").await;
    let (_, law) = read_law(&law_paths()[5]);
    p.aws.put(&registered.object_name, law.as_bytes()).await;
    p.aws.put("direct/unregistered.md", law.as_bytes()).await;
    let retries = template_async_retries();
    let keys = [registered.object_name.as_str(), "direct/unregistered.md"];
    invoke_each_until_it_reaches_the_destination(&p, &failing_store, &keys, retries).await;
    decode_the_invocation_records_in_the_store_dlq(&p).await;

    let doc = p.doc(&registered.doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    assert!(
        doc.error_message
            .contains(&format!("gave up after {} attempts", retries + 1)),
        "{}",
        doc.error_message
    );
    assert!(
        doc.error_message.contains("database"),
        "the store's own error: {}",
        doc.error_message
    );
    let failures = intake_failures(&p).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].object_name, "direct/unregistered.md");
    assert_eq!(failures[0].deliveries as u32, retries + 1);
    assert!(
        failures[0].reason.contains("database"),
        "{}",
        failures[0].reason
    );
}

/// A store service whose database is unreachable: every invocation fails.
fn store_with_an_unreachable_database(p: &Pipeline) -> docpipe_pipeline::services::StoreService {
    let unreachable = docpipe_db::Db::connect(&docpipe_core::config::DbConfig {
        url: docpipe_core::config::Secret::new("postgres://docpipe@127.0.0.1:9/docpipe"),
        pool_size: 1,
        secret_arn: None,
        ca_bundle: None,
    })
    .unwrap();
    docpipe_pipeline::services::StoreService::new(
        unreachable,
        &p.aws.clients,
        p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
    )
}

/// Each key's S3 event, invoked asynchronously as Lambda does: every retry is used, then the
/// invocation record goes to the store DLQ.
async fn invoke_each_until_it_reaches_the_destination(
    p: &Pipeline,
    failing_store: &docpipe_pipeline::services::StoreService,
    keys: &[&str],
    retries: u32,
) {
    let destination = docpipe_pipeline::adapters::SqsJobQueue::new(p.aws.clients.sqs.clone());
    for &key in keys {
        let mut invocations = 0;
        let outcome = docpipe_pipeline::handlers::async_invoke::invoke(
            "arn:aws:lambda:us-east-1:123456789012:function:store",
            s3_put_event(&p.aws.bucket, key),
            retries,
            p.aws.clock.scale,
            (&destination, &p.aws.store_dlq),
            |event| {
                invocations += 1;
                let store = failing_store;
                async move { docpipe_pipeline::handlers::store::handle_event(store, event).await }
            },
        )
        .await
        .unwrap();
        assert_eq!(
            outcome,
            docpipe_pipeline::handlers::async_invoke::AsyncOutcome::SentToDestination {
                attempts: retries + 1
            }
        );
        assert_eq!(invocations, retries + 1);
    }
}

/// One invocation record per event in the store DLQ, each decoded by the DLQ function.
async fn decode_the_invocation_records_in_the_store_dlq(p: &Pipeline) {
    let records = p.aws.drain(&p.aws.store_dlq, 10).await;
    assert_eq!(records.len(), 2, "one invocation record per event");
    for (i, body) in records.into_iter().enumerate() {
        let report = docpipe_pipeline::handlers::dlq::handle_sqs(
            &p.dead_letters(),
            dead_letter(body, &format!("r-{i}"), 1),
        )
        .await;
        assert!(
            report.response.batch_item_failures.is_empty(),
            "{:?}",
            report.lines
        );
    }
}
