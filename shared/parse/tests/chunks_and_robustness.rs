//! Chunk invariants over real documents, and hostile inputs that must fail cleanly.

mod common;

use std::io::Write;

use common::{parse_rel, require_pdfium};
use docpipe_parse::{chunk, parse, ChunkConfig, Hint, Limits, ParseError};

const DOCS: &[&str] = &[
    "md/reg_data_security.md",
    "md/chinese_1mb.md",
    "pdf/reg_long.pdf",
    "pdf/spec_numbered.pdf",
    "docx/reg_long.docx",
    "html/spec_numbered.html",
    "external/udhr_chinese.pdf",
    "sample-pdfs/pdflatex-4-pages.pdf",
];

#[test]
fn chunks_are_bounded_stay_inside_blocks_and_are_deterministic() {
    require_pdfium();
    for cfg in [
        ChunkConfig::default(),
        ChunkConfig {
            max_tokens: 64,
            overlap_tokens: 8,
        },
    ] {
        for f in DOCS {
            let doc = parse_rel(f).unwrap_or_else(|e| panic!("{f}: {e}"));
            let chunks = chunk(&doc, &cfg);
            assert!(!chunks.is_empty(), "{f}");
            for c in &chunks {
                assert!(
                    c.token_estimate <= cfg.max_tokens,
                    "{f}: {} tokens",
                    c.token_estimate
                );
                assert_eq!(
                    c.token_estimate,
                    docpipe_parse::estimate_tokens(&c.text),
                    "{f}"
                );
                let block = doc
                    .semantic_blocks
                    .iter()
                    .find(|b| b.semantic_id == c.semantic_id)
                    .expect("chunk names its block");
                // The chunk is exactly a slice of its own block: it cannot cross into another.
                let slice: String = block
                    .text
                    .chars()
                    .skip(c.char_start as usize)
                    .take((c.char_end - c.char_start) as usize)
                    .collect();
                assert_eq!(slice, c.text, "{f}");
                assert_eq!(c.section_path, block.section_path);
                assert_eq!(
                    (c.page_start, c.page_end),
                    (block.page_start, block.page_end)
                );
            }
            // Every block's text is covered by its chunks.
            for b in &doc.semantic_blocks {
                let mine: Vec<_> = chunks
                    .iter()
                    .filter(|c| c.semantic_id == b.semantic_id)
                    .collect();
                assert!(
                    !mine.is_empty(),
                    "{f}: block {} has no chunk",
                    b.semantic_id
                );
                let chars: Vec<char> = b.text.chars().collect();
                for w in mine.windows(2) {
                    let (end, start) = (w[0].char_end as usize, w[1].char_start as usize);
                    assert!(
                        start <= end || chars[end..start].iter().all(|c| c.is_whitespace()),
                        "{f}: text lost between chunks"
                    );
                }
            }
            let again = chunk(&parse_rel(f).unwrap(), &cfg);
            let keys = |v: &[docpipe_parse::VectorChunk]| {
                v.iter().map(|c| c.chunk_key.clone()).collect::<Vec<_>>()
            };
            assert_eq!(
                keys(&chunks),
                keys(&again),
                "{f}: keys must be deterministic"
            );
            let mut unique = keys(&chunks);
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), chunks.len(), "{f}: duplicate keys");
        }
    }
}

#[test]
fn an_article_is_one_block_with_its_items() {
    let doc = parse_rel("md/reg_data_security.md").unwrap();
    let art = doc
        .semantic_blocks
        .iter()
        .find(|b| b.section_title == "第二条")
        .expect("block for 第二条");
    assert_eq!(art.block_type, "article");
    assert!(art.text.starts_with("第二条"));
    assert!(art.text.contains("（二）"));
    assert_eq!(
        art.section_path,
        vec![
            "数据安全管理办法",
            "第一章 总则",
            "第一节 立法目的",
            "第二条"
        ]
    );
}

#[test]
fn artifacts_round_trip_as_json() {
    let doc = parse_rel("html/reg_data_security.html").unwrap();
    let json = serde_json::to_string(&doc).unwrap();
    let back: docpipe_parse::ParsedDocument = serde_json::from_str(&json).unwrap();
    assert_eq!(back, doc);
    assert!(json.contains("\"kind\":\"heading\""));
    let err = ParseError::NoTextLayer {
        pages: 3,
        ocr: "/opt/ocr/manifest.json is missing".into(),
    };
    assert_eq!(err.kind(), "no_text_layer");
    assert!(err.to_string().contains("OCR not available: /opt/ocr"));
}

fn parse_bytes(bytes: &[u8], name: &str) -> Result<docpipe_parse::ParsedDocument, ParseError> {
    parse(bytes, &Hint::new(name, ""), &Limits::default())
}

