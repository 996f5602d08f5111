"""Scores the retrieval benchmark (tests/examples/bench_retrieval.rs) and runs the Python BM25
baseline on the very same articles, side by side, in one run.

    python score.py DIR [--json OUT] [--no-baseline] [--tune-fusion]

DIR holds what bench_retrieval wrote: articles.jsonl (every block docpipe searched, with the key a
cited article is scored by: <law>第<N>条), rankings.jsonl (per question and mode the distinct
articles returned, best first, and the latency), ingest.json and http.json.

The baseline is the questions README's: rank_bm25's BM25Okapi (k1 1.5, b 0.75, epsilon 0.25)
over jieba.lcut_for_search tokens of each block's text and of each question; its latency is
tokenising the question and scoring every block, in this process.

Scoring (the questions README): a returned article counts when its key is a cited
`<law>第<N>条`; recall@k over the first k distinct articles, averaged over questions; MRR@10 of the
first relevant one. Every figure is given for all questions and for the tune and check parts
(split.py), and for `unseen`: the check questions whose cited articles no tune question cites.

The article graph (shared/search/src/graph.rs) runs over hybrid with a small grid of settings
(`hybrid (graph N seeds, weight W)`); the setting best on tune is compared with hybrid without
the graph on check and unseen, and so is the query adapter (with against without).

--tune-fusion fuses the dense and keyword lists of rankings.jsonl by reciprocal rank over a grid of
k and weights and reports each on tune and check: how the defaults in
shared/search/src/fusion.rs were chosen (on tune only). With candidates.jsonl (both rankings
before fusion, with scores) it also compares score-level fusion (a convex mix of the per-query
min-max or z-normalised scores) with RRF on the same candidates.
"""

import argparse
import json
import os
import sys
import time

from articles import cn_to_int
from bm25 import evaluate, percentile
from split import PARTS, load_questions, split, unseen

# With e5-small the dense and hybrid modes map the query through the built-in query adapter, which
# was fitted on the tune part: their tune (and so all) figures are on questions it was trained on,
# and the check part is the held-out one. "(no adapter)" is the same search with the model's own
# query vectors, in the same run.
MODES = ("dense", "keyword", "hybrid", "dense (no adapter)", "hybrid (no adapter)")
GRAPH_PREFIX = "hybrid (graph "


def ref_key(ref):
    """'民法典第五十四条' → '民法典第54条'; None when it is no article reference."""
    i = ref.rfind("第")
    if i <= 0 or not ref.endswith("条"):
        return None
    try:
        return f"{ref[:i]}第{cn_to_int(ref[i + 1:-1])}条"
    except ValueError:
        return None


def metrics(ranked_by_id, questions):
    return evaluate(ranked_by_id, questions, ref_key)


def baseline(articles, questions):
    import jieba
    from rank_bm25 import BM25Okapi

    jieba.setLogLevel(60)
    corpus = [jieba.lcut_for_search(a["text"]) for a in articles]
    bm25 = BM25Okapi(corpus)
    keys = [a["key"] for a in articles]
    ranked, ms = {}, []
    for q in questions:
        t = time.perf_counter()
        scores = bm25.get_scores(jieba.lcut_for_search(q["question"]))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        out = []
        for i in order:
            if keys[i] not in out:
                out.append(keys[i])
                if len(out) == 50:
                    break
        ms.append((time.perf_counter() - t) * 1e3)
        ranked[q["id"]] = out
    return ranked, ms


def fuse(dense, keyword, k, wd, wk):
    score = {}
    for lst, w in ((dense, wd), (keyword, wk)):
        for rank, key in enumerate(lst, 1):
            score[key] = score.get(key, 0.0) + w / (k + rank)
    return sorted(score, key=lambda key: -score[key])


def normalised(pairs, how):
    """Scores of one ranking, as (block, score) pairs, scaled per query: min-max to [0, 1] or z."""
    if not pairs:
        return {}
    v = [x for _, x in pairs]
    if how == "minmax":
        lo, hi = min(v), max(v)
        return {b: (x - lo) / (hi - lo or 1.0) for b, x in pairs}
    mean = sum(v) / len(v)
    sd = (sum((x - mean) ** 2 for x in v) / len(v)) ** 0.5 or 1.0
    return {b: (x - mean) / sd for b, x in pairs}


def convex(cand, key_of, how, alpha):
    """Score-level fusion: alpha × dense + (1 − alpha) × keyword, each normalised per query; an
    article one list lacks takes that list's lowest score."""
    d, k = normalised(cand["dense"], how), normalised(cand["keyword"], how)
    d_low, k_low = min(d.values(), default=0.0), min(k.values(), default=0.0)
    score = {b: alpha * d.get(b, d_low) + (1 - alpha) * k.get(b, k_low) for b in set(d) | set(k)}
    out = []
    for b in sorted(score, key=lambda b: (-score[b], b)):
        key = key_of.get(b)
        if key is not None and key not in out:
            out.append(key)
    return out


