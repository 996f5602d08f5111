//! Heading trees against sources: the 378 Markdown laws, the same laws in four formats, the
//! regulation in four PDF font setups and in four text encodings.

mod common;

use std::collections::HashMap;
use std::sync::LazyLock;

use common::{article_number, files_in, parse_path, parse_rel, require_pdfium, titles};
use docpipe_parse::ParsedDocument;
use regex::Regex;

const NUM: &str = "[一二三四五六七八九十百千零〇两0-9]+";

static CHAPTER_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^(?:#+\s*)?(第{NUM}章)\s*(.*)$")).unwrap());
static ARTICLE_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^(第{NUM}条)")).unwrap());

/// Chapters and articles read straight from the Markdown source, independently of the parser:
/// chapter headings (`## 第X章 title`, plus one law whose 第五章 lost its `##`), and lines that
/// start with 第X条.
fn source_truth(md: &str) -> (Vec<String>, Vec<String>) {
    let mut chapters = Vec::new();
    let mut articles = Vec::new();
    for line in md.lines() {
        if let Some(c) = CHAPTER_LINE.captures(line) {
            if !c[2].contains('。') {
                chapters.push(squash(&format!("{}{}", &c[1], &c[2])));
            }
        }
        if let Some(c) = ARTICLE_LINE.captures(line) {
            articles.push(c[1].to_string());
        }
    }
    (chapters, articles)
}

/// Titles compare without whitespace: "第一章  总  则" and "第一章 总则" are the same heading.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn tree_truth(doc: &ParsedDocument) -> (Vec<String>, Vec<String>) {
    let chapters = titles(doc, "chapter").iter().map(|t| squash(t)).collect();
    let articles = titles(doc, "article")
        .iter()
        .map(|t| article_number(t))
        .collect();
    (chapters, articles)
}

