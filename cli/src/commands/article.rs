//! `docpipe article 民法典 第五百一十条`: one article of a law (or of a document), its paragraphs and
//! items, what it cites (with the cited text) and what cites it.

use super::print_json;
use crate::client::Conn;
use clap::Args;
use serde_json::{json, Value};
use std::io::Write;

#[derive(Args, Debug)]
pub struct ArticleArgs {
    /// The law as people cite it (民法典, 《中华人民共和国劳动合同法》), or a document's id (doc_…).
    pub law: String,
    /// The article: 第五百一十条, 第510条, 510, 第三十九条之一.
    pub article: String,
    /// The law as it stood that day (YYYY-MM-DD; default today).
    #[arg(long)]
    pub as_of: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// The law's name and the article as one citation: 民法典 + 510 → 民法典第510条.
fn citation_of(law: &str, article: &str) -> String {
    let a = article.trim();
    let a = if a.starts_with('第') {
        a.to_string()
    } else {
        match a.split_once(['-', '之']) {
            Some((n, m)) => format!("第{n}条之{m}"),
            None => format!("第{a}条"),
        }
    };
    let law = law.trim();
    if law.starts_with('《') || law.is_empty() {
        format!("{law}{a}")
    } else {
        format!("《{law}》{a}")
    }
}

pub async fn article(args: ArticleArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let client = args.conn.client()?;
    let (doc_id, address) = if args.law.starts_with("doc_") {
        (args.law.clone(), args.article.clone())
    } else {
        let resolved = client
            .resolve_citation(&json!({
                "citation": citation_of(&args.law, &args.article),
                "as_of": args.as_of,
            }))
            .await?;
        let r = &resolved["resolved"];
        let Some(doc) = r["doc_id"].as_str() else {
            anyhow::bail!(
                "{}: {}",
                r["status"].as_str().unwrap_or("not found"),
                r["reason"].as_str().unwrap_or_default()
            );
        };
        let address = r["address"]
            .as_str()
            .and_then(|a| a.strip_prefix("art:"))
            .and_then(|a| a.split(':').next())
            .unwrap_or(&args.article)
            .to_string();
        (doc.to_string(), address)
    };
    let v = client.article(&doc_id, &address).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    write_article(&v, out)
}

fn write_article(v: &Value, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    writeln!(
        out,
        "{}  ({})",
        v["citation"].as_str().unwrap_or_default(),
        v["doc_id"].as_str().unwrap_or_default()
    )?;
    for p in v["paragraphs"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  ¶{} {}",
            p["number"],
            p["text"].as_str().unwrap_or_default()
        )?;
        for i in p["items"].as_array().into_iter().flatten() {
            writeln!(out, "      {}", i["text"].as_str().unwrap_or_default())?;
        }
    }
    let refs = v["references"].as_array().cloned().unwrap_or_default();
    if !refs.is_empty() {
        writeln!(out, "cites ({}):", refs.len())?;
        for r in &refs {
            let target = r["target_text"].as_str().unwrap_or_default();
            let state = if r["dangling"].as_bool() == Some(true) {
                "dangling: no such target".to_string()
            } else {
                r["status"].as_str().unwrap_or("found").to_string()
            };
            writeln!(
                out,
                "  ¶{} {} [{}] → {} ({state}){}",
                r["paragraph"],
                r["text"].as_str().unwrap_or_default(),
                r["kind"].as_str().unwrap_or_default(),
                r["canonical"]
                    .as_str()
                    .or(r["target"].as_str())
                    .unwrap_or_default(),
                if target.is_empty() {
                    String::new()
                } else {
                    let flat: String = target
                        .chars()
                        .map(|c| if c == '\n' { ' ' } else { c })
                        .take(120)
                        .collect();
                    format!("\n      {flat}")
                }
            )?;
        }
    }
    let by = v["cited_by"].as_array().cloned().unwrap_or_default();
    if !by.is_empty() {
        writeln!(out, "cited by ({}):", by.len())?;
        for r in &by {
            writeln!(
                out,
                "  {} 第{}条 ¶{}: {} [{}]",
                r["doc_id"].as_str().unwrap_or_default(),
                r["article"].as_str().unwrap_or_default(),
                r["paragraph"],
                r["text"].as_str().unwrap_or_default(),
                r["kind"].as_str().unwrap_or_default()
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_law_and_an_article_make_one_citation() {
        assert_eq!(
            citation_of("民法典", "第五百一十条"),
            "《民法典》第五百一十条"
        );
        assert_eq!(citation_of("民法典", "510"), "《民法典》第510条");
        assert_eq!(citation_of("《刑法》", "39-1"), "《刑法》第39条之1");
    }
}
