//! Search at article level on the real stack: keyword (BM25 in PostgreSQL), dense (Milvus) and
//! hybrid; hits cited as lawyers cite them; an article the query names first; filters in every
//! mode; and a keyword index that follows every delete, retry and reindex exactly.

use docpipe_core::analyzer::ANALYZER;
use docpipe_core::filters::Filters;
use docpipe_core::model::DocStatus;
use docpipe_search::{Mode, SearchResult, ARTICLE_EXCERPT_CHARS};
use docpipe_vector::VectorIndex;
use helpers::{corpus_dir, Pipeline};

const MODES: [Mode; 3] = [Mode::Dense, Mode::Keyword, Mode::Hybrid];

/// A law of `corpus/questions/laws` by its INDEX.tsv name and, for the Civil Code, its 编.
fn question_law(name: &str, part: &str) -> (String, Vec<u8>) {
    let dir = corpus_dir().join("questions").join("laws");
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("laws/INDEX.tsv");
    let file = index
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|f| f.len() == 3 && f[1] == name && f[2].contains(part))
        .unwrap_or_else(|| panic!("{name} {part} in INDEX.tsv"))[0]
        .to_string();
    let body = std::fs::read(dir.join(&file)).expect("law file");
    (file, body)
}

/// Indexes a law and waits until dense search sees it.
async fn ingest_law(p: &Pipeline, name: &str, part: &str) -> String {
    let (file, body) = question_law(name, part);
    let doc_id = p
        .ingest_indexed(&format!("uploads/laws/{file}"), &body)
        .await
        .doc_id;
    p.wait_searchable(&doc_id).await;
    doc_id
}

/// The keyword index's own bookkeeping: every posting counted once in `keyword_terms`, every
/// block's term list matching its postings, nothing negative. Returns the rows of `doc_id`.
async fn keyword_rows(p: &Pipeline, doc_id: &str) -> (i64, i64) {
    let client = p.db.db.client().await.unwrap();
    let row = client
        .query_typed_one(
            "SELECT (SELECT count(*) FROM keyword_postings),
                    (SELECT COALESCE(sum(df), 0)::int8 FROM keyword_terms),
                    (SELECT COALESCE(sum(cardinality(terms)), 0)::int8 FROM keyword_blocks),
                    (SELECT count(*) FROM keyword_terms WHERE df < 0),
                    (SELECT count(*) FROM keyword_blocks WHERE doc_id = $1),
                    (SELECT COALESCE(max(run_id), 0) FROM keyword_documents WHERE doc_id = $1)",
            &[(&doc_id, tokio_postgres::types::Type::TEXT)],
        )
        .await
        .unwrap();
    let (postings, df, listed, negative): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        postings, df,
        "document frequencies count every posting once"
    );
    assert_eq!(
        postings, listed,
        "each block lists exactly its postings' terms"
    );
    assert_eq!(negative, 0);
    (row.get(4), row.get(5))
}

fn cited(r: &SearchResult) -> Vec<&str> {
    r.hits.iter().map(|h| h.citation.as_str()).collect()
}

/// A mode's answer has hits, and they came from the lists the mode asks for: dense hits all from
/// the vectors, keyword hits all from BM25, hybrid hits from both lists (the hash embedder finds
/// the nearest chunks whatever the query, so dense is never empty while anything is indexed).
fn assert_answered(r: &SearchResult, mode: Mode, what: &str) {
    assert!(!r.hits.is_empty(), "{what} ({mode:?}): no hits");
    match mode {
        Mode::Dense => assert!(
            r.hits
                .iter()
                .all(|h| h.dense_rank.is_some() || h.referenced),
            "{what} ({mode:?}): {:?}",
            cited(r)
        ),
        Mode::Keyword => assert!(
            r.hits
                .iter()
                .all(|h| h.keyword_rank.is_some() || h.referenced),
            "{what} ({mode:?}): {:?}",
            cited(r)
        ),
        Mode::Hybrid => assert!(
            r.hits.iter().any(|h| h.dense_rank.is_some())
                && r.hits.iter().any(|h| h.keyword_rank.is_some()),
            "{what} ({mode:?}): both lists contribute: {:?}",
            cited(r)
        ),
    }
}

