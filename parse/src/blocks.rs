//! Semantic blocks: the units that chunks may never cross. One block per article (with all its
//! paragraphs and items), one per stretch of text under a heading, one per table, and a preamble
//! for whatever comes before the first heading. A heading with no text of its own yields no block:
//! its title already travels in the section path of everything below it.

use crate::model::{padded_id, BlockKind, LayoutBlock, SemanticBlock, StructureNode};
use crate::structure::{Kind, Tree};

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
        let text = g
            .layout_idx
            .iter()
            .map(|&i| layouts[i].text.as_str())
            .filter(|t| !t.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if text.trim().is_empty() {
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
        let pages = g.layout_idx.iter().map(|&i| layouts[i].page);
        let page_start = pages.clone().min().unwrap_or(1);
        let page_end = pages.max().unwrap_or(1);
        blocks.push(SemanticBlock {
            semantic_id: padded_id("S", blocks.len() + 1, 5),
            block_type: block_type.to_string(),
            page_start,
            page_end,
            section_path,
            section_level,
            section_title,
            source_ids: g
                .layout_idx
                .iter()
                .map(|&i| layouts[i].id.clone())
                .collect(),
            text,
        });
    }
    blocks
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
