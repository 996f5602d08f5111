//! Citations checked against the authority: a citation as people write it (《民法典》第1079条第3款第（一）
//! 项, 民法典第一千零七十九条, 婚姻法第三十二条) resolved to the law's live documents, the version in
//! force on a date, and the text of the article, paragraph or item it names.
//!
//! A law is known by its documents' normalised titles ([`normalize_law_name`]: 中华人民共和国 and
//! title marks out), with a version date in brackets ignored. A law that several documents carry
//! (the Civil Code's 编, its versions) answers from the one holding the article, in force on the
//! date. Nothing is guessed: an article, paragraph or item the law does not have is `not_found`,
//! one that only a version not in force has is `not_in_force`.

use std::collections::HashMap;

use crate::law_names::{self, work_key};

use docpipe_db::authority::{self, Standing};
use docpipe_db::keyword::LawTitle;
use docpipe_db::references::ReferenceRow;
use docpipe_db::works::{self, VersionPlace};
use docpipe_db::{articles, keyword, Db, DbError};
use docpipe_parse::article_ref::article_number;
use docpipe_parse::article_ref::normalize_law_name;
use docpipe_parse::references::{
    article_texts, parse_target, written, ArticleNo, ArticleText, Citation, Target,
};
use serde::{Deserialize, Serialize};

/// What a citation comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Found,
    /// The law is known and has no such article, paragraph or item.
    NotFound,
    /// Only a version not in force on the date has it (superseded, not yet in force, repealed).
    NotInForce,
    /// No document carries the law.
    LawUnknown,
}

/// One citation, checked.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    /// As written, and where in the text it was.
    pub citation: String,
    pub span: [usize; 2],
    pub status: Status,
    /// The law as written (title marks out).
    pub law: String,
    /// The canonical target: art:1079:p3:i1.
    pub address: String,
    /// As a lawyer cites it: 《中华人民共和国民法典》第一千零七十九条第三款第（一）项 (when the law is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionPlace>,
    /// The text cited (at most [`MAX_TEXT_CHARS`] characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why, in words.
    pub reason: String,
    /// For a repealed law: the law that took its place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
}

/// The most text one answer carries per citation.
pub const MAX_TEXT_CHARS: usize = 4000;

/// At most `max_chars` characters of `s`, an ellipsis marking a cut.
pub fn cut(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The laws a citation can name, by [`work_key`] of their title key; each law's documents newest
/// first. A version held for its release answers no citation, not even as a fallback: the
/// authority leaves it out of the titles (`keyword::law_titles`).
pub type CitableLaws = HashMap<String, Vec<LawTitle>>;

pub(crate) fn citable_laws(titles: &[LawTitle]) -> CitableLaws {
    let mut by_key: CitableLaws = HashMap::new();
    for t in titles {
        by_key
            .entry(work_key(&t.title_key).to_string())
            .or_default()
            .push(t.clone());
    }
    for docs in by_key.values_mut() {
        docs.sort_by_key(|d| std::cmp::Reverse(d.indexed_at));
    }
    by_key
}

/// Checks citations against the live documents, reading each law's articles once.
pub struct Checker<'a> {
    db: &'a Db,
    as_of: String,
    /// The tenants whose laws a citation may name: the caller's and the public library.
    organs: Vec<String>,
    /// The citable laws by the key a citation names them by (shared for [`crate::CACHE_TTL`]).
    laws: std::sync::Arc<crate::CachedLaws>,
    /// Laws read by their key after a miss (a law indexed since the cache was filled, or a
    /// version of it), each key at most once per checker; empty for a key no document has.
    fresh: HashMap<String, Vec<LawTitle>>,
    /// Whether each document asked about answers on `as_of` (the authority's standing, read once
    /// per document): what is held, deleted or not in force answers no citation as in force.
    in_force: HashMap<String, bool>,
    articles: HashMap<String, Vec<ArticleText>>,
    /// Each document's version on `as_of`, read once.
    places: HashMap<String, Option<VersionPlace>>,
}