#[tokio::test]
async fn hits_are_articles_cited_as_lawyers_cite_them_and_a_named_article_comes_first() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let marriage = ingest_law(&p, "民法典", "婚姻家庭编").await;
    let _contracts = ingest_law(&p, "民法典", "合同编").await;
    keyword_finds_article_39_without_vectors(&p).await;
    every_mode_answers_one_cited_hit_per_article(&p).await;
    a_named_article_comes_first_in_every_mode(&p, &labour, &marriage).await;
    // A law nobody indexed, an article a law lacks: no reference, and no error.
    for query in ["刑法 第 264 条", "劳动合同法第九百条"] {
        let r = p.search(query, 5, Mode::Hybrid, &Filters::default()).await;
        assert!(
            r.references.is_empty() && r.hits.iter().all(|h| !h.referenced),
            "{query}"
        );
        assert!(!r.hits.is_empty(), "{query}: still answered, by similarity");
    }
    p.cleanup().await;
}

/// Words of article 39 that everyday questions use: BM25 finds it without any vectors.
async fn keyword_finds_article_39_without_vectors(p: &Pipeline) {
    let r = p
        .search(
            "劳动者严重违反用人单位的规章制度，单位可以解除劳动合同吗",
            10,
            Mode::Keyword,
            &Filters::default(),
        )
        .await;
    assert_eq!(r.mode, Mode::Keyword);
    assert!(
        cited(&r)[..3].contains(&"《中华人民共和国劳动合同法》第三十九条"),
        "{:?}",
        cited(&r)
    );
    let top = &r.hits[0];
    assert!(top.keyword_rank == Some(1) && top.dense_rank.is_none());
    assert!(top.chunk_id.is_none() && !top.text.is_empty());
    assert!(
        top.article_excerpt.contains(&top.text),
        "the passage is part of the article"
    );
    assert_eq!(top.law_title, "中华人民共和国劳动合同法");
}

/// In every mode: one hit per article, best first, each cited and its passage in the article.
async fn every_mode_answers_one_cited_hit_per_article(p: &Pipeline) {
    for mode in MODES {
        let r = p
            .search(
                "公司解除劳动合同要给经济补偿吗",
                20,
                mode,
                &Filters::default(),
            )
            .await;
        assert_answered(&r, mode, "经济补偿");
        let mut keys: Vec<(&str, &str)> = r
            .hits
            .iter()
            .map(|h| (h.doc_id.as_str(), h.semantic_id.as_str()))
            .collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "{mode:?}: one hit per article");
        assert!(r.hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert_eq!(r.parameters.fusion.method, "rrf");
        assert_eq!(r.parameters.analyzer, ANALYZER);
        for h in &r.hits {
            assert!(h.citation.starts_with('《'), "{}", h.citation);
            assert!(h.article_excerpt.contains(&h.text) || h.chunk_id.is_some());
            assert!(h.article_excerpt.chars().count() <= ARTICLE_EXCERPT_CHARS);
        }
    }
}

/// An article the query names is the first hit in every mode. The Civil Code is eight files
/// under one name; the number picks the file.
async fn a_named_article_comes_first_in_every_mode(p: &Pipeline, labour: &str, marriage: &str) {
    for (query, want, doc) in [
        (
            "民法典第一千零四十二条",
            "《中华人民共和国民法典》第一千零四十二条",
            marriage,
        ),
        (
            "中华人民共和国民法典第1042条是什么",
            "《中华人民共和国民法典》第一千零四十二条",
            marriage,
        ),
        (
            "劳动合同法第39条",
            "《中华人民共和国劳动合同法》第三十九条",
            labour,
        ),
        (
            "《劳动合同法》 第 三十九 条",
            "《中华人民共和国劳动合同法》第三十九条",
            labour,
        ),
    ] {
        for mode in MODES {
            let r = p.search(query, 5, mode, &Filters::default()).await;
            let first = &r.hits[0];
            assert_eq!(first.citation, want, "{query} ({mode:?}): {:?}", cited(&r));
            assert!(first.referenced && first.doc_id == doc);
            assert_eq!(r.references, vec![want.to_string()]);
        }
    }
}

