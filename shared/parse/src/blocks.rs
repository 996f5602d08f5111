//! Semantic blocks: the units that chunks may never cross. One block per article (with all its
//! paragraphs and items), one per stretch of text under a heading, one per table, and a preamble
//! for whatever comes before the first heading. A heading with no text of its own yields no block:
//! its title already travels in the section path of everything below it.
//!
//! A block holds at most [`MAX_BLOCK_CHARS`]. Search shows a hit's block and the API pages through
//! them, so a document without headings (one "preamble" of 12 MB) must not become one block: a
//! stretch over the maximum is cut into several blocks of the same section, between its
//! paragraphs, and a paragraph over the maximum on its own between sentences or lines.

use crate::model::{padded_id, BlockKind, LayoutBlock, SemanticBlock, StructureNode};
use crate::structure::{Kind, Tree};

/// The most characters (Unicode scalar values) one semantic block holds: 8,000, about 24 KB of
/// Chinese in UTF-8 (32 KB at most in any script), four A4 pages of a statute. The longest block
/// of the 378 laws of the corpus is 2,127 characters (the longest article 1,204), so no article of
/// a law is ever cut; what is cut is text without headings, read as a preamble or one section's
/// text.
pub const MAX_BLOCK_CHARS: usize = 8_000;

struct Pending {
    owner: Option<usize>,
    is_table: bool,
    layout_idx: Vec<usize>,
}

pub fn build(layouts: &[LayoutBlock], tree: &Tree) -> Vec<SemanticBlock> {
    let mut groups: Vec<Pending> = Vec::new();
    for (i, layout) in layouts.iter().enumerate() {
        let owner = tree.owner[i];
        let is_table = layout.kind == BlockKind::Table;
        let continues = !tree.opens_node[i]
            && !is_table
            && groups
                .last()
                .is_some_and(|g| g.owner == owner && !g.is_table);
        if continues {
            if let Some(g) = groups.last_mut() {
                g.layout_idx.push(i);
            }
        } else {
            groups.push(Pending {
                owner,
                is_table,
                layout_idx: vec![i],
            });
        }
    }

    let mut blocks = Vec::new();
    for g in groups {
        let is_article = g.owner.is_some_and(|n| tree.kinds[n] == Kind::Article);
        let heading_only = !is_article
            && !g.is_table
            && g.layout_idx.len() == 1
            && tree.opens_node[g.layout_idx[0]];
        if heading_only {
            continue;
        }
        let parts: Vec<(usize, &str)> = g
            .layout_idx
            .iter()
            .map(|&i| (i, layouts[i].text.as_str()))
            .filter(|(_, t)| !t.trim().is_empty())
            .collect();
        if parts.is_empty() {
            continue;
        }
        let block_type = if g.is_table {
            "table"
        } else if is_article {
            "article"
        } else if g.owner.is_none() {
            "preamble"
        } else {
            "section_text"
        };
        let section_path = g.owner.map(|n| path(&tree.nodes, n)).unwrap_or_default();
        let (section_level, section_title) = match g.owner {
            Some(n) => (tree.nodes[n].level, tree.nodes[n].title.clone()),
            None => (0, String::new()),
        };
        let pieces = match within_limit(&parts, MAX_BLOCK_CHARS) {
            // The whole group: every layout it holds is a source, as before blocks were bounded.
            Some(text) => vec![(g.layout_idx.clone(), text)],
            None => cut(&parts, MAX_BLOCK_CHARS),
        };
        for (sources, text) in pieces {
            let pages = sources.iter().map(|&i| layouts[i].page);
            let page_start = pages.clone().min().unwrap_or(1);
            let page_end = pages.max().unwrap_or(1);
            blocks.push(SemanticBlock {
                semantic_id: padded_id("S", blocks.len() + 1, 5),
                block_type: block_type.to_string(),
                page_start,
                page_end,
                section_path: section_path.clone(),
                section_level,
                section_title: section_title.clone(),
                source_ids: sources.iter().map(|&i| layouts[i].id.clone()).collect(),
                text,
            });
        }
    }
    blocks
}