#[test]
fn every_markdown_law_has_exactly_its_chapters_and_articles() {
    let laws = files_in("laws", "md");
    assert_eq!(laws.len(), 378, "expected the 378 laws of the corpus");
    let mut mismatches = Vec::new();
    let (mut total_chapters, mut total_articles) = (0, 0);
    for path in &laws {
        let md = std::fs::read_to_string(path).unwrap();
        let expected = source_truth(&md);
        let doc = parse_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let got = tree_truth(&doc);
        total_chapters += expected.0.len();
        total_articles += expected.1.len();
        if got != expected {
            mismatches.push(format!(
                "{}: chapters {}/{} articles {}/{}",
                path.file_name().unwrap().to_string_lossy(),
                got.0.len(),
                expected.0.len(),
                got.1.len(),
                expected.1.len()
            ));
        }
    }
    println!(
        "{} of {} laws match ({total_chapters} chapters, {total_articles} articles in the sources)",
        laws.len() - mismatches.len(),
        laws.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} laws differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn articles_nest_under_their_chapters() {
    let doc = parse_rel("laws-formats/md/law-2c32f47f.md").unwrap();
    let by_idx: HashMap<i32, &docpipe_parse::StructureNode> =
        doc.structure_nodes.iter().map(|n| (n.idx, n)).collect();
    for n in doc
        .structure_nodes
        .iter()
        .filter(|n| n.sub_type == "article")
    {
        let parent = by_idx[&n.parent_idx.expect("article has a parent")];
        assert_eq!(
            parent.sub_type, "chapter",
            "{} under {}",
            n.title, parent.title
        );
        assert_eq!(n.level, parent.level + 1);
    }
}

#[test]
fn laws_formats_agree() {
    require_pdfium();
    let mds = files_in("laws-formats/md", "md");
    assert_eq!(mds.len(), 8);
    for md in &mds {
        let stem = md.file_stem().unwrap().to_string_lossy().into_owned();
        let source = source_truth(&std::fs::read_to_string(md).unwrap());
        for ext in ["md", "html", "docx", "pdf"] {
            let doc = parse_rel(&format!("laws-formats/{ext}/{stem}.{ext}"))
                .unwrap_or_else(|e| panic!("{stem}.{ext}: {e}"));
            assert_eq!(
                tree_truth(&doc),
                source,
                "{stem}.{ext} differs from its Markdown source"
            );
        }
    }
}

fn assert_regulation(doc: &ParsedDocument, what: &str) {
    assert_eq!(titles(doc, "chapter").len(), 7, "{what}: chapters");
    assert_eq!(titles(doc, "article").len(), 44, "{what}: articles");
    assert_eq!(titles(doc, "section").len(), 12, "{what}: sections");
    let articles: Vec<String> = titles(doc, "article");
    assert_eq!(
        articles.first().map(String::as_str),
        Some("第一条"),
        "{what}"
    );
    assert_eq!(
        articles.last().map(String::as_str),
        Some("第四十四条"),
        "{what}"
    );
    // Items (（一）…) inside articles are never nodes.
    assert!(
        titles(doc, "cn_paren").is_empty(),
        "{what}: （一） items became nodes"
    );
}

#[test]
fn regulation_pdf_in_every_font_setup() {
    require_pdfium();
    let truth =
        std::fs::read_to_string(common::corpus_file("groundtruth/reg_data_security.txt")).unwrap();
    for f in [
        "reg_data_security.pdf",
        "reg_data_security_cairo.pdf",
        "reg_data_security_mupdf.pdf",
        "reg_data_security_stsong_noembed.pdf",
    ] {
        let doc = parse_rel(&format!("pdf/{f}")).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(doc.parser_name, "pdfium", "{f}");
        assert_regulation(&doc, f);
        let recall = cjk_recall(&truth, &common::all_text(&doc));
        assert!(
            recall > 0.98,
            "{f}: only {recall:.3} of the source's CJK characters recovered"
        );
        assert!(
            doc.layouts.iter().all(|l| l.bbox.is_some()),
            "{f}: pdfium gives boxes"
        );
    }
}

/// Share of the CJK characters of `truth` (as a multiset) found in `got`.
fn cjk_recall(truth: &str, got: &str) -> f64 {
    let mut counts: HashMap<char, i64> = HashMap::new();
    let cjk = |c: &char| ('\u{4E00}'..='\u{9FFF}').contains(c);
    for c in got.chars().filter(cjk) {
        *counts.entry(c).or_default() += 1;
    }
    let (mut hit, mut total) = (0, 0);
    for c in truth.chars().filter(cjk) {
        total += 1;
        if let Some(n) = counts.get_mut(&c) {
            if *n > 0 {
                *n -= 1;
                hit += 1;
            }
        }
    }
    hit as f64 / total.max(1) as f64
}

#[test]
fn regulation_in_other_formats() {
    for f in [
        "md/reg_data_security.md",
        "docx/reg_data_security.docx",
        "html/reg_data_security.html",
    ] {
        let doc = parse_rel(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_regulation(&doc, f);
        assert!(
            doc.semantic_blocks.iter().any(|b| b.block_type == "table"),
            "{f}: table block"
        );
    }
}

#[test]
fn long_regulation_has_156_articles() {
    require_pdfium();
    for f in [
        "pdf/reg_long.pdf",
        "docx/reg_long.docx",
        "html/reg_long.html",
    ] {
        let doc = parse_rel(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(titles(&doc, "article").len(), 156, "{f}");
        assert_eq!(doc.page_count, if f.ends_with("pdf") { 15 } else { 1 });
    }
}

#[test]
fn numbered_spec_gives_numbered_headings_in_every_format() {
    require_pdfium();
    let reference = parse_rel("html/spec_numbered.html").unwrap();
    let expected: Vec<(String, i32)> = reference
        .structure_nodes
        .iter()
        .map(|n| (n.title.clone(), n.level))
        .collect();
    let numbered = titles(&reference, "numbered");
    assert!(numbered.len() >= 20, "{numbered:?}");
    assert!(numbered.contains(&"1.1.1 要求".to_string()));
    for f in ["pdf/spec_numbered.pdf", "docx/spec_numbered.docx"] {
        let doc = parse_rel(f).unwrap();
        let got: Vec<(String, i32)> = doc
            .structure_nodes
            .iter()
            .map(|n| (n.title.clone(), n.level))
            .collect();
        assert_eq!(got, expected, "{f}");
    }
}

#[test]
fn text_in_every_encoding_gives_the_utf8_tree() {
    let shape = |d: &ParsedDocument| {
        d.structure_nodes
            .iter()
            .map(|n| (n.title.clone(), n.sub_type.clone(), n.level, n.parent_idx))
            .collect::<Vec<_>>()
    };
    let utf8 = parse_rel("txt/reg_utf8.txt").unwrap();
    assert_regulation(&utf8, "reg_utf8.txt");
    for (f, parser) in [
        ("txt/reg_gbk.txt", "text-gbk"),
        ("txt/reg_gb18030.txt", "text-gbk"),
    ] {
        let doc = parse_rel(f).unwrap();
        assert_eq!(doc.parser_name, parser, "{f}");
        assert_eq!(shape(&doc), shape(&utf8), "{f}");
    }
    // The GB18030 file carries characters outside GBK (4-byte sequences): they must survive.
    let gb18030 = parse_rel("txt/reg_gb18030.txt").unwrap();
    assert!(!common::all_text(&gb18030).contains('\u{FFFD}'));
    // The Big5 file is a different, traditional-script text: 5 × (第一章 總則, 第一條).
    let big5 = parse_rel("txt/reg_big5.txt").unwrap();
    assert_eq!(big5.parser_name, "text-big5");
    assert_eq!(titles(&big5, "chapter"), vec!["第一章 總則"; 5]);
    assert_eq!(titles(&big5, "article"), vec!["第一條"; 5]);
}

#[test]
fn udhr_articles_from_real_word_pdfs() {
    require_pdfium();
    let zh = parse_rel("external/udhr_chinese.pdf").unwrap();
    let articles = titles(&zh, "article");
    assert_eq!(articles.len(), 30, "{articles:?}");
    assert_eq!(articles[0], "第一条");
    let truth = std::fs::read_to_string(common::corpus_file(
        "groundtruth/udhr_chinese.pdftotext.txt",
    ))
    .unwrap();
    let recall = cjk_recall(&truth, &common::all_text(&zh));
    assert!(recall > 0.99, "UDHR zh recall {recall:.3}");
    // Letter-spaced text is closed up.
    assert!(common::all_text(&zh).contains("人人生而自由"));
    // The Japanese PDF has a typo in its source ("弟23条"), so 29 of its 30 articles are found.
    let ja = parse_rel("external/udhr_japanese.pdf").unwrap();
    assert_eq!(titles(&ja, "article").len(), 29);
}