#[tokio::test]
async fn filters_apply_in_every_mode() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let marriage = ingest_law(&p, "民法典", "婚姻家庭编").await;
    let query = "解除劳动合同 离婚 财产";
    for mode in MODES {
        let unfiltered = p.search(query, 20, mode, &Filters::default()).await;
        assert_answered(&unfiltered, mode, "unfiltered");
        let docs: std::collections::BTreeSet<&str> =
            unfiltered.hits.iter().map(|h| h.doc_id.as_str()).collect();
        // The test embedder hashes words, so only the keyword side is sure to reach both.
        if mode != Mode::Dense {
            assert_eq!(docs.len(), 2, "{mode:?} finds both laws unfiltered");
        }
        for doc in [&labour, &marriage] {
            let only = Filters {
                doc_ids: vec![doc.clone()],
                ..Filters::default()
            };
            let r = p.search(query, 20, mode, &only).await;
            assert_answered(&r, mode, "one document");
            assert!(r.hits.iter().all(|h| &h.doc_id == doc), "{mode:?}");
        }
        let none = Filters {
            regulation_type: Some("no such type".into()),
            ..Filters::default()
        };
        assert!(
            p.search(query, 20, mode, &none).await.hits.is_empty(),
            "{mode:?}"
        );
        let tagged = Filters {
            tags: vec!["no-such-tag".into()],
            ..Filters::default()
        };
        assert!(
            p.search(query, 20, mode, &tagged).await.hits.is_empty(),
            "{mode:?}"
        );
        // A named article outside the filter is not let through either.
        let r = p
            .search(
                "劳动合同法第39条",
                5,
                mode,
                &Filters {
                    doc_ids: vec![marriage.clone()],
                    ..Filters::default()
                },
            )
            .await;
        assert!(
            r.hits.iter().all(|h| h.doc_id == marriage && !h.referenced),
            "{mode:?}"
        );
    }
    p.cleanup().await;
}

#[tokio::test]
async fn the_keyword_index_follows_delete_and_retry_exactly() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let marriage = ingest_law(&p, "民法典", "婚姻家庭编").await;
    let labour_query = "用人单位 劳动者 劳动合同 试用期";
    let finds = |r: &SearchResult, doc: &str| r.hits.iter().any(|h| h.doc_id == doc);
    let (blocks, run) = keyword_rows(&p, &labour).await;
    assert!(blocks > 50);
    assert_eq!(Some(run), p.doc(&labour).await.unwrap().current_run_id);
    let r = p
        .search(labour_query, 10, Mode::Keyword, &Filters::default())
        .await;
    assert!(finds(&r, &labour));

    // Retry: from the moment it is accepted until its run is indexed, the old run's keyword
    // rows are gone, like its vectors stop counting.
    p.retry(&marriage).await.unwrap();
    assert_eq!(keyword_rows(&p, &marriage).await.0, 0);
    let r = p
        .search("结婚 离婚 夫妻", 20, Mode::Keyword, &Filters::default())
        .await;
    assert!(!finds(&r, &marriage));
    p.drive(&marriage).await;
    p.wait_searchable(&marriage).await;
    let doc = p.doc(&marriage).await.unwrap();
    assert_eq!(doc.status, DocStatus::Indexed);
    let (blocks, run) = keyword_rows(&p, &marriage).await;
    assert!(blocks > 50);
    assert_eq!(Some(run), doc.current_run_id, "the new run's rows, only");
    let r = p
        .search("结婚 离婚 夫妻", 20, Mode::Keyword, &Filters::default())
        .await;
    assert!(finds(&r, &marriage));

    // Delete: nothing of it is found by any mode, and its terms stop counting, at once.
    docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &labour)
        .await
        .unwrap();
    assert_eq!(keyword_rows(&p, &labour).await.0, 0);
    for mode in MODES {
        let r = p.search(labour_query, 50, mode, &Filters::default()).await;
        assert!(!finds(&r, &labour), "{mode:?}");
        assert!(
            finds(&r, &marriage),
            "{mode:?}: the other law still answers"
        );
        let r = p
            .search("劳动合同法第39条", 5, mode, &Filters::default())
            .await;
        assert!(r.references.is_empty(), "{mode:?}");
    }
    p.cleanup().await;
}

