//! `GET /documents/{doc_id}/articles/{address}`: one article of a document, its paragraphs (款) and
//! items (项), the references it makes with their targets' texts, and the references that point at
//! it ("cited by"), from its own regulation and from other live documents that name its law.

use crate::authority::{self, Need};
use crate::problem::ApiError;
use crate::state::ApiState;
use axum::extract::{Path, State};
use docpipe_db::references::{self, ReferenceRow};
use docpipe_parse::article_ref::normalize_law_name;
use docpipe_parse::references::{
    article_texts, parse_article, parse_target, written, ArticleNo, ArticleText, Citation, Target,
};
use docpipe_search::citations::{cut, Checker, MAX_TEXT_CHARS};
use serde_json::{json, Value};
use std::sync::Arc;

/// The most references listed each way; the answer says how many more there were.
pub const MAX_LISTED: i64 = 200;
const MAX_ADDRESS_CHARS: usize = 32;

/// A target in the same regulation, with its text when the regulation has it.
fn own_target(row: &ReferenceRow, articles: &[ArticleText]) -> Value {
    let target = parse_target(&row.target);
    let text = target.and_then(|(article, paragraph, item)| {
        articles
            .iter()
            .find(|a| a.number == article)?
            .part(paragraph, item)
    });
    json!({
        "text": row.text,
        "kind": row.kind,
        "paragraph": row.from_paragraph,
        "law": null,
        "target": row.target,
        "dangling": row.dangling,
        "target_text": text.map(|t| cut(&t, MAX_TEXT_CHARS)),
    })
}

/// The paragraphs as served: at most [`MAX_LISTED`] paragraphs and items each, every text cut to
/// [`MAX_TEXT_CHARS`], so the answer stays bounded whatever an upload's article holds.
fn bounded(paragraphs: &[docpipe_parse::references::ParagraphText]) -> Value {
    paragraphs
        .iter()
        .take(MAX_LISTED as usize)
        .map(|p| {
            json!({
                "number": p.number,
                "text": cut(&p.text, MAX_TEXT_CHARS),
                "items": p.items.iter().take(MAX_LISTED as usize).map(|i| json!({
                    "number": i.number,
                    "text": cut(&i.text, MAX_TEXT_CHARS),
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

pub(crate) async fn get_article(
    State(state): State<Arc<ApiState>>,
    caller: crate::tenant::Caller,
    Path((doc_id, address)): Path<(String, String)>,
) -> Result<axum::response::Response, ApiError> {
    let article = requested(&doc_id, &address)?;
    crate::tenant::gate_document(&state.db, &caller, &doc_id, false).await?;
    let client = state.db.client().await?;
    let served = authority::check(&**client, &doc_id, Need::Applies, &caller).await?;
    let articles = articles_of(&**client, &doc_id).await?;
    let Some(this) = articles.iter().find(|a| a.number == article) else {
        return Err(ApiError::NotFound(format!(
            "document {doc_id} has no article {} (it has {} articles)",
            written(article, None, None),
            articles.len()
        )));
    };
    let title = docpipe_db::keyword::title_of(&**client, &doc_id).await?;
    let from = article.to_string();
    let outgoing = references::outgoing(&**client, &doc_id, &from, MAX_LISTED + 1).await?;
    let keys: Vec<String> = title
        .iter()
        .map(|t| normalize_law_name(t))
        .filter(|k| !k.is_empty())
        .collect();
    let incoming = references::incoming(
        &**client,
        &doc_id,
        &keys,
        article,
        MAX_LISTED + 1,
        &caller.readable(),
    )
    .await?;
    drop(client);

    let refs = outgoing_with_targets(&state, &caller, &outgoing, &articles).await?;
    Ok(served.answer(json!({
        "doc_id": doc_id,
        "article": from,
        "citation": title.as_deref().map(|t| citation_of(t, article)),
        "text": cut(&this.text(), 20_000),
        "paragraphs": bounded(&this.paragraphs),
        "references": refs,
        "references_truncated": outgoing.len() as i64 > MAX_LISTED,
        "cited_by": cited_by(&incoming),
        "cited_by_truncated": incoming.len() as i64 > MAX_LISTED,
    })))
}

/// The article the path names, once the document id and the address are well formed.
fn requested(doc_id: &str, address: &str) -> Result<ArticleNo, ApiError> {
    if !docpipe_core::ids::is_addressable_doc_id(doc_id) {
        return Err(ApiError::invalid(
            "doc_id must be \"doc_\" followed by 32 lowercase hexadecimal digits",
        ));
    }
    (address.chars().count() <= MAX_ADDRESS_CHARS)
        .then(|| parse_article(address))
        .flatten()
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "address {:?} names no article: write 第三十九条, 第39条, 39 or 第三十九条之一",
                cut(address, MAX_ADDRESS_CHARS)
            ))
        })
}

/// The document's articles, read from its stored blocks.
async fn articles_of(
    client: &impl docpipe_db::GenericClient,
    doc_id: &str,
) -> Result<Vec<ArticleText>, ApiError> {
    let blocks: Vec<_> = docpipe_db::articles::article_blocks(client, &[doc_id])
        .await?
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    Ok(article_texts(&blocks))
}

/// The references the article makes, at most [`MAX_LISTED`]: a target in the same regulation
/// with its text, another law's as its citation checks today.
async fn outgoing_with_targets(
    state: &ApiState,
    caller: &crate::tenant::Caller,
    outgoing: &[ReferenceRow],
    articles: &[ArticleText],
) -> Result<Vec<Value>, ApiError> {
    let as_of = docpipe_search::today();
    let mut checker =
        Checker::new(&state.db, &state.search_cache, &as_of, &caller.readable()).await?;
    let mut refs = Vec::new();
    for row in outgoing.iter().take(MAX_LISTED as usize) {
        let Some(law) = &row.target_law else {
            refs.push(own_target(row, articles));
            continue;
        };
        let checked = checker.check(&citation_in(row, law)).await?;
        refs.push(json!({
            "text": row.text,
            "kind": row.kind,
            "paragraph": row.from_paragraph,
            "law": law,
            "target": row.target,
            "dangling": false,
            "status": checked.status,
            "canonical": checked.canonical,
            "target_doc_id": checked.doc_id,
            "target_text": checked.text,
        }));
    }
    Ok(refs)
}

/// A stored reference to another law as a citation of it (an unreadable target as article 0,
/// which no law has).
fn citation_in(row: &ReferenceRow, law: &str) -> Citation {
    let (article, paragraph, item) =
        parse_target(&row.target).unwrap_or((ArticleNo::new(0, 0), None, None));
    Citation {
        span: 0..0,
        text: row.text.clone(),
        law: law.to_string(),
        target: Target::Article {
            article,
            paragraph,
            item,
        },
    }
}

/// The references that point at the article, at most [`MAX_LISTED`].
fn cited_by(incoming: &[ReferenceRow]) -> Vec<Value> {
    incoming
        .iter()
        .take(MAX_LISTED as usize)
        .map(|r| {
            json!({
                "doc_id": r.doc_id,
                "article": r.from_article,
                "paragraph": r.from_paragraph,
                "text": r.text,
                "kind": r.kind,
                "target": r.target,
            })
        })
        .collect()
}

/// The article as a lawyer cites it: 《中华人民共和国民法典》第一千零七十九条.
fn citation_of(title: &str, article: ArticleNo) -> String {
    let name = docpipe_parse::article_ref::citation(title, 1);
    format!(
        "{}{}",
        name.strip_suffix("第一条").unwrap_or(&name),
        written(article, None, None)
    )
}
