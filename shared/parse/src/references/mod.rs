//! References between articles, read from a regulation's own text: "违反本法第三十九条规定的",
//! "依照前款规定", "参照适用本编第五百一十条的规定", "《中华人民共和国行政处罚法》第三十二条".
//!
//! Each reference gets a kind (the drafting rules' 依照/按照 "apply", 参照 "analogy", 除…外
//! "exception", else a plain "mention") and a target: an article (第X条, 第X条之一), a span of
//! articles (第X条至第Y条), a paragraph (款), an item (项), a span of paragraphs (前两款), or the
//! chapter, section or part that holds the citing article (本章, 本节, 本编). Relative forms are
//! resolved against where they stand (前款 in the third paragraph is the second). A target in the
//! same regulation that the regulation does not have is kept and marked dangling, never dropped
//! and never moved to a neighbour; a target in another law keeps that law's name as written, to be
//! found when that law is known.
//!
//! Only the text is read: the heading tree says which article and division a paragraph is in, the
//! paragraphs and items are the article's lines (an item line, （一）…, belongs to the paragraph
//! before it), and a line 第N条之M… starts the inserted article N-M (the tree keeps it inside N).

mod articles;
mod dangling;
mod drafts;
mod forms;
mod kinds;
mod named_laws;
mod reading;
mod targets;

use std::ops::Range;

use serde::Serialize;

use crate::model::SemanticBlock;

pub use articles::{article_texts, ArticleText, ItemText, ParagraphText};
pub use kinds::Kind;
pub use targets::{parse_article, parse_target, written, ArticleNo, Target};

use articles::{articles, Division};
use dangling::Outline;
use kinds::kind_of;
use reading::{read_line, Place};

/// The extractor's version, recorded with what it read (`reference_readings`): a change here has
/// every document's references read again from its stored blocks, without a parse.
pub const EXTRACTOR: &str = "references-1";

/// One reference found in an article's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    /// The citing article.
    pub article: ArticleNo,
    /// The citing paragraph (款), 1-based.
    pub paragraph: u32,
    /// The semantic block the reference stands in, and its byte range in that block's text.
    pub semantic_id: String,
    pub span: Range<usize>,
    /// The reference as written, with its law when the law is written with it (本法第三十九条第一款,
    /// 前款, 《…》第三十二条); the second of 第X条、第Y条 is 第Y条.
    pub text: String,
    pub kind: Kind,
    /// None: this regulation. Some: another law, named as written, without its title marks.
    pub law: Option<String>,
    pub target: Target,
    /// For a target in this regulation: it has no such article, paragraph, item or division.
    /// Always false for another law's (that is checked where the law is known).
    pub dangling: bool,
}

/// Every reference in a regulation's articles, in text order, relative ones placed and each one
/// into this regulation checked against what it has. Blocks that are no article (a preamble, an
/// appendix) are not read: a reference needs an article to stand in.
pub fn extract(blocks: &[SemanticBlock]) -> Vec<Reference> {
    let articles = articles(blocks);
    let outline = Outline::of(&articles);
    let mut out = Vec::new();
    for article in &articles {
        for (p, paragraph) in article.paragraphs.iter().enumerate() {
            let place = Place {
                article: article.number,
                paragraph: p as u32 + 1,
                division: article.division,
            };
            let mut cited = None;
            for (b, line) in &paragraph.lines {
                let text = &blocks[*b].text;
                for (span, law, target, group) in read_line(text, line.clone(), &place, &mut cited)
                {
                    let dangling = law.is_none() && !outline.has(&target);
                    out.push(Reference {
                        article: article.number,
                        paragraph: place.paragraph,
                        semantic_id: blocks[*b].semantic_id.clone(),
                        text: text[span.clone()].to_string(),
                        kind: kind_of(
                            &text[line.clone()],
                            group - line.start,
                            &(span.start - line.start..span.end - line.start),
                        ),
                        span,
                        law,
                        target,
                        dangling,
                    });
                }
            }
        }
    }
    out
}

/// A citation of another law found in free text (an answer, a brief): the law as written and
/// what it names in that law.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Citation {
    /// Byte range in the text.
    pub span: Range<usize>,
    pub text: String,
    /// As written, title marks removed.
    pub law: String,
    pub target: Target,
}

