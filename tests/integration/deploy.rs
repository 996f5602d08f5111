//! What a deployed function meets at run time and the local stack can show: a rotated database
//! password, Milvus away while the DLQ function and the sweeper start, a sweep that finds another
//! still running, and a store batch that cannot finish before its function's timeout.

use docpipe_core::config::{DbConfig, MilvusConfig, Secret};
use docpipe_db::upkeep;
use docpipe_pipeline::services::{connect_db, DeadLetterService, Service, SWEEPER_LEASE};
use helpers::*;
use std::time::{Duration, Instant};

async fn secrets_client_sdk() -> aws_sdk_secretsmanager::Client {
    aws_sdk_secretsmanager::Client::new(
        &docpipe_pipeline::adapters::aws::sdk_config(&aws_config()).await,
    )
}

/// PostgreSQL itself (not PgBouncer, whose user list is a file of its own), at `database`.
fn direct_url(database: &str) -> String {
    let url = std::env::var("DATABASE_DIRECT_URL")
        .unwrap_or_else(|_| "postgres://docpipe:docpipe@127.0.0.1:55432/docpipe".into());
    let base = &url[..url.rfind('/').expect("a database in the URL")];
    format!("{base}/{database}")
}

async fn current_user(db: &docpipe_db::Db) -> Result<String, String> {
    let client = db
        .client()
        .await
        .map_err(|e| docpipe_core::error::chain(&e))?;
    let row = client
        .query_typed_one("SELECT current_user::text AS who", &[])
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get("who"))
}

#[tokio::test]
async fn a_rotated_password_is_read_again_when_the_database_refuses_the_old_one() {
    let t = TestDb::new().await;
    let role = unique("docpipe_rot_");
    let admin = t.client().await;
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'first-password'"
        ))
        .await
        .unwrap();
    let secrets = secrets_client_sdk().await;
    let credentials =
        |password: &str| serde_json::json!({ "username": role, "password": password }).to_string();
    let arn = secrets
        .create_secret()
        .name(unique("docpipe-db-"))
        .secret_string(credentials("first-password"))
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    // The URL names another user and password: the secret's win, as in AWS.
    let config = DbConfig {
        url: Secret::new(direct_url(&t.name)),
        pool_size: 2,
        secret_arn: Some(arn.clone()),
        ca_bundle: None,
    };
    let db = connect_db(&config, &aws_config()).await.unwrap();
    // One connection, held: the pool's next request must open a new one.
    let held = db.client().await.unwrap();
    let who: String = held
        .query_typed_one("SELECT current_user::text AS who", &[])
        .await
        .unwrap()
        .get("who");
    assert_eq!(who, role);

    // Secrets Manager rotates: the database takes the new password, then the secret holds it.
    admin
        .batch_execute(&format!("ALTER ROLE {role} PASSWORD 'second-password'"))
        .await
        .unwrap();
    secrets
        .put_secret_value()
        .secret_id(&arn)
        .secret_string(credentials("second-password"))
        .send()
        .await
        .unwrap();
    // The connection already open keeps working; the next new one (the pool's second, while the
    // first is held) is refused the old password, reads the secret again and connects.
    assert_eq!(
        current_user(&db).await.as_deref(),
        Ok(role.as_str()),
        "a new connection after the rotation"
    );
    drop(held);

    // A refusal the secret cannot cure is reported as the database's refusal, not hidden.
    admin
        .batch_execute(&format!("ALTER ROLE {role} PASSWORD 'third-password'"))
        .await
        .unwrap();
    let stale = connect_db(&config, &aws_config()).await.unwrap();
    let refused = current_user(&stale).await.unwrap_err();
    assert!(
        refused.contains("password authentication failed"),
        "{refused}"
    );

    drop((db, stale));
    let _ = admin
        .batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
        .await;
}

#[tokio::test]
async fn a_secret_s_password_is_never_sent_in_clear_text_off_this_machine() {
    let secrets = secrets_client_sdk().await;
    let arn = secrets
        .create_secret()
        .name(unique("docpipe-db-"))
        .secret_string(r#"{"username":"docpipe","password":"docpipe"}"#)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let config = |url: &str| DbConfig {
        url: Secret::new(url.to_string()),
        pool_size: 1,
        secret_arn: Some(arn.clone()),
        ca_bundle: None,
    };
    let Err(refused) = connect_db(
        &config("postgres://docpipe@db.example.internal:5432/docpipe?sslmode=disable"),
        &aws_config(),
    )
    .await
    else {
        panic!("a plain-text URL with a secret was accepted")
    };
    assert!(
        docpipe_core::error::chain(&refused).contains("must travel over TLS"),
        "{refused}"
    );
    // The local stack has no TLS: on loopback the secret's path works as it is.
    let local = connect_db(&config(&direct_url("docpipe")), &aws_config())
        .await
        .unwrap();
    assert_eq!(current_user(&local).await.as_deref(), Ok("docpipe"));
}

