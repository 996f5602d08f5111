//! S3 and SQS of each test's own: a bucket and the pipeline's queues on moto, wired with a real
//! bucket notification, the events the functions receive, and the stage configurations over them.

use crate::*;
use aws_sdk_s3::types::{
    Event, FilterRule, FilterRuleName, NotificationConfiguration, NotificationConfigurationFilter,
    QueueConfiguration, S3KeyFilter,
};
use docpipe_core::config::{AwsConfig, StoreConfig};
use docpipe_pipeline::services::AwsClients;

pub fn aws_config() -> AwsConfig {
    AwsConfig {
        endpoint_url: Some(env_or("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")),
        region: env_or("AWS_REGION", "us-east-1"),
        attempt_timeout_secs: 5,
        event_bus: None,
    }
}

/// A bucket and the pipeline's queues, all new, with the bucket notification that sends
/// `s3:ObjectCreated:*` under `uploads/` to the store-events queue.
pub struct TestAws {
    pub clients: AwsClients,
    pub region: String,
    pub bucket: String,
    pub store_queue: String,
    pub parse_queue: String,
    pub index_queue: String,
    pub store_dlq: String,
    pub parse_dlq: String,
    pub index_dlq: String,
    /// The template's clock at the tests' scale; the queues carry its visibility timeouts,
    /// retention and redrive policy.
    pub clock: docpipe_core::clock::Clock,
    /// The test's own EventBridge bus, which its functions publish to, and a consumer's queue
    /// subscribed to every docpipe event on it.
    pub events_bus: String,
    pub events: docpipe_cli::events::Subscription,
    pub eventbridge: aws_sdk_eventbridge::Client,
}

impl TestAws {
    pub async fn new() -> TestAws {
        TestAws::with_scale(TEST_TIME_SCALE).await
    }

    /// A bucket and queues whose clock is the template's at `scale`.
    pub async fn with_scale(scale: f64) -> TestAws {
        let mut config = aws_config();
        let prefix = unique("t");
        let events_bus = format!("{prefix}-events");
        let sdk = docpipe_pipeline::adapters::aws::sdk_config(&config).await;
        let eventbridge = aws_sdk_eventbridge::Client::new(&sdk);
        eventbridge
            .create_event_bus()
            .name(&events_bus)
            .send()
            .await
            .expect("create the test's event bus");
        config.event_bus = Some(events_bus.clone());
        let clients = AwsClients::new(&config).await;
        let events = docpipe_cli::events::subscribe(
            &eventbridge,
            &clients.sqs,
            &events_bus,
            &format!("{prefix}-events-consumer"),
        )
        .await
        .expect("subscribe a queue to the test's bus");
        let bucket = format!("{prefix}-bucket");
        clients
            .s3
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .expect("create bucket (is moto up? `make up`)");
        let clock = template_clock(scale);
        let mut queues = Vec::new();
        for (name, stage) in [
            ("store-events", clock.store),
            ("parse", clock.parse),
            ("index", clock.index),
        ] {
            let queue = create_queue(&clients.sqs, &format!("{prefix}-{name}")).await;
            let dlq = create_queue(&clients.sqs, &format!("{prefix}-{name}-dlq")).await;
            docpipe_cli::dev_runner::apply_queue_clock(
                &clients.sqs,
                &queue,
                Some(&dlq),
                stage.visibility,
                clock.retention,
                clock.max_receive_count,
            )
            .await
            .expect("the template's queue attributes");
            queues.push((queue, dlq));
        }
        let [(store_queue, store_dlq), (parse_queue, parse_dlq), (index_queue, index_dlq)]: [(
            String,
            String,
        );
            3] = queues.try_into().expect("three queues");
        let store_arn = docpipe_cli::dev_runner::queue_arn(&store_queue, &config.region);
        let filter = NotificationConfigurationFilter::builder()
            .key(
                S3KeyFilter::builder()
                    .filter_rules(
                        FilterRule::builder()
                            .name(FilterRuleName::Prefix)
                            .value("uploads/")
                            .build(),
                    )
                    .build(),
            )
            .build();
        clients
            .s3
            .put_bucket_notification_configuration()
            .bucket(&bucket)
            .notification_configuration(
                NotificationConfiguration::builder()
                    .queue_configurations(
                        QueueConfiguration::builder()
                            .id("store-on-upload")
                            .queue_arn(store_arn)
                            .events(Event::from("s3:ObjectCreated:*"))
                            .filter(filter)
                            .build()
                            .expect("queue configuration"),
                    )
                    .build(),
            )
            .send()
            .await
            .expect("bucket notification");
        TestAws {
            clients,
            region: config.region,
            bucket,
            store_queue,
            parse_queue,
            index_queue,
            store_dlq,
            parse_dlq,
            index_dlq,
            clock,
            events_bus,
            events,
            eventbridge,
        }
    }

