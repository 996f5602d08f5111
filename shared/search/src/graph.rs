//! The article graph in ranking: the articles that the strongest fused hits refer to ("依照本法第三十九条",
//! "参照适用本编第五百一十条") gain part of their citers' scores, and enter the ranking when neither
//! list had them. An article that several strong hits invoke (a general rule) gains from each.

use crate::fusion::Fused;
use docpipe_db::references::Edge;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// How far the graph reaches into a ranking.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Graph {
    /// The first fused hits whose references are followed; 0: the graph is off.
    pub seeds: usize,
    /// The share of a citer's fused score its target gains (a plain mention counts half).
    pub weight: f64,
}

/// A reference to a span of articles is followed when it covers at most this many.
pub const MAX_SPAN: i32 = 5;
/// Blocks one reference reaches at most (a law in several documents, several versions).
pub const PER_REFERENCE: i64 = 8;
/// Edges one search reads at most.
pub(crate) const MAX_EDGES: i64 = 200;

impl Graph {
    pub const OFF: Graph = Graph {
        seeds: 0,
        weight: 0.0,
    };

    /// What the API searches with: chosen on the tune part of the questions benchmark.
    pub const DEFAULT: Graph = Graph::OFF;

    pub fn is_off(&self) -> bool {
        self.seeds == 0 || self.weight <= 0.0
    }
}

fn kind_weight(kind: &str) -> f64 {
    match kind {
        "mention" => 0.5,
        _ => 1.0,
    }
}

/// The fused ranking with the graph's gains added, best first; ties keep the fused order. An
/// article reached only by the graph has no rank in either list.
pub(crate) fn lift(mut fused: Vec<Fused>, edges: &[Edge], graph: &Graph) -> Vec<Fused> {
    if graph.is_off() || edges.is_empty() {
        return fused;
    }
    let seed_score: HashMap<i64, f64> = fused
        .iter()
        .take(graph.seeds)
        .map(|f| (f.block_id, f.score))
        .collect();
    // One gain per citer and target: an article citing another twice does not count twice.
    let mut pairs: HashMap<(i64, i64), f64> = HashMap::new();
    for e in edges {
        if let Some(score) = seed_score.get(&e.seed) {
            let gain = graph.weight * kind_weight(&e.kind) * score;
            let slot = pairs.entry((e.seed, e.target)).or_insert(0.0);
            *slot = slot.max(gain);
        }
    }
    let mut gains: HashMap<i64, f64> = HashMap::new();
    for ((_, target), gain) in pairs {
        *gains.entry(target).or_insert(0.0) += gain;
    }
    let present: HashSet<i64> = fused.iter().map(|f| f.block_id).collect();
    for f in &mut fused {
        if let Some(g) = gains.get(&f.block_id) {
            f.score += g;
        }
    }
    let mut reached: Vec<(i64, f64)> = gains
        .into_iter()
        .filter(|(id, _)| !present.contains(id))
        .collect();
    reached.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused.extend(reached.into_iter().map(|(block_id, score)| Fused {
        block_id,
        score,
        dense_rank: None,
        keyword_rank: None,
    }));
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fused(scores: &[(i64, f64)]) -> Vec<Fused> {
        scores
            .iter()
            .map(|&(block_id, score)| Fused {
                block_id,
                score,
                dense_rank: Some(1),
                keyword_rank: None,
            })
            .collect()
    }

    fn edge(seed: i64, target: i64, kind: &str) -> Edge {
        Edge {
            seed,
            target,
            kind: kind.to_string(),
        }
    }

    fn order(f: &[Fused]) -> Vec<i64> {
        f.iter().map(|f| f.block_id).collect()
    }

    const G: Graph = Graph {
        seeds: 2,
        weight: 0.5,
    };

    #[test]
    fn a_target_of_strong_hits_enters_and_a_shared_rule_rises() {
        let ranking = fused(&[(1, 0.30), (2, 0.28), (3, 0.20), (4, 0.10)]);
        let edges = [
            // 1 and 2 both invoke 4 (a general rule): 0.10 + 0.15 + 0.14 puts it first.
            edge(1, 4, "apply"),
            edge(2, 4, "analogy"),
            // 9 is in neither list: it enters with half of 2's score.
            edge(2, 9, "apply"),
            // 3 is no seed: what it cites gains nothing.
            edge(3, 8, "apply"),
            // The same pair twice counts once.
            edge(1, 4, "mention"),
        ];
        let lifted = lift(ranking, &edges, &G);
        assert_eq!(order(&lifted), vec![4, 1, 2, 3, 9]);
        assert!((lifted[0].score - 0.39).abs() < 1e-9, "{}", lifted[0].score);
        let reached = lifted.iter().find(|f| f.block_id == 9).unwrap();
        assert_eq!((reached.dense_rank, reached.keyword_rank), (None, None));
        assert!((reached.score - 0.14).abs() < 1e-9);
    }

    #[test]
    fn a_mention_counts_half_and_off_changes_nothing() {
        let ranking = fused(&[(1, 0.4), (2, 0.1)]);
        let lifted = lift(ranking.clone(), &[edge(1, 7, "mention")], &G);
        assert!((lifted.last().unwrap().score - 0.1).abs() < 1e-9);
        assert_eq!(
            lift(ranking.clone(), &[edge(1, 7, "apply")], &Graph::OFF),
            ranking
        );
    }
}