def score_fusion_grid(path, articles, sets):
    """RRF against score-level fusion on the same candidates (candidates.jsonl: both rankings
    before fusion, block ids with their scores)."""
    key_of = {a["block_id"]: a["key"] for a in articles}
    with open(path, encoding="utf-8") as f:
        cands = {c["id"]: c for c in map(json.loads, f)}
    def rrf(c):
        blocks = fuse([b for b, _ in c["dense"]], [b for b, _ in c["keyword"]], 5, 1.0, 1.0)
        out = []
        for b in blocks:
            if b in key_of and key_of[b] not in out:
                out.append(key_of[b])
        return out

    variants = [("rrf k 5", rrf)]
    for how in ("minmax", "z"):
        for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
            variants.append((f"{how} alpha {alpha}",
                             lambda c, how=how, alpha=alpha: convex(c, key_of, how, alpha)))
    grid = []
    for name, fn in variants:
        fused = {q: fn(c) for q, c in cands.items()}
        grid.append({"fusion": name, **{p: metrics(fused, [q for q in qs if q["id"] in cands])["recall@10"]
                                         for p, qs in sets.items()}})
    return grid


def comparisons(rows):
    """The graph's best setting on tune against hybrid without it, and the query adapter with
    against without, on check and unseen (recall@10), as text; what shared/search/src/graph.rs and
    embed's adapter are kept or constrained by."""
    out = []
    line = lambda label, a, b: out.append(
        f"- {label}: check {a['check']['recall@10']:.3f} vs {b['check']['recall@10']:.3f} "
        f"({a['check']['recall@10'] - b['check']['recall@10']:+.3f}), unseen "
        f"{a['unseen']['recall@10']:.3f} vs {b['unseen']['recall@10']:.3f} "
        f"({a['unseen']['recall@10'] - b['unseen']['recall@10']:+.3f})")
    graph = [(n, r) for n, r in rows.items() if n.startswith(GRAPH_PREFIX)]
    if graph and "hybrid" in rows:
        name, best = max(graph, key=lambda g: g[1]["tune"]["recall@10"])
        out.append(f"\nThe article graph, best on tune: {name} (tune {best['tune']['recall@10']:.3f} vs "
                   f"{rows['hybrid']['tune']['recall@10']:.3f} without)")
        line("with the graph vs without", best, rows["hybrid"])
    adapted = [m for m in ("dense", "hybrid") if m in rows and f"{m} (no adapter)" in rows]
    if adapted:
        out.append("\nThe query adapter (fitted on tune):")
    for mode in adapted:
        line(f"{mode} with vs without", rows[mode], rows[f"{mode} (no adapter)"])
    return "\n".join(out)