impl<'a> Checker<'a> {
    /// What is live now, for citations on `as_of` (YYYY-MM-DD). The citable titles come from
    /// `cache` (read again after [`crate::CACHE_TTL`]); what a document is worth on the day is
    /// read per document when a citation reaches it, so nothing here grows with the library.
    pub async fn new(
        db: &'a Db,
        cache: &'a crate::SearchCache,
        as_of: &str,
        organs: &[String],
    ) -> Result<Checker<'a>, DbError> {
        Ok(Checker {
            db,
            as_of: as_of.to_string(),
            organs: organs.to_vec(),
            laws: cache.laws(db, organs).await?,
            fresh: HashMap::new(),
            in_force: HashMap::new(),
            articles: HashMap::new(),
            places: HashMap::new(),
        })
    }

    /// The standing of those of `doc_ids` not read yet, in one statement. A title the cache still
    /// holds for a document deleted or held since is dropped here, by the authority.
    async fn standing_of(&mut self, doc_ids: &[String]) -> Result<(), DbError> {
        let missing: Vec<String> = doc_ids
            .iter()
            .filter(|d| !self.in_force.contains_key(*d))
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let client = self.db.client().await?;
        let standing = authority::standing(&**client, &missing, &self.as_of, &self.organs).await?;
        for doc in missing {
            let live = match standing.get(&doc) {
                Some(Standing::Live) => Some(true),
                Some(Standing::NotInForce) => Some(false),
                _ => None,
            };
            match live {
                Some(live) => self.in_force.insert(doc, live),
                None => {
                    // Answers nothing at all: forget its articles too.
                    self.articles.insert(doc.clone(), Vec::new());
                    self.in_force.insert(doc, false)
                }
            };
        }
        Ok(())
    }

    /// The law a citation names, as the key its documents are known by (see [`law_names`]).
    fn known_key(&self, c: &Citation) -> String {
        let key = normalize_law_name(&c.law);
        let marked = c.text.contains('《');
        law_names::resolve(&key, marked, |k| {
            self.titles(k).is_some_and(|t| !t.is_empty()) || law_names::repealed(k).is_some()
        })
        .unwrap_or(key)
    }

    /// The documents the checker knows for a key: read after a miss, else cached.
    fn titles(&self, key: &str) -> Option<&Vec<LawTitle>> {
        self.fresh.get(key).or_else(|| self.laws.citable.get(key))
    }

    /// Reads the documents of each of `keys` not read yet, by the title key's index: what a miss
    /// costs is the documents of the laws named, never the library's titles.
    async fn read_fresh(&mut self, keys: &[String]) -> Result<(), DbError> {
        let missing: Vec<&String> = keys
            .iter()
            .filter(|k| !self.fresh.contains_key(*k))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let client = self.db.client().await?;
        for key in missing {
            let mut docs: Vec<LawTitle> = keyword::law_titles_of(&**client, key, &self.organs)
                .await?
                .into_iter()
                .filter(|t| work_key(&t.title_key) == key)
                .collect();
            docs.sort_by_key(|d| std::cmp::Reverse(d.indexed_at));
            self.fresh.insert(key.clone(), docs);
        }
        Ok(())
    }

    /// Every key [`Checker::known_key`] may try for the citation, in its order.
    fn candidate_keys(c: &Citation) -> Vec<String> {
        let key = normalize_law_name(&c.law);
        let tried = std::cell::RefCell::new(Vec::new());
        law_names::resolve(&key, c.text.contains('《'), |k| {
            tried.borrow_mut().push(k.to_string());
            false
        });
        tried.into_inner()
    }

    /// A document's articles, read once.
    pub async fn articles(&mut self, doc_id: &str) -> Result<&[ArticleText], DbError> {
        self.articles_of(&[doc_id.to_string()]).await?;
        Ok(self.articles.get(doc_id).map(Vec::as_slice).unwrap_or(&[]))
    }

    async fn articles_of(&mut self, doc_ids: &[String]) -> Result<(), DbError> {
        let missing: Vec<&str> = doc_ids
            .iter()
            .filter(|d| !self.articles.contains_key(*d))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let client = self.db.client().await?;
        let rows = articles::article_blocks(&**client, &missing).await?;
        let mut by_doc: HashMap<String, Vec<docpipe_parse::SemanticBlock>> = HashMap::new();
        for (doc, block) in rows {
            by_doc.entry(doc).or_default().push(block);
        }
        for doc in missing {
            let blocks = by_doc.remove(doc).unwrap_or_default();
            self.articles
                .insert(doc.to_string(), article_texts(&blocks));
        }
        Ok(())
    }

    /// One citation, checked: the law it names, the article it cites, the document that holds
    /// that article (one in force first), then the part cited and whether it is in force.
    pub async fn check(&mut self, c: &Citation) -> Result<Checked, DbError> {
        let mut out = Checked {
            citation: c.text.clone(),
            span: [c.span.start, c.span.end],
            status: Status::LawUnknown,
            law: c.law.clone(),
            address: c.target.to_string(),
            canonical: None,
            doc_id: None,
            version: None,
            text: None,
            reason: String::new(),
            successor: None,
        };
        let mut key = self.known_key(c);
        if self.titles(&key).is_none_or(Vec::is_empty) {
            // A law indexed since the cache was filled must resolve at once: a miss reads the
            // documents of the names the citation may mean, by key (a hit, the common case,
            // reads nothing).
            self.read_fresh(&Self::candidate_keys(c)).await?;
            key = self.known_key(c);
        }
        let Some(mut docs) = self.titles(&key).filter(|d| !d.is_empty()).cloned() else {
            self.unknown_law(&key, &mut out);
            return Ok(out);
        };
        self.standing_of(&docs_of(&docs)).await?;
        if !self.fresh.contains_key(&key) && !docs.iter().any(|d| self.in_force[&d.doc_id]) {
            // None of the law's documents the cache knows is in force: a version indexed since
            // may be, so the law's documents are read again before the answer says "not in
            // force".
            self.read_fresh(std::slice::from_ref(&key)).await?;
            docs = self.titles(&key).cloned().unwrap_or_default();
            self.standing_of(&docs_of(&docs)).await?;
        }
        let Some((article, paragraph, item)) = cited(&c.target) else {
            out.status = Status::NotFound;
            out.reason = "a citation names an article".into();
            return Ok(out);
        };
        if docs.is_empty() {
            self.unknown_law(&key, &mut out);
            return Ok(out);
        }
        self.articles_of(&docs_of(&docs)).await?;
        let title = docs[0].title.clone();
        let name = docpipe_parse::article_ref::citation(&title, 1);
        let name = name.strip_suffix("第一条").unwrap_or(&name);
        out.canonical = Some(format!("{name}{}", written(article, paragraph, item)));
        let Some((doc_id, text)) = self.holder(&docs, article) else {
            out.status = Status::NotFound;
            out.reason = format!("{title} has no article {}", written(article, None, None));
            return Ok(out);
        };
        out.version = self.place(&doc_id).await?;
        out.doc_id = Some(doc_id.clone());
        match text.part(paragraph, item) {
            None => {
                out.status = Status::NotFound;
                out.reason = missing_part(&title, &text, article, paragraph);
            }
            Some(t) => {
                out.text = Some(cut(&t, MAX_TEXT_CHARS));
                self.in_force_verdict(&doc_id, &title, &mut out);
            }
        }
        Ok(out)
    }

    /// No document carries the law: a law the built-in list says was repealed names its
    /// successor; any other is unknown.
    fn unknown_law(&self, key: &str, out: &mut Checked) {
        match law_names::repealed(key) {
            Some((successor, on)) if self.as_of.as_str() >= on => {
                out.status = Status::NotInForce;
                out.successor = Some(successor.to_string());
                out.reason = format!(
                    "{} was repealed on {on}; {successor} took its place",
                    out.law
                );
            }
            _ => out.reason = format!("no document carries a law named {}", out.law),
        }
    }

    /// The document that holds `article`, and the article: among the law's documents in force
    /// first, then any of them.
    fn holder(&self, docs: &[LawTitle], article: ArticleNo) -> Option<(String, ArticleText)> {
        let find = |doc: &LawTitle| -> Option<(String, ArticleText)> {
            self.articles
                .get(&doc.doc_id)?
                .iter()
                .find(|a| a.number == article)
                .map(|a| (doc.doc_id.clone(), a.clone()))
        };
        docs.iter()
            .filter(|d| self.in_force.get(&d.doc_id) == Some(&true))
            .find_map(find)
            .or_else(|| docs.iter().find_map(find))
    }

    /// A document's version on the checker's date, read once.
    async fn place(&mut self, doc_id: &str) -> Result<Option<VersionPlace>, DbError> {
        if let Some(place) = self.places.get(doc_id) {
            return Ok(place.clone());
        }
        let client = self.db.client().await?;
        let doc_ids = [doc_id.to_string()];
        let place = works::places(&**client, &doc_ids, &self.as_of)
            .await?
            .remove(doc_id);
        self.places.insert(doc_id.to_string(), place.clone());
        Ok(place)
    }

    /// Found when the holding document is in force on the date; not in force, with its
    /// version's status, when it is not.
    fn in_force_verdict(&self, doc_id: &str, title: &str, out: &mut Checked) {
        if self.in_force.get(doc_id) == Some(&true) {
            out.status = Status::Found;
            out.reason = format!("in force on {}", self.as_of);
            return;
        }
        out.status = Status::NotInForce;
        out.reason = match &out.version {
            Some(v) => format!(
                "the version {} is {} on {}",
                v.version, v.status, self.as_of
            ),
            None => format!("no version of {title} in force on {}", self.as_of),
        };
    }
}