    /// Every event that reached the test's consumer queue within `quiet` of the last one, as
    /// EventBridge delivered them.
    pub async fn delivered_events(&self, quiet: std::time::Duration) -> Vec<serde_json::Value> {
        let mut all = Vec::new();
        loop {
            let batch = self
                .events
                .receive(&self.clients.sqs, quiet)
                .await
                .expect("receive events");
            if batch.is_empty() {
                return all;
            }
            all.extend(batch);
        }
    }

    pub fn store_config(&self, max_bytes: u64) -> StoreConfig {
        StoreConfig {
            parse_queue_url: self.parse_queue.clone(),
            store_queue_url: Some(self.store_queue.clone()),
            max_bytes,
            stage_deadline_secs: 900,
            clock: self.clock.clone(),
        }
    }

    pub async fn put(&self, key: &str, body: &[u8]) {
        self.clients
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("text/plain")
            .body(body.to_vec().into())
            .send()
            .await
            .expect("put object");
    }

    /// Puts an object with user metadata (`x-amz-meta-<name>`), as a plain upload names its version.
    pub async fn put_with_metadata(&self, key: &str, body: &[u8], metadata: &[(&str, &str)]) {
        let mut put = self
            .clients
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("text/markdown")
            .body(body.to_vec().into());
        for (name, value) in metadata {
            put = put.metadata(*name, *value);
        }
        put.send().await.expect("put object with metadata");
    }

    pub async fn delete(&self, key: &str) {
        self.clients
            .s3
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .expect("delete object");
    }

    /// Drains up to `max` message bodies from a queue, deleting them.
    pub async fn drain(&self, queue_url: &str, max: usize) -> Vec<String> {
        let mut bodies = Vec::new();
        loop {
            let out = self
                .clients
                .sqs
                .receive_message()
                .queue_url(queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .expect("receive");
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                return bodies;
            }
            for m in messages {
                self.clients
                    .sqs
                    .delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(m.receipt_handle.unwrap_or_default())
                    .send()
                    .await
                    .expect("delete message");
                bodies.push(m.body.unwrap_or_default());
            }
            if bodies.len() >= max {
                return bodies;
            }
        }
    }
}

/// Sends `body` back to `queue` hidden for the template clock's first backoff: how a delivery that
/// failed transiently returns (for a test that drains the queue itself, without receipt handles).
pub async fn return_after_backoff(aws: &TestAws, queue: &str, body: &str) {
    let delay = aws.clock.backoff(1).as_secs_f64().ceil().min(900.0) as i32;
    aws.clients
        .sqs
        .send_message()
        .queue_url(queue)
        .message_body(body)
        .delay_seconds(delay)
        .send()
        .await
        .expect("send the message back");
}

/// A queue with SQS's defaults; [`TestAws::new`] then gives it the template's clock.
async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    sqs.create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("queue url")
}

/// An S3 put notification for one object, the way moto delivers it (key form-urlencoded, no
/// `userIdentity`, no `sequencer`).
pub fn s3_put_event(bucket: &str, key: &str) -> serde_json::Value {
    let encoded: String = form_encode(key);
    serde_json::json!({
        "Records": [{
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": "us-east-1",
            "eventTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "eventName": "ObjectCreated:Put",
            "s3": {
                "s3SchemaVersion": "1.0",
                "configurationId": "store-on-upload",
                "bucket": {"name": bucket, "arn": format!("arn:aws:s3:::{bucket}")},
                "object": {"key": encoded}
            }
        }]
    })
}