/// The group's text, its parts one per line, when it is within `max` characters.
fn within_limit(parts: &[(usize, &str)], max: usize) -> Option<String> {
    let mut chars = parts.len().saturating_sub(1);
    for (_, t) in parts {
        chars += t.chars().count();
        if chars > max {
            return None;
        }
    }
    Some(parts.iter().map(|(_, t)| *t).collect::<Vec<_>>().join("\n"))
}

/// A group over `max` characters as several texts within it, each with the layouts it came
/// from: whole paragraphs (layouts) packed in order, and a paragraph over `max` on its own cut
/// by [`split_text`].
fn cut(parts: &[(usize, &str)], max: usize) -> Vec<(Vec<usize>, String)> {
    let mut out = Vec::new();
    let (mut sources, mut text, mut chars) = (Vec::new(), String::new(), 0usize);
    for &(i, t) in parts {
        let n = t.chars().count();
        let full = !sources.is_empty() && chars + 1 + n > max;
        if full || n > max {
            if !sources.is_empty() {
                out.push((std::mem::take(&mut sources), std::mem::take(&mut text)));
            }
            chars = 0;
        }
        if n > max {
            out.extend(
                split_text(t, max)
                    .into_iter()
                    .map(|piece| (vec![i], piece.to_string())),
            );
            continue;
        }
        if !sources.is_empty() {
            text.push('\n');
            chars += 1;
        }
        text.push_str(t);
        chars += n;
        sources.push(i);
    }
    if !sources.is_empty() {
        out.push((sources, text));
    }
    out
}

/// `text` in pieces of at most `max` characters, cut after the last line break or sentence end in
/// the second half of each window, else after its last clause separator or space, else at `max`
/// (a run with no break at all). Whitespace at a cut is dropped.
fn split_text(text: &str, max: usize) -> Vec<&str> {
    split_text_counting(text, max, &mut 0)
}

/// [`split_text`], adding to `work` the characters it examines: each window (about `max`
/// characters, never the rest of the text) a few times, so the whole is linear in the text.
fn split_text_counting<'a>(text: &'a str, max: usize, work: &mut usize) -> Vec<&'a str> {
    let max = max.max(2);
    let mut rest = text.trim_matches(char::is_whitespace);
    let mut pieces = Vec::new();
    loop {
        if rest.is_empty() {
            return pieces;
        }
        // Where each of the first `max + 2` characters starts (`offsets[k]`: a cut after k
        // characters is there), then the end of the text.
        let offsets: Vec<usize> = rest
            .char_indices()
            .map(|(b, _)| b)
            .take(max + 2)
            .chain(std::iter::once(rest.len()))
            .collect();
        *work += offsets.len();
        if offsets.len() <= max + 1 {
            // The rest fits: it has at most `max` characters.
            pieces.push(rest);
            return pieces;
        }
        // The window's characters, and the one after it (a full stop needs a space after it).
        let chars: Vec<char> = rest[..offsets[max + 1]].chars().collect();
        *work += chars.len();
        let strength = |k: usize| -> u8 {
            let (c, next) = (chars[k - 1], chars[k]);
            match c {
                '\n' | '。' | '！' | '？' | '；' => 2,
                '.' | '!' | '?' | ';' if next.is_whitespace() => 2,
                '，' | '、' | '：' | ',' | ':' | '\u{3000}' => 1,
                c if c.is_whitespace() => 1,
                _ => 0,
            }
        };
        let half = max / 2;
        let at = [2u8, 1]
            .into_iter()
            .find_map(|want| (half..=max).rev().find(|&k| strength(k) >= want))
            .unwrap_or(max);
        *work += 2 * (max - half + 1);
        pieces.push(rest[..offsets[at]].trim_end_matches(char::is_whitespace));
        rest = rest[offsets[at]..].trim_start_matches(char::is_whitespace);
    }
}

