//! Tenants end to end (seeds 001, 004), on the real stack: two tenants and the public library in
//! one deployment. Every route, read and write, answers another tenant's document or work exactly
//! as a missing one; a tenant reads the public library but changes it only as a publisher; the
//! same object name in two tenants makes two documents; a caller with no tenant gets 403; quotas
//! answer 429 and touch nothing stored; and a search whose Milvus ignored the tenant filter still
//! answers only the caller's tenants, because PostgreSQL checks every hit.

use docpipe_db::documents;
use docpipe_vector::VectorIndex;
use helpers::Pipeline;
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;

const ACME: &str = "acme";
const BETA: &str = "beta";
const PUBLIC: &str = "public";
const MISSING: &str = "doc_00000000000000000000000000000000";
/// Both tenants hold a text of this title: two works, one each.
const OWN_TITLE: &str = "星河数据安全管理办法";
const PUBLIC_TITLE: &str = "公共图书馆服务管理办法";

/// A regulation of three articles; `marker` is a phrase only this text holds.
fn regulation(title: &str, marker: &str) -> Vec<u8> {
    format!(
        "# {title}\n\n（2019年12月28日国务院第七十五次常务会议通过）\n\n## 第一章 总则\n\n第一条 为了{marker}，制定本办法。\n\n\
         第二条 数据处理者应当建立{marker}的管理制度，依照本办法第一条的规定履行义务。\n\n\
         第三条 本办法自2020年1月1日起施行。\n"
    )
    .into_bytes()
}

/// Uploads `body` under the tenant's folder (`uploads/{tenant}/…`) and drives it to indexed.
async fn ingest_for(p: &Pipeline, tenant: &str, name: &str, body: &[u8]) -> documents::Document {
    documents::ensure_tenant(&**p.db.client().await, tenant)
        .await
        .unwrap();
    let doc = p
        .ingest_indexed(&format!("uploads/{tenant}/{name}"), body)
        .await;
    assert_eq!(doc.organ_id, tenant, "the key's folder names the tenant");
    doc
}

/// The two tenants' texts of one title, each with a phrase of its own, indexed.
async fn two_tenants(p: &Pipeline) -> (documents::Document, documents::Document) {
    let acme = ingest_for(
        p,
        ACME,
        "rules.md",
        &regulation(OWN_TITLE, "星河甲方专属保密"),
    )
    .await;
    let beta = ingest_for(
        p,
        BETA,
        "rules.md",
        &regulation(OWN_TITLE, "贝塔乙方独有守则"),
    )
    .await;
    (acme, beta)
}

/// A caller of the dev runner's API: its tenant header (none: no header) and roles.
struct Caller {
    http: reqwest::Client,
    base: String,
    tenant: Option<&'static str>,
    roles: &'static str,
}

impl Caller {
    fn new(base: &str, tenant: Option<&'static str>, roles: &'static str) -> Caller {
        Caller {
            http: reqwest::Client::new(),
            base: base.to_string(),
            tenant,
            roles,
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = self.tenant {
            req = req.header("x-docpipe-tenant", t);
        }
        if !self.roles.is_empty() {
            req = req.header("x-docpipe-role", self.roles);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let answer = req.send().await.unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(Method::POST, path, Some(body)).await
    }

    /// The doc ids of a search's hits.
    async fn search(&self, body: Value) -> Vec<String> {
        let (status, answer) = self.post("/search", body.clone()).await;
        assert_eq!(status, 200, "{body}: {answer}");
        answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].as_str().unwrap().to_string())
            .collect()
    }
}

/// The answer to `path` with `doc_id` as it would be for a document that does not exist: the same
/// status, the same problem type, the same detail but for the id.
async fn answers_as_missing(caller: &Caller, method: Method, path: &str, doc_id: &str) {
    let body = (method == Method::POST).then(|| json!({}));
    let (status, answer) = caller.send(method.clone(), path, body.clone()).await;
    let missing_path = path.replace(doc_id, MISSING);
    let (missing_status, missing) = caller.send(method.clone(), &missing_path, body).await;
    assert_eq!(
        (status, &answer["type"]),
        (missing_status, &missing["type"]),
        "{method} {path}: {answer} against a missing document's {missing}"
    );
    assert_eq!(status, 404, "{method} {path}: {answer}");
    assert_eq!(
        answer["detail"].as_str().unwrap().replace(doc_id, MISSING),
        missing["detail"].as_str().unwrap(),
        "{method} {path}"
    );
}

