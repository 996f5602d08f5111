"""The Python BM25 baseline of corpus/questions/README.md, at article level.

As the README describes it: rank_bm25's `BM25Okapi` (its defaults: k1=1.5, b=0.75, epsilon=0.25)
over the articles split at their 第N条 markers (articles.py, named as docpipe names its semantic
blocks), with `jieba.lcut_for_search` tokens for articles and questions alike. Scored per the
README: a hit is a returned article whose law and article number are a cited one; recall@k over
the first k distinct articles (distinct law + number: several laws come in two or three
versions), averaged over questions; MRR@10 of the first relevant article.

    python baseline.py                       # Markdown table: all / tune / check, p50/p99 latency
    python baseline.py --json out.json       # the same figures as JSON too
    python baseline.py --engine inverted     # the same scores through an inverted index (fast)
    python baseline.py --verify 200          # check both engines rank the first N questions alike

Latency is per question, on one core: tokenising the question, scoring, and taking the top 50.
rank_bm25 scores every article for every query term (a dictionary look-up per article per term),
so its latency grows with the corpus; the inverted engine reads only the query terms' postings.
"""

import argparse
import json
import sys
import time

from articles import load_articles, parse_ref, tokenize, tokenize_all
from bm25 import InvertedBM25, evaluate, latency_summary
from split import PARTS, load_questions, split

K = 50


def run(engine="rank_bm25", split_zhi=False, limit=None):
    articles = load_articles(split_zhi=split_zhi)
    t0 = time.perf_counter()
    corpus = tokenize_all([a.text for a in articles], "search")
    t_tok = time.perf_counter() - t0
    keys = [a.key for a in articles]
    questions = load_questions()
    if limit:
        questions = questions[:limit]

    t0 = time.perf_counter()
    if engine == "rank_bm25":
        import numpy as np
        from rank_bm25 import BM25Okapi

        bm25 = BM25Okapi(corpus)

        def search(tokens):
            scores = bm25.get_scores(tokens)
            order = np.argsort(-scores, kind="stable")  # ties: document order
            return order
    else:
        bm25 = InvertedBM25(corpus)

        def search(tokens):
            return bm25.search(tokens, 4 * K)  # room for repeated versions of one article
    t_index = time.perf_counter() - t0

    ranked, ms = {}, []
    for q in questions:
        t = time.perf_counter()
        order = search(tokenize(q["question"], "search"))
        seen, out = set(), []
        for d in order:
            k = keys[d]
            if k not in seen:
                seen.add(k)
                out.append(k)
                if len(out) == K:
                    break
        ms.append((time.perf_counter() - t) * 1000)
        ranked[q["id"]] = out

    parts = split(questions)
    result = {
        "engine": engine,
        "articles": len(articles),
        "distinct_articles": len(set(keys)),
        "split_zhi": split_zhi,
        "corpus_tokenize_s": round(t_tok, 2),
        "index_build_s": round(t_index, 2),
        "all": evaluate(ranked, questions, parse_ref),
        **{p: evaluate(ranked, parts[p], parse_ref) for p in PARTS},
        "latency": latency_summary(ms),
    }
    return result, ranked


def table(results):
    rows = ["| engine | part | questions | recall@10 | recall@50 | MRR@10 | p50 ms | p99 ms |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        for part in ("all",) + PARTS:
            m = r[part]
            lat = r["latency"] if part == "all" else None
            rows.append(
                f"| {r['engine']} | {part} | {m['questions']} | {m['recall@10']:.3f} | {m['recall@50']:.3f} | "
                f"{m['mrr@10']:.3f} | {lat['p50_ms']:.1f} | {lat['p99_ms']:.1f} |" if lat else
                f"| {r['engine']} | {part} | {m['questions']} | {m['recall@10']:.3f} | {m['recall@50']:.3f} | "
                f"{m['mrr@10']:.3f} | | |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("rank_bm25", "inverted", "both"), default="rank_bm25")
    ap.add_argument("--split-zhi", action="store_true", help="make 第N条之一 an article of its own (docpipe does not)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--verify", type=int, metavar="N", help="check that both engines rank the first N questions alike")
    args = ap.parse_args()

    if args.verify:
        a, ra = run("rank_bm25", args.split_zhi, args.verify)
        b, rb = run("inverted", args.split_zhi, args.verify)
        same = sum(ra[q] == rb[q] for q in ra)
        print(f"{same} of {len(ra)} questions ranked identically (top {K} distinct articles)")
        return 0 if same == len(ra) else 1

    engines = ("rank_bm25", "inverted") if args.engine == "both" else (args.engine,)
    results = [run(e, args.split_zhi)[0] for e in engines]
    r0 = results[0]
    print(f"BM25Okapi (k1=1.5, b=0.75, epsilon=0.25), jieba.lcut_for_search; {r0['articles']} articles "
          f"({r0['distinct_articles']} distinct law+number), split_zhi={r0['split_zhi']}; corpus tokenised in "
          f"{r0['corpus_tokenize_s']} s (cached after the first run)\n")
    print(table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results if len(results) > 1 else r0, f, ensure_ascii=False, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
