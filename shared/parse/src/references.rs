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

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::article_ref::{article_number, parse_numeral};
use crate::model::SemanticBlock;
use crate::structure::regulation_marker;

/// The extractor's version, recorded with what it read (`reference_readings`): a change here has
/// every document's references read again from its stored blocks, without a parse.
pub const EXTRACTOR: &str = "references-1";

/// An article's number, with the 之M of an inserted article (第三十九条之一 → 39, 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ArticleNo {
    pub number: u32,
    /// 0 for the article itself, M for 之M.
    pub sub: u32,
}

impl ArticleNo {
    pub fn new(number: u32, sub: u32) -> ArticleNo {
        ArticleNo { number, sub }
    }
}

impl fmt::Display for ArticleNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sub {
            0 => write!(f, "{}", self.number),
            m => write!(f, "{}-{m}", self.number),
        }
    }
}

/// What a reference points at. Displayed in the canonical form the API and the labelled set use:
/// `art:39`, `art:39-1`, `art:39:p2`, `art:39:p2:i1`, `art:39:i3`, `arts:18..20`, `art:39:p1..2`,
/// `chapter:3`, `chapter:3/section:2`, `part:3/chapter:2`, `part:3`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Target {
    Article {
        article: ArticleNo,
        paragraph: Option<u32>,
        item: Option<u32>,
    },
    Articles {
        from: ArticleNo,
        to: ArticleNo,
    },
    Paragraphs {
        article: ArticleNo,
        from: u32,
        to: u32,
    },
    /// 前款第四项至第六项
    Items {
        article: ArticleNo,
        paragraph: Option<u32>,
        from: u32,
        to: u32,
    },
    /// The division (编, 章, 节) that holds the citing article, by its numbers from the top.
    Division {
        part: Option<u32>,
        chapter: Option<u32>,
        section: Option<u32>,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Article {
                article,
                paragraph,
                item,
            } => {
                write!(f, "art:{article}")?;
                if let Some(p) = paragraph {
                    write!(f, ":p{p}")?;
                }
                if let Some(i) = item {
                    write!(f, ":i{i}")?;
                }
                Ok(())
            }
            Target::Articles { from, to } => write!(f, "arts:{from}..{to}"),
            Target::Paragraphs { article, from, to } => write!(f, "art:{article}:p{from}..{to}"),
            Target::Items {
                article,
                paragraph,
                from,
                to,
            } => match paragraph {
                Some(p) => write!(f, "art:{article}:p{p}:i{from}..{to}"),
                None => write!(f, "art:{article}:i{from}..{to}"),
            },
            Target::Division {
                part,
                chapter,
                section,
            } => {
                let parts: Vec<String> =
                    [("part", part), ("chapter", chapter), ("section", section)]
                        .into_iter()
                        .filter_map(|(name, n)| n.map(|n| format!("{name}:{n}")))
                        .collect();
                write!(f, "{}", parts.join("/"))
            }
        }
    }
}

impl Target {
    /// The article a target names (its first, for a span), if it names one.
    pub fn article(&self) -> Option<ArticleNo> {
        match self {
            Target::Article { article, .. }
            | Target::Paragraphs { article, .. }
            | Target::Items { article, .. } => Some(*article),
            Target::Articles { from, .. } => Some(*from),
            Target::Division { .. } => None,
        }
    }
}

/// How the citing text leans on its target (立法技术规范（试行）（一）: 依照/按照, 参照, 除…外).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// 依照, 按照, 依据, 根据, 适用: the target's rule applies.
    Apply,
    /// 参照, 参照适用: applied by analogy.
    Analogy,
    /// 除…外: the target is an exception to the citing rule.
    Exception,
    /// Named without a verb that applies it (违反本法第X条规定的, 前款所称…).
    Mention,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Apply => "apply",
            Kind::Analogy => "analogy",
            Kind::Exception => "exception",
            Kind::Mention => "mention",
        }
    }
}

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

// --- the text's shape: articles, paragraphs, divisions ------------------------------------------

/// One paragraph (款) of an article: its lines, each as (block index, byte range in that block's
/// text), and how many items (项) it has.
#[derive(Debug, Default)]
struct Paragraph {
    lines: Vec<(usize, Range<usize>)>,
    items: u32,
}

/// One article as the text has it, with the divisions that hold it.
#[derive(Debug)]
struct Article {
    number: ArticleNo,
    division: Division,
    paragraphs: Vec<Paragraph>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Division {
    part: Option<u32>,
    chapter: Option<u32>,
    section: Option<u32>,
}

/// The division numbers a block's section path names (第三编 → part 3, 第二章 → chapter 2, …).
fn division_of(path: &[String]) -> Division {
    let mut d = Division::default();
    for title in path {
        let Some((number, unit, _)) = regulation_marker(title.trim_start()) else {
            continue;
        };
        let n = parse_numeral(&number);
        match unit {
            '编' | '編' => {
                d = Division {
                    part: n,
                    ..Division::default()
                }
            }
            '章' => {
                d.chapter = n;
                d.section = None;
            }
            '节' | '節' => d.section = n,
            _ => {}
        }
    }
    d
}

/// `（一）…`, `(一)…`, `一、…` at the start of a line: an item (项).
fn is_item_line(line: &str) -> bool {
    static ITEM: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[ \u{3000}]*(?:[（(][ \u{3000}]*[零〇一二两三四五六七八九十百]+[ \u{3000}]*[）)]|[零〇一二两三四五六七八九十百]+、)")
            .expect("static regex")
    });
    ITEM.is_match(line)
}

