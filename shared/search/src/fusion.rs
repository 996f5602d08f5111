//! Reciprocal rank fusion of the dense and keyword rankings of articles.

use docpipe_db::keyword::ScoredBlock;
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

/// With a query adapter (e5-small's built-in one) the dense ranking is the stronger of the two, and
/// the fusion leans on it: chosen by `scripts/retrieval/adapter.py --cv-fusion`, on dense rankings
/// of the tune part that each came from an adapter fitted without that question (five folds), over
/// k 5–60 and dense weights 1–2: k 10 with the dense list weighted 2 gave recall@10 0.701, against
/// 0.683 for [`DEFAULT_FUSION`]'s k 5 and equal weights.
pub const ADAPTED_FUSION: FusionParameters = FusionParameters {
    method: "rrf",
    k: 10.0,
    dense_weight: 2.0,
    keyword_weight: 1.0,
};

/// The fusion for a dense ranking whose query vector was, or was not, mapped by a query adapter.
pub(crate) fn parameters_for(query_adapter: Option<&str>) -> FusionParameters {
    match query_adapter {
        Some(_) => ADAPTED_FUSION,
        None => DEFAULT_FUSION,
    }
}

/// One article's place in the fused list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fused {
    pub block_id: i64,
    pub score: f64,
    pub dense_rank: Option<usize>,
    pub keyword_rank: Option<usize>,
}

/// Fuses two rankings of block ids (best first, no repeats within a list). Ties keep the dense
/// order, then the keyword order.
pub(crate) fn fuse(
    dense: &[ScoredBlock],
    keyword: &[ScoredBlock],
    p: &FusionParameters,
) -> Vec<Fused> {
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
    fn an_adapted_dense_ranking_is_fused_with_more_weight() {
        assert_eq!(parameters_for(None), DEFAULT_FUSION);
        assert_eq!(parameters_for(Some("e5-small-stard-v2")), ADAPTED_FUSION);
        // an article first in the dense list alone beats one first in the keyword list alone
        // only when the dense list weighs more
        let (dense, keyword) = (ranked(&[1]), ranked(&[2]));
        let leaning = fuse(&dense, &keyword, &ADAPTED_FUSION);
        assert_eq!(leaning[0].block_id, 1);
        assert!(leaning[0].score > leaning[1].score, "{leaning:?}");
        let equal = fuse(&dense, &keyword, &DEFAULT_FUSION);
        assert_eq!(equal[0].score, equal[1].score);
    }

    #[test]
    fn distinct_keeps_first_seen_order() {
        assert_eq!(distinct([3, 1, 3, 2, 1]), vec![3, 1, 2]);
    }
}