def reach(path, articles, ranked_by_id, parts):
    """Of the cited articles a ranking misses in its top 10, how many the article graph could
    bring at all: one reference away from a top-10 hit, either way (edges.jsonl: the graph at
    block level as search follows it), and how many anything cites."""
    key = {a["block_id"]: a["key"] for a in articles}
    out = {}
    cited = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            s, t, _ = json.loads(line)
            if s in key and t in key:
                out.setdefault(key[s], set()).add(key[t])
                cited.add(key[t])
    result = {}
    for part, qs in parts.items():
        missed = near = any_citer = 0
        for q in qs:
            top = ranked_by_id[q["id"]][:10]
            for m in {ref_key(r) for r in q["relevant"]} - set(top):
                missed += 1
                near += any(m in out.get(h, ()) or h in out.get(m, ()) for h in top)
                any_citer += m in cited
        result[part] = {"missed": missed, "one_reference_from_top10": near, "cited_by_any": any_citer}
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--json")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--tune-fusion", action="store_true")
    args = ap.parse_args()

    with open(os.path.join(args.dir, "articles.jsonl"), encoding="utf-8") as f:
        articles = [json.loads(l) for l in f if l.strip()]
    rankings = {m: {} for m in MODES}
    latency = {m: [] for m in MODES}
    adapted = False
    with open(os.path.join(args.dir, "rankings.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            rankings.setdefault(r["mode"], {})[r["id"]] = r["ranked"]
            latency.setdefault(r["mode"], []).append(r["ms"])
            adapted = adapted or r["mode"].endswith("(no adapter)")
    questions = load_questions()
    parts = split(questions)
    parts["unseen"] = unseen(parts, ref_key)
    sets = {"all": questions, **parts}

    results = {"articles": len(articles), "rows": {}}
    rows = [(m, rankings[m], latency[m]) for m in rankings if rankings[m]]
    if not args.no_baseline:
        t = time.perf_counter()
        ranked, ms = baseline(articles, questions)
        results["baseline_secs"] = time.perf_counter() - t
        rows.append(("baseline (rank_bm25 BM25Okapi, jieba search)", ranked, ms))
    for name, ranked, ms in rows:
        results["rows"][name] = {
            part: metrics(ranked, qs) for part, qs in sets.items()
        } | {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99)}

    if args.tune_fusion and rankings["dense"] and rankings["keyword"]:
        grid = []
        for k in (5, 10, 20, 30, 60, 100):
            for wk in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
                fused = {q: fuse(rankings["dense"][q], rankings["keyword"].get(q, []), k, 1.0, wk)
                         for q in rankings["dense"]}
                grid.append({"k": k, "keyword_weight": wk,
                             **{p: metrics(fused, qs)["recall@10"] for p, qs in sets.items()}})
        grid.sort(key=lambda g: -g["tune"])
        results["fusion_grid"] = grid
        candidates = os.path.join(args.dir, "candidates.jsonl")
        if os.path.exists(candidates):
            results["score_fusion"] = score_fusion_grid(candidates, articles, sets)

    print(f"Retrieval on corpus/questions: {len(questions)} questions "
          f"(tune {len(parts['tune'])}, check {len(parts['check'])}, of which unseen "
          f"{len(parts['unseen'])}), {len(articles)} blocks searched\n")
    print("| mode | R@10 all | R@10 tune | R@10 check | R@10 unseen | R@50 all | MRR@10 all | p50 ms | p99 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results["rows"].items():
        print(f"| {name} | {r['all']['recall@10']:.3f} | {r['tune']['recall@10']:.3f} | "
              f"{r['check']['recall@10']:.3f} | {r['unseen']['recall@10']:.3f} | "
              f"{r['all']['recall@50']:.3f} | {r['all']['mrr@10']:.3f} | "
              f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} |")
    print(comparisons(results["rows"]))
    edges = os.path.join(args.dir, "edges.jsonl")
    if os.path.exists(edges) and rankings.get("hybrid"):
        results["graph_reach"] = reach(edges, articles, rankings["hybrid"], parts)
        print("\nWhat the graph could reach: of the cited articles hybrid misses in its top 10, those one "
              "reference away from a top-10 hit (either way), and those any article cites:")
        for part, r in results["graph_reach"].items():
            print(f"- {part}: {r['missed']} missed, {r['one_reference_from_top10']} one reference away, "
                  f"{r['cited_by_any']} cited by any article")
    base = next((r for n, r in results["rows"].items() if n.startswith("baseline")), None)
    if adapted:
        print("\ndense and hybrid map the query through the adapter fitted on the tune part: their tune and "
              "all columns include the questions it was trained on; check is held out.")
    if base:
        print()
        for m in MODES:
            if m in results["rows"]:
                r = results["rows"][m]
                print(f"- {m}: recall@10 {r['all']['recall@10'] / base['all']['recall@10']:.2f}x the baseline "
                      f"(tune {r['tune']['recall@10'] / base['tune']['recall@10']:.2f}x, "
                      f"check {r['check']['recall@10'] / base['check']['recall@10']:.2f}x)")
    http = os.path.join(args.dir, "http.json")
    if os.path.exists(http):
        with open(http) as f:
            h = json.load(f)
        results["http"] = h
        print("\nOver HTTP (the API's router on a local port, top_k 10): " + ", ".join(
            f"{m} p50 {v['p50_ms']:.1f} ms / p99 {v['p99_ms']:.1f} ms ({v['queries']} questions)"
            for m, v in h.items()))
    ingest = os.path.join(args.dir, "ingest.json")
    if os.path.exists(ingest):
        with open(ingest) as f:
            g = json.load(f)
        results["ingest"] = g
        print(f"\nIngest ({g['embedder']}): {g['indexed']} laws indexed ({g['chunks_embedded']} chunks embedded) "
              f"and {g['reused']} reused in {g['ingest_secs']:.0f} s; keyword rows rebuilt for "
              f"{g['keyword_reindexed_documents']} documents in {g['keyword_reindex_secs']:.1f} s")
    if "fusion_grid" in results:
        print("\nRRF grid (dense weight 1), recall@10, best on tune first:")
        for g in results["fusion_grid"][:8]:
            print(f"  k {g['k']:>3}  keyword weight {g['keyword_weight']:.2f}  tune {g['tune']:.3f}  "
                  f"check {g['check']:.3f}  all {g['all']:.3f}")
    if "score_fusion" in results:
        print("\nRRF against score-level fusion on the same candidates, recall@10:")
        for g in results["score_fusion"]:
            print(f"  {g['fusion']:<16}  tune {g['tune']:.3f}  check {g['check']:.3f}  all {g['all']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    sys.exit(main())