fn form_encode(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An SQS batch whose message bodies are the given strings.
pub fn sqs_batch(bodies: &[String]) -> aws_lambda_events::event::sqs::SqsEvent {
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    for (i, body) in bodies.iter().enumerate() {
        let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
        m.message_id = Some(format!("msg-{i}"));
        m.body = Some(body.clone());
        m.event_source = Some("aws:sqs".into());
        event.records.push(m);
    }
    event
}

impl TestAws {
    pub fn parse_config(&self) -> docpipe_core::config::ParseConfig {
        docpipe_core::config::ParseConfig {
            bucket: self.bucket.clone(),
            parse_queue_url: self.parse_queue.clone(),
            index_queue_url: self.index_queue.clone(),
            max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
            chunk: Default::default(),
            limits: Default::default(),
            clock: self.clock.clone(),
            scan: Default::default(),
        }
    }

    pub async fn get(&self, key: &str) -> Vec<u8> {
        self.clients
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .expect("get object")
            .body
            .collect()
            .await
            .expect("body")
            .into_bytes()
            .to_vec()
    }

    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self
            .clients
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .send()
            .await
            .expect("list");
        out.contents()
            .iter()
            .filter_map(|o| o.key().map(String::from))
            .collect()
    }
}

/// An IAM role in the emulator with these tags (created if new, tagged either way), as an
/// account's administrator makes a caller's role: what `AuthMode=iam` reads a tenant from.
pub async fn iam_role_with_tags(name: &str, tags: &[(&str, &str)]) {
    let endpoint = aws_config().endpoint_url.expect("the emulator's endpoint");
    let http = reqwest::Client::new();
    let call = |params: Vec<(String, String)>| {
        let http = http.clone();
        let endpoint = endpoint.clone();
        async move {
            http.post(format!("{endpoint}/"))
                .header(
                    "authorization",
                    "AWS4-HMAC-SHA256 Credential=test/20261201/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
                )
                .form(&params)
                .send()
                .await
                .expect("the emulator's IAM answers")
        }
    };
    let mut create = vec![
        ("Action".to_string(), "CreateRole".to_string()),
        ("Version".into(), "2010-05-08".into()),
        ("RoleName".into(), name.into()),
        (
            "AssumeRolePolicyDocument".into(),
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}"#.into(),
        ),
    ];
    let answer = call(create.clone()).await;
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    assert!(
        status.is_success() || body.contains("EntityAlreadyExists"),
        "CreateRole {name}: {status} {body}"
    );
    create.clear();
    let mut tag = vec![
        ("Action".to_string(), "TagRole".to_string()),
        ("Version".into(), "2010-05-08".into()),
        ("RoleName".into(), name.into()),
    ];
    for (i, (k, v)) in tags.iter().enumerate() {
        tag.push((format!("Tags.member.{}.Key", i + 1), k.to_string()));
        tag.push((format!("Tags.member.{}.Value", i + 1), v.to_string()));
    }
    let answer = call(tag).await;
    assert!(
        answer.status().is_success(),
        "TagRole {name}: {:?}",
        answer.text().await
    );
}

/// Reads principal tags from the emulator's IAM, with the emulator's credentials.
pub fn principal_tags() -> std::sync::Arc<docpipe_api_fn::principal_tags::PrincipalTags> {
    let endpoint = aws_config().endpoint_url.expect("the emulator's endpoint");
    std::sync::Arc::new(docpipe_api_fn::principal_tags::PrincipalTags::new(
        &endpoint,
        docpipe_api_fn::principal_tags::TENANT_TAG,
        aws_credential_types::provider::SharedCredentialsProvider::new(
            aws_credential_types::Credentials::new("test", "test", None, None, "tests"),
        ),
    ))
}