/// `第N条之M` opening a line: the inserted article's number.
fn inserted_article(line: &str) -> Option<ArticleNo> {
    static INSERTED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[ \u{3000}]*第[ \u{3000}]*([零〇一二两三四五六七八九十百千0-9０-９]+)[ \u{3000}]*条之([一二三四五六七八九十]+)")
            .expect("static regex")
    });
    let c = INSERTED.captures(line)?;
    Some(ArticleNo::new(parse_numeral(&c[1])?, parse_numeral(&c[2])?))
}

/// The regulation's articles, in order: each article's blocks (a long one is cut into several)
/// joined, split into paragraphs at line ends, items kept with their paragraph.
fn articles(blocks: &[SemanticBlock]) -> Vec<Article> {
    let mut out: Vec<Article> = Vec::new();
    let mut open: Option<(Vec<String>, u32)> = None;
    for (b, block) in blocks.iter().enumerate() {
        let Some(number) = article_number(&block.section_title) else {
            open = None;
            continue;
        };
        let continues = open
            .as_ref()
            .is_some_and(|(path, n)| *path == block.section_path && *n == number);
        if !continues {
            out.push(Article {
                number: ArticleNo::new(number, 0),
                division: division_of(&block.section_path),
                paragraphs: Vec::new(),
            });
            open = Some((block.section_path.clone(), number));
        }
        let mut offset = 0;
        for line in block.text.split('\n') {
            let range = offset..offset + line.len();
            offset += line.len() + 1;
            if line.trim().is_empty() {
                continue;
            }
            let article = out.last_mut().expect("pushed above");
            if let Some(inserted) = inserted_article(line).filter(|a| a.number == number) {
                let division = article.division;
                out.push(Article {
                    number: inserted,
                    division,
                    paragraphs: Vec::new(),
                });
            }
            let article = out.last_mut().expect("pushed above");
            // A block cut inside a paragraph (a long one) goes on in the next block's first line.
            let cut_mid_paragraph = continues && range.start == 0 && !article.paragraphs.is_empty();
            if is_item_line(line) && !article.paragraphs.is_empty() {
                let p = article.paragraphs.last_mut().expect("not empty");
                p.items += 1;
                p.lines.push((b, range));
            } else if cut_mid_paragraph {
                let p = article.paragraphs.last_mut().expect("not empty");
                p.lines.push((b, range));
            } else {
                article.paragraphs.push(Paragraph {
                    lines: vec![(b, range)],
                    items: 0,
                });
            }
        }
    }
    out
}

/// What the regulation has, to tell a target it has from a dangling one.
struct Outline {
    /// Article → its paragraphs' item counts.
    articles: HashMap<ArticleNo, Vec<u32>>,
    divisions: HashSet<Division>,
}

impl Outline {
    fn of(articles: &[Article]) -> Outline {
        let mut divisions = HashSet::new();
        for a in articles {
            let d = a.division;
            divisions.insert(d);
            divisions.insert(Division { section: None, ..d });
            divisions.insert(Division {
                chapter: None,
                section: None,
                ..d
            });
        }
        Outline {
            articles: articles
                .iter()
                .map(|a| (a.number, a.paragraphs.iter().map(|p| p.items).collect()))
                .collect(),
            divisions,
        }
    }

    fn has(&self, target: &Target) -> bool {
        match target {
            Target::Article {
                article,
                paragraph,
                item,
            } => {
                let Some(paragraphs) = self.articles.get(article) else {
                    return false;
                };
                match (paragraph, item) {
                    (None, None) => true,
                    (Some(p), None) => *p >= 1 && (*p as usize) <= paragraphs.len(),
                    (Some(p), Some(i)) => {
                        *p >= 1
                            && paragraphs
                                .get(*p as usize - 1)
                                .is_some_and(|items| *i >= 1 && i <= items)
                    }
                    // An item with no paragraph named: any paragraph of the article with that many.
                    (None, Some(i)) => *i >= 1 && paragraphs.iter().any(|items| i <= items),
                }
            }
            Target::Articles { from, to } => {
                from < to && self.articles.contains_key(from) && self.articles.contains_key(to)
            }
            Target::Paragraphs { article, from, to } => {
                *from >= 1
                    && from < to
                    && self
                        .articles
                        .get(article)
                        .is_some_and(|p| (*to as usize) <= p.len())
            }
            Target::Items {
                article,
                paragraph,
                from,
                to,
            } => {
                let items = |p: &u32| {
                    (*p as usize)
                        .checked_sub(1)
                        .and_then(|i| self.articles.get(article)?.get(i).copied())
                };
                *from >= 1
                    && from < to
                    && match paragraph {
                        Some(p) => items(p).is_some_and(|n| *to <= n),
                        None => self
                            .articles
                            .get(article)
                            .is_some_and(|ps| ps.iter().any(|n| to <= n)),
                    }
            }
            Target::Division {
                part,
                chapter,
                section,
            } => {
                // A level the text does not number (a code's part cut out on its own) cannot be
                // checked: it is not taken for missing.
                let numbered = |level: fn(&Division) -> Option<u32>| {
                    self.divisions.iter().any(|d| level(d).is_some())
                };
                if part.is_some() && !numbered(|d| d.part)
                    || chapter.is_some() && !numbered(|d| d.chapter)
                    || section.is_some() && !numbered(|d| d.section)
                {
                    return true;
                }
                (part.is_some() || chapter.is_some() || section.is_some())
                    && self.divisions.contains(&Division {
                        part: *part,
                        chapter: *chapter,
                        section: *section,
                    })
            }
        }
    }
}