#[tokio::test]
async fn a_keyword_reindex_rebuilds_from_postgres_without_a_new_run() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let query = "劳动者严重违反用人单位的规章制度";
    let before = p
        .search(query, 10, Mode::Keyword, &Filters::default())
        .await;
    let (blocks, run) = keyword_rows(&p, &labour).await;
    let vectors = p.milvus.count(&labour, None).await.unwrap();
    // As if an older analyzer had indexed it, with a posting it would not write today.
    let client = p.db.db.client().await.unwrap();
    client
        .batch_execute("UPDATE keyword_documents SET analyzer = 'older/v0'")
        .await
        .unwrap();
    drop(client);
    let done = docpipe_pipeline::stages::keywords::reindex(&p.db.db, 100)
        .await
        .unwrap();
    assert_eq!(done.documents, 1);
    assert_eq!(done.blocks as i64, blocks);
    assert_eq!(
        keyword_rows(&p, &labour).await,
        (blocks, run),
        "same run, same blocks"
    );
    let doc = p.doc(&labour).await.unwrap();
    assert_eq!(
        doc.current_run_id,
        Some(run),
        "no new run: nothing parsed or embedded"
    );
    assert_eq!(p.milvus.count(&labour, None).await.unwrap(), vectors);
    let after = p
        .search(query, 10, Mode::Keyword, &Filters::default())
        .await;
    assert_eq!(cited(&after), cited(&before));
    // Up to date: a second pass has nothing to do.
    let again = docpipe_pipeline::stages::keywords::reindex(&p.db.db, 100)
        .await
        .unwrap();
    assert_eq!(again.documents, 0);
    p.cleanup().await;
}

/// The plan PostgreSQL ran for `sql` with `params`, as `EXPLAIN (ANALYZE, FORMAT JSON)` gives
/// it: its top node.
pub(crate) async fn plan_of(
    client: &impl docpipe_db::GenericClient,
    sql: &str,
    params: &[(&(dyn tokio_postgres::types::ToSql + Sync), docpipe_db::Type)],
) -> serde_json::Value {
    let explain = format!("EXPLAIN (ANALYZE, FORMAT JSON) {sql}");
    let plan: serde_json::Value = client
        .query_typed_one(&explain, params)
        .await
        .unwrap()
        .get(0);
    plan[0]["Plan"].clone()
}

/// Rows the plan read from `relation`: kept and filtered out, over every loop.
pub(crate) fn rows_read(plan: &serde_json::Value, relation: &str) -> f64 {
    let here = if plan["Relation Name"] == relation {
        let per_loop = [
            "Actual Rows",
            "Rows Removed by Filter",
            "Rows Removed by Index Recheck",
        ]
        .iter()
        .filter_map(|k| plan[*k].as_f64())
        .sum::<f64>();
        per_loop * plan["Actual Loops"].as_f64().unwrap_or(1.0)
    } else {
        0.0
    };
    here + plan["Plans"]
        .as_array()
        .map_or(0.0, |ps| ps.iter().map(|p| rows_read(p, relation)).sum())
}

