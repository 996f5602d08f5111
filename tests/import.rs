//! Legacy import (seed 000 §7.3): idempotent, no runs, bad records refused one by one.

use docpipe::legacy::import;
use docpipe_tests::TestDb;

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
    let report = import(&t.db, &file).await.unwrap();
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
                    (SELECT count(*) FROM document_status_history),
                    (SELECT doc_name FROM documents WHERE doc_id = 'legacy-006')
             FROM documents WHERE doc_id = 'legacy-001'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "indexed");
    assert_eq!(row.get::<_, i32>(1), 12);
    assert_eq!(row.get::<_, String>(2), "t1");
    assert!(row.get::<_, String>(3).starts_with("2024-05-01"));
    assert_eq!(
        (row.get::<_, i64>(4), row.get::<_, i64>(5)),
        (0, 0),
        "no runs, no history"
    );
    assert_eq!(
        row.get::<_, String>(6),
        "x'; DROP TABLE documents; --",
        "stored as data"
    );

    // Again: nothing new, nothing changed.
    let again = import(&t.db, &file).await.unwrap();
    assert!(again.imported.is_empty());
    assert_eq!(again.skipped, ["legacy-001", "legacy-002", "legacy-006"]);
    assert!(import(&t.db, "{\"not\": \"an array\"}").await.is_err());
}