/// An article as its text has it: paragraphs (款) with their items (项), for serving one article.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArticleText {
    pub number: ArticleNo,
    pub paragraphs: Vec<ParagraphText>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParagraphText {
    /// 1-based.
    pub number: u32,
    /// The paragraph's own lines (its items apart).
    pub text: String,
    pub items: Vec<ItemText>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemText {
    /// 1-based: （一） is 1.
    pub number: u32,
    pub text: String,
}

impl ArticleText {
    /// The whole article, its lines joined.
    pub fn text(&self) -> String {
        let mut lines = Vec::new();
        for p in &self.paragraphs {
            lines.push(p.text.as_str());
            lines.extend(p.items.iter().map(|i| i.text.as_str()));
        }
        lines.join("\n")
    }

    /// The text a target inside this article names: the article, a paragraph, an item, or a span
    /// of paragraphs; none when the article has no such part.
    pub fn part(&self, paragraph: Option<u32>, item: Option<u32>) -> Option<String> {
        match (paragraph, item) {
            (None, None) => Some(self.text()),
            (Some(p), None) => {
                let p = self.paragraphs.get((p as usize).checked_sub(1)?)?;
                let mut lines = vec![p.text.as_str()];
                lines.extend(p.items.iter().map(|i| i.text.as_str()));
                Some(lines.join("\n"))
            }
            (Some(p), Some(i)) => {
                let p = self.paragraphs.get((p as usize).checked_sub(1)?)?;
                Some(p.items.get((i as usize).checked_sub(1)?)?.text.clone())
            }
            (None, Some(i)) => self
                .paragraphs
                .iter()
                .find_map(|p| p.items.get((i as usize).checked_sub(1)?))
                .map(|i| i.text.clone()),
        }
    }
}

/// Every article of a regulation's blocks, split into paragraphs and items as [`extract`] reads
/// them.
pub fn article_texts(blocks: &[SemanticBlock]) -> Vec<ArticleText> {
    articles(blocks)
        .into_iter()
        .map(|a| ArticleText {
            number: a.number,
            paragraphs: a
                .paragraphs
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let mut own = Vec::new();
                    let mut items = Vec::new();
                    for (b, range) in &p.lines {
                        let line = &blocks[*b].text[range.clone()];
                        if is_item_line(line) && !own.is_empty() {
                            items.push(ItemText {
                                number: items.len() as u32 + 1,
                                text: line.to_string(),
                            });
                        } else if items.is_empty() {
                            own.push(line);
                        } else if let Some(last) = items.last_mut() {
                            // A long item cut across blocks goes on.
                            last.text.push_str(line);
                        }
                    }
                    ParagraphText {
                        number: k as u32 + 1,
                        text: own.join(""),
                        items,
                    }
                })
                .collect(),
        })
        .collect()
}

/// An article as people address it: 第三十九条, 第39条, 三十九, 39, 第三十九条之一, 39-1, 39之一.
pub fn parse_article(s: &str) -> Option<ArticleNo> {
    static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"^{SP}第?{SP}(?P<n>{NUM}){SP}条?{SP}(?:(?:之|-){SP}(?P<m>[一二三四五六七八九十0-9]+))?{SP}$"
        ))
        .expect("static regex")
    });
    let c = ADDRESS.captures(s)?;
    let number = parse_numeral(&c["n"]).filter(|n| *n > 0)?;
    let sub = match c.name("m") {
        Some(m) => parse_numeral(m.as_str()).filter(|m| *m > 0)?,
        None => 0,
    };
    Some(ArticleNo::new(number, sub))
}

// --- the grammar of a reference ------------------------------------------------------------------

const NUM: &str = "[零〇○一二两三四五六七八九十百千万0-9０-９]+";
const SP: &str = "[ \u{3000}]*";

/// The pieces a reference is made of, found in one pass; [`chains`] puts them together.
static ATOM: LazyLock<Regex> = LazyLock::new(|| {
    let art =
        format!(r"(?P<art>第{SP}(?P<an>{NUM}){SP}条(?:之(?P<asub>[一二三四五六七八九十0-9]+))?)");
    // 第一、二款 and 第一、二项 name two.
    let para = format!(r"(?P<para>第{SP}(?P<pn>{NUM})(?P<pmore>(?:、{NUM})*){SP}款)");
    let item = format!(
        r"(?P<item>第{SP}(?:[（(]{SP}(?P<in1>{NUM}){SP}[）)](?P<pmore2>(?:、?[（(]{NUM}[）)])*)|(?P<in2>{NUM})(?P<imore>(?:、{NUM})*)){SP}项)"
    );
    let div = format!(r"(?P<div>第{SP}(?P<dn>{NUM}){SP}(?P<du>[编章节]))");
    let rel = r"(?P<rel>本条|前款|上款|前(?P<pk>[两二三四五])款|前条|上一条|前(?P<pa>[两二三])条|本章|本节|本编)";
    let own = r"(?P<own>本(?:法|条例|规定|办法|细则|实施细则|解释|决定|规则|准则))";
    let title = r"(?P<title>《(?P<tname>[^《》\n]{1,80}?(?:〈[^〉\n]*〉[^《》\n]*?)?)》)";
    // `own` before `rel`: 本条例 is the regulation, not 本条 + 例.
    Regex::new(&format!("{art}|{para}|{item}|{own}|{rel}|{title}|{div}")).expect("static regex")
});

/// What may join two references of one list: they share the first one's law (and article).
static JOINER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^{SP}(?:、|，|,|和|及|以及|与|或者|或|至|到){SP}$"
    ))
    .expect("static regex")
});

