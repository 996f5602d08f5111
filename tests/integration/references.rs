//! The article graph on the real stack: references read at parse time and written with the
//! snapshot (a retry leaves no stale edge), served per article both ways, a reference to a law not
//! yet held resolved once that law arrives, and citations resolved and verified against the
//! version in force; every bad input a problem.

use docpipe_parse::references::{article_texts, ArticleNo, ArticleText};
use helpers::{corpus_dir, Pipeline};
use serde_json::{json, Value};

const AD_LAW: &str = "laws/law-ff6c19d6.md"; // 中华人民共和国广告法

async fn indexed(p: &Pipeline, key: &str, body: &[u8]) -> String {
    let doc = p.ingest_indexed(key, body).await;
    p.wait_searchable(&doc.doc_id).await;
    doc.doc_id
}

async fn get(http: &reqwest::Client, url: String) -> (u16, Value) {
    let r = http.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = http.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn references_are_written_with_the_snapshot_and_a_retry_leaves_no_stale_edge() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let body = std::fs::read(corpus_dir().join(AD_LAW)).unwrap();
    let doc = indexed(&p, "uploads/refs/ad.md", &body).await;
    let rows = p
        .count_for(
            "SELECT count(*) FROM article_references WHERE doc_id = $1",
            &doc,
        )
        .await;
    assert!(rows >= 40, "{rows} references");
    // 第十五条 ¶2: 前款规定以外的处方药… → 第十五条第一款.
    let edge = p
        .count_for(
            "SELECT count(*) FROM article_references WHERE doc_id = $1 AND from_article = '15'
               AND from_paragraph = 2 AND text = '前款' AND target = 'art:15:p1' AND NOT dangling",
            &doc,
        )
        .await;
    assert_eq!(edge, 1);

    // An edge of an older snapshot: the next parse commit must take it away.
    let client = p.db.db.client().await.unwrap();
    client
        .execute(
            "INSERT INTO article_references (doc_id, ref_no, semantic_id, from_article,
                 from_paragraph, span_start, span_end, text, kind, target, dangling)
             VALUES ($1, 100000, 'S99999', '999', 1, 0, 1, '本法第一条', 'mention', 'art:1', false)",
            &[&doc],
        )
        .await
        .unwrap();
    drop(client);
    p.retry(&doc).await.unwrap();
    p.drive(&doc).await;
    p.wait_searchable(&doc).await;
    assert_eq!(
        p.count_for(
            "SELECT count(*) FROM article_references WHERE doc_id = $1 AND from_article = '999'",
            &doc
        )
        .await,
        0,
        "the old snapshot's edge is gone"
    );
    assert_eq!(
        p.count_for(
            "SELECT count(*) FROM article_references WHERE doc_id = $1",
            &doc
        )
        .await,
        rows,
        "the same references, once"
    );
}

