//! Hostile input against the real stack (PostgreSQL through PgBouncer, moto's S3 and SQS with real
//! bucket notifications, Milvus for the API case): odd object keys, oversized notifications,
//! SQL-looking metadata, an object far over the size limit, a PDF of 10,000 pages and a DOCX zip
//! bomb. Each case has one clear outcome, asserted on the run's `failure_stage`/`error_message` or
//! on the stored row, and each shares its batch with a good message that must come through
//! untouched. Every test has its own database, bucket and queues.

use docpipe_core::model::{DocStatus, JobMessage, RunStatus};
use docpipe_db::{runs, Type};
use docpipe_pipeline::error::StageError;
use docpipe_pipeline::handlers;
use docpipe_pipeline::handlers::sqs::Handled;
use docpipe_pipeline::handlers::store::Notified;
use docpipe_pipeline::services::StoreService;
use docpipe_pipeline::stages::parse::ParseOutcome;
use docpipe_pipeline::stages::store::StoreOutcome;
use helpers::{
    s3_put_event, serve_api, sha256_hex, sqs_batch, HookedObjectStore, Pipeline, TestAws,
};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX: u64 = docpipe_core::config::DEFAULT_MAX_BYTES;

/// A store message that stored its one object.
fn stored(handled: &Handled<Notified>) -> bool {
    matches!(
        handled.done().map(Notified::only),
        Some(StoreOutcome::Stored { .. })
    )
}

/// A store message dropped as refused, for a reason that says `why`.
fn refused_because(handled: &Handled<Notified>, why: &str) -> bool {
    matches!(handled.dropped(), Some(StageError::Failed { reason, .. }) if reason.contains(why))
}

async fn fixture(max_bytes: u64) -> Pipeline {
    Pipeline::with_max_bytes(max_bytes).await
}

/// Runs a parse batch of `[hostile, good]`: neither may be reported as a batch failure, the
/// good document must be parsed. Returns the hostile message's outcome.
async fn parse_beside_a_good_one(f: &Pipeline, hostile: &JobMessage) -> ParseOutcome {
    let good = f
        .stored(
            "uploads/good-neighbour.md",
            "# 好邻居\n\n第一条 这份文件与恶意文件同批解析，必须成功。\n".as_bytes(),
        )
        .await;
    let started = Instant::now();
    let report =
        handlers::parse::handle_sqs(&f.parse, sqs_batch(&[hostile.encode(), good.encode()])).await;
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the batch took {:?}",
        started.elapsed()
    );
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    assert!(
        matches!(report.done()[1], Some(ParseOutcome::Parsed { .. })),
        "{:?}",
        report.lines
    );
    assert_eq!(f.doc(&good.doc_id).await.unwrap().status, DocStatus::Parsed);
    let hostile = report.done()[0].cloned();
    hostile.unwrap_or_else(|| panic!("no outcome: {:?}", report.lines))
}