/// A law named without title marks just before 第…条 (民法典第一千零七十九条, 刑法第264条): the run
/// of Han characters before it, ending as a law's name ends.
static NAMED_LAW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<name>[\p{Han}]{1,30}(?:法典|法|条例|规定|办法|细则|解释|决定|通则|规则))$")
        .expect("static regex")
});

/// Verbs and particles that end a law name's run on its left ("依照民法典" → 民法典, "应当认定为刑法" →
/// 刑法): the name is what follows the last of them that leaves a name.
const NAME_STOPS: [&str; 40] = [
    "依照", "按照", "依据", "根据", "适用", "违反", "参照", "对照", "符合", "属于", "以及", "或者",
    "具有", "达到", "虚开", "运输", "通过", "认定", "规定", "制造", "和", "及", "与", "或", "为",
    "的", "在", "向", "将", "把", "被", "从", "于", "是", "即", "并", "有", "因", "以", "由",
];

/// The codes people cite by their short name, alone, in running text ("擅自制造刑法第二百零九条"): a
/// run ending with one is that code.
const CODES: [&str; 8] = [
    "民法典",
    "刑法",
    "宪法",
    "刑事诉讼法",
    "民事诉讼法",
    "行政诉讼法",
    "行政处罚法",
    "行政许可法",
];

/// Words ending like a law's name that name none (依法第…: by law).
const NOT_LAW_NAMES: [&str; 8] = [
    "依法", "违法", "合法", "方法", "办法", "立法", "执法", "司法",
];

/// The two-character laws (most names are longer; 刑法第…, 宪法第…).
const SHORT_LAW_NAMES: [&str; 3] = ["刑法", "宪法", "民法"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtomKind {
    Article(ArticleNo),
    Paragraph(u32),
    Item(u32),
    /// 本条
    ThisArticle,
    /// 前款, 前两款 (how many back)
    PreviousParagraphs(u32),
    /// 前条, 前两条
    PreviousArticles(u32),
    Chapter,
    Section,
    Part,
    /// 本法, 本条例…
    Own,
    /// 《…》: its name
    Title,
    /// 第二章, 第一编 (only after 本法/本条例: 本条例第二章)
    Numbered(Division),
}

#[derive(Debug, Clone)]
struct Atom {
    kind: AtomKind,
    range: Range<usize>,
    name: Option<String>,
    /// The rest of a compressed list: 第一、二款 → [2].
    more: Vec<u32>,
}

fn numbers_after(list: Option<regex::Match<'_>>) -> Vec<u32> {
    list.map(|m| {
        m.as_str()
            .split('、')
            .filter(|n| !n.is_empty())
            .filter_map(parse_numeral)
            .collect()
    })
    .unwrap_or_default()
}

fn atoms(text: &str) -> Vec<Atom> {
    let mut out = Vec::new();
    for c in ATOM.captures_iter(text) {
        let whole = c.get(0).expect("group 0");
        let range = whole.range();
        let mut more = Vec::new();
        let kind = if c.name("art").is_some() {
            let Some(n) = parse_numeral(&c["an"]) else {
                continue;
            };
            let sub = c
                .name("asub")
                .and_then(|m| parse_numeral(m.as_str()))
                .unwrap_or(0);
            AtomKind::Article(ArticleNo::new(n, sub))
        } else if c.name("para").is_some() {
            let Some(n) = parse_numeral(&c["pn"]) else {
                continue;
            };
            more = numbers_after(c.name("pmore"));
            AtomKind::Paragraph(n)
        } else if c.name("item").is_some() {
            let n = c.name("in1").or(c.name("in2")).map(|m| m.as_str());
            let Some(n) = n.and_then(parse_numeral) else {
                continue;
            };
            more = numbers_after(c.name("imore"));
            // 第（一）（二）项, 第（一）、（二）项
            if let Some(list) = c.name("pmore2") {
                more.extend(
                    list.as_str()
                        .split(['（', '(', '）', ')', '、'])
                        .filter(|n| !n.is_empty())
                        .filter_map(parse_numeral),
                );
            }
            AtomKind::Item(n)
        } else if let Some(rel) = c.name("rel") {
            let back = |g: &str| {
                c.name(g)
                    .and_then(|m| parse_numeral(m.as_str()))
                    .unwrap_or(1)
            };
            match rel.as_str() {
                "本条" => AtomKind::ThisArticle,
                "本章" => {
                    if text[range.end..].starts_with('程') {
                        continue; // 本章程: a company's articles of association
                    }
                    AtomKind::Chapter
                }
                "本节" => {
                    if text[range.end..].starts_with(['能', '约', '日']) {
                        continue; // 本节能…, 本节约…, 本节日…
                    }
                    AtomKind::Section
                }
                "本编" => AtomKind::Part,
                "前条" | "上一条" => AtomKind::PreviousArticles(1),
                "前款" | "上款" => AtomKind::PreviousParagraphs(1),
                s if s.ends_with('款') => AtomKind::PreviousParagraphs(back("pk")),
                _ => AtomKind::PreviousArticles(back("pa")),
            }
        } else if c.name("own").is_some() {
            AtomKind::Own
        } else if c.name("title").is_some() {
            AtomKind::Title
        } else {
            let Some(n) = parse_numeral(&c["dn"]) else {
                continue;
            };
            AtomKind::Numbered(match &c["du"] {
                "编" => Division {
                    part: Some(n),
                    ..Division::default()
                },
                "章" => Division {
                    chapter: Some(n),
                    ..Division::default()
                },
                _ => Division {
                    section: Some(n),
                    ..Division::default()
                },
            })
        };
        out.push(Atom {
            kind,
            range,
            name: c.name("tname").map(|m| m.as_str().to_string()),
            more,
        });
    }
    out
}

/// Atoms that touch (nothing but spaces between) form one address: 本法 第三十九条 第一款 第（二）项.
fn touches(text: &str, a: &Atom, b: &Atom) -> bool {
    text[a.range.end..b.range.start]
        .chars()
        .all(|c| c == ' ' || c == '\u{3000}')
}

/// Where a reference stands: the article, paragraph and division around it.
struct Place {
    article: ArticleNo,
    paragraph: u32,
    division: Division,
}

/// The law an article reference names on its left: none (this regulation), a title in marks, or
/// a name without them (民法典第…).
fn law_on_the_left(text: &str, start: usize, previous: Option<&Atom>) -> Option<String> {
    if let Some(p) = previous {
        if touches(
            text,
            p,
            &Atom {
                kind: AtomKind::Own,
                range: start..start,
                name: None,
                more: Vec::new(),
            },
        ) {
            return match p.kind {
                AtomKind::Title => p.name.clone(),
                _ => None,
            };
        }
    }
    let before = &text[..start];
    let run_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphabetic() && !c.is_ascii())
        .last()
        .map(|(i, _)| i)?;
    let run = &before[run_start..];
    let name = NAMED_LAW.captures(run)?.name("name")?.as_str();
    let code = CODES
        .iter()
        .filter(|c| name.ends_with(*c))
        .max_by_key(|c| c.len());
    let name = match name.find("中华人民共和国") {
        Some(i) => &name[i..],
        None if code.is_some() => &name[name.len() - code.map_or(0, |c| c.len())..],
        // The last stop word in the run that leaves a name ends it on the left (国有 is no 有).
        None => {
            let cut = NAME_STOPS
                .iter()
                .flat_map(|s| name.match_indices(s).map(move |(i, _)| (i, s.len())))
                .filter(|(i, _)| !(name[..*i].ends_with('国') && name[*i..].starts_with('有')))
                .map(|(i, len)| i + len)
                .filter(|cut| {
                    let rest = &name[*cut..];
                    let chars = rest.chars().count();
                    (chars >= 3 || SHORT_LAW_NAMES.contains(&rest)) && NAMED_LAW.is_match(rest)
                })
                .max()
                .unwrap_or(0);
            &name[cut..]
        }
    };
    let chars = name.chars().count();
    let plausible = (chars >= 3 || SHORT_LAW_NAMES.contains(&name))
        && !NOT_LAW_NAMES
            .iter()
            .any(|w| name.ends_with(w) && chars <= 3)
        && NAMED_LAW.is_match(name)
        && !name.starts_with('本');
    plausible.then(|| name.to_string())
}

