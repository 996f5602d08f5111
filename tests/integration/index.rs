//! The index stage and search against real Milvus: chunks become vectors, a reindex leaves one
//! run's vectors, duplicates leave one set, and every hit is checked against PostgreSQL.

use docpipe_core::filters::Filters;
use docpipe_core::model::{DocStatus, RunStatus};
use docpipe_pipeline::stages::index::{index_job, IndexOutcome};
use docpipe_search::Mode;
use docpipe_vector::VectorIndex;
use helpers::{article_lines, law_paths, law_probe, read_law};
use helpers::{vector_outage, HookedVectorIndex, Pipeline};

fn laws(n: usize) -> Vec<(String, String)> {
    // Laws with articles: a few entries are decisions without 第X条 lines.
    law_paths()
        .iter()
        .map(|p| read_law(p))
        .filter(|(_, text)| article_lines(text).len() >= 3)
        .take(n)
        .collect()
}

/// The whole reconcile, as `docpipe reconcile [--apply]` runs it.
async fn reconcile(p: &Pipeline, apply: bool) -> docpipe_pipeline::upkeep::reconcile::Report {
    docpipe_pipeline::upkeep::reconcile::reconcile(
        &p.db.db,
        p.store.objects.as_ref(),
        p.milvus.as_ref(),
        &p.aws.bucket,
        apply,
        usize::MAX,
    )
    .await
    .unwrap()
}

async fn chunk_count(p: &Pipeline, doc_id: &str) -> usize {
    p.doc(doc_id).await.unwrap().chunk_count as usize
}

#[tokio::test]
async fn a_sentence_from_an_article_finds_its_law_in_the_top_five_for_twenty_laws() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut ingested = Vec::new();
    for (name, text) in laws(20) {
        let doc = p
            .ingest_indexed(&format!("uploads/laws/{name}"), text.as_bytes())
            .await;
        let doc_id = doc.doc_id.clone();
        assert_eq!(
            p.milvus.count(&doc_id, None).await.unwrap(),
            doc.chunk_count as usize,
            "{name}: Milvus holds exactly chunk_count vectors"
        );
        ingested.push((doc_id, text));
    }
    let mut misses = Vec::new();
    for (doc_id, text) in &ingested {
        let sentence = law_probe(text);
        let result = p
            .search(&sentence, 5, Mode::Hybrid, &Filters::default())
            .await;
        assert!(result.hits.len() <= 5);
        assert!(
            result.hits.windows(2).all(|w| w[0].score >= w[1].score),
            "best first"
        );
        if !result.hits.iter().any(|h| &h.doc_id == doc_id) {
            misses.push(sentence);
        }
    }
    assert!(misses.is_empty(), "not in the top 5: {misses:?}");
    p.cleanup().await;
}

#[tokio::test]
async fn a_retry_reads_the_original_again_rather_than_trust_the_old_digest() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = laws(1).remove(0);
    let key = format!("reread/{name}");
    let doc_id = p.ingest(&key, text.as_bytes()).await;
    // The object is replaced and its event has not been handled yet.
    let replaced = format!("{text}\n\n第九百九十九条 替换后的条款。\n");
    p.aws.put(&key, replaced.as_bytes()).await;
    let retried = p.retry(&doc_id).await.unwrap();
    let want = helpers::sha256_hex(replaced.as_bytes());
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(doc.content_sha256, want);
    assert_eq!(doc.size_bytes, replaced.len() as i64);
    let run = docpipe_db::runs::get(&**p.db.client().await, retried.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.content_sha256, want);
    p.cleanup().await;
}

#[tokio::test]
async fn a_reindex_after_a_retry_leaves_exactly_the_new_runs_vectors() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = laws(1).remove(0);
    let doc_id = p.ingest(&format!("uploads/{name}"), text.as_bytes()).await;
    let first_run = p.doc(&doc_id).await.unwrap().current_run_id.unwrap();
    let retried = p.retry(&doc_id).await.unwrap();
    assert_ne!(retried.run_id, first_run);
    // The old run's vectors still answer until the new run is indexed.
    assert!(p.milvus.count(&doc_id, Some(first_run)).await.unwrap() > 0);
    p.drive(&doc_id).await;
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Indexed);
    assert_eq!(doc.current_run_id, Some(retried.run_id));
    assert_eq!(
        p.milvus.count(&doc_id, None).await.unwrap(),
        doc.chunk_count as usize
    );
    assert_eq!(p.milvus.count(&doc_id, Some(first_run)).await.unwrap(), 0);
    let runs = docpipe_db::runs::list_for_doc(&**p.db.client().await, &doc_id)
        .await
        .unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.run_status == RunStatus::Succeeded));
    assert_eq!(runs[0].trigger_type, "retry");
    // Each run was indexed at its first attempt; only the second had another run to clear.
    let attempts: Vec<i32> =
        p.db.column_for_doc(
            "SELECT index_attempts FROM document_processing_runs WHERE doc_id = $1 ORDER BY run_id",
            &doc_id,
        )
        .await;
    assert_eq!(attempts, vec![1, 1]);
    p.cleanup().await;
}