#[test]
fn nesting_bombs_in_every_text_format_do_not_crash() {
    let deep = 200_000;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        ("[".repeat(deep).into_bytes(), "a.md"),
        (">".repeat(deep).into_bytes(), "b.md"),
        ("- ".repeat(deep / 2).into_bytes(), "c.md"),
        ("<div>".repeat(deep / 2).into_bytes(), "d.html"),
        (
            format!("<html><body>{}</body></html>", "<b>".repeat(deep / 2)).into_bytes(),
            "e.html",
        ),
        ("[".repeat(deep).into_bytes(), "f.txt"),
        (
            format!("%PDF-1.4\n1 0 obj\n{}\nendobj\n", "<<".repeat(100_000)).into_bytes(),
            "g.pdf",
        ),
    ];
    // Markdown and text parse on the caller's stack: prove it on a small one (tokio's workers
    // have 2 MiB). A stack overflow here aborts the test process.
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            for (bytes, name) in cases {
                match parse_bytes(&bytes, name) {
                    Ok(_)
                    | Err(ParseError::TooLarge(_))
                    | Err(ParseError::Empty)
                    | Err(ParseError::Corrupt(_)) => {}
                    Err(e) => panic!("{name}: unexpected {e}"),
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

fn zip_with(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in entries {
            z.start_file(*name, opts).unwrap();
            z.write_all(data).unwrap();
        }
        z.finish().unwrap();
    }
    buf.into_inner()
}

const DOCX_TYPES: &[u8] = br#"<?xml version="1.0"?><Types><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;

#[test]
fn docx_zip_bomb_is_refused() {
    let mut body = String::from(r#"<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>"#);
    body.push_str(&"a".repeat(8 * 1024 * 1024));
    body.push_str("</w:t></w:r></w:p></w:body></w:document>");
    let bytes = zip_with(&[
        ("[Content_Types].xml", DOCX_TYPES),
        ("word/document.xml", body.as_bytes()),
    ]);
    assert!(bytes.len() < 100_000, "the bomb compresses well");
    let limits = Limits {
        max_decompressed_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let err = parse(&bytes, &Hint::new("bomb.docx", ""), &limits).unwrap_err();
    assert_eq!(err.kind(), "too_large", "{err}");
}

#[test]
fn small_docx_parses_headings_lists_and_tables() {
    let styles = r#"<w:styles xmlns:w="w"><w:style w:styleId="1"><w:name w:val="heading 1"/></w:style><w:style w:styleId="a5"><w:name w:val="标题 2"/></w:style></w:styles>"#;
    let body = r#"<w:document xmlns:w="w"><w:body>
<w:p><w:pPr><w:pStyle w:val="1"/></w:pPr><w:r><w:t>总则</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="a5"/></w:pPr><w:r><w:t>第一章 适用</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">第一条 A &amp; B</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>（一）项目</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>级别</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>名称</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
</w:body></w:document>"#;
    let bytes = zip_with(&[
        ("[Content_Types].xml", DOCX_TYPES),
        ("word/document.xml", body.as_bytes()),
        ("word/styles.xml", styles.as_bytes()),
    ]);
    let doc = parse_bytes(&bytes, "x.docx").unwrap();
    let nodes: Vec<(String, i32, String)> = doc
        .structure_nodes
        .iter()
        .map(|n| (n.title.clone(), n.level, n.sub_type.clone()))
        .collect();
    assert_eq!(
        nodes,
        vec![
            ("总则".into(), 1, "explicit".into()),
            ("第一章 适用".into(), 2, "chapter".into()),
            ("第一条".into(), 3, "article".into()),
        ]
    );
    assert!(doc.layouts.iter().any(|l| l.text == "第一条 A & B"));
    assert!(doc.layouts.iter().any(|l| l.text == "级别 | 名称"));
}

#[test]
fn mismatches_name_what_was_found() {
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    let err = parse_bytes(png, "scan.pdf").unwrap_err();
    assert!(
        matches!(&err, ParseError::Mismatch { claimed, found } if claimed == "pdf" && found.contains("PNG")),
        "{err}"
    );
    let xlsx = zip_with(&[(
        "[Content_Types].xml",
        br#"<Types><Override ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>"#,
    )]);
    let err = parse_bytes(&xlsx, "report.pdf").unwrap_err();
    assert!(err.to_string().contains("xlsx"), "{err}");
    assert_eq!(parse_bytes(b"", "a.pdf").unwrap_err(), ParseError::Empty);
    assert_eq!(
        parse_bytes(b"  \n ", "a.txt").unwrap_err(),
        ParseError::Empty
    );
}

#[test]
fn markdown_comments_and_regulation_levels() {
    let md = "# 条例\n\n<!-- INFO END -->\n\n## 第一章 总则\n\n第一条 为了。\n（一）甲；\n第二条 乙。\n\n### 第一节 细则\n\n第三条 丙。\n";
    let doc = parse_bytes(md.as_bytes(), "x.md").unwrap();
    let tree: Vec<(String, i32)> = doc
        .structure_nodes
        .iter()
        .map(|n| (n.title.clone(), n.level))
        .collect();
    assert_eq!(
        tree,
        vec![
            ("条例".into(), 1),
            ("第一章 总则".into(), 2),
            ("第一条".into(), 3),
            ("第二条".into(), 3),
            ("第一节 细则".into(), 3),
            ("第三条".into(), 4),
        ]
    );
    assert!(!doc.layouts.iter().any(|l| l.text.contains("INFO END")));
    let first = doc
        .semantic_blocks
        .iter()
        .find(|b| b.section_title == "第一条")
        .unwrap();
    assert!(
        first.text.contains("（一）甲"),
        "items stay in their article: {:?}",
        first.text
    );
}

#[test]
fn gb18030_four_byte_characters_decode() {
    // 𠀀 (U+20000) exists only in GB18030's 4-byte range.
    let (bytes, _, _) =
        encoding_rs::GB18030.encode("第一条 测试𠀀字符。\n第二条 其他内容，足够长以便识别编码。");
    let doc = parse_bytes(&bytes, "x.txt").unwrap();
    assert!(common::all_text(&doc).contains('𠀀'));
    assert_eq!(common::titles(&doc, "article").len(), 2);
}
