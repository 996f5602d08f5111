"""How much index a BM25 query reads: the size of the article-level inverted index (what a
PostgreSQL term table would hold) and the postings one question touches, with the recall cost of
skipping very common query terms (df above a share of the articles), the usual way to bound a
term-at-a-time query in SQL.

    python postings.py [--json FILE]

Tokens as in the baseline (jieba.lcut_for_search, raw), scoring as rank_bm25's BM25Okapi.
"""

import argparse
import json
import sys

from articles import load_articles, parse_ref, tokenize, tokenize_all
from bm25 import InvertedBM25, evaluate, percentile
from split import PARTS, load_questions, split


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    articles = load_articles()
    keys = [a.key for a in articles]
    docs = tokenize_all([a.text for a in articles], "search")
    bm25 = InvertedBM25(docs)
    n = bm25.n_docs
    postings = sum(len(p) for p in bm25.postings.values())
    questions = load_questions()
    parts = split(questions)
    qtoks = {q["id"]: tokenize(q["question"], "search") for q in questions}
    out = {"articles": n, "terms": len(bm25.postings), "postings": postings,
           "tokens_per_article": round(sum(bm25.doc_len) / n, 1), "variants": []}
    print(f"{n} articles, {len(bm25.postings)} distinct terms, {postings} (term, article) postings "
          f"({postings / n:.0f} per article), {out['tokens_per_article']} tokens per article\n")
    print("| query terms kept | postings read p50 | p99 | share of all postings p50 | tune R@10 | check R@10 | all R@10 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for cap in (None, 0.20, 0.10, 0.05, 0.02):
        touched, ranked = [], {}
        for q in questions:
            terms = [t for t in qtoks[q["id"]] if t in bm25.postings and (cap is None or len(bm25.postings[t]) <= cap * n)]
            touched.append(sum(len(bm25.postings[t]) for t in set(terms)))
            seen, lst = set(), []
            for d in bm25.search(terms, 200):
                if keys[d] not in seen:
                    seen.add(keys[d])
                    lst.append(keys[d])
                    if len(lst) == 50:
                        break
            ranked[q["id"]] = lst
        res = {"all": evaluate(ranked, questions, parse_ref), **{p: evaluate(ranked, parts[p], parse_ref) for p in PARTS}}
        row = {"df_cap": cap, "postings_p50": percentile(touched, 50), "postings_p99": percentile(touched, 99), **res}
        out["variants"].append(row)
        label = "all" if cap is None else f"df ≤ {cap:.0%} of articles"
        print(f"| {label} | {row['postings_p50']:,} | {row['postings_p99']:,} | {row['postings_p50'] / postings:.2%} | "
              f"{res['tune']['recall@10']:.3f} | {res['check']['recall@10']:.3f} | {res['all']['recall@10']:.3f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=2)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