#[tokio::test]
async fn a_hit_whose_document_row_is_gone_is_never_returned() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut docs = Vec::new();
    for (name, text) in laws(3) {
        docs.push((
            p.ingest(&format!("uploads/{name}"), text.as_bytes()).await,
            text,
        ));
    }
    let (gone, text) = &docs[0];
    // A delete whose vector step failed: the row is gone, the vectors remain.
    p.db.client()
        .await
        .execute_typed(
            "DELETE FROM documents WHERE doc_id = $1",
            &[(gone, docpipe_db::Type::VARCHAR)],
        )
        .await
        .unwrap();
    assert!(p.milvus.count(gone, None).await.unwrap() > 0);
    let result = p
        .search(&law_probe(text), 10, Mode::Hybrid, &Filters::default())
        .await;
    assert!(
        result.hits.iter().all(|h| &h.doc_id != gone),
        "{:?}",
        result.hits
    );
    assert!(
        result.stale_dropped > 0,
        "the stale hits were seen and dropped"
    );
    p.cleanup().await;
}

#[tokio::test]
async fn two_index_messages_for_the_same_run_leave_one_set_of_vectors() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = laws(1).remove(0);
    let job = p.parsed(&format!("uploads/{name}"), text.as_bytes()).await;
    let doc_id = job.doc_id.clone();

    let deps = p.index.deps();
    let (a, b) = tokio::join!(index_job(&deps, &job), index_job(&deps, &job));
    let indexed = [&a, &b]
        .iter()
        .filter(|o| matches!(o, Ok(IndexOutcome::Indexed { .. })))
        .count();
    assert_eq!(indexed, 1, "{a:?} / {b:?}");
    for o in [&a, &b] {
        if let Err(e) = o {
            assert!(
                e.is_retryable(),
                "the loser is told to come back later: {e}"
            );
        }
    }
    // The loser's redelivery finds the run done.
    assert!(matches!(
        index_job(&deps, &job).await.unwrap(),
        IndexOutcome::Stale { .. }
    ));
    assert_eq!(
        p.milvus.count(&doc_id, None).await.unwrap(),
        chunk_count(&p, &doc_id).await
    );
    p.cleanup().await;
}

#[tokio::test]
async fn a_vector_index_outage_returns_the_message_and_the_redelivery_indexes() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = laws(1).remove(0);
    let job = p.parsed(&format!("uploads/{name}"), text.as_bytes()).await;
    let doc_id = job.doc_id.clone();

    let mut down = HookedVectorIndex::new(p.milvus.clone());
    down.before_insert = Box::new(|_| Err(vector_outage("insert")));
    let mut deps = p.index.deps();
    deps.vectors = &down;
    let err = index_job(&deps, &job).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Parsed, "nothing moved");
    let run = docpipe_db::runs::get(&**p.db.client().await, job.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.run_status, RunStatus::Running);

    // The redelivery (Milvus back) claims the released lease at once and finishes.
    let outcome = index_job(&p.index.deps(), &job).await.unwrap();
    assert!(
        matches!(outcome, IndexOutcome::Indexed { .. }),
        "{outcome:?}"
    );
    p.cleanup().await;
}

#[tokio::test]
async fn an_embedder_of_another_dimension_fails_the_run_permanently() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut texts = laws(2);
    let (name, text) = texts.remove(0);
    p.ingest(&format!("uploads/{name}"), text.as_bytes()).await;

    let (name, text) = texts.remove(0);
    let job = p.parsed(&format!("uploads/{name}"), text.as_bytes()).await;
    let doc_id = job.doc_id.clone();
    let other = docpipe_embed::HashEmbedder::new(128).unwrap();
    let mut deps = p.index.deps();
    deps.embedder = &other;
    let outcome = index_job(&deps, &job).await.unwrap();
    let IndexOutcome::Failed { reason, .. } = outcome else {
        panic!("expected a permanent failure, got {outcome:?}")
    };
    assert!(reason.contains("does not match"), "{reason}");
    let run = docpipe_db::runs::get(&**p.db.client().await, job.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run.run_status, run.failure_stage.as_str()),
        (RunStatus::Failed, "index")
    );
    assert_eq!(p.milvus.count(&doc_id, None).await.unwrap(), 0);
    p.cleanup().await;
}

