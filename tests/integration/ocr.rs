//! Scans through the whole pipeline on the real stack: OCR reads the pages without a usable text
//! layer, and the document ends `indexed` with the heading tree of its text-layer source.
//!
//! The parse stage's OCR budget comes from its function timeout in template.yaml; these tests
//! scale the template's clock by `OCR_TIME_SCALE` (450 s for parse, 360 s of it for OCR), since
//! the usual test scale leaves parse only its 20 s floor, less than a five-page scan takes on two
//! cores busy with the rest of the suite (a page took 33 s under a load of 7).

use docpipe_core::filters::Filters;
use docpipe_core::model::DocStatus;
use docpipe_parse::{parse, Hint, Limits};
use docpipe_search::Mode;
use helpers::{
    corpus_dir, ensure_pdfium_env, law_probe, unique, wait_terminal, DevRunner, Pipeline, TestAws,
    TestDb,
};
use lopdf::{dictionary, Document, Object, Stream};

const OCR_TIME_SCALE: f64 = 0.5;

async fn pipeline() -> Pipeline {
    let aws = TestAws::with_scale(OCR_TIME_SCALE).await;
    Pipeline::with(
        TestDb::new().await,
        aws,
        Pipeline::hash(),
        &unique("t_ocr_"),
    )
    .await
}

