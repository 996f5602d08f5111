//! Articles a query names: "民法典第一千零四十二条", "劳动合同法第39条", "刑法 第 264 条".
//!
//! The rule that matches a law name to documents: a document's law name is its citable title
//! (first top-level heading, else its name) normalised (spaces, 《》 and quotes out, every
//! 中华人民共和国 out, full-width digits to ASCII). The name in the query is the longest such name the
//! text just before the article marker ends with ([`find_article_refs`]), so an interpretation
//! whose title quotes 《民法典》 is not taken for the Civil Code. A name stands for every live
//! document carrying it (the Civil Code's eight 编, several versions of one law); the article
//! number picks the document that has the article, the most recently indexed first.

use super::{SearchDeps, SearchError};
use docpipe_db::keyword::LawTitle;
use docpipe_db::{articles, projection};
use docpipe_parse::article_ref::{article_number, citation, find_article_refs};
use docpipe_vector::VersionWindow;
use std::collections::HashMap;

/// The live documents grouped by normalised law name.
pub(crate) struct LawTitles {
    keys: Vec<String>,
    docs: Vec<Vec<LawTitle>>,
}

impl LawTitles {
    pub fn new(titles: Vec<LawTitle>) -> LawTitles {
        let mut at: HashMap<String, usize> = HashMap::new();
        let mut out = LawTitles {
            keys: Vec::new(),
            docs: Vec::new(),
        };
        for t in titles {
            if t.title_key.is_empty() {
                continue;
            }
            let i = *at.entry(t.title_key.clone()).or_insert_with(|| {
                out.keys.push(t.title_key.clone());
                out.docs.push(Vec::new());
                out.keys.len() - 1
            });
            out.docs[i].push(t);
        }
        for docs in &mut out.docs {
            docs.sort_by_key(|d| std::cmp::Reverse(d.indexed_at));
        }
        out
    }
}

/// The named articles that exist, as (block id, citation), in the order the query names them.
/// Documents outside the search's version window (not in force on its date) name nothing.
pub async fn resolve(
    deps: &SearchDeps<'_>,
    query: &str,
    window: VersionWindow,
    organs: &[String],
) -> Result<Vec<(i64, String)>, SearchError> {
    // Every reference has a 条; most questions have none and cost nothing here.
    if !query.contains('条') {
        return Ok(Vec::new());
    }
    let laws = deps.cache.laws(deps.db, organs).await?;
    let titles = &laws.titles;
    let refs = find_article_refs(query, &titles.keys);
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    let named: Vec<String> = refs
        .iter()
        .flat_map(|r| titles.docs[r.law].iter().map(|d| d.doc_id.clone()))
        .collect();
    let client = deps.db.client().await?;
    let within = projection::within(&**client, &named, window).await?;
    let answers = |d: &&LawTitle| within.contains(&d.doc_id);
    let doc_ids: Vec<&str> = refs
        .iter()
        .flat_map(|r| {
            titles.docs[r.law]
                .iter()
                .filter(answers)
                .map(|d| d.doc_id.as_str())
        })
        .collect();
    let articles = articles::article_titles(&**client, &doc_ids).await?;
    let mut found = Vec::new();
    for r in &refs {
        // Newest first: the first document of the law holding the article wins.
        let hit = titles.docs[r.law].iter().filter(answers).find_map(|doc| {
            articles
                .iter()
                .find(|(_, d, title)| *d == doc.doc_id && article_number(title) == Some(r.article))
                .map(|(id, _, _)| (*id, citation(&doc.title, r.article)))
        });
        if let Some(hit) = hit {
            if !found.iter().any(|(id, _)| *id == hit.0) {
                found.push(hit);
            }
        }
    }
    Ok(found)
}