/// The one run of `doc_id`, which must have failed at `stage`.
async fn failed_run(f: &Pipeline, doc_id: &str, stage: &str) -> runs::Run {
    let doc = f.doc(doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    let runs = f.runs(doc_id).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = runs.into_iter().next().unwrap();
    assert_eq!(run.run_status, RunStatus::Failed);
    assert_eq!(run.failure_stage, stage, "{}", run.error_message);
    assert_eq!(doc.error_message, run.error_message);
    run
}

// ---------------------------------------------------------------------------------------------
// Object keys

/// Keys that S3 allows and a careless pipeline would mangle: traversal, the maximum length,
/// mixed scripts with combining marks, and `+`/`%` that mean nothing but themselves.
fn hostile_keys() -> Vec<(&'static str, String)> {
    let long_tail = "长".repeat(300); // 900 bytes of one CJK character
    let long = format!("uploads/{long_tail}");
    let long = format!("{long}{}.txt", "x".repeat(1024 - long.len() - 4));
    assert_eq!(long.len(), 1024);
    vec![
        ("dot-dot segments", "uploads/../../etc/passwd".to_string()),
        ("dot-dot file name", "uploads/a/../b/..".to_string()),
        ("1,024-byte key", long),
        (
            "1,024-byte single segment",
            format!("uploads/{}.txt", "a".repeat(1024 - 12)),
        ),
        (
            "mixed scripts",
            "uploads/مرحبا 你好 😀 e\u{301}\u{302} Ω̃.md".to_string(),
        ),
        ("plus and percent", "uploads/a+b %20 100%.txt".to_string()),
        (
            "percent escape lookalike",
            "uploads/%E6%B3%95+%2B.txt".to_string(),
        ),
    ]
}

#[tokio::test]
async fn hostile_object_keys_are_stored_exactly_and_their_ids_stay_safe() {
    let f = fixture(MAX).await;
    let keys = hostile_keys();
    for (i, (_, key)) in keys.iter().enumerate() {
        f.aws
            .put(key, format!("hostile key {i}\n").as_bytes())
            .await;
    }
    let good = "uploads/good.txt";
    f.aws.put(good, b"a good neighbour").await;

    // What moto delivered for those uploads, exactly as a queue would hand it over, plus the
    // same events spelled by the harness (AWS's encoding), all in batches with a good message.
    let mut delivered: Vec<String> = f
        .aws
        .drain(&f.aws.store_queue, keys.len() + 2)
        .await
        .into_iter()
        .filter(|b| !b.contains("s3:TestEvent"))
        .collect();
    assert_eq!(
        delivered.len(),
        keys.len() + 1,
        "moto delivered one notification per upload"
    );
    delivered.extend(
        keys.iter()
            .map(|(_, k)| s3_put_event(&f.aws.bucket, k).to_string()),
    );
    for bodies in delivered.chunks(5) {
        let mut batch = bodies.to_vec();
        batch.push(s3_put_event(&f.aws.bucket, good).to_string());
        let report = handlers::store::handle_sqs(&f.store, sqs_batch(&batch)).await;
        assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
        for (outcome, line) in report.done().into_iter().zip(&report.lines) {
            assert!(
                matches!(
                    outcome.map(Notified::only),
                    Some(StoreOutcome::Stored { .. } | StoreOutcome::Duplicate { .. })
                ),
                "{line}"
            );
        }
    }

    for (i, (what, key)) in keys.iter().enumerate() {
        assert_stored_verbatim(&f, what, key, i).await;
    }
    assert_eq!(
        f.count("SELECT count(*) FROM documents").await,
        keys.len() as i64 + 1
    );

    // Every parse job names a well-formed id; the artifacts of such a document live under that
    // id, never under anything derived from the key.
    let jobs = f.aws.drain(&f.aws.parse_queue, 100).await;
    assert!(!jobs.is_empty());
    for body in &jobs {
        let job = JobMessage::decode(body).expect("a v1 job");
        assert!(docpipe_core::ids::is_valid_doc_id(&job.doc_id));
    }
}

/// The `i`th hostile key's document: stored, under the key verbatim, with a safe id and one run.
async fn assert_stored_verbatim(f: &Pipeline, what: &str, key: &str, i: usize) {
    let doc = f
        .doc_at(key)
        .await
        .unwrap_or_else(|| panic!("{what}: {key:?} was not stored"));
    assert_eq!(&doc.object_name, key, "{what}: object_name verbatim");
    // The file name is the key's last segment, cut to the column's width from the front.
    assert_eq!(
        doc.file_name,
        docpipe_core::ids::file_name_of(key),
        "{what}"
    );
    assert!(key.ends_with(&doc.file_name), "{what}");
    assert!(doc.file_name.chars().count() <= docpipe_core::ids::MAX_FILE_NAME_CHARS);
    assert!(docpipe_core::ids::is_valid_doc_id(&doc.doc_id), "{what}");
    assert_eq!(
        doc.status,
        DocStatus::Stored,
        "{what}: {}",
        doc.error_message
    );
    assert_eq!(
        doc.content_sha256,
        sha256_hex(format!("hostile key {i}\n").as_bytes()),
        "{what}"
    );
    assert_eq!(f.runs(&doc.doc_id).await.len(), 1, "{what}: one run");
}

#[tokio::test]
async fn keys_no_row_can_hold_are_refused_at_once_and_not_retried() {
    let f = fixture(MAX).await;
    // S3 takes a NUL in a key (moto does); PostgreSQL's text cannot hold one. Whatever the put
    // answers, the event naming such a key must be a permanent, clear refusal, not an endless
    // retry of a database error.
    let nul = "uploads/nul\u{0}byte.txt";
    let put = f
        .aws
        .clients
        .s3
        .put_object()
        .bucket(&f.aws.bucket)
        .key(nul)
        .body(b"nul".to_vec().into())
        .send()
        .await;
    eprintln!("S3 accepted a key with NUL: {}", put.is_ok());
    // Longer than S3 allows: no object can have it, and S3's error must not look transient.
    let too_long = format!("uploads/{}.txt", "z".repeat(1100));
    let good = "uploads/good.txt";
    f.aws.put(good, b"a good neighbour").await;
    let report = handlers::store::handle_sqs(
        &f.store,
        sqs_batch(&[
            s3_put_event(&f.aws.bucket, nul).to_string(),
            s3_put_event(&f.aws.bucket, &too_long).to_string(),
            s3_put_event(&f.aws.bucket, good).to_string(),
        ]),
    )
    .await;
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    assert!(
        refused_because(&report.outcomes[0], "NUL character"),
        "{}",
        report.lines[0]
    );
    assert!(
        refused_because(
            &report.outcomes[1],
            "1112 bytes, longer than the 1024 bytes S3 allows"
        ),
        "{}",
        report.lines[1]
    );
    assert!(stored(&report.outcomes[2]), "{:?}", report.lines);
    assert_eq!(f.count("SELECT count(*) FROM documents").await, 1);
}

// ---------------------------------------------------------------------------------------------
// Oversized notifications

fn records_for_missing_objects(bucket: &str, n: usize) -> Value {
    let records: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": bucket}, "object": {"key": format!("uploads/missing/{i:05}.pdf"), "size": 1}}
            })
        })
        .collect();
    json!({ "Records": records })
}