/// The document's references as (article, paragraph, target, kind), sorted.
async fn edges_of(p: &Pipeline, doc: &str) -> Vec<(String, i32, String, String)> {
    let client = p.db.db.client().await.unwrap();
    let mut rows: Vec<(String, i32, String, String)> = client
        .query(
            "SELECT from_article, from_paragraph, target, kind FROM article_references
             WHERE doc_id = $1",
            &[&doc],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn a_document_read_before_the_graph_gets_its_references_from_its_stored_blocks() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let body = std::fs::read(corpus_dir().join(AD_LAW)).unwrap();
    let doc = indexed(&p, "uploads/refs/ad.md", &body).await;
    let parsed = edges_of(&p, &doc).await;
    let placed_sql = "SELECT count(*) FROM semantic_blocks WHERE doc_id = $1
                      AND article_ordinal IS NOT NULL";
    let placed = p.count_for(placed_sql, &doc).await;
    assert!(
        parsed.len() >= 40 && placed >= 70,
        "{} {placed}",
        parsed.len()
    );
    // Nothing to catch up on: the parse commit read them.
    let none = docpipe_pipeline::stages::references::reread(&p.db.db, 100)
        .await
        .unwrap();
    assert_eq!(none.documents, 0);

    // As a document parsed before migration 0018 stands: no reading, no references, no places.
    let client = p.db.db.client().await.unwrap();
    client
        .batch_execute(&format!(
            "DELETE FROM article_references WHERE doc_id = '{doc}';
             DELETE FROM reference_readings WHERE doc_id = '{doc}';
             UPDATE semantic_blocks SET article_ordinal = NULL WHERE doc_id = '{doc}';"
        ))
        .await
        .unwrap();
    let done = docpipe_pipeline::stages::references::reread(&p.db.db, 100)
        .await
        .unwrap();
    assert_eq!((done.documents, done.references), (1, parsed.len()));
    assert_eq!(
        edges_of(&p, &doc).await,
        parsed,
        "the same references as the parse read"
    );
    assert_eq!(p.count_for(placed_sql, &doc).await, placed);

    // Read by an older extractor: read again, once.
    client
        .execute(
            "UPDATE reference_readings SET extractor = 'references-0' WHERE doc_id = $1",
            &[&doc],
        )
        .await
        .unwrap();
    let again = docpipe_pipeline::stages::references::reread(&p.db.db, 100)
        .await
        .unwrap();
    assert_eq!(again.documents, 1);
    let after = docpipe_pipeline::stages::references::reread(&p.db.db, 100)
        .await
        .unwrap();
    assert_eq!(after.documents, 0);
    assert_eq!(edges_of(&p, &doc).await, parsed);
}

const WHALE_LAW: &str = "# 鲸类观察管理条例\n\n\
第一条 为了规范海上观察活动，制定本条例。\n\n\
第二条 观鲸船舶擅自靠近鲸群或者驱赶鲸群的，依照本条例第九条的规定处理。\n\n\
第三条 观鲸船舶应当配备瞭望人员。\n\n\
第九条 有违法行为的，由海事管理机构处五千元以上五万元以下的罚款。\n";

#[tokio::test]
async fn search_follows_a_reference_from_a_strong_hit_only_when_the_graph_is_on() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let doc = indexed(&p, "uploads/refs/whale.md", WHALE_LAW.as_bytes()).await;
    let cache = docpipe_search::SearchCache::default();
    let deps = docpipe_search::SearchDeps {
        db: &p.db.db,
        embedder: p.index.embedder.as_ref(),
        vectors: p.milvus.as_ref(),
        cache: &cache,
    };
    let filters = docpipe_core::filters::Filters {
        doc_ids: vec![doc.clone()],
        ..Default::default()
    };
    let ask = |graph| docpipe_search::Query {
        text: "观鲸船舶驱赶鲸群",
        top_k: 10,
        mode: docpipe_search::Mode::Keyword,
        filters: &filters,
        as_of: None,
        versions: docpipe_search::Versions::InForce,
        graph,
    };
    let cited = |r: &docpipe_search::SearchResult| -> Vec<String> {
        r.hits.iter().map(|h| h.citation.clone()).collect()
    };
    let off = docpipe_search::search(&deps, &ask(docpipe_search::Graph::OFF))
        .await
        .unwrap();
    assert!(cited(&off)[0].ends_with("第二条"), "{:?}", cited(&off));
    // Article 9 shares no word with the query: only the reference brings it.
    assert!(
        !cited(&off).iter().any(|c| c.ends_with("第九条")),
        "{:?}",
        cited(&off)
    );
    let on = docpipe_search::search(
        &deps,
        &ask(docpipe_search::Graph {
            seeds: 3,
            weight: 0.5,
        }),
    )
    .await
    .unwrap();
    let ninth = on
        .hits
        .iter()
        .find(|h| h.citation.ends_with("第九条"))
        .unwrap_or_else(|| panic!("{:?}", cited(&on)));
    assert_eq!((ninth.dense_rank, ninth.keyword_rank), (None, None));
    assert!(cited(&on)[0].ends_with("第二条"), "{:?}", cited(&on));
}

