"""BM25 over an inverted index, plus the scoring of a ranking against train.jsonl.

`InvertedBM25` computes exactly what rank_bm25's `BM25Okapi` computes (same IDF with its
epsilon floor: idf = ln(N - n + 0.5) - ln(n + 0.5), a negative idf replaced by
epsilon * mean idf; same term weight, query tokens counted with repetition), but walks only the
postings of the query's terms, the way a real index (and a Rust implementation) would. baseline.py
checks that both give the same rankings.
"""

import math
import statistics
from collections import Counter, defaultdict


class InvertedBM25:
    def __init__(self, corpus_tokens, k1=1.5, b=0.75, epsilon=0.25, idf_mode="okapi"):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.n_docs = len(corpus_tokens)
        self.doc_len = [len(d) for d in corpus_tokens]
        self.avgdl = sum(self.doc_len) / self.n_docs
        self.postings = defaultdict(list)  # term -> [(doc, tf)]
        for i, doc in enumerate(corpus_tokens):
            for term, tf in Counter(doc).items():
                self.postings[term].append((i, tf))
        self.idf = {}
        if idf_mode == "okapi":  # rank_bm25's BM25Okapi
            negative, total = [], 0.0
            for term, plist in self.postings.items():
                n = len(plist)
                idf = math.log(self.n_docs - n + 0.5) - math.log(n + 0.5)
                self.idf[term] = idf
                total += idf
                if idf < 0:
                    negative.append(term)
            eps = epsilon * total / len(self.idf)
            for term in negative:
                self.idf[term] = eps
        elif idf_mode == "lucene":  # ln(1 + (N - n + 0.5) / (n + 0.5)): never negative, no floor
            for term, plist in self.postings.items():
                n = len(plist)
                self.idf[term] = math.log(1 + (self.n_docs - n + 0.5) / (n + 0.5))
        else:
            raise ValueError(idf_mode)
        # the length norm of each document, computed as rank_bm25 computes it
        self.norm = [k1 * (1 - b + b * dl / self.avgdl) for dl in self.doc_len]

    def scores(self, query_tokens):
        """{doc: score} for the documents that share a term with the query."""
        acc = defaultdict(float)
        k1p1 = self.k1 + 1
        for term in query_tokens:  # with repetition, as rank_bm25 does
            plist = self.postings.get(term)
            if not plist:
                continue
            idf = self.idf[term]
            norm = self.norm
            for doc, tf in plist:
                acc[doc] += idf * (tf * k1p1 / (tf + norm[doc]))
        return acc

    def search(self, query_tokens, k):
        """The top-k document indexes, best first; ties broken by document order."""
        acc = self.scores(query_tokens)
        return sorted(acc, key=lambda d: (-acc[d], d))[:k]


def evaluate(ranked_keys_by_qid, questions, parse_ref):
    """recall@10, recall@50, MRR@10 at article level. `ranked_keys_by_qid[qid]` is the ranked list
    of distinct article keys (law, number, zhi) returned for that question (at least 50 long when
    the index holds that many). A hit is a returned key equal to a cited one."""
    r10, r50, mrr = [], [], []
    for q in questions:
        relevant = {parse_ref(r) for r in q["relevant"]}
        ranked = ranked_keys_by_qid[q["id"]]
        r10.append(len(relevant.intersection(ranked[:10])) / len(relevant))
        r50.append(len(relevant.intersection(ranked[:50])) / len(relevant))
        rr = 0.0
        for rank, key in enumerate(ranked[:10], 1):
            if key in relevant:
                rr = 1.0 / rank
                break
        mrr.append(rr)
    n = len(questions)
    return {"questions": n, "recall@10": sum(r10) / n, "recall@50": sum(r50) / n, "mrr@10": sum(mrr) / n}


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def latency_summary(ms):
    return {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "mean_ms": statistics.fmean(ms)}