/// A reference being read: its law, the article it is at, and the pieces so far.
#[derive(Debug, Clone)]
struct Draft {
    start: usize,
    end: usize,
    law: Option<String>,
    article: Option<ArticleNo>,
    paragraph: Option<u32>,
    item: Option<u32>,
    /// 前两款 / 前两条 / 本章…: the whole target, already placed.
    fixed: Option<Target>,
    /// For 至: the first article of the span.
    span_from: Option<ArticleNo>,
    /// The rest of a compressed list at the last level given (第一、二款: [2]).
    more: Vec<u32>,
    /// For 第四项至第六项: the first item.
    item_from: Option<u32>,
    /// Where the list this reference continues began (本法第六条、第二十一条: 本法…), whose verb
    /// governs every member; `usize::MAX` for a reference that begins one.
    group: usize,
}

impl Draft {
    fn group_start(&self) -> usize {
        if self.group == usize::MAX {
            self.start
        } else {
            self.group
        }
    }
}

/// A reference read from a line: its span, law and target, and where its list began.
type Found = (Range<usize>, Option<String>, Target, usize);

impl Draft {
    fn target(&self) -> Option<Target> {
        if let Some(t) = &self.fixed {
            // 前款第四项至第六项
            if let (Target::Paragraphs { article, from, to }, Some(first), Some(last)) =
                (t, self.item_from, self.item)
            {
                if from == to {
                    return Some(Target::Items {
                        article: *article,
                        paragraph: Some(*from),
                        from: first,
                        to: last,
                    });
                }
            }
            return match (t, self.item) {
                // 前款第（一）项
                (Target::Paragraphs { article, from, to }, Some(i)) if from == to => {
                    Some(Target::Article {
                        article: *article,
                        paragraph: Some(*from),
                        item: Some(i),
                    })
                }
                (Target::Paragraphs { article, from, to }, None) if from == to => {
                    Some(Target::Article {
                        article: *article,
                        paragraph: Some(*from),
                        item: None,
                    })
                }
                // 前条, 前条第（一）项
                (Target::Articles { from, to }, item) if from == to => Some(Target::Article {
                    article: *from,
                    paragraph: None,
                    item,
                }),
                _ => Some(t.clone()),
            };
        }
        let article = self.article?;
        if let Some(from) = self.span_from {
            return Some(Target::Articles { from, to: article });
        }
        if let (Some(from), Some(to)) = (self.item_from, self.item) {
            return Some(Target::Items {
                article,
                paragraph: self.paragraph,
                from,
                to,
            });
        }
        Some(Target::Article {
            article,
            paragraph: self.paragraph,
            item: self.item,
        })
    }
}

