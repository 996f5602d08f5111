//! Reciprocal rank fusion of the dense and keyword rankings of articles.

use crate::db::keyword::ScoredBlock;
use serde::Serialize;
use std::collections::HashMap;

/// How the two rankings are fused; stated in every response.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FusionParameters {
    /// `rrf`: each list adds `weight / (k + rank)` for the articles it ranks (rank from 1).
    pub method: &'static str,
    pub k: f64,
    pub dense_weight: f64,
    pub keyword_weight: f64,
}

/// Chosen on the tune part of `corpus/questions` (`make bench`'s RRF grid over k 5–100 and keyword
/// weights 0.5–2): k 5 with equal weights was best on tune (recall@10 0.608 against 0.594 at the
/// customary k 60); the first ranks of both lists matter most.
pub const DEFAULT_FUSION: FusionParameters = FusionParameters {
    method: "rrf",
    k: 5.0,
    dense_weight: 1.0,
    keyword_weight: 1.0,
};

/// One article's place in the fused list.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub block_id: i64,
    pub score: f64,
    pub dense_rank: Option<usize>,
    pub keyword_rank: Option<usize>,
}

/// Fuses two rankings of block ids (best first, no repeats within a list). Ties keep the dense
/// order, then the keyword order.
pub fn fuse(dense: &[ScoredBlock], keyword: &[ScoredBlock], p: &FusionParameters) -> Vec<Fused> {
    let mut at: HashMap<i64, usize> = HashMap::new();
    let mut out: Vec<Fused> = Vec::new();
    let mut add = |id: i64, rank: usize, weight: f64, dense_list: bool| {
        let i = *at.entry(id).or_insert_with(|| {
            out.push(Fused {
                block_id: id,
                score: 0.0,
                dense_rank: None,
                keyword_rank: None,
            });
            out.len() - 1
        });
        let f = &mut out[i];
        f.score += weight / (p.k + rank as f64);
        if dense_list {
            f.dense_rank = Some(rank);
        } else {
            f.keyword_rank = Some(rank);
        }
    };
    for (i, b) in dense.iter().enumerate() {
        add(b.block_id, i + 1, p.dense_weight, true);
    }
    for (i, b) in keyword.iter().enumerate() {
        add(b.block_id, i + 1, p.keyword_weight, false);
    }
    // Stable: equal scores keep first-seen order.
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out
}

/// Ids in first-seen order without repeats.
pub fn distinct(ids: impl IntoIterator<Item = i64>) -> Vec<i64> {
    let mut seen = std::collections::HashSet::new();
    ids.into_iter().filter(|id| seen.insert(*id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(ids: &[i64]) -> Vec<ScoredBlock> {
        ids.iter()
            .map(|&block_id| ScoredBlock {
                block_id,
                score: 0.0,
            })
            .collect()
    }

    #[test]
    fn an_article_both_lists_rank_beats_one_only_one_ranks_first() {
        let fused = fuse(&ranked(&[1, 2, 3]), &ranked(&[3, 4, 1]), &DEFAULT_FUSION);
        let order: Vec<i64> = fused.iter().map(|f| f.block_id).collect();
        assert_eq!(order[..2], [1, 3]);
        assert_eq!(fused[0].dense_rank, Some(1));
        assert_eq!(fused[0].keyword_rank, Some(3));
        assert_eq!(
            fused.iter().find(|f| f.block_id == 4).unwrap().dense_rank,
            None
        );
        assert_eq!(fused.len(), 4);
    }

    #[test]
    fn weights_move_the_order() {
        let keyword_heavy = FusionParameters {
            keyword_weight: 3.0,
            ..DEFAULT_FUSION
        };
        assert_eq!(
            fuse(&ranked(&[1]), &ranked(&[2]), &DEFAULT_FUSION)[0].block_id,
            1
        );
        assert_eq!(
            fuse(&ranked(&[1]), &ranked(&[2]), &keyword_heavy)[0].block_id,
            2
        );
    }

    #[test]
    fn distinct_keeps_first_seen_order() {
        assert_eq!(distinct([3, 1, 3, 2, 1]), vec![3, 1, 2]);
    }
}