#[tokio::test]
async fn every_route_answers_another_tenants_document_and_work_as_missing_ones() {
    let p = Pipeline::new(Pipeline::hash()).await;
    // The same object name in both tenants: two documents, one each.
    let (acme, beta) = two_tenants(&p).await;
    let public = ingest_for(
        &p,
        PUBLIC,
        "library.md",
        &regulation(PUBLIC_TITLE, "公共图书馆开放服务"),
    )
    .await;
    assert_ne!(acme.doc_id, beta.doc_id);
    let base = helpers::serve_api(&p).await;
    let as_acme = Caller::new(&base, Some(ACME), "reviewer");
    let as_beta = Caller::new(&base, Some(BETA), "reviewer");

    // Reads of one document, as its own tenant and as the other.
    let reads = [
        "",
        "/runs",
        "/history",
        "/artifacts",
        "/structure",
        "/blocks",
        "/scan",
        "/download",
        "/articles/第一条",
    ];
    for route in reads {
        let own = as_acme
            .get(&format!("/documents/{}{route}", acme.doc_id))
            .await;
        assert_eq!(own.0, 200, "acme reads its own {route}: {}", own.1);
        let public_read = as_beta
            .get(&format!("/documents/{}{route}", public.doc_id))
            .await;
        assert_eq!(
            public_read.0, 200,
            "beta reads the public library's {route}: {}",
            public_read.1
        );
        answers_as_missing(
            &as_beta,
            Method::GET,
            &format!("/documents/{}{route}", acme.doc_id),
            &acme.doc_id,
        )
        .await;
    }
    // Writes to another tenant's document: as missing, and nothing changes.
    for route in ["/retry", "/scan/resolve"] {
        answers_as_missing(
            &as_beta,
            Method::POST,
            &format!("/documents/{}{route}", acme.doc_id),
            &acme.doc_id,
        )
        .await;
    }
    answers_as_missing(
        &as_beta,
        Method::DELETE,
        &format!("/documents/{}", acme.doc_id),
        &acme.doc_id,
    )
    .await;
    let still = p.doc(&acme.doc_id).await.unwrap();
    assert_eq!(
        (still.status, still.current_run_id, still.deleting_at),
        (acme.status, acme.current_run_id, None),
        "another tenant's retry and delete changed nothing"
    );
    // The public library is read by all and changed by a publisher only.
    for (method, route) in [(Method::DELETE, ""), (Method::POST, "/retry")] {
        let (status, answer) = as_beta
            .send(
                method.clone(),
                &format!("/documents/{}{route}", public.doc_id),
                None,
            )
            .await;
        assert_eq!(
            (status, answer["type"].as_str().unwrap_or_default()),
            (403, "https://docpipe.dev/problems/publisher-required"),
            "{method} {route}: {answer}"
        );
    }
    assert!(p.doc(&public.doc_id).await.is_some());

    // Listings: own by default, the public library on request, never another tenant's.
    let listed = |answer: &Value| -> Vec<String> {
        answer["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["doc_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        listed(&as_beta.get("/documents").await.1),
        vec![beta.doc_id.clone()]
    );
    let mut all = listed(&as_beta.get("/documents?scope=all").await.1);
    all.sort();
    let mut expected = vec![beta.doc_id.clone(), public.doc_id.clone()];
    expected.sort();
    assert_eq!(all, expected);
    assert_eq!(
        listed(&as_beta.get("/documents?scope=public").await.1),
        vec![public.doc_id.clone()]
    );

    // Search in every mode, as of a date and over every version: own and public, never the
    // other tenant's, though both tenants' texts share the title and most words.
    for mode in ["dense", "keyword", "hybrid"] {
        for extra in [
            json!({}),
            json!({"as_of": "2024-06-01"}),
            json!({"versions": "all"}),
        ] {
            let mut body =
                json!({"query": "星河甲方专属保密的管理制度", "mode": mode, "top_k": 20});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let beta_hits = as_beta.search(body.clone()).await;
            assert!(
                !beta_hits.contains(&acme.doc_id),
                "{mode} {extra}: {beta_hits:?}"
            );
            let acme_hits = as_acme.search(body.clone()).await;
            assert!(
                acme_hits.contains(&acme.doc_id),
                "{mode} {extra}: {acme_hits:?}"
            );
            assert!(
                !acme_hits.contains(&beta.doc_id),
                "{mode} {extra}: {acme_hits:?}"
            );
            body["scope"] = json!("public");
            let public_hits = as_acme.search(body.clone()).await;
            assert!(
                public_hits.iter().all(|d| *d == public.doc_id),
                "{mode} {extra} public: {public_hits:?}"
            );
            body["scope"] = json!("own");
            body["query"] = json!("公共图书馆开放服务");
            let own_hits = as_acme.search(body.clone()).await;
            assert!(
                !own_hits.contains(&public.doc_id),
                "{mode} {extra} own: {own_hits:?}"
            );
            body["scope"] = json!("all");
            assert!(
                as_acme.search(body).await.contains(&public.doc_id),
                "{mode} {extra} all"
            );
        }
    }
    let (status, answer) = as_acme
        .post("/search", json!({"query": "x", "scope": "everyone"}))
        .await;
    assert_eq!(status, 422, "{answer}");

    // Citations: a tenant's citation of its own law resolves to its text, of the public law to
    // the library's, and the other tenant's law is unknown to it.
    let (status, answer) = as_acme
        .post(
            "/citations/resolve",
            json!({"citation": format!("《{OWN_TITLE}》第一条")}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["resolved"]["doc_id"], json!(acme.doc_id), "{answer}");
    let (status, answer) = as_beta
        .post(
            "/citations/resolve",
            json!({"citation": format!("《{PUBLIC_TITLE}》第一条")}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["resolved"]["doc_id"],
        json!(public.doc_id),
        "{answer}"
    );
    let (_, answer) = as_beta
        .post(
            "/citations/verify",
            json!({"passage": format!("依照《{OWN_TITLE}》第一条的规定。")}),
        )
        .await;
    let checked = answer["citations"][0].clone();
    assert_ne!(checked["doc_id"], json!(acme.doc_id), "{answer}");
    assert_eq!(
        checked["doc_id"],
        json!(beta.doc_id),
        "beta's citation names its own text: {answer}"
    );

    // Works: each tenant's text of the same title is a work of its own.
    let work_of = |answer: &Value| -> Vec<i64> {
        answer["works"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["work_id"].as_i64().unwrap())
            .collect()
    };
    let acme_works = work_of(&as_acme.get("/works?scope=own").await.1);
    let beta_works = work_of(&as_beta.get("/works?scope=own").await.1);
    assert_eq!(
        (acme_works.len(), beta_works.len()),
        (1, 1),
        "{acme_works:?} {beta_works:?}: all {:?}; acme's document {:?}",
        as_acme.get("/works?scope=all").await,
        as_acme.get(&format!("/documents/{}", acme.doc_id)).await
    );
    assert_ne!(acme_works, beta_works);
    let acme_work = acme_works[0];
    let public_works = work_of(&as_beta.get("/works?scope=public").await.1);
    assert_eq!(public_works.len(), 1);
    assert!(!work_of(&as_beta.get("/works").await.1).contains(&acme_work));
    let missing_work = 999_999_999i64;
    for (method, route) in [
        (Method::GET, ""),
        (Method::GET, "/diff"),
        (Method::POST, "/repeal"),
        (
            Method::POST,
            &format!("/versions/{}/release", acme.doc_id) as &str,
        ),
    ] {
        let body = (method == Method::POST).then(|| json!({}));
        let (status, answer) = as_beta
            .send(
                method.clone(),
                &format!("/works/{acme_work}{route}"),
                body.clone(),
            )
            .await;
        let (missing_status, missing) = as_beta
            .send(
                method.clone(),
                &format!("/works/{missing_work}{route}"),
                body,
            )
            .await;
        assert_eq!(
            (status, &answer["type"]),
            (missing_status, &missing["type"]),
            "{method} {route}: {answer} / {missing}"
        );
        assert_eq!(status, 404, "{method} {route}: {answer}");
    }
    assert_eq!(as_acme.get(&format!("/works/{acme_work}")).await.0, 200);
    // A reviewer of a tenant repeals nothing of the public library.
    let (status, answer) = as_beta
        .post(
            &format!("/works/{}/repeal", public_works[0]),
            json!({"repealed_on": "2024-01-01"}),
        )
        .await;
    assert_eq!(status, 403, "{answer}");
    p.cleanup().await;
}

#[tokio::test]
async fn a_caller_without_a_tenant_gets_403_and_a_bad_tenant_names_none() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut config = helpers::api_config(&p);
    config.tenancy.dev_tenant = None;
    let base = helpers::serve_api_with(&p, config).await;
    let nobody = Caller::new(&base, None, "");
    for (method, path) in [
        (Method::GET, "/documents".to_string()),
        (Method::GET, format!("/documents/{MISSING}")),
        (Method::POST, "/search".to_string()),
        (Method::POST, "/citations/verify".to_string()),
        (Method::GET, "/works".to_string()),
        (Method::GET, "/intake-failures".to_string()),
        (Method::POST, "/documents".to_string()),
        (Method::GET, "/no/such/route".to_string()),
    ] {
        let body = (method == Method::POST).then(|| json!({"query": "x"}));
        let (status, answer) = nobody.send(method.clone(), &path, body).await;
        assert_eq!(
            (status, answer["type"].as_str().unwrap_or_default()),
            (403, "https://docpipe.dev/problems/tenant-required"),
            "{method} {path}: {answer}"
        );
    }
    // A header that is no tenant id is not taken for the default either.
    let bad = Caller::new(&base, Some("Acme!"), "");
    assert_eq!(bad.get("/documents").await.0, 403);
    // The health check needs no tenant.
    assert_ne!(nobody.get("/healthz").await.0, 403);
    p.cleanup().await;
}

#[tokio::test]
async fn quotas_answer_429_per_tenant_and_touch_nothing_stored() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut config = helpers::api_config(&p);
    config.tenancy.max_documents = 1;
    config.tenancy.searches_per_minute = 3;
    let base = helpers::serve_api_with(&p, config).await;
    let as_acme = Caller::new(&base, Some(ACME), "");
    let as_beta = Caller::new(&base, Some(BETA), "");
    let register = json!({"file_name": "a.md", "content_type": "text/markdown"});
    let (status, first) = as_acme.post("/documents", register.clone()).await;
    assert_eq!(status, 201, "{first}");
    assert!(
        first["object_name"]
            .as_str()
            .unwrap()
            .starts_with(&format!("uploads/{ACME}/")),
        "{first}"
    );
    let (status, answer) = as_acme.post("/documents", register.clone()).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(
        answer["type"],
        "https://docpipe.dev/problems/quota-exceeded"
    );
    assert_eq!(
        (answer["quota"].as_str(), answer["limit"].as_i64()),
        (Some("documents"), Some(1))
    );
    // Another tenant's quota is its own, and acme's first document is untouched.
    assert_eq!(as_beta.post("/documents", register).await.0, 201);
    let kept = p.doc(first["doc_id"].as_str().unwrap()).await.unwrap();
    assert_eq!(kept.organ_id, ACME);
    assert_eq!(
        p.count("SELECT count(*) FROM documents WHERE organ_id = 'acme'")
            .await,
        1
    );

    let search = json!({"query": "数据安全", "mode": "keyword"});
    // The minute may turn between two searches: then the count starts again, and a fourth
    // search within one minute is what is refused.
    let mut refused = None;
    for n in 1..=8 {
        let (status, answer) = as_acme.post("/search", search.clone()).await;
        if status == 429 {
            refused = Some((n, answer));
            break;
        }
        assert_eq!(status, 200, "{answer}");
    }
    let (n, answer) = refused.expect("a search past the quota is refused");
    assert!(n >= 4, "refused at search {n}");
    assert_eq!(answer["quota"], "searches_per_minute", "{answer}");
    assert_eq!(
        as_beta.post("/search", search).await.0,
        200,
        "beta's searches are its own"
    );
    p.cleanup().await;
}

/// With Milvus's tenant filter taken away (the wrapper drops `organ_id in [...]` from every
/// search), Milvus hands another tenant's chunks to the API, and PostgreSQL's check refuses every
/// one of them: the answer holds the caller's tenants only. The first assertion fails if the
/// filter is not removed (Milvus would return no foreign chunk), the last if the check is.
#[tokio::test]
async fn a_search_whose_milvus_ignores_the_tenant_filter_still_answers_the_callers_tenant_only() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (acme, beta) = two_tenants(&p).await;
    let hooked = Arc::new(helpers::HookedVectorIndex::new(p.milvus.clone()));
    let state = Arc::new(docpipe_api_fn::ApiState::new(
        p.db.db.clone(),
        &p.aws.clients,
        p.index.embedder.clone(),
        hooked.clone(),
        p.aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
        helpers::api_config(&p),
        docpipe_api_fn::ActorSource::Local,
    ));
    let base = helpers::serve_state(state).await;
    let as_beta = Caller::new(&base, Some(BETA), "");
    let query = json!({"query": "星河甲方专属保密的管理制度", "mode": "dense", "top_k": 20,
                       "scope": "own"});

    // With the filter, Milvus itself keeps acme's chunks away from beta.
    let hits = as_beta.search(query.clone()).await;
    assert!(hits.contains(&beta.doc_id));
    assert!(!hooked.searched_docs.lock().unwrap().contains(&acme.doc_id));

    hooked
        .drop_tenant_filter
        .store(true, std::sync::atomic::Ordering::SeqCst);
    hooked.searched_docs.lock().unwrap().clear();
    let hits = as_beta.search(query).await;
    assert!(
        hooked.searched_docs.lock().unwrap().contains(&acme.doc_id),
        "without its filter Milvus returns acme's chunks to beta's search"
    );
    assert!(
        !hits.contains(&acme.doc_id),
        "PostgreSQL refused them: {hits:?}"
    );
    assert!(hits.contains(&beta.doc_id));
    p.cleanup().await;
}