/// The keyword statement's live check costs one key lookup per scored candidate, whatever the
/// planner knows. Before, it read every block of every live document: a nested loop over all of
/// them per candidate in a database fresh from a load (no statistics yet), a hash join over all of
/// them once statistics came.
#[tokio::test]
async fn the_keyword_live_check_reads_only_its_candidates() {
    use docpipe_core::analyzer::Analyzer;
    use docpipe_db::keyword;
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let marriage = ingest_law(&p, "民法典", "婚姻家庭编").await;
    let live_blocks = keyword_rows(&p, &labour).await.0 + keyword_rows(&p, &marriage).await.0;
    let client = p.db.db.client().await.unwrap();
    let terms = Analyzer::shared().query_terms("用人单位 解除 劳动合同 经济补偿");
    let n = keyword::block_count(&**client, &[]).await.unwrap();
    let limit = 5;
    let statement = keyword::SearchStatement::new(
        &terms,
        n,
        docpipe_search::POSTINGS_PER_TERM,
        docpipe_search::MAX_QUERY_TERMS,
        limit,
        &Filters::default(),
        docpipe_vector::VersionWindow::Any,
    );
    let candidates = (limit * 2 + 20) as f64;
    assert!(
        live_blocks as f64 > 4.0 * candidates,
        "{live_blocks} blocks"
    );
    for statistics in ["none yet", "after ANALYZE"] {
        if statistics == "after ANALYZE" {
            client.batch_execute("ANALYZE").await.unwrap();
        }
        let plan = &plan_of(&**client, &statement.sql, &statement.params()).await;
        let read = rows_read(plan, "keyword_blocks");
        assert!(
            read > 0.0 && read <= candidates,
            "statistics {statistics}: the live check read {read} keyword_blocks rows for at most \
             {candidates} candidates ({live_blocks} live blocks)"
        );
        let hits = keyword::search(
            &**client,
            &terms,
            n,
            docpipe_search::POSTINGS_PER_TERM,
            docpipe_search::MAX_QUERY_TERMS,
            limit,
            &Filters::default(),
            docpipe_vector::VersionWindow::Any,
        )
        .await
        .unwrap();
        assert_eq!(hits.len(), limit as usize, "statistics {statistics}");
    }
}

fn reads(plan: &serde_json::Value, relation: &str) -> bool {
    plan["Relation Name"] == relation
        || plan["Plans"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| reads(p, relation)))
}

/// How many times the plan ran a per-row LIMIT (a LATERAL's) that reads `relation`: for the
/// keyword statement's postings, the terms whose postings it read. Whatever the join below it
/// (one index scan per term, or one lookup per term and block when filtered), it runs once per
/// term.
fn lateral_runs(plan: &serde_json::Value, relation: &str) -> f64 {
    if plan["Node Type"] == "Limit"
        && plan["Parent Relationship"] == "Inner"
        && reads(plan, relation)
    {
        return plan["Actual Loops"].as_f64().unwrap_or(1.0);
    }
    plan["Plans"]
        .as_array()
        .map_or(0.0, |ps| ps.iter().map(|p| lateral_runs(p, relation)).sum())
}

/// The longest query the API takes (2,000 characters of a law's own text, so that nearly every
/// term is in the index) scores only its `MAX_QUERY_TERMS` most selective terms: the statement
/// reads the postings of at most that many terms, each at most `POSTINGS_PER_TERM`, with and
/// without a filter. Before the cap it read the postings of every term the index knew.
#[tokio::test]
async fn a_two_thousand_character_query_reads_the_postings_of_at_most_the_capped_terms() {
    use docpipe_core::analyzer::Analyzer;
    use docpipe_db::keyword;
    use docpipe_search::{MAX_QUERY_TERMS, POSTINGS_PER_TERM};
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let marriage = ingest_law(&p, "民法典", "婚姻家庭编").await;
    let (_, body) = question_law("劳动合同法", "");
    let text: String = String::from_utf8(body)
        .unwrap()
        .chars()
        .filter(|c| !c.is_whitespace())
        .take(docpipe_api_fn::search::MAX_QUERY_CHARS)
        .collect();
    let terms = Analyzer::shared().query_terms(&text);
    let client = p.db.db.client().await.unwrap();
    let ids: Vec<i64> = terms.iter().map(|(t, _)| *t).collect();
    let known: i64 = client
        .query_typed_one(
            "SELECT count(*) FROM keyword_terms WHERE term = ANY($1) AND df > 0",
            &[(&ids, docpipe_db::Type::INT8_ARRAY)],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        known > 2 * MAX_QUERY_TERMS,
        "the query has {known} indexed terms, well over the cap of {MAX_QUERY_TERMS}"
    );
    let n = keyword::block_count(&**client, &[]).await.unwrap();
    // As a tenant's search of its own documents (one tenant: what the API sends for `own`).
    let own = vec![docpipe_core::tenant::DEFAULT.to_string()];
    let both = Filters {
        doc_ids: vec![labour.clone(), marriage.clone()],
        organs: own.clone(),
        ..Filters::default()
    };
    let unfiltered = Filters {
        organs: own,
        ..Filters::default()
    };
    for (name, filters) in [("unfiltered", unfiltered), ("filtered", both)] {
        let statement = keyword::SearchStatement::new(
            &terms,
            n,
            POSTINGS_PER_TERM,
            MAX_QUERY_TERMS,
            10,
            &filters,
            docpipe_vector::VersionWindow::Any,
        );
        let plan = &plan_of(&**client, &statement.sql, &statement.params()).await;
        let terms_read = lateral_runs(plan, "keyword_postings");
        assert!(
            terms_read > 0.0 && terms_read <= MAX_QUERY_TERMS as f64,
            "{name}: the statement read the postings of {terms_read} terms ({known} indexed in \
             the query, cap {MAX_QUERY_TERMS})"
        );
        if name == "unfiltered" {
            let read = rows_read(plan, "keyword_postings");
            assert!(
                read <= (MAX_QUERY_TERMS * POSTINGS_PER_TERM) as f64,
                "{name}: {read} postings read"
            );
        }
    }
    // The capped query still finds the law it was taken from.
    let r = p.search(&text, 5, Mode::Keyword, &Filters::default()).await;
    assert_eq!(r.parameters.max_query_terms, MAX_QUERY_TERMS);
    assert_eq!(
        r.hits.first().map(|h| h.doc_id.as_str()),
        Some(labour.as_str())
    );
    drop(client);
    p.cleanup().await;
}

