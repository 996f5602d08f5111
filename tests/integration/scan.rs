//! The sensitive-data scan on the real stack: each parse is scanned, its findings recorded with
//! their place and a masked sample; with the mask policy nothing stored or indexed holds a value.

use docpipe_core::config::ScanAction;
use helpers::Pipeline;

const ID: &str = "11010519491231002X";
const MOBILE: &str = "13812345678";
const CARD: &str = "6222 0212 3456 7894";
const EMAIL: &str = "zhang.san@example.com.cn";

/// A regulation-like text with one value of each kind in its articles, and look-alikes.
fn contract() -> String {
    format!(
        "# 劳务合同管理办法\n\n## 第一章 总则\n\n第一条 为规范劳务合同管理，制定本办法。本办法自2024年1月1日起施行，编号国发〔2024〕12号。\n\n\
         第二条 甲方联系人身份证号：{ID}，联系电话{MOBILE}。\n\n\
         第三条 报酬汇入账户{CARD}；\n合同文本发送至{EMAIL}。\n\n\
         第四条 订单号HT20240101000123、座机010-12345678、金额1,234,567.89元不属于个人信息。\n"
    )
}

async fn blocks_text(p: &Pipeline, doc_id: &str) -> String {
    let texts: Vec<String> =
        p.db.column_for_doc(
            "SELECT text FROM semantic_blocks WHERE doc_id = $1 ORDER BY id",
            doc_id,
        )
        .await;
    texts.join("\n")
}

/// A GET of the API, as a reviewer or not: the status and the JSON body.
async fn get_json(http: &reqwest::Client, url: String, reviewer: bool) -> (u16, serde_json::Value) {
    let mut req = http.get(url);
    if reviewer {
        req = req.header("x-docpipe-role", "reviewer");
    }
    let answer = req.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or_default())
}

fn holds_a_value(text: &str) -> Vec<&'static str> {
    [ID, MOBILE, CARD, EMAIL, "6222021234567894"]
        .into_iter()
        .filter(|v| text.contains(v))
        .collect()
}