/// Milvus's own tenant filter (`organ_id`): the same query of the collection itself, with one
/// tenant's filter, finds that tenant's vectors only; without it, both.
#[tokio::test]
async fn milvus_keeps_each_tenants_vectors_to_its_tenant_filter() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (acme, beta) = two_tenants(&p).await;
    let vector = p
        .index
        .embedder
        .embed_query("星河甲方专属保密的管理制度")
        .await
        .unwrap();
    let docs_for = |organs: Vec<String>| {
        let p = &p;
        let vector = vector.clone();
        async move {
            let filters = docpipe_vector::SearchFilters {
                organ_ids: organs,
                ..Default::default()
            };
            let mut docs: Vec<String> = p
                .milvus
                .search(&vector, 50, &filters)
                .await
                .unwrap()
                .into_iter()
                .map(|h| h.doc_id)
                .collect();
            docs.sort();
            docs.dedup();
            docs
        }
    };
    assert_eq!(docs_for(vec![ACME.into()]).await, vec![acme.doc_id.clone()]);
    assert_eq!(docs_for(vec![BETA.into()]).await, vec![beta.doc_id.clone()]);
    let mut both = vec![acme.doc_id.clone(), beta.doc_id.clone()];
    both.sort();
    assert_eq!(docs_for(Vec::new()).await, both);
    p.cleanup().await;
}