#[tokio::test]
async fn an_sqs_body_of_256_kb_with_thousands_of_records_is_handled_in_bounded_time() {
    let f = fixture(MAX).await;
    let mut n = 1000;
    let body = loop {
        let body = records_for_missing_objects(&f.aws.bucket, n).to_string();
        if body.len() >= 250 * 1024 {
            break body;
        }
        n += 100;
    };
    assert!(body.len() <= 256 * 1024, "fits an SQS message");
    let good = "uploads/good.txt";
    f.aws.put(good, b"a good neighbour").await;
    let started = Instant::now();
    let report = handlers::store::handle_sqs(
        &f.store,
        sqs_batch(&[body, s3_put_event(&f.aws.bucket, good).to_string()]),
    )
    .await;
    let took = started.elapsed();
    eprintln!("{n} records: {took:?}");
    assert!(report.failed_ids().is_empty(), "{:?}", &report.lines[1..]);
    assert!(
        took < Duration::from_secs(10),
        "{n} records took {took:?}: the store function has 60 s for a batch of 10"
    );
    assert!(
        refused_because(
            &report.outcomes[0],
            &format!("{n} records in one notification, more than 100")
        ),
        "{}",
        report.lines[0]
    );
    assert!(stored(&report.outcomes[1]), "{:?}", report.lines[1]);
    // Nothing was created for the phantom objects.
    assert_eq!(f.count("SELECT count(*) FROM documents").await, 1);
}