/// The references of one paragraph line, in order.
/// `cited` carries, from line to line of one paragraph, the last other article of this regulation
/// it cited (what a bare 第（一）项 after it means).
fn read_line(
    text: &str,
    line: Range<usize>,
    place: &Place,
    cited: &mut Option<ArticleNo>,
) -> Vec<Found> {
    let slice = &text[line.clone()];
    let found = atoms(slice);
    let mut out: Vec<Found> = Vec::new();
    let mut draft: Option<Draft> = None;
    let mut previous: Option<&Atom> = None;
    // A reference opening a line is the article's own heading only when it is this article.
    for (k, atom) in found.iter().enumerate() {
        let joined_to_draft = previous.is_some_and(|p| {
            draft.is_some() && JOINER.is_match(&slice[p.range.end..atom.range.start])
        });
        let touching = previous.is_some_and(|p| draft.is_some() && touches(slice, p, atom));
        let joiner_is_to = previous.is_some_and(|p| {
            let between = slice[p.range.end..atom.range.start].trim_matches([' ', '\u{3000}']);
            between == "至" || between == "到"
        });
        match atom.kind {
            AtomKind::Numbered(division) => {
                // 本条例第二章, 本法第一编、第五编: only with the regulation named (a bare 第二章 in
                // running text is too often a heading quoted).
                let after_own =
                    previous.is_some_and(|p| p.kind == AtomKind::Own && touches(slice, p, atom));
                let in_list = joined_to_draft
                    && draft
                        .as_ref()
                        .is_some_and(|d| matches!(d.fixed, Some(Target::Division { .. })));
                if after_own || in_list {
                    let start = match previous {
                        Some(p) if after_own => p.range.start,
                        _ => atom.range.start,
                    };
                    flush(&mut draft, &mut out);
                    draft = Some(Draft {
                        start,
                        end: atom.range.end,
                        law: None,
                        article: None,
                        paragraph: None,
                        item: None,
                        fixed: Some(Target::Division {
                            part: division.part,
                            chapter: division.chapter,
                            section: division.section,
                        }),
                        span_from: None,
                        more: Vec::new(),
                        item_from: None,
                        group: usize::MAX,
                    });
                } else {
                    flush(&mut draft, &mut out);
                }
            }
            AtomKind::Own | AtomKind::Title => {
                flush(&mut draft, &mut out);
                // A law by itself is no reference; it waits for an article touching it.
            }
            AtomKind::Article(n) => {
                if atom.range.start == 0 && n == place.article {
                    // The article's own heading (第三十九条　…), not a reference.
                    previous = Some(atom);
                    continue;
                }
                let law_left = previous
                    .filter(|p| touches(slice, p, atom))
                    .map(|p| matches!(p.kind, AtomKind::Own | AtomKind::Title))
                    .unwrap_or(false);
                if joined_to_draft && !law_left {
                    let mut d = draft.take().expect("joined to a draft");
                    let law = d.law.clone();
                    if joiner_is_to
                        && d.fixed.is_none()
                        && d.article.is_some()
                        && d.paragraph.is_none()
                    {
                        d.span_from = d.article;
                        d.article = Some(n);
                        d.end = atom.range.end;
                        draft = Some(d);
                    } else {
                        push(&d, &mut out);
                        let group = d.group_start();
                        draft = Some(Draft {
                            group,
                            start: atom.range.start,
                            end: atom.range.end,
                            law,
                            article: Some(n),
                            paragraph: None,
                            item: None,
                            fixed: None,
                            span_from: None,
                            more: Vec::new(),
                            item_from: None,
                        });
                    }
                } else {
                    flush(&mut draft, &mut out);
                    let (start, law) = match previous.filter(|p| touches(slice, p, atom)) {
                        Some(p) if p.kind == AtomKind::Own => (p.range.start, None),
                        Some(p) if p.kind == AtomKind::Title => (p.range.start, p.name.clone()),
                        _ => {
                            let law = law_on_the_left(slice, atom.range.start, None);
                            let start = match &law {
                                Some(name) => atom.range.start - name.len(),
                                None => atom.range.start,
                            };
                            (start, law)
                        }
                    };
                    draft = Some(Draft {
                        start,
                        end: atom.range.end,
                        law,
                        article: Some(n),
                        paragraph: None,
                        item: None,
                        fixed: None,
                        span_from: None,
                        more: Vec::new(),
                        item_from: None,
                        group: usize::MAX,
                    });
                }
            }
            AtomKind::Paragraph(p) => {
                let one_article = |d: &Draft| match &d.fixed {
                    None => d.article,
                    // 前条第二款
                    Some(Target::Articles { from, to }) if from == to => Some(*from),
                    Some(_) => None,
                };
                let extends = touching
                    && draft.as_ref().is_some_and(|d| {
                        d.paragraph.is_none()
                            && d.item.is_none()
                            && d.span_from.is_none()
                            && one_article(d).is_some()
                    });
                if extends {
                    let d = draft.as_mut().expect("touching a draft");
                    d.article = one_article(d);
                    d.fixed = None;
                    d.paragraph = Some(p);
                    d.more = atom.more.clone();
                    d.end = atom.range.end;
                } else if joined_to_draft && draft.as_ref().is_some_and(|d| d.paragraph.is_some()) {
                    let d = draft.take().expect("joined");
                    push(&d, &mut out);
                    draft = Some(Draft {
                        start: atom.range.start,
                        paragraph: Some(p),
                        item: None,
                        more: atom.more.clone(),
                        end: atom.range.end,
                        ..d
                    });
                } else {
                    flush(&mut draft, &mut out);
                    // A bare 第二款: this article's.
                    draft = Some(Draft {
                        start: atom.range.start,
                        end: atom.range.end,
                        law: None,
                        article: Some(place.article),
                        paragraph: Some(p),
                        item: None,
                        fixed: None,
                        span_from: None,
                        more: atom.more.clone(),
                        item_from: None,
                        group: usize::MAX,
                    });
                }
            }
            AtomKind::Item(i) => {
                if touching
                    && draft
                        .as_ref()
                        .is_some_and(|d| d.item.is_none() && d.span_from.is_none())
                {
                    let d = draft.as_mut().expect("touching a draft");
                    d.item = Some(i);
                    d.more = atom.more.clone();
                    d.end = atom.range.end;
                } else if joined_to_draft
                    && joiner_is_to
                    && draft.as_ref().is_some_and(|d| {
                        d.item.is_some() && d.more.is_empty() && d.item_from.is_none()
                    })
                {
                    // 第四项至第六项
                    let d = draft.as_mut().expect("joined");
                    d.item_from = d.item;
                    d.item = Some(i);
                    d.end = atom.range.end;
                } else if joined_to_draft && draft.as_ref().is_some_and(|d| d.item.is_some()) {
                    let d = draft.take().expect("joined");
                    push(&d, &mut out);
                    draft = Some(Draft {
                        start: atom.range.start,
                        item: Some(i),
                        item_from: None,
                        group: usize::MAX,
                        more: atom.more.clone(),
                        end: atom.range.end,
                        ..d
                    });
                } else {
                    flush(&mut draft, &mut out);
                    // A bare 第（一）项: an item of the article this paragraph cited last (违反本条例第十八
                    // 条规定的…：（一）违反第（一）项…), else of this paragraph.
                    let (article, paragraph) = match *cited {
                        Some(a) => (a, None),
                        None => (place.article, Some(place.paragraph)),
                    };
                    draft = Some(Draft {
                        start: atom.range.start,
                        end: atom.range.end,
                        law: None,
                        article: Some(article),
                        paragraph,
                        item: Some(i),
                        fixed: None,
                        span_from: None,
                        more: atom.more.clone(),
                        item_from: None,
                        group: usize::MAX,
                    });
                }
            }
            AtomKind::ThisArticle => {
                flush(&mut draft, &mut out);
                draft = Some(Draft {
                    start: atom.range.start,
                    end: atom.range.end,
                    law: None,
                    article: Some(place.article),
                    paragraph: None,
                    item: None,
                    fixed: None,
                    span_from: None,
                    more: Vec::new(),
                    item_from: None,
                    group: usize::MAX,
                });
                // 本条 alone names the article it stands in: no reference unless a 款 or 项 follows.
                let next = found.get(k + 1);
                let followed = next.is_some_and(|n| {
                    matches!(n.kind, AtomKind::Paragraph(_) | AtomKind::Item(_))
                        && touches(slice, atom, n)
                });
                if !followed {
                    draft = None;
                }
            }
            AtomKind::PreviousParagraphs(back) => {
                flush(&mut draft, &mut out);
                let (from, to) = (
                    place.paragraph as i64 - back as i64,
                    place.paragraph as i64 - 1,
                );
                draft = Some(Draft {
                    start: atom.range.start,
                    end: atom.range.end,
                    law: None,
                    article: Some(place.article),
                    paragraph: None,
                    item: None,
                    fixed: Some(Target::Paragraphs {
                        article: place.article,
                        from: from.max(0) as u32,
                        to: to.max(0) as u32,
                    }),
                    span_from: None,
                    more: Vec::new(),
                    item_from: None,
                    group: usize::MAX,
                });
            }
            AtomKind::PreviousArticles(back) => {
                flush(&mut draft, &mut out);
                let (from, to) = previous_articles(place.article, back);
                draft = Some(Draft {
                    start: atom.range.start,
                    end: atom.range.end,
                    law: None,
                    article: None,
                    paragraph: None,
                    item: None,
                    fixed: Some(Target::Articles { from, to }),
                    span_from: None,
                    more: Vec::new(),
                    item_from: None,
                    group: usize::MAX,
                });
            }
            AtomKind::Chapter | AtomKind::Section | AtomKind::Part => {
                flush(&mut draft, &mut out);
                let d = place.division;
                let fixed = match atom.kind {
                    AtomKind::Part => Target::Division {
                        part: d.part.or(Some(0)),
                        chapter: None,
                        section: None,
                    },
                    AtomKind::Chapter => Target::Division {
                        part: d.part,
                        chapter: d.chapter.or(Some(0)),
                        section: None,
                    },
                    _ => Target::Division {
                        part: d.part,
                        chapter: d.chapter,
                        section: d.section.or(Some(0)),
                    },
                };
                // 本章第…条 is an article of this regulation; the division only qualifies it.
                let next = found.get(k + 1);
                if next.is_some_and(|n| {
                    matches!(n.kind, AtomKind::Article(_)) && touches(slice, atom, n)
                }) {
                    previous = Some(atom);
                    continue;
                }
                draft = Some(Draft {
                    start: atom.range.start,
                    end: atom.range.end,
                    law: None,
                    article: None,
                    paragraph: None,
                    item: None,
                    fixed: Some(fixed),
                    span_from: None,
                    more: Vec::new(),
                    item_from: None,
                    group: usize::MAX,
                });
            }
        }
        previous = Some(atom);
    }
    flush(&mut draft, &mut out);
    for (_, law, target, _) in &out {
        if let (None, Target::Article { article, .. } | Target::Articles { to: article, .. }) =
            (law, target)
        {
            if *article != place.article {
                *cited = Some(*article);
            }
        }
    }
    out.into_iter()
        .map(|(r, law, t, g)| {
            (
                r.start + line.start..r.end + line.start,
                law,
                t,
                g + line.start,
            )
        })
        .collect()
}