/// A tenant's reviewer chooses what the scan does in that tenant's documents: acme masks, beta
/// keeps the deployment's `warn`, and each parse follows its own tenant's choice.
#[tokio::test]
async fn each_tenant_chooses_its_scan_policy_and_its_parses_follow_it() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let base = helpers::serve_api(&p).await;
    let acme_reviewer = Caller::new(&base, Some(ACME), "reviewer");
    let acme_reader = Caller::new(&base, Some(ACME), "");
    let put = |caller: &Caller, body: Value| {
        let (http, url, tenant, roles) = (
            caller.http.clone(),
            format!("{}/tenant/scan-policy", caller.base),
            caller.tenant,
            caller.roles,
        );
        async move {
            let mut req = http.put(url).json(&body);
            if let Some(t) = tenant {
                req = req.header("x-docpipe-tenant", t);
            }
            if !roles.is_empty() {
                req = req.header("x-docpipe-role", roles);
            }
            let answer = req.send().await.unwrap();
            (
                answer.status().as_u16(),
                answer.json::<Value>().await.unwrap_or_default(),
            )
        }
    };
    let (status, answer) = put(&acme_reader, json!({"policy": "mask"})).await;
    assert_eq!(status, 403, "a reader chooses nothing: {answer}");
    for bad in [json!({"policy": "shred"}), json!({}), json!({"policy": 3})] {
        let (status, answer) = put(&acme_reviewer, bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {answer}");
    }
    let (status, answer) = put(&acme_reviewer, json!({"policy": "mask"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["scan_policy"],
        json!({"chosen": "mask", "applies": "mask"})
    );
    let (_, beta) = Caller::new(&base, Some(BETA), "").get("/tenant").await;
    assert_eq!(
        beta["scan_policy"],
        json!({"chosen": null, "applies": "warn"}),
        "{beta}"
    );
    // The public library's policy is a publisher's to choose.
    let (status, _) = put(
        &Caller::new(&base, Some(PUBLIC), "reviewer"),
        json!({"policy": "block"}),
    )
    .await;
    assert_eq!(status, 403);

    let id = "11010519491231002X";
    let text = format!(
        "# 员工信息管理办法\n\n## 第一章 总则\n\n第一条 联系人身份证号：{id}。\n\n第二条 本办法自2020年1月1日起施行。\n"
    );
    let acme = ingest_for(&p, ACME, "staff.md", text.as_bytes()).await;
    let beta = ingest_for(&p, BETA, "staff.md", text.as_bytes()).await;
    let blocks = |doc_id: String| {
        let p = &p;
        async move {
            let texts: Vec<String> =
                p.db.column_for_doc(
                    "SELECT text FROM semantic_blocks WHERE doc_id = $1 ORDER BY id",
                    &doc_id,
                )
                .await;
            texts.join("\n")
        }
    };
    assert!(
        !blocks(acme.doc_id.clone()).await.contains(id),
        "acme masks"
    );
    assert!(blocks(beta.doc_id.clone()).await.contains(id), "beta warns");
    let (_, scan) = acme_reader
        .get(&format!("/documents/{}/scan", acme.doc_id))
        .await;
    assert_eq!(scan["scan"]["policy"], "mask", "{scan}");
    p.cleanup().await;
}

/// The article graph (search's `graph`) follows an article's references into the laws it cites:
/// only into the caller's tenants'. acme's article cites a law only beta holds: the edge is there
/// for the operator's tools (no tenant given) and not for acme's search, which would otherwise
/// pull beta's article into its candidates (where it takes a place of acme's own before the
/// check refuses it).
#[tokio::test]
async fn the_article_graph_follows_references_into_the_callers_tenants_only() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let cited = "贝塔内部保密守则";
    let beta = ingest_for(
        &p,
        BETA,
        "secret.md",
        format!(
            "# {cited}\n\n第一条 贝塔员工不得对外披露客户名单。\n\n第二条 本守则自发布之日起施行。\n"
        )
        .as_bytes(),
    )
    .await;
    let acme = ingest_for(
        &p,
        ACME,
        "citing.md",
        format!(
            "# 星河合作伙伴管理办法\n\n第一条 合作伙伴处理星河甲方专属数据时，参照《{cited}》第一条执行。\n\n\
             第二条 本办法自发布之日起施行。\n"
        )
        .as_bytes(),
    )
    .await;
    let citing: Vec<i64> =
        p.db.column_for_doc(
            "SELECT id FROM semantic_blocks WHERE doc_id = $1 AND text LIKE '%参照%'",
            &acme.doc_id,
        )
        .await;
    let beta_first: Vec<i64> =
        p.db.column_for_doc(
            "SELECT id FROM semantic_blocks WHERE doc_id = $1 AND section_title = '第一条'",
            &beta.doc_id,
        )
        .await;
    assert_eq!((citing.len(), beta_first.len()), (1, 1));
    let edges = |organs: Vec<String>| {
        let (p, citing) = (&p, citing.clone());
        async move {
            docpipe_db::references::edges_from(
                &**p.db.client().await,
                &citing,
                docpipe_search::graph::MAX_SPAN,
                docpipe_search::graph::PER_REFERENCE,
                100,
                &organs,
            )
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.target)
            .collect::<Vec<i64>>()
        }
    };
    assert_eq!(edges(Vec::new()).await, beta_first, "the edge exists");
    assert_eq!(
        edges(vec![ACME.into(), PUBLIC.into()]).await,
        Vec::<i64>::new(),
        "acme's search does not follow it into beta's law"
    );
    assert_eq!(edges(vec![BETA.into()]).await, beta_first);
    p.cleanup().await;
}