#[tokio::test]
async fn a_delete_leaves_nothing_searchable_and_nothing_behind() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = laws(1).remove(0);
    let key = format!("uploads/{name}");
    let doc_id = p.ingest(&key, text.as_bytes()).await;
    assert!(!p.aws.keys(&format!("artifacts/{doc_id}/")).await.is_empty());
    let deleted = docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &doc_id)
        .await
        .unwrap();
    assert_eq!(
        deleted.objects_removed, 5,
        "the original and four artifacts"
    );
    assert!(p.doc(&doc_id).await.is_none());
    assert!(p.aws.keys(&format!("artifacts/{doc_id}/")).await.is_empty());
    assert!(p.aws.keys(&key).await.is_empty());
    assert_eq!(p.milvus.count(&doc_id, None).await.unwrap(), 0);
    let leftovers =
        p.db.client()
            .await
            .query_typed_one(
                "SELECT (SELECT count(*) FROM document_processing_runs WHERE doc_id = $1)
                  + (SELECT count(*) FROM document_status_history WHERE doc_id = $1)
                  + (SELECT count(*) FROM document_artifacts WHERE doc_id = $1)
                  + (SELECT count(*) FROM structure_nodes WHERE doc_id = $1)
                  + (SELECT count(*) FROM semantic_blocks WHERE doc_id = $1)",
                &[(&doc_id, docpipe_db::Type::VARCHAR)],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
    assert_eq!(leftovers, 0, "the cascades removed every row");
    assert!(matches!(
        docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &doc_id).await,
        Err(docpipe_pipeline::stages::delete::DeleteError::NotFound(_))
    ));
    p.cleanup().await;
}

#[tokio::test]
async fn reconcile_reports_orphans_in_a_dry_run_and_removes_them_when_applied() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut texts = laws(3);
    let (name, text) = texts.remove(0);
    let kept = p.ingest(&format!("uploads/{name}"), text.as_bytes()).await;
    let (name, text) = texts.remove(0);
    let orphaned = p.ingest(&format!("uploads/{name}"), text.as_bytes()).await;
    // A delete that lost its S3 and Milvus steps: only the row went.
    p.db.client()
        .await
        .execute_typed(
            "DELETE FROM documents WHERE doc_id = $1",
            &[(&orphaned, docpipe_db::Type::VARCHAR)],
        )
        .await
        .unwrap();
    // A stray artifact nobody recorded.
    p.aws
        .put(&format!("artifacts/{kept}/999999/layouts.json"), b"{}")
        .await;

    let dry = reconcile(&p, false).await;
    assert_eq!(dry.orphan_vector_docs, std::slice::from_ref(&orphaned));
    let mut want: Vec<String> = p.aws.keys(&format!("artifacts/{orphaned}/")).await;
    want.push(format!("artifacts/{kept}/999999/layouts.json"));
    let mut got = dry.orphan_artifacts.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(dry.stale_run_vectors.is_empty() && dry.failed_doc_vectors.is_empty());
    assert!(
        p.milvus.count(&orphaned, None).await.unwrap() > 0,
        "a dry run removes nothing"
    );

    let applied = reconcile(&p, true).await;
    assert_eq!(applied.orphan_vector_docs, dry.orphan_vector_docs);
    assert_eq!(p.milvus.count(&orphaned, None).await.unwrap(), 0);
    assert!(p
        .aws
        .keys(&format!("artifacts/{orphaned}/"))
        .await
        .is_empty());
    assert!(
        p.milvus.count(&kept, None).await.unwrap() > 0,
        "what PostgreSQL vouches for stays"
    );
    assert_eq!(p.aws.keys(&format!("artifacts/{kept}/")).await.len(), 4);
    let again = reconcile(&p, false).await;
    assert!(again.is_clean(), "{again:?}");
    p.cleanup().await;
}

