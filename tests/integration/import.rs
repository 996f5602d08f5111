//! Legacy import (seed 000 §7.3): idempotent, through the state machine (a run and a history row
//! that say it was imported), bad records refused one by one; its originals are recorded in their
//! bucket, so a retry indexes one and a delete removes it.

use docpipe_pipeline::legacy_import::import;
use helpers::TestDb;

#[tokio::test]
async fn legacy_records_load_once_without_runs_and_bad_ones_are_refused_with_reasons() {
    let t = TestDb::new().await;
    let file = serde_json::json!([
        {"doc_id": "legacy-001", "doc_name": "中华人民共和国测试法", "file_name": "a.pdf",
         "object_name": "raw/a.pdf", "status": "indexed", "chunk_count": 12,
         "metadata": {"parse_task_id": "t1"}, "created_at": "2024-05-01T08:00:00Z"},
        {"doc_id": "legacy-002", "status": "failed", "error_message": "old failure"},
        {"doc_id": "../etc/passwd", "status": "indexed"},
        {"doc_id": "legacy-003", "status": "processing"},
        {"doc_id": "legacy-004", "status": "indexed", "colour": "blue"},
        {"doc_id": "legacy-005", "size_bytes": -1},
        {"doc_name": "no id"},
        {"doc_id": "legacy-001", "status": "indexed"},
        "not an object",
        {"doc_id": "legacy-006", "doc_name": "x'; DROP TABLE documents; --", "status": "pending"}
    ])
    .to_string();
    let report = import(&t.db, &file, "legacy-bucket").await.unwrap();
    assert_eq!(report.imported, ["legacy-001", "legacy-002", "legacy-006"]);
    assert!(report.skipped.is_empty());
    let rejected: Vec<usize> = report.rejected.iter().map(|r| r.0).collect();
    assert_eq!(rejected, [2, 3, 4, 5, 6, 7, 8], "{:#?}", report.rejected);
    assert!(report.rejected[1].2.contains("processing"));
    assert!(
        report.rejected[2].2.contains("colour"),
        "{}",
        report.rejected[2].2
    );
    assert!(report.rejected[5].2.contains("earlier in the file"));

    let client = t.client().await;
    let row = client
        .query_typed_one(
            "SELECT status, chunk_count, metadata->>'parse_task_id', created_at::text,
                    (SELECT count(*) FROM document_processing_runs),
                    (SELECT count(*) FROM document_status_history WHERE stage = 'import'),
                    (SELECT doc_name FROM documents WHERE doc_id = 'legacy-006'),
                    metadata->'import'->>'legacy_status', error_message, source_bucket,
                    (SELECT failure_stage || ' ' || run_status FROM document_processing_runs r
                     WHERE r.run_id = documents.current_run_id)
             FROM documents WHERE doc_id = 'legacy-001'",
            &[],
        )
        .await
        .unwrap();
    // Nothing of it is indexed here: it says so, and search and status agree.
    assert_eq!(row.get::<_, String>(0), "failed");
    assert_eq!(row.get::<_, i32>(1), 0, "no chunks here");
    assert_eq!(row.get::<_, String>(2), "t1");
    assert!(row.get::<_, String>(3).starts_with("2024-05-01"));
    assert_eq!(
        (row.get::<_, i64>(4), row.get::<_, i64>(5)),
        (3, 3),
        "one run and one history row per imported record"
    );
    assert_eq!(
        row.get::<_, String>(6),
        "x'; DROP TABLE documents; --",
        "stored as data"
    );
    assert_eq!(row.get::<_, String>(7), "indexed");
    assert!(
        row.get::<_, String>(8).contains("retry it"),
        "{}",
        row.get::<_, String>(8)
    );
    assert_eq!(row.get::<_, String>(9), "legacy-bucket");
    assert_eq!(row.get::<_, String>(10), "import failed");

    // Again: nothing new, nothing changed.
    let again = import(&t.db, &file, "legacy-bucket").await.unwrap();
    assert!(again.imported.is_empty());
    assert_eq!(again.skipped, ["legacy-001", "legacy-002", "legacy-006"]);
    assert!(import(&t.db, "{\"not\": \"an array\"}", "legacy-bucket")
        .await
        .is_err());
}

#[tokio::test]
async fn an_imported_record_is_indexed_by_a_retry_and_its_original_goes_with_a_delete() {
    let p = helpers::Pipeline::new(helpers::Pipeline::hash()).await;
    let (_, law) = helpers::read_law(&helpers::law_paths()[0]);
    p.aws.put("raw/imported.md", law.as_bytes()).await;
    let file = serde_json::json!([{"doc_id": "legacy-law", "file_name": "imported.md",
        "object_name": "raw/imported.md", "content_type": "text/markdown", "status": "indexed"}])
    .to_string();
    let report = import(&p.db.db, &file, &p.aws.bucket).await.unwrap();
    assert_eq!(report.imported, ["legacy-law"]);

    let retried = p
        .retry("legacy-law")
        .await
        .expect("an imported record with its original can be retried");
    p.drive("legacy-law").await;
    let doc = p.doc("legacy-law").await.unwrap();
    assert_eq!(doc.status, docpipe_core::model::DocStatus::Indexed);
    assert_eq!(doc.current_run_id, Some(retried.run_id));
    assert_eq!(doc.content_sha256, helpers::sha256_hex(law.as_bytes()));
    assert!(
        docpipe_vector::VectorIndex::count(p.milvus.as_ref(), "legacy-law", None)
            .await
            .unwrap()
            > 0
    );

    docpipe_pipeline::stages::delete::delete(&p.delete_deps(), "legacy-law")
        .await
        .unwrap();
    assert!(
        p.aws.keys("raw/imported.md").await.is_empty(),
        "the original is removed"
    );
    assert!(p.doc("legacy-law").await.is_none());
    p.cleanup().await;
}