fn docs_of(laws: &[LawTitle]) -> Vec<String> {
    laws.iter().map(|d| d.doc_id.clone()).collect()
}

/// The article, paragraph and item a citation names; none for a chapter, section or part.
fn cited(target: &Target) -> Option<(ArticleNo, Option<u32>, Option<u32>)> {
    match target {
        Target::Article {
            article,
            paragraph,
            item,
        } => Some((*article, *paragraph, *item)),
        Target::Articles { from, .. } => Some((*from, None, None)),
        Target::Paragraphs { article, from, .. } => Some((*article, Some(*from), None)),
        Target::Items {
            article,
            paragraph,
            from,
            ..
        } => Some((*article, *paragraph, Some(*from))),
        Target::Division { .. } => None,
    }
}

/// Why a cited paragraph or item is not there: what the article has.
fn missing_part(
    title: &str,
    text: &ArticleText,
    article: ArticleNo,
    paragraph: Option<u32>,
) -> String {
    format!(
        "{} {} has {} paragraph(s){}",
        title,
        written(article, None, None),
        text.paragraphs.len(),
        match paragraph.and_then(|p| text.paragraphs.get(p as usize - 1)) {
            Some(p) => format!(", its paragraph {} {} item(s)", p.number, p.items.len()),
            None => String::new(),
        }
    )
}