/// The sweeper's reconcile lists the artifacts, then reads their rows, then the documents. A parse
/// that commits between those reads leaves it seeing the current run's artifacts without rows and
/// the document already `parsed`; they must stay, or the index stage finds its chunks gone (2 of
/// 150 documents failed so in the backlog drill).
#[tokio::test]
async fn the_reconcile_never_takes_the_current_runs_artifacts() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, text) = laws(1).remove(0);
    let job = p.parsed(&format!("uploads/{name}"), text.as_bytes()).await;
    // What the reconcile sees when the parse committed between its two reads: no rows yet.
    p.db.client()
        .await
        .execute_typed(
            "DELETE FROM document_artifacts WHERE doc_id = $1",
            &[(&job.doc_id, docpipe_db::Type::VARCHAR)],
        )
        .await
        .unwrap();
    let report = reconcile(&p, true).await;
    assert!(report.orphan_artifacts.is_empty(), "{report:?}");
    assert_eq!(
        p.aws
            .keys(&format!("artifacts/{}/", job.doc_id))
            .await
            .len(),
        4
    );
    p.cleanup().await;
}

/// The sweeper's reconcile reads a bounded page of each listing per sweep and goes on where the
/// last sweep stopped (its cursors are in PostgreSQL): no sweep reads more than its budget,
/// orphans past the first page are found a few sweeps later, and past the end the cursor starts
/// over. Before, every sweep read the whole collection and every artifact key at once.
#[tokio::test]
async fn the_sweepers_reconcile_pages_through_the_collection_and_the_artifacts_across_sweeps() {
    use docpipe_pipeline::upkeep::reconcile::{self, Budget};
    use helpers::HookedObjectStore;
    use std::sync::atomic::Ordering;
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut docs = Vec::new();
    for (name, text) in laws(3) {
        docs.push(
            p.ingest_indexed(&format!("uploads/{name}"), text.as_bytes())
                .await,
        );
    }
    // The document whose vectors come last in the collection loses its row.
    docs.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
    let orphan = docs.pop().unwrap().doc_id;
    p.db.client()
        .await
        .execute_typed(
            "DELETE FROM documents WHERE doc_id = $1",
            &[(&orphan, docpipe_db::Type::VARCHAR)],
        )
        .await
        .unwrap();
    // An artifact nobody recorded, after every other key.
    let stray = "artifacts/zz-gone/999999/layouts.json";
    p.aws.put(stray, b"{}").await;
    let before: usize = docs.iter().map(|d| d.chunk_count as usize).sum();
    assert!(before >= 20, "the kept documents hold {before} vectors");

    let vectors = HookedVectorIndex::new(p.milvus.clone());
    let objects = HookedObjectStore::new(p.store.objects.clone());
    let budget = Budget {
        vector_page: 10,
        vector_pages: 1,
        artifact_page: 3,
        artifact_pages: 1,
    };
    let mut sweeps = 0;
    let mut found = reconcile::Report::default();
    loop {
        let (listed, keys) = (
            vectors.listed.load(Ordering::SeqCst),
            objects.keys_listed.load(Ordering::SeqCst),
        );
        let r = reconcile::sweep(&p.db.db, &objects, &vectors, &p.aws.bucket, 200, budget)
            .await
            .unwrap();
        sweeps += 1;
        let (listed, keys) = (
            vectors.listed.load(Ordering::SeqCst) - listed,
            objects.keys_listed.load(Ordering::SeqCst) - keys,
        );
        assert!(
            listed <= 10 && keys <= 3,
            "sweep {sweeps} read {listed} vectors and {keys} artifact keys (budget 10 and 3)"
        );
        assert_eq!((r.vectors_read, r.artifacts_read), (listed, keys));
        if sweeps == 1 {
            assert!(
                r.orphan_vector_docs.is_empty() && r.orphan_artifacts.is_empty(),
                "the first page holds neither orphan: {r:?}"
            );
            let cursor = reconcile::read_cursor(
                &p.db.db,
                &reconcile::vector_cursor_name(p.milvus.collection()),
            )
            .await
            .unwrap();
            assert!(!cursor.position.is_empty() && cursor.passes == 0);
        }
        found.orphan_vector_docs.extend(r.orphan_vector_docs);
        found.orphan_artifacts.extend(r.orphan_artifacts);
        let passes = |name: String| {
            let db = &p.db.db;
            async move { reconcile::read_cursor(db, &name).await.unwrap().passes }
        };
        if passes(reconcile::vector_cursor_name(p.milvus.collection())).await >= 1
            && passes(reconcile::artifact_cursor_name(&p.aws.bucket)).await >= 1
        {
            break;
        }
        assert!(sweeps < 100, "the cursors never went round");
    }
    assert!(sweeps > 2, "{sweeps} sweeps");
    assert_eq!(found.orphan_vector_docs, vec![orphan.clone()]);
    assert!(
        p.aws.keys(&format!("artifacts/{orphan}/")).await.is_empty(),
        "the orphan's artifacts went"
    );
    assert_eq!(
        found.orphan_artifacts.len(),
        5,
        "{:?}",
        found.orphan_artifacts
    );
    assert!(found
        .orphan_artifacts
        .iter()
        .all(|k| k.starts_with(&format!("artifacts/{orphan}/")) || k == stray));
    assert_eq!(p.milvus.count(&orphan, None).await.unwrap(), 0);
    assert!(p.aws.keys("artifacts/zz-gone/").await.is_empty());
    for d in &docs {
        assert_eq!(
            p.milvus.count(&d.doc_id, None).await.unwrap(),
            d.chunk_count as usize,
            "what PostgreSQL vouches for stays"
        );
        assert_eq!(
            p.aws.keys(&format!("artifacts/{}/", d.doc_id)).await.len(),
            4
        );
    }
    // The sweeper's housekeeping goes the same way: from the cursor, within its budget.
    let kept = docpipe_pipeline::upkeep::housekeeping::housekeeping(
        &docpipe_pipeline::upkeep::housekeeping::HousekeepingDeps {
            db: &p.db.db,
            objects: &objects,
            vectors: &vectors,
            bucket: &p.aws.bucket,
            clock: &p.aws.clock,
        },
        200,
    )
    .await;
    assert!(kept.problems.is_empty(), "{:?}", kept.problems);
    assert!(kept.reconciled.is_clean(), "{:?}", kept.reconciled);
    assert!(kept.reconciled.vectors_read <= Budget::SWEEP.vector_page * Budget::SWEEP.vector_pages);
    p.cleanup().await;
}

