"""How much better BM25 gets with changes a Rust implementation could make too.

Every variant is the baseline (baseline.py: BM25Okapi k1=1.5 b=0.75 eps=0.25 over
jieba.lcut_for_search tokens of the article text, raw tokens, query tokens with repetition) with
one thing changed; then a greedy combination chosen on the TUNE part only (each group in turn,
keeping the option with the best tune recall@10), then a small k1/b grid on tune. The check
part is reported for everything but never used to choose.

    python explore.py                  # Markdown table on stdout
    python explore.py --json out.json  # and the figures as JSON
    python explore.py --quick          # the single-change variants only

Scoring goes through bm25.InvertedBM25, which ranks exactly as rank_bm25 does (baseline.py
--verify), one core, no pools.
"""

import argparse
import json
import os
import re
import sys
import time

from articles import load_articles, parse_ref, tokenize, tokenize_all
from bm25 import InvertedBM25, evaluate
from split import PARTS, load_questions, split

HERE = os.path.dirname(os.path.abspath(__file__))
K = 50
WORDY = re.compile(r"[\w\u3400-\u9fff]")


# The word lists docpipe's keyword analyzer uses (shared/core/src/analyzer/), so these figures and the
# Rust index drop the same words.
WORD_LISTS = os.path.join(HERE, "..", "..", "core", "src", "analyzer")


def word_list(name):
    with open(os.path.join(WORD_LISTS, name), encoding="utf-8") as f:
        return {l.strip() for l in f if l.strip() and not l.startswith("#")}


STOP = word_list("stopwords.txt")
PARTICLES = word_list("particles.txt")

BASE = {
    "mode": "search",     # search = lcut_for_search | default = lcut | search_nohmm | bigram
                          # | search_bigram (jieba search tokens + character bigrams)
                          # | rs_search (jieba-rs cut_for_search, through rjieba)
    "doc_text": "text",   # text | law (law name + text) | law_path (law name + headings + text)
    "filter": "none",     # none | punct (both sides) | stop (stop words + punct, both sides)
                          # | particles (punct both sides, question words off the query)
                          # | stop_particles (both)
    "dedupe_query": False,
    "k1": 1.5,
    "b": 0.75,
    "idf": "okapi",       # okapi (rank_bm25, eps floor) | lucene (ln(1 + (N-n+.5)/(n+.5)))
}