/// The chapters, sections and articles of a tree, by their numbers (第N章, 第N条): OCR may
/// misread a character of a title, never a number or the order.
fn markers(nodes: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    nodes
        .into_iter()
        .filter(|(kind, _)| matches!(kind.as_str(), "chapter" | "section" | "article"))
        .map(|(_, title)| title.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// The tree docpipe finds in a text-layer PDF.
fn expected(source: &str) -> Vec<String> {
    ensure_pdfium_env();
    let bytes = std::fs::read(corpus_dir().join(source)).unwrap();
    let doc = parse(&bytes, &Hint::new(source, ""), &Limits::default()).expect(source);
    assert!(doc.ocr.is_none(), "{source} has a text layer");
    markers(
        doc.structure_nodes
            .into_iter()
            .map(|n| (n.sub_type, n.title)),
    )
}

async fn stored_tree(p: &Pipeline, doc_id: &str) -> Vec<String> {
    let rows =
        p.db.client()
            .await
            .query_typed(
                "SELECT sub_type, title FROM structure_nodes WHERE doc_id = $1 ORDER BY idx",
                &[(&doc_id, tokio_postgres::types::Type::TEXT)],
            )
            .await
            .unwrap();
    markers(rows.iter().map(|r| (r.get(0), r.get(1))))
}

async fn ocr_of(p: &Pipeline, doc_id: &str) -> serde_json::Value {
    let doc = p.doc(doc_id).await.unwrap();
    let run = docpipe_db::runs::get(&**p.db.client().await, doc.current_run_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    run.metadata["ocr"].clone()
}

/// `GET /documents/{doc_id}` from the API, served over HTTP as the dev runner serves it.
async fn api_document(p: &Pipeline, doc_id: &str) -> serde_json::Value {
    let base = helpers::serve_api(p).await;
    let response = reqwest::get(format!("{base}/documents/{doc_id}"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Ingests `bytes`, which must end indexed with the tree of `source`, OCR'd on `ocr_pages`.
/// Returns what the run recorded of OCR.
async fn ingests_like(
    p: &Pipeline,
    name: &str,
    bytes: &[u8],
    source: &str,
    ocr_pages: &[u32],
) -> serde_json::Value {
    let doc = p.ingest_indexed(&format!("uploads/{name}"), bytes).await;
    let doc_id = doc.doc_id.clone();
    assert!(doc.parser_name.contains("ocr"), "{}", doc.parser_name);
    let want = expected(source);
    assert!(want.len() >= 10, "{source}: {want:?}");
    assert_eq!(
        stored_tree(p, &doc_id).await,
        want,
        "{name} against {source}"
    );
    let ocr = ocr_of(p, &doc_id).await;
    assert_eq!(
        api_document(p, &doc_id).await["ocr"],
        ocr,
        "the API shows the run's record"
    );
    assert_eq!(ocr["pages"], serde_json::json!(ocr_pages), "{ocr}");
    assert!(ocr["mean_confidence"].as_f64().unwrap() > 0.9, "{ocr}");
    assert_eq!(ocr["rec_model"], "ch_PP-OCRv4_rec_infer.onnx");
    assert_eq!(ocr["runtime"], "onnxruntime 1.23.2");
    assert!(
        ocr["engine"].as_str().unwrap().contains("PP-OCRv4"),
        "{ocr}"
    );
    ocr
}

/// A scanned law: indexed with its source's tree, and a sentence of it finds its article.
async fn scanned_law(law: &str, pages: &[u32]) {
    let p = pipeline().await;
    let bytes = std::fs::read(corpus_dir().join(format!("scanned/{law}.pdf"))).unwrap();
    let source = format!("laws-formats/pdf/{law}.pdf");
    let ocr = ingests_like(&p, &format!("{law}.pdf"), &bytes, &source, pages).await;
    assert_eq!(ocr["garbled_text_pages"], serde_json::json!([]), "{ocr}");
    let markdown = std::fs::read_to_string(corpus_dir().join(format!("laws/{law}.md"))).unwrap();
    let probe = law_probe(&markdown);
    let hits = p
        .search(&probe, 5, Mode::Keyword, &Filters::default())
        .await
        .hits;
    let top = hits
        .first()
        .unwrap_or_else(|| panic!("{law}: nothing for {probe}"));
    let article = helpers::article_lines(&markdown)
        .into_iter()
        .find(|a| a.contains(&probe))
        .and_then(|a| a.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(
        top.citation.ends_with(&article),
        "{law}: {probe} → {}",
        top.citation
    );
    // A scan marks no heading: it is cited by the name on its first line, as the same law in
    // Markdown is, never by its first chapter or article.
    let title = markdown
        .lines()
        .next()
        .unwrap()
        .trim_start_matches('#')
        .trim();
    assert_eq!(top.law_title, title, "{}", top.citation);
    assert_eq!(top.citation, format!("《{title}》{article}"));
    p.cleanup().await;
}

#[tokio::test]
async fn a_two_page_scan_is_read_to_the_article() {
    scanned_law("law-23989715", &[1, 2]).await;
}

#[tokio::test]
async fn a_four_page_scan_is_read_to_the_article() {
    scanned_law("law-1ca3af0a", &[1, 2, 3, 4]).await;
}

#[tokio::test]
async fn another_four_page_scan_is_read_to_the_article() {
    scanned_law("law-c234c0d4", &[1, 2, 3, 4]).await;
}

#[tokio::test]
async fn a_scanned_regulation_keeps_its_seven_chapters_and_44_articles() {
    let p = pipeline().await;
    let bytes = std::fs::read(corpus_dir().join("scanned/reg_data_security.pdf")).unwrap();
    let source = "pdf/reg_data_security.pdf";
    let ocr = ingests_like(&p, "reg.pdf", &bytes, source, &[1, 2, 3, 4, 5]).await;
    assert_eq!(ocr["garbled_text_pages"], serde_json::json!([]), "{ocr}");
    // What OCR stored (ingests_like compared it with the source's tree).
    let doc = p.doc_at("uploads/reg.pdf").await.unwrap();
    let tree = stored_tree(&p, &doc.doc_id).await;
    assert_eq!(tree.iter().filter(|m| m.ends_with('章')).count(), 7);
    assert_eq!(tree.iter().filter(|m| m.ends_with('条')).count(), 44);
    p.cleanup().await;
}

fn load(rel: &str) -> Document {
    Document::load(corpus_dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `first`'s pages followed by `second`'s, as one document.
fn merged(mut first: Document, mut second: Document) -> Vec<u8> {
    second.renumber_objects_with(first.max_id + 1);
    first.max_id = second.max_id;
    let pages_id = first
        .catalog()
        .unwrap()
        .get(b"Pages")
        .unwrap()
        .as_reference()
        .unwrap();
    let added: Vec<_> = second.get_pages().into_values().collect();
    for (id, object) in std::mem::take(&mut second.objects) {
        let is_root_or_pages = matches!(
            object.as_dict().ok().and_then(|d| d.get(b"Type").ok()),
            Some(Object::Name(n)) if n == b"Catalog" || n == b"Pages"
        );
        if !is_root_or_pages {
            first.objects.insert(id, object);
        }
    }
    for id in &added {
        let page = first.get_object_mut(*id).unwrap().as_dict_mut().unwrap();
        page.set("Parent", pages_id);
    }
    let pages = first
        .get_object_mut(pages_id)
        .unwrap()
        .as_dict_mut()
        .unwrap();
    let kids = pages.get_mut(b"Kids").unwrap().as_array_mut().unwrap();
    kids.extend(added.iter().map(|id| Object::Reference(*id)));
    let count = kids.len() as i64;
    pages.set("Count", count);
    let mut out = Vec::new();
    first.save_to(&mut out).unwrap();
    out
}

#[tokio::test]
async fn a_mixed_document_is_ocrd_on_its_image_pages_only() {
    // Page 1 of the law with its text layer, page 2 as a scan.
    let mut text = load("laws-formats/pdf/law-23989715.pdf");
    text.delete_pages(&[2]);
    let mut scan = load("scanned/law-23989715.pdf");
    scan.delete_pages(&[1]);
    let p = pipeline().await;
    let source = "laws-formats/pdf/law-23989715.pdf";
    let ocr = ingests_like(&p, "mixed.pdf", &merged(text, scan), source, &[2]).await;
    assert_eq!(ocr["garbled_text_pages"], serde_json::json!([]), "{ocr}");
    p.cleanup().await;
}

/// An invisible text layer whose font maps every code to the private use area: what a bad
/// conversion leaves behind, text that extracts as garbage over a page image.
fn with_garbage_layer(mut doc: Document, page_no: u32) -> Vec<u8> {
    let cmap = "/CIDInit /ProcSet findresource begin 12 dict begin begincmap \
        /CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def \
        /CMapName /Garbage def /CMapType 2 def 1 begincodespacerange <00> <FF> endcodespacerange \
        1 beginbfrange <00> <FF> <E000> endbfrange endcmap \
        CMapName currentdict /CMap defineresource pop end end";
    let to_unicode = doc.add_object(Stream::new(dictionary! {}, cmap.as_bytes().to_vec()));
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "ToUnicode" => to_unicode,
    });
    let body = (0..30)
        .map(|i| {
            format!(
                "BT /FG 12 Tf 3 Tr 72 {} Td (ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefgh) Tj ET\n",
                760 - i * 22
            )
        })
        .collect::<String>();
    let content = doc.add_object(Stream::new(dictionary! {}, body.into_bytes()));
    let page_id = doc.get_pages()[&page_no];
    let resources = doc
        .get_or_create_resources(page_id)
        .unwrap()
        .as_dict_mut()
        .unwrap();
    let mut fonts = lopdf::Dictionary::new();
    fonts.set("FG", font);
    resources.set("Font", fonts);
    let page = doc.get_object_mut(page_id).unwrap().as_dict_mut().unwrap();
    let mut contents = match page.get(b"Contents").unwrap().clone() {
        Object::Array(items) => items,
        other => vec![other],
    };
    contents.push(Object::Reference(content));
    page.set("Contents", contents);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

#[tokio::test]
async fn a_page_whose_text_layer_is_glyph_garbage_is_ocrd() {
    let bytes = with_garbage_layer(load("scanned/law-23989715.pdf"), 1);
    let source = "laws-formats/pdf/law-23989715.pdf";
    let p = pipeline().await;
    let ocr = ingests_like(&p, "garbage.pdf", &bytes, source, &[1, 2]).await;
    // Page 1 was read because its text layer is garbage; page 2 has none at all.
    assert_eq!(ocr["garbled_text_pages"], serde_json::json!([1]), "{ocr}");
    p.cleanup().await;
}

#[test]
fn a_scan_that_would_overrun_its_time_budget_fails_with_the_reason() {
    ensure_pdfium_env();
    let bytes = std::fs::read(corpus_dir().join("scanned/law-23989715.pdf")).unwrap();
    // One page is read; the second would take the whole document past its budget.
    let limits = Limits {
        ocr_budget_ms: 1,
        ..Limits::default()
    };
    let err = parse(&bytes, &Hint::new("scan.pdf", ""), &limits).unwrap_err();
    assert_eq!(err.kind(), "too_large");
    assert!(
        err.to_string().contains("OCR time budget of")
            && err.to_string().contains("exceeded: 1 of 2 pages read"),
        "{err}"
    );
}

#[tokio::test]
async fn a_scan_over_the_ocr_page_limit_fails_with_the_reason() {
    let mut p = pipeline().await;
    p.parse.config.limits.max_ocr_pages = 1;
    let bytes = std::fs::read(corpus_dir().join("scanned/law-23989715.pdf")).unwrap();
    let doc_id = p.ingest("uploads/two-pages.pdf", &bytes).await;
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Failed);
    assert!(
        doc.error_message
            .contains("2 pages have no usable text layer and need OCR (OCR page limit 1)"),
        "{}",
        doc.error_message
    );
    p.cleanup().await;
}

#[tokio::test]
async fn without_the_ocr_files_a_scan_fails_with_the_reason_and_the_runner_goes_on() {
    let p = pipeline().await;
    let empty = std::env::temp_dir().join(unique("no-ocr-"));
    std::fs::create_dir_all(&empty).unwrap();
    let runner = DevRunner::spawn(
        &p,
        OCR_TIME_SCALE,
        &[("DOCPIPE_OCR_DIR", empty.display().to_string())],
    );
    let scan = std::fs::read(corpus_dir().join("scanned/law-23989715.pdf")).unwrap();
    p.aws.put("uploads/scan.pdf", &scan).await;
    p.aws
        .put(
            "uploads/text.md",
            "# 测试条例\n\n第一条 为了测试。\n".as_bytes(),
        )
        .await;
    let ids: Vec<String> = ["uploads/scan.pdf", "uploads/text.md"]
        .iter()
        .map(|k| docpipe_core::ids::derived_doc_id(&p.aws.bucket, k))
        .collect();
    let statuses = wait_terminal(&p.db, &ids, std::time::Duration::from_secs(120)).await;
    let scan_doc = p.doc(&ids[0]).await.unwrap();
    assert_eq!(
        statuses.get(&ids[0]),
        Some(&DocStatus::Failed),
        "{}",
        runner.log_text()
    );
    assert!(
        scan_doc.error_message.contains("OCR not available")
            && scan_doc.error_message.contains("manifest.json"),
        "{}",
        scan_doc.error_message
    );
    assert_eq!(
        statuses.get(&ids[1]),
        Some(&DocStatus::Indexed),
        "{}",
        runner.log_text()
    );
    drop(runner);
    p.cleanup().await;
}

/// The OCR page limit a function gets from the template and the one a process without the variable
/// falls back to are the same number.
#[test]
fn the_ocr_page_limit_default_is_the_templates() {
    let template =
        docpipe_cli::template::Template::load(&helpers::workspace_root().join("template.yaml"))
            .expect("template.yaml");
    let from_template: u32 = template
        .parameter_default("MaxOcrPages")
        .expect("MaxOcrPages has a default")
        .parse()
        .expect("a number");
    assert_eq!(
        from_template,
        docpipe_parse::Limits::default().max_ocr_pages
    );
}