/// The offline default embedder end to end: Chinese and cross-lingual English queries find the law.
#[cfg(feature = "e5")]
#[tokio::test]
async fn e5_small_finds_laws_by_chinese_and_english_questions() {
    let model =
        docpipe_embed::e5::default_model_path().expect("run scripts/fetch-e5.sh (make up does)");
    // As the dev runner and the API build it: with the built-in query adapter.
    let e5 = docpipe_embed::E5Embedder::load(&model, None)
        .and_then(|e| e.with_query_adapter(Some(docpipe_embed::e5::builtin_query_adapter())))
        .expect("the e5 model loads");
    let p = Pipeline::new(std::sync::Arc::new(e5)).await;
    let dir = helpers::corpus_dir().join("laws-formats/md");
    let mut ids = std::collections::HashMap::new();
    for (file, short) in [
        ("law-15978a0e.md", "wetland"),
        ("law-23989715.md", "coal"),
        ("law-2c32f47f.md", "heating"),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let doc = p
            .ingest_indexed(&format!("uploads/{file}"), text.as_bytes())
            .await;
        ids.insert(short, doc.doc_id);
    }
    let run = docpipe_db::runs::list_for_doc(&**p.db.client().await, &ids["wetland"])
        .await
        .unwrap();
    assert_eq!(run[0].embedding_model, p.index.embedder.model_id());
    for (query, want) in [
        ("湿地保护应当遵循什么原则？", "wetland"),
        ("散煤的销售和燃用有哪些限制", "coal"),
        (
            "Who pays for residential heating and when does the heating season start?",
            "heating",
        ),
        ("protection and restoration of wetlands", "wetland"),
    ] {
        let result = p.search(query, 5, Mode::Hybrid, &Filters::default()).await;
        assert_eq!(
            result.parameters.query_adapter.as_deref(),
            Some(docpipe_embed::e5::BUILTIN_QUERY_ADAPTER)
        );
        assert_eq!(
            result.parameters.fusion,
            docpipe_search::fusion::ADAPTED_FUSION
        );
        assert!(
            result.hits.iter().any(|h| h.doc_id == ids[want]),
            "{query:?} did not find the {want} law: {:?}",
            result
                .hits
                .iter()
                .map(|h| (&h.doc_name, h.score))
                .collect::<Vec<_>>()
        );
    }
    p.cleanup().await;
}