#[tokio::test]
async fn an_article_is_served_with_its_references_both_ways() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let body = std::fs::read(corpus_dir().join(AD_LAW)).unwrap();
    let doc = indexed(&p, "uploads/refs/ad.md", &body).await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();

    let (status, a) = get(
        &http,
        format!("{base}/documents/{doc}/articles/{}", encode("第十五条")),
    )
    .await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["citation"], "《中华人民共和国广告法》第十五条");
    assert_eq!(a["paragraphs"].as_array().unwrap().len(), 2, "{a}");
    let before = a["references"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["text"] == "前款")
        .expect("前款");
    assert_eq!(before["target"], "art:15:p1");
    assert_eq!(
        before["target_text"].as_str(),
        a["paragraphs"][0]["text"].as_str(),
        "the target's text is its first paragraph"
    );
    // Article 15's first paragraph is cited by ¶2 of itself (前款); article 1 cites nothing, and
    // what cites 第九条 comes from the articles that name it.
    let (_, nine) = get(&http, format!("{base}/documents/{doc}/articles/9")).await;
    let cited_by = nine["cited_by"].as_array().unwrap();
    assert!(
        cited_by
            .iter()
            .any(|r| r["target"].as_str().unwrap().starts_with("art:9")),
        "{nine}"
    );
    assert!(cited_by.iter().all(|r| r["doc_id"] == doc.as_str()));

    // A search that expands references: the hit for 第十五条 carries 前款 with its text; without
    // `expand`, no hit carries references; anything else to expand is a 422.
    let (status, found) = post(
        &http,
        format!("{base}/search"),
        json!({ "query": "广告法第十五条", "mode": "keyword", "top_k": 3, "expand": "references" }),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    let top = &found["hits"][0];
    assert_eq!(
        top["citation"], "《中华人民共和国广告法》第十五条",
        "{found}"
    );
    let expanded = top["references"].as_array().expect("references");
    let before = expanded.iter().find(|r| r["text"] == "前款").expect("前款");
    assert_eq!(before["target"], "art:15:p1");
    assert!(
        before["target_text"].as_str().unwrap().contains("麻醉药品"),
        "{before}"
    );
    let (_, plain) = post(
        &http,
        format!("{base}/search"),
        json!({ "query": "广告法第十五条", "mode": "keyword", "top_k": 3 }),
    )
    .await;
    assert!(plain["hits"][0].get("references").is_none(), "{plain}");
    let (status, _) = post(
        &http,
        format!("{base}/search"),
        json!({ "query": "广告法第十五条", "expand": "everything" }),
    )
    .await;
    assert_eq!(status, 422);

    // The same article by other spellings of its address.
    for address in ["15", "第15条", "第十五条"] {
        let (status, b) = get(
            &http,
            format!("{base}/documents/{doc}/articles/{}", encode(address)),
        )
        .await;
        assert_eq!(status, 200, "{address}");
        assert_eq!(b["article"], "15");
    }
    // Bad input: an address naming nothing, an article the law lacks, an unknown or bad id.
    for (url, want) in [
        (
            format!("{base}/documents/{doc}/articles/{}", encode("第三章")),
            400,
        ),
        (
            format!(
                "{base}/documents/{doc}/articles/{}",
                encode("x".repeat(40).as_str())
            ),
            400,
        ),
        (format!("{base}/documents/{doc}/articles/9000"), 404),
        (
            format!("{base}/documents/doc_{}/articles/1", "0".repeat(32)),
            404,
        ),
        (format!("{base}/documents/bad%20id/articles/1"), 400),
    ] {
        let r = http.get(&url).send().await.unwrap();
        assert_eq!(r.status().as_u16(), want, "{url}");
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "application/problem+json",
            "{url}"
        );
    }
}

