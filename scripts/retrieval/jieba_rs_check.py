"""Does jieba-rs (the Rust crate a docpipe implementation would use) tokenise like Python jieba,
and does the README's BM25 baseline score the same with its tokens?

jieba-rs is reached through PyPI `rjieba`, messense's binding, which bundles the crate (its SBOM
names the jieba-rs version). Measured: the share of articles and questions whose cut_for_search
tokens are identical, the startup (dictionary load) and the time to tokenise the corpus for both,
and baseline.py's figures with jieba-rs tokens on both sides.

    python jieba_rs_check.py [--json FILE]
"""

import argparse
import json
import sys
import time
from importlib.metadata import version

from articles import jieba, load_articles, parse_ref, tokenize
from bm25 import InvertedBM25, evaluate
from split import PARTS, load_questions, split


def rjieba_crate_version():
    import glob
    import os

    import rjieba

    base = os.path.dirname(rjieba.__file__)
    for path in glob.glob(os.path.join(base, "..", "rjieba-*.dist-info", "sboms", "*.json")):
        with open(path, encoding="utf-8") as f:
            for comp in json.load(f).get("components", []):
                if comp.get("name") == "jieba-rs":
                    return comp.get("version")
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()

    t = time.perf_counter()
    import rjieba

    rs = rjieba.Jieba()
    rs_new_s = time.perf_counter() - t
    t = time.perf_counter()
    jieba()  # Python jieba: builds its prefix dict (from /tmp/jieba.cache when present)
    py_init_s = time.perf_counter() - t

    articles = load_articles()
    questions = load_questions()
    texts = [a.text for a in articles]
    out = {"jieba": version("jieba"), "rjieba": version("rjieba"), "jieba_rs": rjieba_crate_version(),
           "jieba_rs_new_s": round(rs_new_s, 3), "python_jieba_init_s": round(py_init_s, 3)}

    for mode, py, rsm in (("search", "search", "rs_search"), ("default", "default", "rs_default")):
        t = time.perf_counter()
        py_docs = [tokenize(x, py) for x in texts]
        py_s = time.perf_counter() - t
        t = time.perf_counter()
        rs_docs = [tokenize(x, rsm) for x in texts]
        rs_s = time.perf_counter() - t
        same_docs = sum(a == b for a, b in zip(py_docs, rs_docs))
        same_q = sum(tokenize(q["question"], py) == tokenize(q["question"], rsm) for q in questions)
        out[mode] = {"articles_identical": same_docs, "articles": len(texts),
                     "questions_identical": same_q, "questions": len(questions),
                     "python_corpus_s": round(py_s, 2), "rs_corpus_s": round(rs_s, 2)}
        if mode == "search":
            diffs = [(a, b) for a, b in zip(py_docs, rs_docs) if a != b][:3]
            out[mode]["examples"] = [
                {"python_only": sorted(set(a) - set(b))[:8], "rs_only": sorted(set(b) - set(a))[:8]} for a, b in diffs]
            keys = [a.key for a in articles]
            parts = split(questions)
            results = {}
            for name, docs, qmode in (("python jieba", py_docs, py), ("jieba-rs", rs_docs, rsm)):
                bm25 = InvertedBM25(docs)
                ranked = {}
                for q in questions:
                    seen, lst = set(), []
                    for d in bm25.search(tokenize(q["question"], qmode), 200):
                        if keys[d] not in seen:
                            seen.add(keys[d])
                            lst.append(keys[d])
                            if len(lst) == 50:
                                break
                    ranked[q["id"]] = lst
                results[name] = {"all": evaluate(ranked, questions, parse_ref),
                                 **{p: evaluate(ranked, parts[p], parse_ref) for p in PARTS}}
            out["bm25"] = results

    print(f"jieba {out['jieba']} vs jieba-rs {out['jieba_rs']} (rjieba {out['rjieba']}): "
          f"startup {out['python_jieba_init_s']} s (Python, from its cache) vs {out['jieba_rs_new_s']} s (Jieba::new)\n")
    print("| mode | articles with identical tokens | questions with identical tokens | corpus tokenise s (Python / Rust) |")
    print("| --- | ---: | ---: | ---: |")
    for mode in ("search", "default"):
        m = out[mode]
        print(f"| {mode} | {m['articles_identical']}/{m['articles']} | {m['questions_identical']}/{m['questions']} | "
              f"{m['python_corpus_s']} / {m['rs_corpus_s']} |")
    print("\n| BM25 baseline tokens | all R@10 | tune R@10 | check R@10 | all R@50 | all MRR@10 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in out["bm25"].items():
        print(f"| {name} | {r['all']['recall@10']:.3f} | {r['tune']['recall@10']:.3f} | {r['check']['recall@10']:.3f} | "
              f"{r['all']['recall@50']:.3f} | {r['all']['mrr@10']:.3f} |")
    for ex in out["search"]["examples"]:
        print("  differs:", ex)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=2)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