/// Uploads, stores and parses `body`; gives the document `regulation_type` before its index stage
/// copies it into every vector; indexes it.
async fn indexed_with_type(p: &Pipeline, key: &str, body: &[u8], regulation_type: &str) -> String {
    let job = p.parsed(key, body).await;
    p.db.client()
        .await
        .execute_typed(
            "UPDATE documents SET regulation_type = $2 WHERE doc_id = $1",
            &[
                (&job.doc_id, docpipe_db::Type::VARCHAR),
                (&regulation_type, docpipe_db::Type::VARCHAR),
            ],
        )
        .await
        .unwrap();
    docpipe_pipeline::stages::index::index_job(&p.index.deps(), &job)
        .await
        .expect("index");
    assert_eq!(p.doc(&job.doc_id).await.unwrap().status, DocStatus::Indexed);
    p.wait_searchable(&job.doc_id).await;
    job.doc_id
}

/// Milvus keeps a regulation type in 128 bytes, 42 CJK characters: one of 50 (registration
/// refuses it now, but the column holds 128 characters and the legacy import brings what it holds)
/// is stored cut. A filter on it finds its document's chunks in every mode, and only that
/// document's. Before, the dense side compared the whole value with the cut one and found nothing.
#[tokio::test]
async fn a_long_cjk_regulation_type_filters_in_every_mode() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let long = "地方性法规".repeat(10);
    assert_eq!(long.chars().count(), 50);
    assert!(long.len() > docpipe_vector::limits::REGULATION_TYPE_BYTES);
    let (file, body) = question_law("劳动合同法", "");
    let labour = indexed_with_type(&p, &format!("uploads/laws/{file}"), &body, &long).await;
    let (file, body) = question_law("民法典", "婚姻家庭编");
    let marriage = indexed_with_type(&p, &format!("uploads/laws/{file}"), &body, "法律").await;
    let query = "解除劳动合同 离婚 财产";
    for mode in MODES {
        for (regulation_type, doc) in [(long.as_str(), &labour), ("法律", &marriage)] {
            let filters = Filters {
                regulation_type: Some(regulation_type.to_string()),
                ..Filters::default()
            };
            let r = p.search(query, 20, mode, &filters).await;
            assert!(
                !r.hits.is_empty(),
                "{mode:?}: the filter {regulation_type} finds its document"
            );
            assert!(r.hits.iter().all(|h| &h.doc_id == doc), "{mode:?}");
            if mode == Mode::Dense {
                assert!(r.hits.iter().all(|h| h.dense_rank.is_some()), "{mode:?}");
            }
        }
    }
    p.cleanup().await;
}