/// Who cites an article is read by the cited law's index, whatever the library holds: the
/// statement used to leave out that another law's reference has a `target_law`, so the planner
/// could not use `article_references_other_law` (a partial index on those rows) and read every
/// reference of every document on each article read (the article route grew with the library:
/// 28,965 rows filtered for none kept at 1,000 laws).
#[tokio::test]
async fn who_cites_an_article_is_read_by_the_cited_law_not_the_whole_library() {
    use docpipe_db::references;
    let p = Pipeline::new(Pipeline::hash()).await;
    let body = std::fs::read(corpus_dir().join(AD_LAW)).unwrap();
    let cited = indexed(&p, "uploads/refs/ad.md", &body).await;
    let citing = indexed(&p, "uploads/refs/whale.md", WHALE_LAW.as_bytes()).await;
    let client = p.db.db.client().await.unwrap();
    let title = docpipe_db::keyword::title_of(&**client, &cited)
        .await
        .unwrap()
        .expect("the cited law's title");
    let key = docpipe_parse::article_ref::normalize_law_name(&title);
    // A library's worth of references to other laws, and one to 第十五条 of the cited one.
    client
        .batch_execute(&format!(
            "INSERT INTO article_references (doc_id, ref_no, semantic_id, from_article,
                 from_paragraph, span_start, span_end, text, kind, target_law, target_law_key,
                 target, target_from, target_to, dangling)
             SELECT '{citing}', 100000 + i, 'sem', '1', 1, 0, 4, '《其他法》第一条', 'mention',
                    '其他法' || i, '其他法' || i, 'art:1', 1000, 1000, false
             FROM generate_series(1, 20000) AS i;
             INSERT INTO article_references (doc_id, ref_no, semantic_id, from_article,
                 from_paragraph, span_start, span_end, text, kind, target_law, target_law_key,
                 target, target_from, target_to, dangling)
             VALUES ('{citing}', 99999, 'sem', '2', 1, 0, 4, '《{title}》第十五条', 'apply',
                     '{title}', '{key}', 'art:15', 15000, 15000, false);
             ANALYZE article_references;"
        ))
        .await
        .unwrap();
    let article = ArticleNo::new(15, 0);
    let organs = vec!["default".to_string(), "public".to_string()];
    let keys = vec![key];
    let found = references::incoming(&**client, &cited, &keys, article, 51, &organs)
        .await
        .unwrap();
    assert!(
        found
            .iter()
            .any(|r| r.doc_id == citing && r.target == "art:15"),
        "{found:?}"
    );
    let at = references::ordinal(article);
    let limit = 51i64;
    let plan = crate::search::plan_of(
        &**client,
        &references::incoming_statement(),
        &[
            (&cited, docpipe_db::Type::VARCHAR),
            (&at, docpipe_db::Type::INT4),
            (&keys, docpipe_db::Type::VARCHAR_ARRAY),
            (&limit, docpipe_db::Type::INT8),
            (&organs, docpipe_db::Type::VARCHAR_ARRAY),
        ],
    )
    .await;
    let read = crate::search::rows_read(&plan, "article_references");
    assert!(
        read < 100.0,
        "{read} reference rows read for one article's citers: {plan}"
    );
    drop(client);
    p.cleanup().await;
}

#[tokio::test]
async fn a_dangling_target_is_kept_and_another_law_resolves_once_it_arrives() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let citing = "# 甲市测试条例\n\n第一条 为了测试，制定本条例。\n\n第二条 违反本条例第九百条规定的，依照《中华人民共和国乙测试法》第二条处罚。\n\n前款规定的处罚，参照适用本条例第一条。\n";
    let doc = indexed(&p, "uploads/refs/citing.md", citing.as_bytes()).await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let (status, a) = get(&http, format!("{base}/documents/{doc}/articles/2")).await;
    assert_eq!(status, 200, "{a}");
    let refs = a["references"].as_array().unwrap();
    let dangling = refs
        .iter()
        .find(|r| r["text"] == "本条例第九百条")
        .expect("kept");
    assert_eq!(dangling["dangling"], true);
    assert_eq!(dangling["target"], "art:900");
    let other = refs
        .iter()
        .find(|r| r["law"] == "中华人民共和国乙测试法")
        .expect("the other law's article");
    assert_eq!(other["status"], "law_unknown", "{other}");
    assert_eq!(other["kind"], "apply");
    let analogy = refs.iter().find(|r| r["text"] == "本条例第一条").unwrap();
    assert_eq!(analogy["kind"], "analogy");

    let cited = "# 中华人民共和国乙测试法\n\n第一条 总则。\n\n第二条 违反规定的，处一千元罚款。\n";
    let law = indexed(&p, "uploads/refs/cited.md", cited.as_bytes()).await;
    let (_, a) = get(&http, format!("{base}/documents/{doc}/articles/2")).await;
    let other = a["references"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["law"] == "中华人民共和国乙测试法")
        .cloned()
        .unwrap();
    assert_eq!(other["status"], "found", "{other}");
    assert_eq!(other["target_doc_id"], law.as_str());
    assert!(other["target_text"].as_str().unwrap().contains("一千元"));
    // And the law's article 2 is cited by the other document.
    let (_, two) = get(&http, format!("{base}/documents/{law}/articles/2")).await;
    assert!(
        two["cited_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["doc_id"] == doc.as_str()),
        "{two}"
    );
}