/// The `back` articles before `article` (前条, 前两条): an inserted article's previous is its
/// base (第三十九条之一's 前条 is 第三十九条).
fn previous_articles(article: ArticleNo, back: u32) -> (ArticleNo, ArticleNo) {
    let to = if article.sub > 0 {
        ArticleNo::new(article.number, article.sub - 1)
    } else {
        ArticleNo::new(article.number.saturating_sub(1), 0)
    };
    let from = ArticleNo::new(
        to.number.saturating_sub(back - 1),
        if back == 1 { to.sub } else { 0 },
    );
    (from, to)
}

fn push(d: &Draft, out: &mut Vec<Found>) {
    if let Some(t) = d.target() {
        out.push((d.start..d.end, d.law.clone(), t, d.group_start()));
    }
    // 第一、二款: the same reference at the other numbers.
    for n in &d.more {
        let mut other = Draft {
            more: Vec::new(),
            ..d.clone()
        };
        if d.item.is_some() {
            other.item = Some(*n);
        } else if d.paragraph.is_some() {
            other.paragraph = Some(*n);
        } else {
            continue;
        }
        if let Some(t) = other.target() {
            out.push((d.start..d.end, d.law.clone(), t, d.group_start()));
        }
    }
}

fn flush(draft: &mut Option<Draft>, out: &mut Vec<Found>) {
    if let Some(d) = draft.take() {
        push(&d, out);
    }
}