/// Milvus keeps a chunk's section title in 512 bytes, 170 CJK characters: a heading of 200 is
/// stored cut. Its chunks are still vouched for and mapped to their block, whose whole title the
/// hit shows. Before, the check compared the cut title with the block's and dropped every such hit
/// as stale.
#[tokio::test]
async fn a_heading_longer_than_the_vector_index_holds_keeps_its_hits() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let heading = format!("关于{}的规定", "湿地生态保护与修复".repeat(22));
    assert!(heading.chars().count() > 200);
    assert!(heading.len() > docpipe_vector::limits::SECTION_TITLE_BYTES);
    let body = "湿地保护应当坚持保护优先、严格管理、系统治理、科学修复、合理利用的原则。\n\n\
                县级以上人民政府应当将湿地保护纳入国民经济和社会发展规划。";
    let text =
        format!("# 湿地条例\n\n## {heading}\n\n{body}\n\n## 附则\n\n本条例自公布之日起施行。\n");
    let doc = p
        .ingest_indexed("uploads/wetland.md", text.as_bytes())
        .await
        .doc_id;
    p.wait_searchable(&doc).await;
    let stored: Vec<String> =
        p.db.column_for_doc(
            "SELECT section_title FROM semantic_blocks WHERE doc_id = $1 ORDER BY id",
            &doc,
        )
        .await;
    assert!(
        stored.contains(&heading),
        "the block has the whole heading: {stored:?}"
    );
    for mode in [Mode::Dense, Mode::Hybrid] {
        let r = p.search(body, 5, mode, &Filters::default()).await;
        assert_eq!(r.stale_dropped, 0, "{mode:?}: no hit refused");
        let hit = r
            .hits
            .iter()
            .find(|h| h.section_path.last() == Some(&heading))
            .unwrap_or_else(|| panic!("{mode:?}: the long heading's article: {:?}", cited(&r)));
        assert!(hit.dense_rank.is_some(), "{mode:?}: found by its vector");
        assert!(hit.article_excerpt.contains("保护优先"));
    }
    p.cleanup().await;
}

/// A citation of a law the cached titles lack reads that law's documents by key, not every title
/// of the library again. Before, each request whose checker met such a citation (a law the
/// library does not hold, common in a passage or in an article's references) re-read all the
/// titles: 6.5 ms at 1,100 laws, growing with the library. A law indexed after the titles were
/// cached still resolves at once.
#[tokio::test]
async fn a_citation_of_a_law_the_cache_lacks_reads_that_law_by_key_not_every_title() {
    use docpipe_parse::references::citations;
    use docpipe_search::citations::{Checker, Status};
    use docpipe_search::SearchCache;
    let p = Pipeline::new(Pipeline::hash()).await;
    let labour = ingest_law(&p, "劳动合同法", "").await;
    let cache = SearchCache::default();
    let today = docpipe_search::today();
    let mut checker = Checker::new(&p.db.db, &cache, &today, &[]).await.unwrap();
    assert_eq!(cache.citable_reads(), 1);
    let known = citations("依据《劳动合同法》第三十九条的规定");
    let checked = checker.check(&known[0]).await.unwrap();
    assert_eq!(checked.status, Status::Found);
    assert_eq!(checked.doc_id.as_deref(), Some(labour.as_str()));
    let unknown = citations("依据《某某市不存在条例》第三条的规定");
    for round in 0..2 {
        // Each request has a checker of its own; the cache outlives them.
        let mut checker = Checker::new(&p.db.db, &cache, &today, &[]).await.unwrap();
        let checked = checker.check(&unknown[0]).await.unwrap();
        assert_eq!(checked.status, Status::LawUnknown, "round {round}");
    }
    assert_eq!(
        cache.citable_reads(),
        1,
        "a citation of an unknown law read the library's titles again"
    );
    // Indexed after the titles were cached: found at once, by its key.
    let marriage = ingest_law(&p, "民法典", "婚姻家庭编").await;
    let mut checker = Checker::new(&p.db.db, &cache, &today, &[]).await.unwrap();
    let checked = checker
        .check(&citations("依据《民法典》第一千零七十九条")[0])
        .await
        .unwrap();
    assert_eq!(checked.status, Status::Found, "{checked:?}");
    assert_eq!(checked.doc_id.as_deref(), Some(marriage.as_str()));
    assert_eq!(cache.citable_reads(), 1);
}