/// Every citation of a named law in `text`: 《民法典》第1079条第3款第（一）项, 民法典第一千零七十九条,
/// 刑法第264条、第266条. What names no law (本法第三条, 前款) cites nothing outside its own text
/// and is left out.
pub fn citations(text: &str) -> Vec<Citation> {
    let nowhere = Place {
        article: ArticleNo::new(0, 0),
        paragraph: 0,
        division: Division::default(),
    };
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split('\n') {
        let range = offset..offset + line.len();
        offset += line.len() + 1;
        for (span, law, target, _) in read_line(text, range, &nowhere, &mut None) {
            if let Some(law) = law {
                out.push(Citation {
                    text: text[span.clone()].to_string(),
                    span,
                    law,
                    target,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(id: usize, path: &[&str], text: &str) -> SemanticBlock {
        SemanticBlock {
            semantic_id: format!("S{id:05}"),
            block_type: "article".into(),
            page_start: 1,
            page_end: 1,
            section_path: path.iter().map(|s| s.to_string()).collect(),
            section_level: path.len() as i32,
            section_title: path.last().map(|s| s.to_string()).unwrap_or_default(),
            source_ids: Vec::new(),
            text: text.into(),
        }
    }

    fn law() -> Vec<SemanticBlock> {
        vec![
            block(1, &["第一章 总则", "第一条"], "第一条　为了规范本法第三条规定的事项，制定本法。"),
            block(2, &["第一章 总则", "第二条"], "第二条　依照前条规定。\n前款规定的事项，参照适用本法第三条第二款第（一）项的规定。\n除前两款规定外，违反本章规定的，依照《中华人民共和国行政处罚法》第三十二条、第三十三条处罚。"),
            block(3, &["第二章 责任", "第一节 一般规定", "第三条"], "第三条　甲内容。\n乙内容：\n（一）甲；\n（二）乙。\n违反本法第九百条、第三条第五款的，适用本节和第一条至第二条的规定。\n第三条之一　插入的条文，依照前条规定。"),
            block(4, &["第二章 责任", "第一节 一般规定", "第四条"], "第四条　民法典第一千零七十九条第三款第（一）项；本条第一款和第二款；前款；第８条；第 3 条之一。"),
        ]
    }

    /// (citing article, paragraph, text, kind, law, target, dangling)
    type Row = (
        String,
        u32,
        String,
        &'static str,
        Option<String>,
        String,
        bool,
    );

    fn found() -> Vec<Row> {
        extract(&law())
            .into_iter()
            .map(|r| {
                (
                    r.article.to_string(),
                    r.paragraph,
                    r.text,
                    r.kind.as_str(),
                    r.law,
                    r.target.to_string(),
                    r.dangling,
                )
            })
            .collect()
    }

    #[test]
    fn every_form_is_read_and_placed() {
        let got = found();
        let s = |x: &str| x.to_string();
        let want = vec![
            (
                s("1"),
                1,
                s("本法第三条"),
                "mention",
                None,
                s("art:3"),
                false,
            ),
            (s("2"), 1, s("前条"), "apply", None, s("art:1"), false),
            (s("2"), 2, s("前款"), "mention", None, s("art:2:p1"), false),
            (
                s("2"),
                2,
                s("本法第三条第二款第（一）项"),
                "analogy",
                None,
                s("art:3:p2:i1"),
                false,
            ),
            (
                s("2"),
                3,
                s("前两款"),
                "exception",
                None,
                s("art:2:p1..2"),
                false,
            ),
            (s("2"), 3, s("本章"), "mention", None, s("chapter:1"), false),
            (
                s("2"),
                3,
                s("《中华人民共和国行政处罚法》第三十二条"),
                "apply",
                Some(s("中华人民共和国行政处罚法")),
                s("art:32"),
                false,
            ),
            (
                s("2"),
                3,
                s("第三十三条"),
                "apply",
                Some(s("中华人民共和国行政处罚法")),
                s("art:33"),
                false,
            ),
            (
                s("3"),
                3,
                s("本法第九百条"),
                "mention",
                None,
                s("art:900"),
                true,
            ),
            (
                s("3"),
                3,
                s("第三条第五款"),
                "mention",
                None,
                s("art:3:p5"),
                true,
            ),
            (
                s("3"),
                3,
                s("本节"),
                "apply",
                None,
                s("chapter:2/section:1"),
                false,
            ),
            (
                s("3"),
                3,
                s("第一条至第二条"),
                "apply",
                None,
                s("arts:1..2"),
                false,
            ),
            (s("3-1"), 1, s("前条"), "apply", None, s("art:3"), false),
            (
                s("4"),
                1,
                s("民法典第一千零七十九条第三款第（一）项"),
                "mention",
                Some(s("民法典")),
                s("art:1079:p3:i1"),
                false,
            ),
            (
                s("4"),
                1,
                s("本条第一款"),
                "mention",
                None,
                s("art:4:p1"),
                false,
            ),
            (s("4"), 1, s("第二款"), "mention", None, s("art:4:p2"), true),
            (s("4"), 1, s("前款"), "mention", None, s("art:4:p0"), true),
            (s("4"), 1, s("第８条"), "mention", None, s("art:8"), true),
            (
                s("4"),
                1,
                s("第 3 条之一"),
                "mention",
                None,
                s("art:3-1"),
                false,
            ),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_law_name_is_cut_at_its_verb() {
        let b = vec![block(
            1,
            &["第一条"],
            "第一条　依照刑法第二百六十四条的规定处罚。",
        )];
        let r = extract(&b);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].law.as_deref(), Some("刑法"));
        assert_eq!(r[0].text, "刑法第二百六十四条");
        assert_eq!(r[0].kind, Kind::Apply);
    }

    #[test]
    fn the_articles_of_association_are_no_chapter() {
        let b = vec![block(
            1,
            &["第一章 总则", "第一条"],
            "第一条　依照本章程规定。本节约定。",
        )];
        assert!(extract(&b).is_empty());
    }

    #[test]
    fn a_heading_is_no_reference_but_a_line_naming_another_article_is() {
        let b = vec![block(
            1,
            &["第七条"],
            "第七条　内容。\n第八条规定的情形，依照本法处理。",
        )];
        let r = extract(&b);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].target.to_string(), "art:8");
        assert_eq!(r[0].paragraph, 2);
    }

    #[test]
    fn an_article_is_served_by_paragraph_and_item() {
        let texts = article_texts(&law());
        let third = texts
            .iter()
            .find(|a| a.number == ArticleNo::new(3, 0))
            .unwrap();
        assert_eq!(third.paragraphs.len(), 3);
        assert_eq!(third.paragraphs[1].text, "乙内容：");
        assert_eq!(third.paragraphs[1].items.len(), 2);
        assert_eq!(third.part(Some(2), Some(2)).as_deref(), Some("（二）乙。"));
        assert_eq!(third.part(Some(4), None), None);
        let inserted = texts
            .iter()
            .find(|a| a.number == ArticleNo::new(3, 1))
            .unwrap();
        assert!(inserted.text().starts_with("第三条之一"));
    }

    #[test]
    fn addresses_are_read_as_people_write_them() {
        for (s, want) in [
            ("第三十九条", Some((39, 0))),
            ("第39条", Some((39, 0))),
            ("39", Some((39, 0))),
            ("３９", Some((39, 0))),
            ("第三十九条之一", Some((39, 1))),
            ("39-1", Some((39, 1))),
            ("第 39 条", Some((39, 0))),
            ("0", None),
            ("第三章", None),
            ("abc", None),
            ("", None),
        ] {
            assert_eq!(parse_article(s).map(|a| (a.number, a.sub)), want, "{s}");
        }
    }

    #[test]
    fn citations_in_free_text_name_their_laws() {
        let text = "根据《民法典》第1079条第3款第（一）项和民法典第一千零七十九条，以及刑法第264条、第２６６条；本法第三条不算。";
        let got: Vec<(String, String)> = citations(text)
            .into_iter()
            .map(|c| (c.law, c.target.to_string()))
            .collect();
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            got,
            vec![
                s("民法典", "art:1079:p3:i1"),
                s("民法典", "art:1079"),
                s("刑法", "art:264"),
                s("刑法", "art:266"),
            ]
        );
        assert_eq!(
            written(ArticleNo::new(1079, 0), Some(3), Some(1)),
            "第一千零七十九条第三款第（一）项"
        );
    }

    #[test]
    fn a_target_reads_back() {
        for t in [
            "art:39",
            "art:39-1",
            "art:39:p2",
            "art:39:p2:i1",
            "art:39:i3",
        ] {
            let (a, p, i) = parse_target(t).unwrap();
            let back = Target::Article {
                article: a,
                paragraph: p,
                item: i,
            };
            assert_eq!(back.to_string(), t);
        }
        assert_eq!(
            parse_target("arts:18..20").unwrap().0,
            ArticleNo::new(18, 0)
        );
        assert_eq!(parse_target("art:39:p1..2").unwrap().1, Some(1));
        assert_eq!(parse_target("chapter:3"), None);
    }
}
