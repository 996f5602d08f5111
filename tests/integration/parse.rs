//! The parse stage end to end: a stored original becomes the snapshot rows, four artifacts and an
//! index job, in one transaction guarded by a compare-and-set.

use docpipe_core::model::{DocStatus, JobMessage, RunStatus};
use docpipe_db::{documents, runs};
use docpipe_pipeline::stages::parse::{parse_job, ParseOutcome};
use helpers::{corpus_dir, sha256_hex, Pipeline};

async fn fixture() -> Pipeline {
    Pipeline::new(Pipeline::hash()).await
}

/// The document an upload under `key` became.
async fn doc(f: &Pipeline, key: &str) -> documents::Document {
    f.doc_at(key).await.expect("document")
}

fn markdown_ground_truth(text: &str) -> (usize, usize) {
    let chapter = regex::Regex::new(r"^#+\s*第[一二三四五六七八九十百千零〇两\d]+章").unwrap();
    let article = regex::Regex::new(r"^第[一二三四五六七八九十百千零〇两\d]+条").unwrap();
    let chapters = text.lines().filter(|l| chapter.is_match(l.trim())).count();
    let articles = text
        .lines()
        .filter(|l| article.is_match(l.trim_start_matches(['\u{3000}', ' '])))
        .count();
    (chapters, articles)
}

#[tokio::test]
async fn a_stored_law_becomes_its_snapshot_artifacts_and_an_index_job() {
    let f = fixture().await;
    let dir = corpus_dir().join("laws-formats/md");
    let path = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&path).unwrap();
    let (chapters, articles) = markdown_ground_truth(&text);
    assert!(articles > 0, "the fixture has articles");

    let job = f.stored("uploads/law.md", text.as_bytes()).await;
    let outcome = parse_job(&f.parse.deps(), &job).await.unwrap();
    let ParseOutcome::Parsed { chunks, .. } = outcome else {
        panic!("not parsed: {outcome:?}")
    };

    let doc = doc(&f, "uploads/law.md").await;
    assert_eq!(doc.status, DocStatus::Parsed);
    assert!(!doc.parser_name.is_empty());
    let id = doc.doc_id.as_str();
    let db_articles = f
        .count_for("SELECT count(*) FROM structure_nodes WHERE doc_id = $1 AND sub_type = 'article' AND title LIKE '第%条%'", id)
        .await;
    let db_chapters = f
        .count_for(
            "SELECT count(*) FROM structure_nodes WHERE doc_id = $1 AND sub_type = 'chapter'",
            id,
        )
        .await;
    assert_eq!(
        (db_chapters as usize, db_articles as usize),
        (chapters, articles)
    );

    assert_run_counts(&f, &job, id, chunks).await;
    assert_article_paths(&f, id).await;
    assert_artifacts(&f, &job, id, chunks).await;
    assert_eq!(
        f.aws.drain(&f.aws.index_queue, 10).await,
        [job.encode()],
        "exactly one index job"
    );
    let history: Vec<String> = runs::history(&**f.db.client().await, id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.to_status)
        .collect();
    assert_eq!(history, ["pending", "stored", "parsed"]);
}

/// The run's counts match the rows it wrote, and its timing has every phase.
async fn assert_run_counts(f: &Pipeline, job: &JobMessage, id: &str, chunks: usize) {
    let run = runs::get(&**f.db.client().await, job.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.run_status, RunStatus::Running);
    assert!(run.parsed_at.is_some());
    assert_eq!(run.vector_chunk_count as usize, chunks);
    let nodes = f
        .count_for("SELECT count(*) FROM structure_nodes WHERE doc_id = $1", id)
        .await;
    let blocks = f
        .count_for("SELECT count(*) FROM semantic_blocks WHERE doc_id = $1", id)
        .await;
    assert_eq!(run.structure_node_count as i64, nodes);
    assert_eq!(run.semantic_block_count as i64, blocks);
    assert!(run.layout_count > 0);
    assert_eq!(run.metadata["parse"]["format"], "markdown");
    // Where the time went: every phase recorded, together within the whole.
    let timing = &run.metadata["parse"];
    let ms = |k: &str| {
        timing[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {timing}"))
    };
    assert!(ms("fetch_ms") + ms("parse_ms") + ms("artifacts_ms") <= ms("duration_ms"));
}

/// Every article block carries its path from the root.
async fn assert_article_paths(f: &Pipeline, id: &str) {
    let row =
        f.db.client()
            .await
            .query_typed_one(
                "SELECT section_path, section_title FROM semantic_blocks
             WHERE doc_id = $1 AND block_type = 'article' ORDER BY id LIMIT 1",
                &[(&id, docpipe_db::Type::VARCHAR)],
            )
            .await
            .unwrap();
    let path: serde_json::Value = row.get(0);
    let title: String = row.get(1);
    assert_eq!(
        path.as_array().unwrap().last().unwrap().as_str().unwrap(),
        title
    );
    assert!(title.starts_with('第'), "{title}");
}

/// The four artifacts: objects in S3, rows whose size and checksum match the bytes.
async fn assert_artifacts(f: &Pipeline, job: &JobMessage, id: &str, chunks: usize) {
    let rows =
        f.db.client()
            .await
            .query_typed(
                "SELECT artifact_type, object_name, byte_size, checksum FROM document_artifacts
             WHERE doc_id = $1 AND run_id = $2 ORDER BY artifact_type",
                &[
                    (&id, docpipe_db::Type::VARCHAR),
                    (&job.run_id, docpipe_db::Type::INT8),
                ],
            )
            .await
            .unwrap();
    let types: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        types,
        [
            "layouts",
            "semantic_blocks",
            "structure_nodes",
            "vector_chunks"
        ]
    );
    for r in &rows {
        let name: String = r.get(1);
        assert_eq!(
            name,
            format!(
                "artifacts/{id}/{}/{}.json",
                job.run_id,
                r.get::<_, String>(0)
            )
        );
        let body = f.aws.get(&name).await;
        assert_eq!(r.get::<_, i64>(2), body.len() as i64);
        assert_eq!(r.get::<_, String>(3), sha256_hex(&body));
    }
    let chunk_items: Vec<docpipe_parse::VectorChunk> = docpipe_core::artifacts::decode_items(
        &f.aws
            .get(&format!("artifacts/{id}/{}/vector_chunks.json", job.run_id))
            .await,
    )
    .unwrap();
    assert_eq!(chunk_items.len(), chunks);
}