#[tokio::test]
async fn the_dead_letter_function_starts_and_records_give_ups_while_milvus_is_away() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // Nothing listens on port 1: before, the DLQ function failed its init here.
    let away = MilvusConfig {
        url: "http://127.0.0.1:1".into(),
        token: None,
        token_secret_arn: None,
        collection: "docpipe_away".into(),
        aws: aws_config(),
    };
    let started = Instant::now();
    let dlq = DeadLetterService::connect(p.db.db.clone(), &aws_config(), away)
        .await
        .expect("the DLQ function starts without Milvus");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // A dead-lettered upload that never became a document needs no Milvus: it is recorded.
    let event = s3_put_event(&p.aws.bucket, "deploy/never-stored.md").to_string();
    let report = docpipe_pipeline::handlers::dlq::handle_sqs(&dlq, sqs_batch(&[event])).await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    let recorded = p
        .count("SELECT count(*) FROM intake_failures WHERE object_name = 'deploy/never-stored.md'")
        .await;
    assert_eq!(recorded, 1, "{:?}", report.lines);
    p.cleanup().await;
}

#[tokio::test]
async fn a_sweep_does_nothing_while_another_holds_the_lease() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let sweeper = p.sweeper();
    let db = p.db.client().await;
    assert!(upkeep::acquire(&**db, SWEEPER_LEASE, "another-sweep", 60.0)
        .await
        .unwrap());
    assert!(
        sweeper.run_once().await.unwrap().is_none(),
        "a second sweep ran beside the first"
    );
    // The other sweep ends and gives the lease back: the next one sweeps, and gives it back too.
    upkeep::release(&**db, SWEEPER_LEASE, "another-sweep")
        .await
        .unwrap();
    assert!(sweeper.run_once().await.unwrap().is_some());
    assert!(sweeper.run_once().await.unwrap().is_some());
    // A sweep that died holding it: the lease expires with its function's timeout.
    assert!(upkeep::acquire(&**db, SWEEPER_LEASE, "died", 0.0)
        .await
        .unwrap());
    assert!(sweeper.run_once().await.unwrap().is_some());
    p.cleanup().await;
}

#[tokio::test]
async fn a_store_batch_leaves_what_it_has_no_time_for_to_another_invocation() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // Three 8 MB uploads, whose notifications say their size (as S3's do).
    let body = vec![b'x'; 8 << 20];
    let mut bodies = Vec::new();
    for i in 0..3 {
        let key = format!("deploy/large-{i}.txt");
        p.aws.put(&key, &body).await;
        let mut event = s3_put_event(&p.aws.bucket, &key);
        event["Records"][0]["s3"]["object"]["size"] = (8u64 << 20).into();
        bodies.push(event.to_string());
    }
    // Two seconds left: the first is stored (a batch must move), and the others, which may need
    // more than what is left, go back at once.
    let deadline = Instant::now() + Duration::from_secs(2);
    let report =
        docpipe_pipeline::handlers::store::handle_sqs_until(&p.store, sqs_batch(&bodies), deadline)
            .await;
    assert_eq!(
        report.failed_ids(),
        ["msg-1", "msg-2"],
        "{:?}",
        report.lines
    );
    assert!(
        report.lines[1].contains("deferred to another invocation"),
        "{:?}",
        report.lines
    );
    assert!(p.doc_at("deploy/large-0.txt").await.is_some());
    assert!(
        p.doc_at("deploy/large-1.txt").await.is_none(),
        "a deferred upload was stored"
    );
    assert!(Instant::now() < deadline + Duration::from_millis(500));

    // Their next delivery, with the function's whole time, stores them.
    let report =
        docpipe_pipeline::handlers::store::handle_sqs(&p.store, sqs_batch(&bodies[1..])).await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    assert!(p.doc_at("deploy/large-2.txt").await.is_some());
    p.cleanup().await;
}