#[tokio::test]
async fn a_direct_notification_with_ten_thousand_records_is_refused_at_once() {
    let f = fixture(MAX).await;
    let event = records_for_missing_objects(&f.aws.bucket, 10_000);
    let started = Instant::now();
    let err = handlers::store::handle_notification(&f.store, &event)
        .await
        .unwrap_err();
    assert!(!err.is_retryable(), "{err}");
    assert!(
        err.to_string()
            .contains("10000 records in one notification, more than 100"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // As many records as a notification may carry are each looked up, in bounded time.
    let limit = docpipe_core::events::MAX_RECORDS;
    let started = Instant::now();
    let notified = handlers::store::handle_notification(
        &f.store,
        &records_for_missing_objects(&f.aws.bucket, limit),
    )
    .await
    .unwrap();
    let took = started.elapsed();
    eprintln!("{limit} records for missing objects: {took:?}");
    let missing = notified
        .objects()
        .iter()
        .filter(|o| {
            matches!(
                o.outcome,
                Ok(StoreOutcome::ObjectMissing {
                    failed_run: None,
                    ..
                })
            )
        })
        .count();
    assert_eq!(missing, limit, "{notified}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(f.count("SELECT count(*) FROM documents").await, 0);
}

// ---------------------------------------------------------------------------------------------
// SQL-looking metadata through the API

const DROP: &str = "'; DROP TABLE documents; --";

#[tokio::test]
async fn sql_looking_registration_fields_are_stored_verbatim_and_the_tables_survive() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let base = serve_api(&p).await;
    let http = reqwest::Client::new();
    let tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'";
    let tables_before = p.count(tables).await;

    let (metadata, body) = sql_looking_registration();
    let doc_id = register_sql_looking(&http, &base, &body).await;
    // Read back through the API and straight from the table: byte for byte what was sent.
    assert_the_view_is_what_was_sent(&http, &base, &doc_id, &body, &metadata).await;
    assert_the_row_is_what_was_sent(&p, &doc_id, &body).await;

    assert_the_list_filter_takes_text_as_a_value(&http, &base, &doc_id).await;

    // Every table is still there, with the rows it should have.
    assert_eq!(p.count(tables).await, tables_before);
    assert_eq!(p.count("SELECT count(*) FROM documents").await, 1);
    assert_eq!(
        p.count("SELECT count(*) FROM document_processing_runs")
            .await,
        1
    );
    p.cleanup().await;
}

/// A registration whose every field looks like SQL: its metadata, and the whole body.
fn sql_looking_registration() -> (Value, Value) {
    let metadata = json!({
        "owner": DROP,
        "x'); DELETE FROM documents; --": "key too",
        "nested": {"q": "1 OR 1=1", "list": [DROP, "\" OR \"\"=\""]},
        "$1": "::jsonb",
    });
    let body = json!({
        "doc_name": format!("Robert{DROP}"),
        "file_name": "bobby'; DROP TABLE runs;--.md",
        "regulation_type": DROP,
        "version": "1' OR '1'='1",
        "tags": [DROP, "%' OR 1=1 --", "\\'; SELECT pg_sleep(10); --"],
        "metadata": metadata,
    });
    (metadata, body)
}

/// Registers `body`: a 201 with a safe doc id and the file name kept in the object name.
async fn register_sql_looking(http: &reqwest::Client, base: &str, body: &Value) -> String {
    let r = http
        .post(format!("{base}/documents"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let answer: Value = r.json().await.unwrap();
    let doc_id = answer["doc_id"].as_str().unwrap().to_string();
    assert!(docpipe_core::ids::is_valid_doc_id(&doc_id));
    assert_eq!(
        answer["object_name"],
        format!("uploads/default/{doc_id}/bobby'; DROP TABLE runs;--.md")
    );
    doc_id
}

/// The API's view of the document holds every field exactly as sent.
async fn assert_the_view_is_what_was_sent(
    http: &reqwest::Client,
    base: &str,
    doc_id: &str,
    body: &Value,
    metadata: &Value,
) {
    let view: Value = http
        .get(format!("{base}/documents/{doc_id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for field in [
        "doc_name",
        "file_name",
        "regulation_type",
        "version",
        "tags",
    ] {
        assert_eq!(view[field], body[field], "{field}");
    }
    assert_eq!(view["metadata"], *metadata);
}

/// The documents row holds the SQL-looking text as text.
async fn assert_the_row_is_what_was_sent(p: &Pipeline, doc_id: &str, body: &Value) {
    let row = p
        .db
        .client()
        .await
        .query_typed_one(
            "SELECT doc_name, regulation_type, version, metadata FROM documents WHERE doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), format!("Robert{DROP}"));
    assert_eq!(row.get::<_, String>(1), DROP);
    assert_eq!(row.get::<_, String>(2), "1' OR '1'='1");
    let stored: Value = row.get(3);
    assert_eq!(stored["owner"], DROP);
    assert_eq!(stored["tags"], body["tags"]);
}

/// The list filter takes SQL-looking text as a value, not as SQL.
async fn assert_the_list_filter_takes_text_as_a_value(
    http: &reqwest::Client,
    base: &str,
    doc_id: &str,
) {
    let list: Value = http
        .get(format!("{base}/documents"))
        .query(&[("regulation_type", DROP)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = list["documents"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["doc_id"], doc_id);
    let none: Value = http
        .get(format!("{base}/documents"))
        .query(&[("regulation_type", "x' OR '1'='1")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(none["documents"], json!([]), "{none}");
}

// ---------------------------------------------------------------------------------------------
// An object far over the size limit

/// Uploads `size` bytes of zeros from a sparse file (streamed by the SDK, never in this process's
/// memory); moto spools large bodies to disk.
async fn put_sparse(aws: &TestAws, key: &str, size: u64) {
    let path = std::env::temp_dir().join(helpers::unique("docpipe-sparse-"));
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(size).unwrap();
    drop(file);
    let body = aws_sdk_s3::primitives::ByteStream::from_path(&path)
        .await
        .unwrap();
    let result = aws
        .clients
        .s3
        .put_object()
        .bucket(&aws.bucket)
        .key(key)
        .content_type("application/pdf")
        .content_length(size as i64)
        .body(body)
        .customize()
        // The pipeline's clients give an S3 call 5 s; half a gigabyte into moto needs longer.
        .config_override(
            aws_sdk_s3::config::Builder::default().timeout_config(
                aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_secs(600))
                    .operation_timeout(Duration::from_secs(600))
                    .build(),
            ),
        )
        .send()
        .await;
    std::fs::remove_file(&path).unwrap();
    result.expect("sparse upload");
}

#[tokio::test]
async fn a_500_mb_object_fails_at_store_with_the_size_message_without_being_read() {
    let f = fixture(MAX).await;
    // The real object store, counting how often an object's bytes are read.
    let watched = Arc::new(HookedObjectStore::new(f.store.objects.clone()));
    let store = StoreService {
        db: f.db.db.clone(),
        objects: watched.clone(),
        queue: f.store.queue.clone(),
        config: f.aws.store_config(MAX),
        events: f.store.events.clone(),
    };
    let key = "uploads/huge.pdf";
    let size: u64 = 500 * 1024 * 1024;
    let started = Instant::now();
    put_sparse(&f.aws, key, size).await;
    eprintln!("uploaded 500 MiB to moto in {:?}", started.elapsed());
    let good = "uploads/good.txt";
    f.aws.put(good, b"a good neighbour").await;

    let started = Instant::now();
    let report = handlers::store::handle_sqs(
        &store,
        sqs_batch(&[
            s3_put_event(&f.aws.bucket, key).to_string(),
            s3_put_event(&f.aws.bucket, good).to_string(),
        ]),
    )
    .await;
    let took = started.elapsed();
    // Give moto its half gigabyte back before anything can fail.
    f.aws.delete(key).await;
    assert!(took < Duration::from_secs(10), "the batch took {took:?}");
    assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    assert!(
        matches!(
            report.done()[0].map(Notified::only),
            Some(StoreOutcome::Rejected { .. })
        ),
        "{:?}",
        report.lines
    );
    assert!(stored(&report.outcomes[1]), "{:?}", report.lines);
    assert_eq!(
        watched.body_reads.load(Ordering::SeqCst),
        1,
        "only the good neighbour's bytes were read"
    );
    let doc = f.doc_at(key).await.unwrap();
    let run = failed_run(&f, &doc.doc_id, "store").await;
    assert!(
        run.error_message
            .contains(&format!("{size} bytes, over the limit of {MAX} bytes")),
        "{}",
        run.error_message
    );
    assert_eq!(doc.size_bytes, size as i64);
    // Only the good neighbour's parse was queued.
    assert_eq!(f.aws.drain(&f.aws.parse_queue, 10).await.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// A PDF of 10,000 pages

/// A valid PDF of `pages` tiny pages, each showing one line of text (one shared content stream,
/// resources inherited from the page tree): about 60 bytes a page.
fn many_page_pdf(pages: usize) -> Vec<u8> {
    let mut out: Vec<u8> = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    let mut object = |out: &mut Vec<u8>, body: String| {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", offsets.len()).as_bytes());
    };
    let first_page = 5;
    let kids: Vec<String> = (0..pages)
        .map(|i| format!("{} 0 R", first_page + i))
        .collect();
    object(&mut out, "<< /Type /Catalog /Pages 2 0 R >>".into());
    object(
        &mut out,
        format!(
            "<< /Type /Pages /Count {pages} /MediaBox [0 0 200 40] /Resources << /Font << /F1 3 0 R >> >> /Kids [{}] >>",
            kids.join(" ")
        ),
    );
    object(
        &mut out,
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into(),
    );
    let content = "BT /F1 10 Tf 10 15 Td (One line on a tiny page) Tj ET";
    object(
        &mut out,
        format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ),
    );
    for _ in 0..pages {
        object(
            &mut out,
            "<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>".into(),
        );
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for o in &offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[tokio::test]
async fn a_pdf_of_ten_thousand_pages_fails_at_parse_as_too_large() {
    let f = fixture(MAX).await;
    // The generator is sound: a few pages of it parse, with their text.
    let small = docpipe_parse::parse(
        &many_page_pdf(3),
        &docpipe_parse::Hint::new("small.pdf", "application/pdf"),
        &docpipe_parse::Limits::default(),
    )
    .expect("three tiny pages parse");
    assert_eq!(small.page_count, 3);

    let pdf = many_page_pdf(10_000);
    let job = f.stored("uploads/ten-thousand-pages.pdf", &pdf).await;
    let started = Instant::now();
    let outcome = parse_beside_a_good_one(&f, &job).await;
    eprintln!("10,000 pages: {} bytes, {:?}", pdf.len(), started.elapsed());
    assert!(
        matches!(outcome, ParseOutcome::Failed { .. }),
        "{outcome:?}"
    );
    let run = failed_run(&f, &job.doc_id, "parse").await;
    assert!(
        run.error_message.contains("10000 pages (limit 5000)")
            && run.error_message.contains("too_large"),
        "{}",
        run.error_message
    );
    // Nothing of it reached the snapshot tables or the index queue.
    assert_eq!(
        f.count("SELECT count(*) FROM semantic_blocks b JOIN documents d USING (doc_id) WHERE d.status = 'failed'")
            .await,
        0
    );
}

// ---------------------------------------------------------------------------------------------
// A DOCX zip bomb

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A raw DEFLATE writer (RFC 1951), fixed Huffman codes only.
struct Deflate {
    out: Vec<u8>,
    acc: u64,
    bits: u32,
}

impl Deflate {
    fn new() -> Self {
        let mut d = Deflate {
            out: Vec::new(),
            acc: 0,
            bits: 0,
        };
        d.put(1, 1); // BFINAL
        d.put(1, 2); // BTYPE = fixed Huffman
        d
    }
    fn put(&mut self, value: u32, count: u32) {
        self.acc |= (value as u64) << self.bits;
        self.bits += count;
        while self.bits >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.bits -= 8;
        }
    }
    /// Huffman codes go most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        let reversed = code.reverse_bits() >> (32 - len);
        self.put(reversed, len);
    }
    fn literal(&mut self, byte: u8) {
        match byte {
            0..=143 => self.code(0x30 + byte as u32, 8),
            _ => self.code(0x190 + (byte as u32 - 144), 9),
        }
    }
    /// Copies the previous byte 258 times: length code 285, distance code 0.
    fn repeat_258(&mut self) {
        self.code(0xC5, 8);
        self.code(0, 5);
    }
    fn finish(mut self) -> Vec<u8> {
        self.code(0, 7); // end of block
        if self.bits > 0 {
            self.put(0, 8 - self.bits);
        }
        self.out
    }
}

struct Entry {
    name: &'static str,
    method: u16,
    data: Vec<u8>,
    crc: u32,
    size: u32,
}

fn zip(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let offset = out.len() as u32;
        let fields = |sig: u32, central_dir: bool| {
            let mut h = Vec::new();
            h.extend_from_slice(&sig.to_le_bytes());
            if central_dir {
                h.extend_from_slice(&20u16.to_le_bytes()); // made by
            }
            h.extend_from_slice(&20u16.to_le_bytes()); // needed
            h.extend_from_slice(&0u16.to_le_bytes()); // flags
            h.extend_from_slice(&e.method.to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes()); // time
            h.extend_from_slice(&0x21u16.to_le_bytes()); // date 1980-01-01
            h.extend_from_slice(&e.crc.to_le_bytes());
            h.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
            h.extend_from_slice(&e.size.to_le_bytes());
            h.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes()); // extra
            if central_dir {
                h.extend_from_slice(&0u16.to_le_bytes()); // comment
                h.extend_from_slice(&0u16.to_le_bytes()); // disk
                h.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
                h.extend_from_slice(&0u32.to_le_bytes()); // external attributes
                h.extend_from_slice(&offset.to_le_bytes());
            }
            h.extend_from_slice(e.name.as_bytes());
            h
        };
        out.extend(fields(0x0403_4b50, false));
        out.extend_from_slice(&e.data);
        central.extend(fields(0x0201_4b50, true));
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A DOCX whose `word/document.xml` inflates to just over 256 MiB (the default cap) from about
/// 1.7 MB: well-formed XML up to the point where it repeats one character. `declared` is the
/// uncompressed size its headers claim: the truth, or a lie.
fn docx_bomb(declared: Option<u32>) -> (Vec<u8>, u64) {
    let prefix = br#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>a"#;
    let target: u64 = 256 * 1024 * 1024 + 1024 * 1024;
    let repeats = (target - prefix.len() as u64) / 258 + 1;
    let mut d = Deflate::new();
    for &b in prefix.iter() {
        d.literal(b);
    }
    for _ in 0..repeats {
        d.repeat_258();
    }
    let inflated = prefix.len() as u64 + repeats * 258;
    // The CRC is never reached: a reader that gets to the end of this entry has already lost.
    let bytes = deflated_docx(d.finish(), 0, declared.unwrap_or(inflated as u32));
    (bytes, inflated)
}

#[test]
fn the_hand_made_deflate_stream_inflates_as_intended() {
    // A small stream from the same writer, checked against the parser's own DOCX path: the
    // bomb generator produces real DEFLATE, not bytes the reader happens to choke on.
    let mut d = Deflate::new();
    let text = r#"<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>第一条 zip"#;
    for &b in text.as_bytes() {
        d.literal(b);
    }
    d.repeat_258();
    let tail = "</w:t></w:r></w:p></w:body></w:document>";
    for &b in tail.as_bytes() {
        d.literal(b);
    }
    let mut inflated = text.as_bytes().to_vec();
    inflated.extend(std::iter::repeat_n(b'p', 258));
    inflated.extend_from_slice(tail.as_bytes());
    let bytes = deflated_docx(d.finish(), crc32(&inflated), inflated.len() as u32);
    let doc = docpipe_parse::parse(
        &bytes,
        &docpipe_parse::Hint::new("small.docx", ""),
        &docpipe_parse::Limits::default(),
    )
    .expect("the small stream parses");
    let text: String = doc.layouts.iter().map(|l| l.text.as_str()).collect();
    assert!(
        text.contains(&format!("第一条 zip{}", "p".repeat(258))),
        "{text}"
    );
}

/// A DOCX of two entries: the content types, stored, and `word/document.xml`, deflated, with the
/// CRC and uncompressed size its headers are to claim.
fn deflated_docx(document: Vec<u8>, crc: u32, size: u32) -> Vec<u8> {
    let types = br#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#.to_vec();
    zip(&[
        Entry {
            name: "[Content_Types].xml",
            method: 0,
            crc: crc32(&types),
            size: types.len() as u32,
            data: types,
        },
        Entry {
            name: "word/document.xml",
            method: 8,
            crc,
            size,
            data: document,
        },
    ])
}

#[tokio::test]
async fn a_docx_zip_bomb_fails_at_parse_with_the_zip_bomb_message() {
    let f = fixture(MAX).await;
    let (bomb, inflated) = docx_bomb(None);
    assert!(bomb.len() < 2 * 1024 * 1024, "{} bytes", bomb.len());
    assert!(inflated > docpipe_parse::Limits::default().max_decompressed_bytes);
    let job = f.stored("uploads/bomb.docx", &bomb).await;
    let outcome = parse_beside_a_good_one(&f, &job).await;
    assert!(
        matches!(outcome, ParseOutcome::Failed { .. }),
        "{outcome:?}"
    );
    let run = failed_run(&f, &job.doc_id, "parse").await;
    assert!(
        run.error_message.contains("zip bomb guard") && run.error_message.contains("too_large"),
        "{}",
        run.error_message
    );
}

#[tokio::test]
async fn a_docx_zip_bomb_that_lies_about_its_size_fails_at_parse_too() {
    let f = fixture(MAX).await;
    let (bomb, _) = docx_bomb(Some(4096));
    let job = f.stored("uploads/liar.docx", &bomb).await;
    let outcome = parse_beside_a_good_one(&f, &job).await;
    assert!(
        matches!(outcome, ParseOutcome::Failed { .. }),
        "{outcome:?}"
    );
    let run = failed_run(&f, &job.doc_id, "parse").await;
    // The archive reader stops at the declared size; what is left is a corrupt entry.
    assert!(
        run.error_message.contains("word/document.xml")
            && (run.error_message.contains("(corrupt)")
                || run.error_message.contains("(too_large)")),
        "{}",
        run.error_message
    );
}

/// A hit carries the best passage and a bounded excerpt of its article, never the whole block
/// however long it is; the whole article is one request away (its `article_url`).
#[tokio::test]
async fn a_search_hit_is_bounded_whatever_the_article_and_the_article_is_one_request_away() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let sentence = "用人单位应当依法建立和完善劳动规章制度，保障劳动者享有劳动权利、履行劳动义务。";
    let article: String = sentence.repeat(3_000 / sentence.chars().count() + 1);
    let text =
        format!("# 超长条文测试条例\n\n第一条 {article}\n\n第二条 本条例自公布之日起施行。\n");
    let doc_id = p.ingest("uploads/long-article.md", text.as_bytes()).await;
    let r = p
        .search(
            "劳动规章制度",
            10,
            docpipe_search::Mode::Keyword,
            &docpipe_core::filters::Filters::default(),
        )
        .await;
    let hit = r
        .hits
        .iter()
        .find(|h| h.doc_id == doc_id && h.article_chars > 2_500)
        .unwrap_or_else(|| panic!("the long article is found: {:?}", r.hits));
    assert!(hit.article_excerpt.chars().count() <= docpipe_search::ARTICLE_EXCERPT_CHARS);
    assert!(hit.article_truncated);
    assert!(hit.article_excerpt.contains(&hit.text) || hit.chunk_id.is_some());
    let body = serde_json::to_string(&r).unwrap();
    assert!(
        body.len() < 10 * 3 * (docpipe_search::ARTICLE_EXCERPT_CHARS * 3 + 4_096),
        "{} bytes",
        body.len()
    );
    // The whole article, as the hit's URL names it.
    let semantic_id = hit
        .article_url
        .rsplit_once("semantic_id=")
        .map(|(_, id)| id.to_string())
        .unwrap();
    assert_eq!(
        hit.article_url,
        format!("/documents/{doc_id}/blocks?semantic_id={semantic_id}")
    );
    let blocks = docpipe_db::views::blocks(
        &**p.db.client().await,
        &doc_id,
        &docpipe_db::views::BlockFilter {
            semantic_id: Some(hit.semantic_id.clone()),
            ..Default::default()
        },
        None,
        10,
    )
    .await
    .unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].text.chars().count(), hit.article_chars);
    p.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// Issue 29: inputs that made a parse run without end, or without bound

/// A PDF of `objects` (object 1 is the catalog), with a correct cross-reference table.
fn raw_pdf(objects: &[String]) -> Vec<u8> {
    let mut out: Vec<u8> = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for o in &offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn stream(data: &str) -> String {
    format!("<< /Length {} >>\nstream\n{data}\nendstream", data.len())
}

/// The probe of issue 29: outline entries with empty titles pointing at each other through
/// /Next made parse run with no end in sight. It parses, beside a good neighbour, at once.
#[tokio::test]
async fn a_pdf_whose_untitled_outline_entries_form_a_cycle_parses() {
    let f = fixture(MAX).await;
    let pdf = raw_pdf(&[
        "<< /Type /Catalog /Pages 2 0 R /Outlines 5 0 R >>".into(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R /Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>".into(),
        stream("BT /F1 12 Tf 10 50 Td (Article 1 applies here.) Tj ET"),
        "<< /Type /Outlines /First 6 0 R /Count 2 >>".into(),
        "<< /Title () /Parent 5 0 R /Next 7 0 R >>".into(),
        "<< /Title () /Parent 5 0 R /Prev 6 0 R /Next 6 0 R >>".into(),
    ]);
    assert!(pdf.len() < 1024, "{} bytes", pdf.len());
    let job = f.stored("uploads/cyclic-outline.pdf", &pdf).await;
    let outcome = parse_beside_a_good_one(&f, &job).await;
    assert!(
        matches!(outcome, ParseOutcome::Parsed { .. }),
        "{outcome:?}"
    );
}

/// An image-only page of 10,000 × 10,000 pt failed as "corrupt document: pdfium cannot render
/// a page for OCR: PdfiumLibraryInternalError(\n Unknown,\n)". It fails as too large, with its
/// size and the limit, in one line.
#[tokio::test]
async fn an_image_page_too_large_for_ocr_fails_at_parse_with_a_readable_reason() {
    let f = fixture(MAX).await;
    let pdf = raw_pdf(&[
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".into(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10000 10000] /Contents 4 0 R /Resources << /XObject << /Im0 5 0 R >> >> >>".into(),
        stream("q 10000 0 0 10000 0 0 cm /Im0 Do Q"),
        "<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 1 >>\nstream\n\u{7f}\nendstream".into(),
    ]);
    let job = f.stored("uploads/poster.pdf", &pdf).await;
    let outcome = parse_beside_a_good_one(&f, &job).await;
    assert!(
        matches!(outcome, ParseOutcome::Failed { .. }),
        "{outcome:?}"
    );
    let run = failed_run(&f, &job.doc_id, "parse").await;
    assert_eq!(
        run.error_message,
        "document too large: page 1 is 10,000 × 10,000 pt; OCR renders at most 25 megapixels a \
         page, which at that size is 36 dpi, under the 100 dpi it needs to read text (too_large)"
    );
}

/// A document that makes more chunks than `DOCPIPE_MAX_CHUNKS` fails at parse, permanently,
/// saying how many it makes; nothing of it reaches the index queue or the snapshot.
#[tokio::test]
async fn a_document_over_the_chunk_limit_fails_at_parse_saying_how_many_it_makes() {
    let mut f = fixture(MAX).await;
    f.parse.config.limits.max_chunks = 100;
    let text = "本条例所称数据处理，包括数据的收集、存储、使用、加工、传输、提供、公开等。\n\n"
        .repeat(2_000);
    let expected = {
        let doc = docpipe_parse::parse(
            text.as_bytes(),
            &docpipe_parse::Hint::new("many.txt", ""),
            &docpipe_parse::Limits::default(),
        )
        .unwrap();
        docpipe_parse::chunk(&doc, &f.parse.config.chunk).len()
    };
    assert!(expected > 100, "{expected}");
    let job = f.stored("uploads/many-chunks.txt", text.as_bytes()).await;
    let outcome = parse_beside_a_good_one(&f, &job).await;
    assert!(
        matches!(outcome, ParseOutcome::Failed { .. }),
        "{outcome:?}"
    );
    let run = failed_run(&f, &job.doc_id, "parse").await;
    assert_eq!(
        run.error_message,
        format!(
            "document too large: the document makes {expected} chunks; at most 100 are indexed \
             per document (DOCPIPE_MAX_CHUNKS) (too_large)"
        )
    );
    assert_eq!(
        f.count_for(
            "SELECT count(*) FROM semantic_blocks WHERE doc_id = $1",
            &job.doc_id
        )
        .await,
        0
    );
}

/// A text file without a heading became one semantic block as large as the file. It becomes
/// blocks of at most `MAX_BLOCK_CHARS`, each whole paragraphs, in the snapshot search reads.
#[tokio::test]
async fn a_text_without_headings_is_stored_as_blocks_within_the_limit() {
    let f = fixture(MAX).await;
    let paragraph =
        "本条例所称数据处理，包括数据的收集、存储、使用、加工、传输、提供、公开等。".repeat(10);
    let text = (0..3_000)
        .map(|i| format!("{i}　{paragraph}"))
        .collect::<Vec<_>>()
        .join("\n\n");
    assert!(text.len() > 3_000_000, "{} bytes", text.len());
    let job = f.stored("uploads/no-headings.txt", text.as_bytes()).await;
    let outcome = parse_beside_a_good_one(&f, &job).await;
    let ParseOutcome::Parsed {
        semantic_blocks, ..
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    let max = docpipe_parse::MAX_BLOCK_CHARS as i64;
    assert!(
        semantic_blocks as i64 >= text.chars().count() as i64 / max,
        "{semantic_blocks}"
    );
    let blocks = |sql: &'static str| f.count_for(sql, &job.doc_id);
    assert_eq!(
        blocks("SELECT count(*) FROM semantic_blocks WHERE doc_id = $1").await,
        semantic_blocks as i64
    );
    assert!(
        blocks("SELECT max(char_length(text))::int8 FROM semantic_blocks WHERE doc_id = $1").await
            <= max
    );
}