#[tokio::test]
async fn duplicate_and_concurrent_parse_messages_leave_the_same_rows() {
    let f = fixture().await;
    let job = f
        .stored("uploads/dup.md", "# 测试条例\n\n## 第一章 总则\n\n第一条 为了测试。\n\n第二条 本条例自公布之日起施行。\n".as_bytes())
        .await;
    let deps = f.parse.deps();
    let (a, b) = tokio::join!(parse_job(&deps, &job), parse_job(&deps, &job));
    let parsed = [&a, &b]
        .iter()
        .filter(|o| matches!(o, Ok(ParseOutcome::Parsed { .. })))
        .count();
    assert_eq!(parsed, 1, "{a:?} / {b:?}");
    let before = snapshot_counts(&f, &job.doc_id).await;
    assert_eq!(before.2, 4);
    // A late duplicate re-sends the index job and changes nothing else.
    let again = parse_job(&deps, &job).await.unwrap();
    assert!(
        matches!(again, ParseOutcome::IndexResent { .. }),
        "{again:?}"
    );
    assert_eq!(snapshot_counts(&f, &job.doc_id).await, before);
    let keys = f.aws.keys(&format!("artifacts/{}/", job.doc_id)).await;
    assert_eq!(keys.len(), 4, "{keys:?}");
}

async fn snapshot_counts(f: &Pipeline, id: &str) -> (i64, i64, i64, i64) {
    (
        f.count_for("SELECT count(*) FROM structure_nodes WHERE doc_id = $1", id)
            .await,
        f.count_for("SELECT count(*) FROM semantic_blocks WHERE doc_id = $1", id)
            .await,
        f.count_for(
            "SELECT count(*) FROM document_artifacts WHERE doc_id = $1",
            id,
        )
        .await,
        f.count_for(
            "SELECT count(*) FROM document_status_history WHERE doc_id = $1",
            id,
        )
        .await,
    )
}

#[tokio::test]
async fn a_message_for_a_superseded_run_is_dropped_and_leaves_nothing() {
    let f = fixture().await;
    let old = f
        .stored(
            "uploads/changing.md",
            "# 旧\n\n第一条 旧内容。\n".as_bytes(),
        )
        .await;
    let new = f
        .stored(
            "uploads/changing.md",
            "# 新\n\n第一条 新内容。\n".as_bytes(),
        )
        .await;
    assert_ne!(old.run_id, new.run_id);
    let outcome = parse_job(&f.parse.deps(), &old).await.unwrap();
    assert!(matches!(outcome, ParseOutcome::Stale { .. }), "{outcome:?}");
    assert_eq!(
        doc(&f, "uploads/changing.md").await.status,
        DocStatus::Stored
    );
    assert!(f
        .aws
        .keys(&format!("artifacts/{}/", old.doc_id))
        .await
        .is_empty());
    assert!(f.aws.drain(&f.aws.index_queue, 10).await.is_empty());
    // The current run parses as usual.
    assert!(matches!(
        parse_job(&f.parse.deps(), &new).await.unwrap(),
        ParseOutcome::Parsed { .. }
    ));
}

#[tokio::test]
async fn bad_input_fails_the_run_at_parse_with_a_clear_reason() {
    let f = fixture().await;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("uploads/empty.txt", Vec::new(), "empty"),
        (
            "uploads/picture.pdf",
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
            "png",
        ),
        (
            "uploads/random.pdf",
            std::fs::read(corpus_dir().join("malformed/random64k.pdf")).unwrap(),
            "",
        ),
        (
            "uploads/locked.pdf",
            std::fs::read(corpus_dir().join("sample-pdfs/libreoffice-writer-password.pdf"))
                .unwrap(),
            "encrypted",
        ),
    ];
    for (key, body, expect) in cases {
        let job = f.stored(key, &body).await;
        let outcome = parse_job(&f.parse.deps(), &job).await.unwrap();
        let ParseOutcome::Failed { reason, .. } = &outcome else {
            panic!("{key}: expected a failure, got {outcome:?}")
        };
        assert!(reason.to_lowercase().contains(expect), "{key}: {reason}");
        let doc = doc(&f, key).await;
        assert_eq!(doc.status, DocStatus::Failed, "{key}");
        let run = runs::get(&**f.db.client().await, job.run_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (run.run_status, run.failure_stage.as_str()),
            (RunStatus::Failed, "parse")
        );
        assert_eq!(run.error_message, *reason);
    }
    assert!(
        f.aws.drain(&f.aws.index_queue, 10).await.is_empty(),
        "nothing bad is indexed"
    );
}