#[tokio::test]
async fn citations_are_resolved_and_verified_and_bad_ones_refused() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let body = std::fs::read(corpus_dir().join(AD_LAW)).unwrap();
    let doc = indexed(&p, "uploads/refs/ad.md", &body).await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();

    for spelling in [
        "《中华人民共和国广告法》第十五条第二款",
        "《广告法》第15条第2款",
        "广告法第十五条第二款",
        "广告法第１５条第２款",
        "《广告法》 第 15 条 第 2 款",
    ] {
        let (status, r) = post(
            &http,
            format!("{base}/citations/resolve"),
            json!({ "citation": spelling }),
        )
        .await;
        assert_eq!(status, 200, "{spelling}: {r}");
        let r = &r["resolved"];
        assert_eq!(r["status"], "found", "{spelling}: {r}");
        assert_eq!(r["address"], "art:15:p2");
        assert_eq!(r["canonical"], "《中华人民共和国广告法》第十五条第二款");
        assert_eq!(r["doc_id"], doc.as_str());
        assert!(r["text"].as_str().unwrap().contains("处方药"), "{r}");
    }
    // A law the Civil Code repealed names its successor.
    let (status, r) = post(
        &http,
        format!("{base}/citations/resolve"),
        json!({ "citation": "婚姻法第三十二条" }),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["resolved"]["status"], "not_in_force");
    assert_eq!(r["resolved"]["successor"], "中华人民共和国民法典");

    // A passage: found, not found (article, paragraph, item), law unknown.
    let passage = "依据《广告法》第十五条第一款，以及广告法第九百条、广告法第十五条第九款和广告法第十五条第一款第（九）项，另见《中华人民共和国无此法》第一条。";
    let (status, v) = post(
        &http,
        format!("{base}/citations/verify"),
        json!({ "passage": passage }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let statuses: Vec<&str> = v["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "found",
            "not_found",
            "not_found",
            "not_found",
            "law_unknown"
        ],
        "{v}"
    );

    // Bad input.
    for (path, body, want) in [
        ("resolve", json!({ "citation": "hello" }), 422),
        ("resolve", json!({ "citation": "《无此法》第一条" }), 404),
        (
            "resolve",
            json!({ "citation": "广告法第一条", "as_of": "2020-13-01" }),
            422,
        ),
        ("resolve", json!({ "citation": "广".repeat(201) }), 422),
        ("resolve", json!({ "nope": 1 }), 422),
        ("verify", json!({ "passage": "广".repeat(20_001) }), 422),
        ("verify", json!({ "passage": 5 }), 422),
    ] {
        let r = http
            .post(format!("{base}/citations/{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), want, "{path} {body}");
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "application/problem+json"
        );
    }
    let (status, v) = post(
        &http,
        format!("{base}/citations/verify"),
        json!({ "passage": "这段话没有引用任何条文。" }),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["citations"], json!([]));

    // A whole 20,000-character passage as Python's json.dumps sends it (every character \uXXXX,
    // 120 KB): answered, not refused for its bytes. Past what any such passage takes, 413.
    let passage = format!("依照广告法第一条。{}", "广".repeat(19_990));
    let escaped: String = passage
        .encode_utf16()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    let r = http
        .post(format!("{base}/citations/verify"))
        .header("content-type", "application/json")
        .body(format!("{{\"passage\": \"{escaped}\"}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["citations"].as_array().unwrap().len(), 1, "{v}");
    let r = http
        .post(format!("{base}/citations/verify"))
        .header("content-type", "application/json")
        .body(format!("{{\"passage\": \"{}\"}}", "a".repeat(400_000)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
}

/// Real citations of eight indexed laws: every (article, paragraph, item) each one has, read from
/// the database as the API serves it.
async fn real_parts(p: &Pipeline, docs: &[String]) -> Vec<(String, String, ArticleText)> {
    let client = p.db.db.client().await.unwrap();
    let ids: Vec<&str> = docs.iter().map(String::as_str).collect();
    let blocks = docpipe_db::articles::article_blocks(&**client, &ids)
        .await
        .unwrap();
    let mut out = Vec::new();
    for doc in docs {
        let title = docpipe_db::keyword::title_of(&**client, doc)
            .await
            .unwrap()
            .expect("a title");
        let own: Vec<_> = blocks
            .iter()
            .filter(|(d, _)| d == doc)
            .map(|(_, b)| b.clone())
            .collect();
        for a in article_texts(&own) {
            out.push((doc.clone(), title.clone(), a));
        }
    }
    out
}

/// One way people write a citation: the law's name (full, short, with or without title marks) and
/// the numbers (Chinese, Arabic, full-width, spaced).
fn spelled(
    title: &str,
    article: ArticleNo,
    paragraph: Option<u32>,
    item: Option<u32>,
    style: usize,
) -> String {
    let short = title.trim_start_matches("中华人民共和国");
    let law = match style % 3 {
        0 => format!("《{title}》"),
        1 => format!("《{short}》"),
        _ => short.to_string(),
    };
    let digits = |n: u32| -> String {
        match style % 4 {
            0 => docpipe_parse::references::written(ArticleNo::new(n, 0), None, None)
                .trim_start_matches('第')
                .trim_end_matches('条')
                .to_string(),
            1 => n.to_string(),
            2 => n
                .to_string()
                .chars()
                .map(|c| char::from_u32(c as u32 - '0' as u32 + '０' as u32).unwrap())
                .collect(),
            _ => format!(" {n} "),
        }
    };
    let mut s = format!("{law}第{}条", digits(article.number));
    if article.sub > 0 {
        s.push_str(&format!(
            "之{}",
            docpipe_parse::references::written(ArticleNo::new(article.sub, 0), None, None)
                .trim_start_matches('第')
                .trim_end_matches('条')
        ));
    }
    if let Some(p) = paragraph {
        s.push_str(&format!("第{}款", digits(p)));
    }
    if let Some(i) = item {
        s.push_str(&format!("第（{}）项", digits(i)));
    }
    s
}

#[tokio::test]
async fn generated_spellings_resolve_and_fabricated_citations_are_all_flagged() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let laws = [
        "law-ff6c19d6", // 广告法
        "law-0d9d5de3", // 上海市住宅物业管理规定
        "law-2a92ee90", // 危险化学品安全管理条例
        "law-85cadca3", // 环境噪声污染防治法
        "law-19c3ec0e", // 行政诉讼法
        "law-3e25cdef", // 海关法
        "law-6d844c46", // 邮政法
        "law-ccdf0e0c", // 专利法
    ];
    let mut docs = Vec::new();
    for law in laws {
        let body = std::fs::read(corpus_dir().join(format!("laws/{law}.md"))).unwrap();
        docs.push(indexed(&p, &format!("uploads/refs/{law}.md"), &body).await);
    }
    let parts = real_parts(&p, &docs).await;
    assert!(parts.len() > 400, "{} articles", parts.len());
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();

    // 1,000 spellings of real citations: an article, a paragraph or an item, stepped through the
    // laws' articles so that every law and every style is used.
    let (mut right, mut total, mut wrong) = (0usize, 0usize, Vec::new());
    let mut k = 0usize;
    while total < 1000 {
        let (doc, title, a) = &parts[(k * 7919) % parts.len()];
        k += 1;
        let (paragraph, item) = match k % 3 {
            0 => (None, None),
            1 if a.paragraphs.len() > 1 => (Some(a.paragraphs.len() as u32), None),
            _ => match a.paragraphs.iter().find(|p| !p.items.is_empty()) {
                Some(p) => (Some(p.number), Some(p.items.len() as u32)),
                None => (None, None),
            },
        };
        let citation = spelled(title, a.number, paragraph, item, k);
        let want = docpipe_parse::references::Target::Article {
            article: a.number,
            paragraph,
            item,
        }
        .to_string();
        total += 1;
        let (status, r) = post(
            &http,
            format!("{base}/citations/resolve"),
            json!({ "citation": citation }),
        )
        .await;
        let r = &r["resolved"];
        if status == 200
            && r["status"] == "found"
            && r["address"] == want.as_str()
            && r["doc_id"] == doc.as_str()
        {
            right += 1;
        } else if wrong.len() < 20 {
            wrong.push(format!("{citation} → {status} {r}"));
        }
    }
    let share = right as f64 / total as f64;
    eprintln!("resolve: {right} of {total} spellings answered with the right address ({share:.4}); wrong: {wrong:#?}");
    assert!(share >= 0.995, "{share:.4}: {wrong:#?}");

    // 200 fabricated citations: an article past the last, a paragraph past an article's last, an
    // item past a paragraph's last. Verify must flag every one.
    let mut fabricated = Vec::new();
    let mut k = 0usize;
    while fabricated.len() < 200 {
        let (_, title, a) = &parts[(k * 104_729) % parts.len()];
        let last = parts
            .iter()
            .filter(|(_, t, _)| t == title)
            .map(|(_, _, a)| a.number.number)
            .max()
            .unwrap();
        let citation = match k % 3 {
            0 => spelled(
                title,
                ArticleNo::new(last + 1 + (k as u32 % 50), 0),
                None,
                None,
                k,
            ),
            1 => spelled(
                title,
                a.number,
                Some(a.paragraphs.len() as u32 + 1),
                None,
                k,
            ),
            _ => {
                let p = &a.paragraphs[0];
                spelled(title, a.number, Some(1), Some(p.items.len() as u32 + 1), k)
            }
        };
        fabricated.push(citation);
        k += 1;
    }
    let mut flagged = 0;
    for chunk in fabricated.chunks(25) {
        let passage = chunk.join("；另见");
        let (status, v) = post(
            &http,
            format!("{base}/citations/verify"),
            json!({ "passage": passage }),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let checked = v["citations"].as_array().unwrap();
        assert_eq!(checked.len(), chunk.len(), "every citation read: {passage}");
        for c in checked {
            if c["status"] == "not_found" {
                flagged += 1;
            } else {
                eprintln!("not flagged: {c}");
            }
        }
    }
    eprintln!(
        "verify: {flagged} of {} fabricated citations flagged",
        fabricated.len()
    );
    assert_eq!(flagged, fabricated.len());
}

/// A citation names one law exactly: 《社会保险法》 is not the indexed 保险法, 《劳动合同法》 is
/// not the 合同法 the Civil Code repealed. Each is `law_unknown` (404) until a document carries
/// it, and then resolves to that document.
#[tokio::test]
async fn a_law_is_named_exactly_never_by_how_its_name_ends() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let insurance = "# 中华人民共和国保险法\n\n第一条 为了规范保险活动，制定本法。\n\n第二条 本法所称保险，是指商业保险行为。\n";
    let insurance = indexed(&p, "uploads/names/insurance.md", insurance.as_bytes()).await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let resolve = |citation: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            post(
                &http,
                format!("{base}/citations/resolve"),
                json!({ "citation": citation }),
            )
            .await
        }
    };

    let (status, r) = resolve("《保险法》第二条").await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["resolved"]["doc_id"], insurance.as_str(), "{r}");
    for unknown in [
        "《社会保险法》第二条",
        "社会保险法第二条",
        "《劳动合同法》第三十九条",
        "劳动合同法第三十九条",
    ] {
        let (status, r) = resolve(unknown).await;
        assert_eq!(status, 404, "{unknown}: {r}");
        assert_eq!(r["status"], 404, "{unknown}: {r}");
        assert!(
            r["detail"]
                .as_str()
                .unwrap_or("")
                .contains("no document carries"),
            "{unknown}: {r}"
        );
    }
    // The repealed 合同法 itself still names its successor.
    let (status, r) = resolve("《合同法》第五十二条").await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["resolved"]["status"], "not_in_force", "{r}");

    // Once the longer law is indexed, it resolves to itself, never to the shorter one.
    let social = "# 中华人民共和国社会保险法\n\n第一条 为了规范社会保险关系，制定本法。\n\n第二条 国家建立基本养老保险等社会保险制度。\n";
    let social = indexed(&p, "uploads/names/social.md", social.as_bytes()).await;
    let (status, r) = resolve("《社会保险法》第二条").await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["resolved"]["status"], "found", "{r}");
    assert_eq!(r["resolved"]["doc_id"], social.as_str(), "{r}");
    let (_, r) = resolve("《保险法》第二条").await;
    assert_eq!(r["resolved"]["doc_id"], insurance.as_str(), "{r}");
}