def bigrams(text):
    """Overlapping character bigrams of each CJK/alnum run (no segmenter at all)."""
    out = []
    for run in re.findall(r"[\w\u3400-\u9fff]+", text):
        out.extend(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    return out


def doc_texts(articles, how):
    if how == "text":
        return [a.text for a in articles]
    if how == "law":
        return [f"{a.law}\n{a.text}" for a in articles]
    if how == "law_path":
        return [f"{a.law}\n{' '.join(a.path)}\n{a.text}" for a in articles]
    raise ValueError(how)


def keep(filter_, side):
    """The token filter for one side (doc/query)."""
    punct = lambda t: WORDY.search(t) is not None
    if filter_ == "none":
        return None
    if filter_ == "punct":
        return punct
    if filter_ == "stop":
        return lambda t: punct(t) and t not in STOP
    if filter_ == "particles":
        return (lambda t: punct(t) and t not in PARTICLES) if side == "query" else punct
    if filter_ == "stop_particles":
        return (lambda t: punct(t) and t not in STOP and t not in PARTICLES) if side == "query" else (
            lambda t: punct(t) and t not in STOP)
    raise ValueError(filter_)


class Explorer:
    def __init__(self):
        self.articles = load_articles()
        self.keys = [a.key for a in self.articles]
        self.questions = load_questions()
        self.parts = split(self.questions)
        self._docs = {}
        self._index = {}
        self.memo = {}

    def doc_tokens(self, cfg):
        key = (cfg["mode"], cfg["doc_text"])
        if key not in self._docs:
            texts = doc_texts(self.articles, cfg["doc_text"])
            if cfg["mode"] == "bigram":
                self._docs[key] = [bigrams(t) for t in texts]
            elif cfg["mode"] == "search_bigram":
                self._docs[key] = [a + bigrams(t) for a, t in zip(tokenize_all(texts, "search"), texts)]
            else:
                self._docs[key] = tokenize_all(texts, cfg["mode"])
        return self._docs[key]

    def query_tokens(self, cfg, text):
        if cfg["mode"] == "bigram":
            toks = bigrams(text)
        elif cfg["mode"] == "search_bigram":
            toks = tokenize(text, "search") + bigrams(text)
        else:
            toks = tokenize(text, cfg["mode"])
        f = keep(cfg["filter"], "query")
        if f:
            toks = [t for t in toks if f(t)]
        if cfg["dedupe_query"]:
            toks = list(dict.fromkeys(toks))
        return toks

    def index(self, cfg):
        key = (cfg["mode"], cfg["doc_text"], cfg["filter"], cfg["k1"], cfg["b"], cfg["idf"])
        if key not in self._index:
            docs = self.doc_tokens(cfg)
            f = keep(cfg["filter"], "doc")
            if f:
                docs = [[t for t in d if f(t)] for d in docs]
            self._index.clear()  # one index in memory at a time
            self._index[key] = InvertedBM25(docs, k1=cfg["k1"], b=cfg["b"], idf_mode=cfg["idf"])
        return self._index[key]

    def run(self, cfg):
        memo_key = json.dumps(cfg, sort_keys=True)
        if memo_key in self.memo:
            return self.memo[memo_key]
        bm25 = self.index(cfg)
        ranked = {}
        t0 = time.perf_counter()
        for q in self.questions:
            out, seen = [], set()
            for d in bm25.search(self.query_tokens(cfg, q["question"]), 4 * K):
                k = self.keys[d]
                if k not in seen:
                    seen.add(k)
                    out.append(k)
                    if len(out) == K:
                        break
            ranked[q["id"]] = out
        res = {"all": evaluate(ranked, self.questions, parse_ref),
               **{p: evaluate(ranked, self.parts[p], parse_ref) for p in PARTS},
               "search_s": round(time.perf_counter() - t0, 1)}
        self.memo[memo_key] = res
        print(f"  {describe(cfg):60s} tune {res['tune']['recall@10']:.3f} check {res['check']['recall@10']:.3f}",
              file=sys.stderr, flush=True)
        return res


def describe(cfg):
    diff = [f"{k}={v}" for k, v in cfg.items() if BASE[k] != v]
    return ", ".join(diff) or "baseline"


SINGLE = [
    ("baseline (README)", {}),
    ("drop punctuation tokens (both sides)", {"filter": "punct"}),
    ("stop words + punctuation off (both sides)", {"filter": "stop"}),
    ("question words/particles off the query (+punct)", {"filter": "particles"}),
    ("stop words both sides + particles off the query", {"filter": "stop_particles"}),
    ("jieba accurate mode (lcut) instead of search mode", {"mode": "default"}),
    ("search mode, HMM off", {"mode": "search_nohmm"}),
    ("jieba-rs cut_for_search (rjieba) instead of Python jieba", {"mode": "rs_search"}),
    ("character bigrams, no segmenter", {"mode": "bigram"}),
    ("jieba search tokens + character bigrams", {"mode": "search_bigram"}),
    ("law name prepended to the article", {"doc_text": "law"}),
    ("law name + chapter path prepended", {"doc_text": "law_path"}),
    ("query tokens deduplicated", {"dedupe_query": True}),
    ("k1=1.2 b=0.75, Lucene idf (Lucene/Tantivy/Milvus default)", {"k1": 1.2, "idf": "lucene"}),
]

GROUPS = [
    ("mode", ["search", "default", "search_nohmm", "bigram", "search_bigram"]),
    ("filter", ["none", "punct", "stop", "particles", "stop_particles"]),
    ("doc_text", ["text", "law", "law_path"]),
    ("dedupe_query", [False, True]),
    ("idf", ["okapi", "lucene"]),
]
GRID = [(k1, b) for k1 in (0.9, 1.2, 1.5, 2.0) for b in (0.5, 0.75, 0.9)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    ex = Explorer()
    rows = []
    for name, change in SINGLE:
        cfg = {**BASE, **change}
        rows.append((name, cfg, ex.run(cfg)))

    if not args.quick:
        best = dict(BASE)
        for field, options in GROUPS:
            scored = [(ex.run({**best, field: o})["tune"]["recall@10"], -i, o) for i, o in enumerate(options)]
            best[field] = max(scored)[2]
        rows.append(("greedy combination (chosen on tune)", dict(best), ex.run(best)))
        grid = [(ex.run({**best, "k1": k1, "b": b})["tune"]["recall@10"], k1, b) for k1, b in GRID]
        _, k1, b = max(grid)
        best = {**best, "k1": k1, "b": b}
        rows.append((f"+ k1/b chosen on tune (k1={k1}, b={b})", dict(best), ex.run(best)))

    print("| variant | config | tune R@10 | check R@10 | all R@10 | all R@50 | all MRR@10 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, cfg, r in rows:
        print(f"| {name} | {describe(cfg)} | {r['tune']['recall@10']:.3f} | {r['check']['recall@10']:.3f} | "
              f"{r['all']['recall@10']:.3f} | {r['all']['recall@50']:.3f} | {r['all']['mrr@10']:.3f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{"variant": n, "config": c, **r} for n, c, r in rows], f, ensure_ascii=False, indent=2)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