/// One reference a hit's article makes, with what it points at (`expand: "references"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitReference {
    pub text: String,
    pub kind: String,
    pub target: String,
    /// Another law, as written; none for the same regulation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub law: Option<String>,
    pub dangling: bool,
    /// For another law's article: found, not_found, not_in_force or law_unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    /// The target's text, at most [`EXPANDED_TEXT_CHARS`] characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_text: Option<String>,
}

/// The most references attached to one hit, and the most of each target's text: an expanded
/// answer stays within top_k × 20 × 1,000 characters whatever the laws say.
pub const MAX_EXPANDED_PER_HIT: i64 = 20;
pub const EXPANDED_TEXT_CHARS: usize = 1_000;

/// Attaches to each hit that is an article the references it makes and their targets' texts, on
/// `as_of`.
pub async fn expand_references<'a>(
    db: &'a Db,
    cache: &'a crate::SearchCache,
    hits: &mut [crate::Hit],
    as_of: &str,
    organs: &[String],
) -> Result<(), DbError> {
    let mut checker = Checker::new(db, cache, as_of, organs).await?;
    let mut by_article = references_of_hits(db, hits).await?;
    for hit in hits.iter_mut() {
        let rows = article_of(hit)
            .and_then(|a| by_article.remove(&(hit.doc_id.clone(), a)))
            .unwrap_or_default();
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(checker.expanded(&hit.doc_id, row).await?);
        }
        hit.references = Some(out);
    }
    Ok(())
}

/// The article a hit is, as its stored number ('39'); none for a hit that is no article.
fn article_of(hit: &crate::Hit) -> Option<String> {
    hit.section_path
        .last()
        .and_then(|t| article_number(t))
        .map(|n| ArticleNo::new(n, 0).to_string())
}

/// Every hit's references in one statement, not one a hit, by (document, article).
async fn references_of_hits(
    db: &Db,
    hits: &[crate::Hit],
) -> Result<HashMap<(String, String), Vec<ReferenceRow>>, DbError> {
    let wanted: Vec<(String, String)> = hits
        .iter()
        .filter_map(|h| Some((h.doc_id.clone(), article_of(h)?)))
        .collect();
    let pairs: Vec<(&str, &str)> = wanted
        .iter()
        .map(|(d, a)| (d.as_str(), a.as_str()))
        .collect();
    let mut by_article: HashMap<(String, String), Vec<ReferenceRow>> = HashMap::new();
    for row in
        docpipe_db::references::outgoing_of(&**db.client().await?, &pairs, MAX_EXPANDED_PER_HIT)
            .await?
    {
        by_article
            .entry((row.doc_id.clone(), row.from_article.clone()))
            .or_default()
            .push(row);
    }
    Ok(by_article)
}

impl Checker<'_> {
    /// One stored reference of `doc_id`'s article, with its target's text: from the same
    /// document, or, for another law, as that law's citation checks on the checker's date.
    async fn expanded(&mut self, doc_id: &str, row: ReferenceRow) -> Result<HitReference, DbError> {
        let parts = parse_target(&row.target);
        let mut r = HitReference {
            text: row.text.clone(),
            kind: row.kind.clone(),
            target: row.target.clone(),
            law: row.target_law.clone(),
            dangling: row.dangling,
            status: None,
            canonical: None,
            target_text: None,
        };
        match (row.target_law, parts) {
            (None, Some((article, paragraph, item))) => {
                let texts = self.articles(doc_id).await?;
                r.target_text = texts
                    .iter()
                    .find(|a| a.number == article)
                    .and_then(|a| a.part(paragraph, item))
                    .map(|t| cut(&t, EXPANDED_TEXT_CHARS));
            }
            (Some(law), Some((article, paragraph, item))) => {
                let checked = self
                    .check(&Citation {
                        span: 0..0,
                        text: row.text,
                        law,
                        target: Target::Article {
                            article,
                            paragraph,
                            item,
                        },
                    })
                    .await?;
                r.status = Some(checked.status);
                r.canonical = checked.canonical;
                r.target_text = checked.text.map(|t| cut(&t, EXPANDED_TEXT_CHARS));
            }
            _ => {}
        }
        Ok(r)
    }
}