/// How close before a reference (or its list) a verb must stand to govern it: 依照本法…, 根据前款…,
/// 按照《…》… (a verb further back governs something else: 未按照约定履行…本法第…条规定的协议).
const VERB_REACH: usize = 4;

/// The kind of the reference at `span` of `line` whose list began at `group`: read in its clause
/// (from the last 。，；： before the list), and in its sentence after it for "…的规定，适用于…".
fn kind_of(line: &str, group: usize, span: &Range<usize>) -> Kind {
    const BOUNDS: [char; 8] = ['，', '。', '；', '：', ',', ';', ':', '\n'];
    let group = group.min(span.start);
    let clause_start = line[..group]
        .rfind(BOUNDS)
        .map(|i| i + line[i..].chars().next().map_or(1, char::len_utf8))
        .unwrap_or(0);
    let clause_end = line[span.end..]
        .find(['，', '。', '；', ',', ';'])
        .map(|i| span.end + i)
        .unwrap_or(line.len());
    let sentence_end = line[span.end..]
        .find(['。', '；', ';'])
        .map(|i| span.end + i)
        .unwrap_or(line.len());
    let before = &line[clause_start..group];
    let after = &line[span.end..clause_end];
    if before.contains('除') && after.contains('外') {
        return Kind::Exception;
    }
    // The verb's distance to the list, in characters.
    let near = |at: usize, word: &str| before[at + word.len()..].chars().count() <= VERB_REACH;
    let last = |words: &[&'static str]| -> Option<usize> {
        words
            .iter()
            .filter_map(|w| before.rfind(w).filter(|at| near(*at, w)))
            .max()
    };
    if let Some(at) = last(&["参照"]) {
        if !before[at..].contains("依照") {
            return Kind::Analogy;
        }
    }
    if last(&["依照", "按照", "依据", "根据", "适用", "按"]).is_some()
        || line[span.end..sentence_end].contains("适用于")
    {
        return Kind::Apply;
    }
    Kind::Mention
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

/// The article, paragraph and item of a canonical target (`art:39:p2:i1`; a span gives its first):
/// what [`Target`]'s display wrote; none for a division or anything else.
pub fn parse_target(s: &str) -> Option<(ArticleNo, Option<u32>, Option<u32>)> {
    let rest = s.strip_prefix("arts:").or_else(|| s.strip_prefix("art:"))?;
    let mut parts = rest.split(':');
    let first = parts.next()?.split("..").next()?;
    let (number, sub) = match first.split_once('-') {
        Some((n, m)) => (n.parse().ok()?, m.parse().ok()?),
        None => (first.parse().ok()?, 0),
    };
    let (mut paragraph, mut item) = (None, None);
    for part in parts {
        let first = |p: &str| p.split("..").next().and_then(|n| n.parse::<u32>().ok());
        if let Some(p) = part.strip_prefix('p') {
            paragraph = Some(first(p)?);
        } else if let Some(i) = part.strip_prefix('i') {
            item = Some(first(i)?);
        } else {
            return None;
        }
    }
    Some((ArticleNo::new(number, sub), paragraph, item))
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

/// How a citation is written out: 第一千零七十九条之一第三款第（一）项 (what follows the law's name).
pub fn written(article: ArticleNo, paragraph: Option<u32>, item: Option<u32>) -> String {
    use crate::article_ref::chinese_numeral;
    let mut s = format!("第{}条", chinese_numeral(article.number));
    if article.sub > 0 {
        s.push_str(&format!("之{}", chinese_numeral(article.sub)));
    }
    if let Some(p) = paragraph {
        s.push_str(&format!("第{}款", chinese_numeral(p)));
    }
    if let Some(i) = item {
        s.push_str(&format!("第（{}）项", chinese_numeral(i)));
    }
    s
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