fn path(nodes: &[StructureNode], mut n: usize) -> Vec<String> {
    let mut titles = vec![nodes[n].title.clone()];
    while let Some(p) = nodes[n].parent_idx {
        n = p as usize;
        titles.push(nodes[n].title.clone());
    }
    titles.reverse();
    titles
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Hint, Limits};

    fn text_doc(text: &str) -> crate::ParsedDocument {
        parse(
            text.as_bytes(),
            &Hint::new("notes.txt", ""),
            &Limits::default(),
        )
        .unwrap()
    }

    /// Issue 29: a 12 MB text file with no heading became one semantic block of 12 MB. Text
    /// without headings is now cut between paragraphs into blocks of at most the maximum.
    #[test]
    fn text_without_headings_is_cut_into_blocks_between_paragraphs() {
        let paragraph =
            "本条例所称数据处理，包括数据的收集、存储、使用、加工、传输、提供、公开等。".repeat(12);
        let paragraphs: Vec<String> = (0..200).map(|i| format!("{i} {paragraph}")).collect();
        let doc = text_doc(&paragraphs.join("\n\n"));
        let total: usize = paragraphs.iter().map(|p| p.chars().count() + 1).sum();
        assert!(doc.semantic_blocks.len() >= total / MAX_BLOCK_CHARS);
        let mut read = Vec::new();
        for b in &doc.semantic_blocks {
            assert!(
                b.text.chars().count() <= MAX_BLOCK_CHARS,
                "{}",
                b.semantic_id
            );
            assert_eq!(b.block_type, "preamble");
            // Whole paragraphs: every line of a block is one of them, and its sources say which.
            let lines: Vec<&str> = b.text.split('\n').collect();
            assert_eq!(lines.len(), b.source_ids.len());
            read.extend(lines);
        }
        assert_eq!(read, paragraphs, "every paragraph once, in order");
        // Packed, not one block per paragraph.
        assert!(doc.semantic_blocks.len() < paragraphs.len() / 4);
    }

    #[test]
    fn a_paragraph_over_the_maximum_is_cut_at_sentence_ends_then_hard() {
        let sentence = "违反本条例规定的，由有关主管部门责令改正，给予警告。";
        let long = sentence.repeat(2 * MAX_BLOCK_CHARS / sentence.chars().count());
        let doc = text_doc(&format!("前言。\n\n{long}\n\n后记。"));
        let blocks = &doc.semantic_blocks;
        assert!(blocks.len() >= 4, "{}", blocks.len());
        let mut joined = String::new();
        for b in blocks {
            assert!(b.text.chars().count() <= MAX_BLOCK_CHARS);
            assert!(b.text.ends_with('。'), "cut mid-sentence: …{}", {
                let t: String = b.text.chars().rev().take(10).collect();
                t.chars().rev().collect::<String>()
            });
            joined.push_str(&b.text);
        }
        assert_eq!(joined, format!("前言。{long}后记。"));

        // One run without any break: cut hard, at the maximum.
        let run = "0123456789abcdef".repeat(MAX_BLOCK_CHARS / 16 * 3 + 1);
        let doc = text_doc(&run);
        let sizes: Vec<usize> = doc
            .semantic_blocks
            .iter()
            .map(|b| b.text.chars().count())
            .collect();
        assert_eq!(
            sizes,
            [MAX_BLOCK_CHARS, MAX_BLOCK_CHARS, MAX_BLOCK_CHARS, 16]
        );
    }

    #[test]
    fn an_article_within_the_maximum_is_one_block_as_before() {
        let items: String = (1..=40)
            .map(|i| format!("（{i}）本项规定的情形，依照本条例处理。\n"))
            .collect();
        let doc = text_doc(&format!(
            "第一章 总则\n\n第一条 本条例适用于下列情形：\n{items}\n第二条 其他。"
        ));
        let articles: Vec<_> = doc
            .semantic_blocks
            .iter()
            .filter(|b| b.block_type == "article")
            .collect();
        assert_eq!(articles.len(), 2);
        assert!(articles[0].text.starts_with("第一条") && articles[0].text.contains("（40）"));
    }

    /// The cut examines each window a bounded number of times, never the rest of the text (an
    /// early version collected the whole rest for every piece: quadratic).
    #[test]
    fn cutting_one_paragraph_is_linear() {
        let run = "0123456789abcdef".repeat(100_000);
        let n = run.len();
        let mut work = 0;
        let pieces = split_text_counting(&run, MAX_BLOCK_CHARS, &mut work);
        assert_eq!(pieces.concat(), run);
        assert!(work <= 4 * n, "{work} characters examined for {n}");
    }
}