#[tokio::test]
async fn a_parse_records_each_finding_by_its_article_with_a_masked_sample_and_warn_leaves_the_text()
{
    let p = Pipeline::new(Pipeline::hash()).await;
    let doc = p
        .ingest_indexed("uploads/scan/contract.md", contract().as_bytes())
        .await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let (_, answer) = get_json(
        &http,
        format!("{base}/documents/{}/scan", doc.doc_id),
        false,
    )
    .await;
    let scan = &answer["scan"];
    assert_eq!(scan["status"], "warned", "{answer}");
    assert_eq!(scan["policy"], "warn");
    assert_eq!(scan["risk_level"], "high");
    assert_eq!(scan["findings_count"], 4);
    assert_eq!(scan["run_id"], serde_json::json!(doc.current_run_id));
    assert_eq!(
        scan["summary"]["by_type"],
        serde_json::json!({ "id_card": 1, "mobile": 1, "bank_card": 1, "email": 1 })
    );
    let findings = scan["findings"].as_array().unwrap();
    let placed: Vec<(String, String, i64)> = findings
        .iter()
        .map(|f| {
            (
                f["finding_type"].as_str().unwrap().to_string(),
                f["location"]["article"].as_str().unwrap_or("").to_string(),
                f["location"]["paragraph"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        vec![
            ("id_card".into(), "第二条".into(), 1),
            ("mobile".into(), "第二条".into(), 1),
            ("bank_card".into(), "第三条".into(), 1),
            ("email".into(), "第三条".into(), 2),
        ]
    );
    let samples = answer.to_string();
    assert_eq!(holds_a_value(&samples), Vec::<&str>::new(), "{samples}");
    assert_eq!(findings[0]["masked_sample"], "110**************X");
    // Warn: indexed as it is.
    assert_eq!(holds_a_value(&blocks_text(&p, &doc.doc_id).await).len(), 4);

    let (status, missing) = get_json(
        &http,
        format!("{base}/documents/doc_00000000000000000000000000000000/scan"),
        false,
    )
    .await;
    assert_eq!(status, 404, "{missing}");
    let (status, _) = get_json(
        &http,
        format!("{base}/documents/{}/scan", "a".repeat(300)),
        false,
    )
    .await;
    assert_eq!(status, 400);
    p.cleanup().await;
}

#[tokio::test]
async fn with_the_mask_policy_no_block_chunk_artifact_or_search_holds_a_value() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.parse.config.scan.action = ScanAction::Mask;
    let doc = p
        .ingest_indexed("uploads/scan/masked.md", contract().as_bytes())
        .await;
    let blocks = blocks_text(&p, &doc.doc_id).await;
    assert_eq!(holds_a_value(&blocks), Vec::<&str>::new(), "{blocks}");
    assert!(
        blocks.contains("110**************X") && blocks.contains("138****5678"),
        "{blocks}"
    );
    assert!(
        blocks.contains("HT20240101000123"),
        "look-alikes stay: {blocks}"
    );
    for key in p.aws.keys(&format!("artifacts/{}/", doc.doc_id)).await {
        let body = String::from_utf8_lossy(&p.aws.get(&key).await).to_string();
        assert_eq!(holds_a_value(&body), Vec::<&str>::new(), "{key}");
    }
    p.wait_searchable(&doc.doc_id).await;
    let none = docpipe_core::filters::Filters::default();
    for mode in [docpipe_search::Mode::Keyword, docpipe_search::Mode::Hybrid] {
        let r = p
            .search("甲方联系人身份证号 联系电话", 5, mode, &none)
            .await;
        assert!(!r.hits.is_empty(), "{mode:?}");
        let shown = serde_json::to_string(&r.hits).unwrap();
        assert_eq!(
            holds_a_value(&shown),
            Vec::<&str>::new(),
            "{mode:?}: {shown}"
        );
        // Searching by the value itself may match its kept digits (138, 5678), never show it.
        let by_value = p.search(MOBILE, 5, mode, &none).await;
        let shown = serde_json::to_string(&by_value.hits).unwrap();
        assert_eq!(
            holds_a_value(&shown),
            Vec::<&str>::new(),
            "{mode:?}: {shown}"
        );
    }
    let scan = docpipe_db::security::of_document(&**p.db.client().await, &doc.doc_id, 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(scan.policy, "mask");
    assert_eq!(scan.summary["masked"], true);
    p.cleanup().await;
}

#[tokio::test]
async fn with_the_block_policy_nothing_answers_until_a_reviewer_resolves_the_findings() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.parse.config.scan.action = ScanAction::Block;
    let doc = p
        .ingest_indexed("uploads/scan/blocked.md", contract().as_bytes())
        .await;
    let clean = p
        .ingest_indexed(
            "uploads/scan/clean.md",
            "# 劳务合同管理细则\n\n第一条 甲方联系人应当按时签署劳务合同。\n".as_bytes(),
        )
        .await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let (_, scan) = get_json(&http, format!("{base}/documents/{}/scan", doc.doc_id), true).await;
    assert_eq!(scan["scan"]["status"], "blocked", "{scan}");
    assert_eq!(scan["scan"]["policy"], "block");

    let none = docpipe_core::filters::Filters::default();
    let query = "甲方联系人 劳务合同";
    let found = |r: &docpipe_search::SearchResult, id: &str| r.hits.iter().any(|h| h.doc_id == id);
    let before = p
        .search(query, 10, docpipe_search::Mode::Keyword, &none)
        .await;
    assert!(
        !found(&before, &doc.doc_id),
        "a blocked document answers nothing"
    );
    assert!(
        found(&before, &clean.doc_id),
        "a clean one under the same policy does"
    );
    let (status, problem) = get_json(
        &http,
        format!("{base}/documents/{}/blocks", doc.doc_id),
        false,
    )
    .await;
    assert_eq!(status, 409);
    assert!(
        problem["type"].as_str().unwrap().ends_with("scan-blocked"),
        "{problem}"
    );

    let resolve = |reviewer: bool| {
        let mut req = http.post(format!("{base}/documents/{}/scan/resolve", doc.doc_id));
        if reviewer {
            req = req.header("x-docpipe-role", "reviewer");
        }
        req.send()
    };
    assert_eq!(resolve(false).await.unwrap().status(), 403);
    let still = p
        .search(query, 10, docpipe_search::Mode::Keyword, &none)
        .await;
    assert!(
        !found(&still, &doc.doc_id),
        "a refused resolve changes nothing"
    );
    assert_eq!(resolve(true).await.unwrap().status(), 200);
    assert_eq!(
        resolve(true).await.unwrap().status(),
        409,
        "nothing left to resolve"
    );
    let after = p
        .search(query, 10, docpipe_search::Mode::Keyword, &none)
        .await;
    assert!(found(&after, &doc.doc_id), "resolved, it answers");
    let scan = docpipe_db::security::of_document(&**p.db.client().await, &doc.doc_id, 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(scan.status, "warned");
    assert!(scan.findings.iter().all(|f| f.resolution == "resolved"));
    p.cleanup().await;
}
