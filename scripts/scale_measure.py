#!/usr/bin/env python3
"""The measuring side of `make scale` (scripts/scale.sh): stdlib only.

    scale_measure.py batches  --manifest M --from A --to B --size 40 --out DIR
    scale_measure.py queries  --db URL --out queries.json [--seed 41] [--searches 200] [--others 100]
    scale_measure.py measure  --label small --db URL --api URL --pid PID --milvus URL --collection C
                              --queries queries.json --manifest M --laws N --out point.json
    scale_measure.py report   --small small.json --large large.json --run run.json

`batches`: the manifest's files of laws A..B-1, in upload batches of one folder each (a file per
batch, one path a line; the batch's folder is its key prefix under uploads/scale/).

`queries`: what is asked at both points, drawn once, at the first, from what the library holds
then (so the second point asks the same of a library 30× larger): search phrases of 6 to 12
characters from random indexed articles, each with a date in the past for `as_of`; verify
passages of about 2,000 characters citing 20 laws each by title and article (依据《…》第十二条的规定，…);
citations to resolve (《…》第十二条); articles to read (a document of each law's version in force
today, and an article it has).

`measure`: every request sequentially on one keep-alive connection, timed each (after 5 untimed
warm-ups per kind): keyword, hybrid, as_of (hybrid on a past date), versions_all (hybrid,
versions=all), verify, resolve, article, works_page (GET /works, 50 a page, following next_cursor
and starting over at the end). Then the dev runner's peak RSS (VmHWM: it serves the API), the
database's size, Milvus's entities (count(*) over the REST API), and the counts: documents by
status, works, versions (work_versions), articles (indexed article blocks), chunks; and the
checks: documents against uploaded keys, indexed documents sharing a sha256 the manifest does not
repeat, Milvus entities against the chunks PostgreSQL holds.

`report`: a Markdown table (small, large, ratio, the issue's limits: p50 at most 1.5×, p99 at
most 2×), then, as the last line, the JSON object issue 41 asks for.
"""
from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

KINDS = ["keyword", "hybrid", "as_of", "versions_all", "verify", "resolve", "article", "works_page"]
SEARCHES = {"keyword", "hybrid", "as_of", "versions_all"}
P50_LIMIT, P99_LIMIT = 1.5, 2.0

# Article numbers are written as the generator writes them (one implementation, beside this file).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_library import cn  # noqa: E402


def sql(url: str, query: str):
    """The rows of `query` as a list of dicts, through psql (json_agg: text with any character)."""
    wrapped = f"SELECT coalesce(json_agg(t), '[]'::json) FROM ({query}) t"
    out = subprocess.run(["psql", url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", wrapped],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def sql_one(url: str, query: str) -> dict:
    rows = sql(url, query)
    return rows[0] if rows else {}


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (PostgreSQL's percentile_cont, numpy's default)."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


# ───────────────────────────── batches ─────────────────────────────

def cmd_batches(a) -> None:
    rows = [json.loads(line) for line in open(a.manifest, encoding="utf-8")]
    root = Path(a.manifest).parent
    chosen = [r for r in rows if a.start <= r["law"] < a.stop]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    by_folder: dict[str, list[str]] = collections.OrderedDict()
    for r in chosen:
        by_folder.setdefault(os.path.dirname(r["file"]), []).append(str(root / r["file"]))
    n = 0
    for folder, files in by_folder.items():
        for i in range(0, len(files), a.size):
            # The batch file's first line is its key prefix, the rest its files.
            (out / f"b{n:05d}").write_text("\n".join([f"uploads/scale/{folder}/".replace("//", "/")]
                                                     + files[i:i + a.size]) + "\n", encoding="utf-8")
            n += 1
    print(len(chosen))


# ───────────────────────────── queries ─────────────────────────────

CLAUSE_SPLIT = re.compile(r"[，。；：、（）()《》〈〉“”\"'！？\s]+")
ARTICLE_MARK = re.compile(r"^第[零〇一二三四五六七八九十百千两]+条(之[一二三四五六七八九十]+)?[\s\u3000]*")
CITATION_LIKE = re.compile(r"第[零〇一二三四五六七八九十百千两0-9]+[条款项章节编]|[《》〈〉]")

# The version of each work in force today, as the works timeline orders them (effective date,
# then version id), and one indexed document of it (Markdown first).
CURRENT_DOCS = """
SELECT DISTINCT ON (w.work_id) w.work_id, w.title, d.doc_id, wv.label
FROM works w
JOIN work_versions wv ON wv.work_id = w.work_id
JOIN version_documents vd ON vd.version_id = wv.version_id
JOIN documents d ON d.doc_id = vd.doc_id AND d.status = 'indexed'
WHERE coalesce(wv.effective_from, wv.promulgated_on) <= current_date
ORDER BY w.work_id, coalesce(wv.effective_from, wv.promulgated_on) DESC, wv.version_id DESC,
         (d.doc_name LIKE '%.md') DESC, d.doc_id
"""


def cmd_queries(a) -> None:
    rng = random.Random(a.seed)
    # Search phrases: random indexed articles (a stable order: md5 of the block id and the seed).
    blocks = sql(a.db, f"""
        SELECT sb.doc_id, sb.text FROM semantic_blocks sb JOIN documents d ON d.doc_id = sb.doc_id
        WHERE d.status = 'indexed' AND sb.block_type = 'article' AND length(sb.text) >= 20
        ORDER BY md5(sb.id::text || '{a.seed}') LIMIT {a.searches * 3}""")
    searches = []
    for b in blocks:
        text = ARTICLE_MARK.sub("", b["text"].strip())
        clauses = [c for c in CLAUSE_SPLIT.split(text) if len(c) >= 6]
        if not clauses:
            continue
        c = rng.choice(clauses)
        n = rng.randint(6, min(12, len(c)))
        at = rng.randint(0, len(c) - n)
        y = rng.randint(1995, 2020)
        searches.append({"query": c[at:at + n], "doc_id": b["doc_id"],
                         "as_of": f"{y}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"})
        if len(searches) == a.searches:
            break
    # Laws in force today, with their articles.
    current = sql(a.db, CURRENT_DOCS)
    doc_ids = ",".join(f"'{c['doc_id']}'" for c in current)
    arts = sql(a.db, f"""
        SELECT doc_id, article_ordinal / 1000 AS n, text FROM semantic_blocks
        WHERE doc_id IN ({doc_ids or "''"}) AND block_type = 'article'
          AND article_ordinal IS NOT NULL AND article_ordinal % 1000 = 0
        ORDER BY doc_id, article_ordinal""") if current else []
    by_doc: dict[str, list[dict]] = collections.defaultdict(list)
    for r in arts:
        by_doc[r["doc_id"]].append(r)
    laws = [c for c in current if len(by_doc[c["doc_id"]]) >= 3]
    if not laws:
        sys.exit("scale_measure: no law in force with articles")
    per_passage = min(20, len(laws))  # 20 laws a passage (fewer only in a library that small)

    def fragment(doc_id: str, start: int, size: int) -> str:
        """`size` characters of the law's text from its article `start` on, with nothing in it
        that reads as a citation (article numbers, title marks)."""
        text = ""
        for r in by_doc[doc_id][start:]:
            text += CITATION_LIKE.sub("", ARTICLE_MARK.sub("", r["text"].strip()))
            if len(text) >= size:
                break
        return text[:size].rstrip("，。；：、") or "有关规定"

    passages = []
    for _ in range(a.others):
        cited = rng.sample(laws, per_passage)
        picks = []
        for law in cited:
            i = rng.randrange(len(by_doc[law["doc_id"]]))
            picks.append((law, i, by_doc[law["doc_id"]][i]["n"]))
        heads = [f"依据《{law['title']}》第{cn(n)}条的规定，" for law, _, n in picks]
        budget = max(10, (2000 - sum(map(len, heads)) - per_passage) // per_passage)
        passage = "".join(h + fragment(law["doc_id"], i, budget) + "。" for h, (law, i, _) in zip(heads, picks))
        passages.append({"passage": passage[:2000], "citations": per_passage})
    resolves, articles = [], []
    for _ in range(a.others):
        law = rng.choice(laws)
        r = rng.choice(by_doc[law["doc_id"]])
        resolves.append({"citation": f"《{law['title']}》第{cn(r['n'])}条"})
        law = rng.choice(laws)
        r = rng.choice(by_doc[law["doc_id"]])
        articles.append({"doc_id": law["doc_id"], "address": f"第{cn(r['n'])}条"})
    json.dump({"seed": a.seed, "searches": searches, "passages": passages, "resolves": resolves,
               "articles": articles}, open(a.out, "w", encoding="utf-8"), ensure_ascii=False)
    print(f"{len(searches)} search phrases, {len(passages)} passages "
          f"(~{sum(len(p['passage']) for p in passages) // max(1, len(passages))} characters), "
          f"{len(resolves)} citations, {len(articles)} articles, from {len(laws)} laws in force")


# ───────────────────────────── measure ─────────────────────────────

class Api:
    """One keep-alive connection, reopened after an error."""

    def __init__(self, url: str):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.conn = None

    def call(self, method: str, path: str, body=None) -> tuple[int, float, dict | None]:
        data = json.dumps(body, ensure_ascii=False).encode() if body is not None else None
        headers = {"content-type": "application/json"} if data else {}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
            try:
                t0 = time.perf_counter()
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                ms = (time.perf_counter() - t0) * 1000
                try:
                    payload = json.loads(raw) if raw else None
                except ValueError:
                    payload = None
                return resp.status, ms, payload
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def requests_for(kind: str, q: dict, n: int):
    """The (method, path, body) of each of `n` requests of `kind`."""
    if kind in SEARCHES:
        for s in q["searches"][:n]:
            body = {"query": s["query"], "top_k": 10, "mode": "keyword" if kind == "keyword" else "hybrid"}
            if kind == "as_of":
                body["as_of"] = s["as_of"]
            if kind == "versions_all":
                body["versions"] = "all"
            yield "POST", "/search", body
    elif kind == "verify":
        for p in q["passages"][:n]:
            yield "POST", "/citations/verify", {"passage": p["passage"]}
    elif kind == "resolve":
        for r in q["resolves"][:n]:
            yield "POST", "/citations/resolve", r
    elif kind == "article":
        for r in q["articles"][:n]:
            yield "GET", f"/documents/{r['doc_id']}/articles/{urllib.parse.quote(r['address'])}", None


def time_kind(api: Api, kind: str, q: dict, n: int) -> dict:
    times, statuses, extra = [], collections.Counter(), collections.Counter()
    if kind == "works_page":
        cursor = None
        for i in range(n + 5):
            path = "/works?limit=50" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
            status, ms, body = api.call("GET", path)
            if i >= 5:
                times.append(ms)
                statuses[status] += 1
                extra["works_seen"] += len((body or {}).get("works", []))
            cursor = (body or {}).get("next_cursor")
            if cursor is None:
                extra["restarts"] += 1
    else:
        reqs = list(requests_for(kind, q, n))
        warm = reqs[:5]
        for method, path, body in warm:
            api.call(method, path, body)
        for method, path, body in reqs:
            status, ms, payload = api.call(method, path, body)
            times.append(ms)
            statuses[status] += 1
            if kind in SEARCHES and status == 200:
                hits = (payload or {}).get("hits") or []
                extra["with_hits"] += bool(hits)
            if kind == "verify" and status == 200:
                extra["found"] += (payload or {}).get("found", 0)
                extra["checked"] += (payload or {}).get("checked", 0)
            if kind == "resolve" and status == 200:
                extra["found"] += ((payload or {}).get("resolved") or {}).get("status") == "found"
            if status >= 300 and len(extra) < 50:
                extra[f"error {status}: {str((payload or {}).get('type') or (payload or {}).get('title') or '')[:60]}"] += 1
    ok = sum(c for s, c in statuses.items() if s < 300)
    return {"n": len(times), "ok": ok, "p50": percentile(times, 0.5), "p99": percentile(times, 0.99),
            "mean": sum(times) / len(times) if times else None, "max": max(times) if times else None,
            "statuses": {str(k): v for k, v in statuses.items()}, "extra": dict(extra)}


def milvus_count(url: str, collection: str) -> int | None:
    """count(*) over Milvus's REST API (v1), read until two reads 2 s apart agree (its default
    consistency is bounded, so a count right after inserts may lag)."""
    body = json.dumps({"collectionName": collection, "filter": 'doc_id != ""',
                       "outputFields": ["count(*)"], "limit": 0}).encode()
    u = urllib.parse.urlsplit(url)
    last = None
    for _ in range(15):
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
        conn.request("POST", "/v1/vector/query", body=body, headers={"content-type": "application/json"})
        out = json.loads(conn.getresponse().read())
        conn.close()
        if out.get("code") != 200:
            return None
        n = int(out["data"][0]["count(*)"])
        if n == last:
            return n
        last = n
        time.sleep(2)
    return last


def rss_mb(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    if "docpipe" not in cmd:
        sys.exit(f"scale_measure: pid {pid} is not the dev runner ({cmd!r})")
    kb = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(VmHWM|VmRSS):\s+(\d+) kB", status, re.M)}
    return {"peak": kb["VmHWM"] / 1024, "now": kb["VmRSS"] / 1024}


COUNTS = """
SELECT (SELECT count(*) FROM documents) AS documents,
       (SELECT count(*) FROM documents WHERE status = 'indexed') AS indexed,
       (SELECT count(*) FROM documents WHERE status = 'failed') AS failed,
       (SELECT count(*) FROM documents WHERE status NOT IN ('indexed', 'failed')) AS other,
       (SELECT count(*) FROM works) AS works,
       (SELECT count(*) FROM work_versions) AS versions,
       (SELECT count(*) FROM version_documents) AS version_documents,
       (SELECT count(*) FROM semantic_blocks sb JOIN documents d ON d.doc_id = sb.doc_id
         WHERE d.status = 'indexed' AND sb.block_type = 'article') AS articles,
       (SELECT coalesce(sum(chunk_count), 0) FROM documents WHERE status = 'indexed') AS chunks,
       (SELECT count(*) FROM keyword_postings) AS postings,
       (SELECT count(*) FROM article_references) AS references,
       pg_database_size(current_database()) AS postgres_bytes
"""

# Where a document's time went, over every run so far: each stage's work (the run's metadata) and
# its latency (timestamps: the queue's wait included), in seconds.
STAGES = """
WITH r AS (
  SELECT extract(epoch FROM parsed_at - stored_at) AS parse_s,
         (metadata->'parse'->>'duration_ms')::float8 / 1000 AS parse_work_s,
         extract(epoch FROM indexed_at - parsed_at) AS index_s,
         (metadata->'index'->>'duration_ms')::float8 / 1000 AS index_work_s
  FROM document_processing_runs WHERE run_status = 'succeeded')
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY parse_work_s) AS parse_work_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY parse_work_s) AS parse_work_p95,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY parse_s) AS parse_latency_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY parse_s) AS parse_latency_p95,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY index_work_s) AS index_work_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY index_work_s) AS index_work_p95,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY index_s) AS index_latency_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY index_s) AS index_latency_p95
FROM r
"""


def cmd_measure(a) -> None:
    q = json.load(open(a.queries, encoding="utf-8"))
    api = Api(a.api)
    point: dict = {"label": a.label, "laws": a.laws, "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    latency = {}
    for kind in KINDS:
        n = a.searches if kind in SEARCHES else a.others
        t0 = time.time()
        latency[kind] = time_kind(api, kind, q, n)
        r = latency[kind]
        print(f"[scale] {a.label}: {kind:<12} n={r['n']:<4} p50 {r['p50']:8.1f} ms  p99 {r['p99']:8.1f} ms"
              f"  ({r['ok']} ok, {time.time() - t0:.0f} s) {r['extra'] or ''}", file=sys.stderr, flush=True)
    point["latency"] = latency
    point["rss_mb"] = rss_mb(a.pid)
    point.update(sql_one(a.db, COUNTS))
    point["stages"] = sql_one(a.db, STAGES)
    point["tables"] = sql(a.db, """
        SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes, c.reltuples::bigint AS rows
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = 'r' AND n.nspname = 'public' ORDER BY 2 DESC LIMIT 6""")
    point["milvus_entities"] = milvus_count(a.milvus, a.collection)
    # Doubled: indexed documents sharing a content the manifest holds fewer times.
    manifest = [json.loads(line) for line in open(a.manifest, encoding="utf-8")]
    planned = collections.Counter(m["sha256"] for m in manifest if m["law"] < a.laws)
    point["keys_planned"] = sum(planned.values())
    shared = sql(a.db, """SELECT content_sha256 AS sha, count(*) AS n FROM documents
                          WHERE status = 'indexed' GROUP BY 1 HAVING count(*) > 1""")
    point["doubled_contents"] = sum(r["n"] - planned.get(r["sha"], 1) for r in shared
                                    if r["n"] > planned.get(r["sha"], 1))
    point["versions_planned"] = len({(m["work"], m["version"]) for m in manifest
                                     if m["law"] < a.laws and m["work"] is not None}) or None
    point["works_planned"] = len({m["work"] for m in manifest
                                  if m["law"] < a.laws and m["work"] is not None}) or None
    # Grouping: each planned work is one work; a version's renditions are one version.
    if point["works_planned"]:
        titles = {r["title"]: r for r in sql(a.db, """
            SELECT w.title, count(DISTINCT wv.version_id) AS versions, count(vd.doc_id) AS documents
            FROM works w LEFT JOIN work_versions wv ON wv.work_id = w.work_id
            LEFT JOIN version_documents vd ON vd.version_id = wv.version_id GROUP BY w.title""")}
        want = collections.defaultdict(set)
        for m in manifest:
            if m["law"] < a.laws:
                want[m["work"]].add(m["version"])
        point["works_missing"] = sorted(t for t in want if t not in titles)[:20]
        point["works_unplanned"] = sorted(t for t in titles if t not in want)[:20]
        point["works_wrong_versions"] = sorted(
            f"{t}: {titles[t]['versions']} versions, {len(v)} planned"
            for t, v in want.items() if t in titles and titles[t]["versions"] != len(v))[:20]
    point["failures"] = sql(a.db, """
        SELECT failure_stage AS stage, left(error_message, 160) AS reason, count(*) AS n
        FROM document_processing_runs WHERE run_status = 'failed' GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 8""")
    json.dump(point, open(a.out, "w", encoding="utf-8"), ensure_ascii=False, indent=1)


# ───────────────────────────── cpu ─────────────────────────────

CLASSES = [("docpipe lambda parse", "parse"), ("docpipe lambda index", "index"),
           ("docpipe lambda store", "store"), ("docpipe lambda", "dlq"), ("docpipe dev", "dev runner + API"),
           ("docpipe put", "uploaders"), ("postgres", "postgres"), ("pgbouncer", "pgbouncer"),
           ("milvus", "milvus"), ("etcd", "milvus"), ("minio", "milvus"), ("moto_server", "moto")]


def cpu_classes(runner_pid: int | None) -> dict:
    """CPU seconds so far of the scale run's dev runner and its function processes (children of
    runner_pid) and of the stack's services, by what each is; plus the machine's busy and total
    seconds (/proc/stat). What the machine spent beyond these (other work, processes that came
    and went) is the difference of two snapshots' busy seconds and theirs."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.Counter()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ppid, secs = int(fields[1]), (int(fields[11]) + int(fields[12])) / tick
        name = next((cls for pat, cls in CLASSES if pat in cmd), None)
        if name in ("parse", "index", "store", "dlq", "dev runner + API") and runner_pid not in (int(d), ppid):
            name = None  # another dev runner (the main one, a test's)
        if name:
            out[name] += secs
    cpu = Path("/proc/stat").read_text().split("\n")[0].split()[1:]
    vals = list(map(int, cpu))
    out["machine busy"] = (sum(vals) - vals[3] - vals[4]) / tick
    out["machine total"] = sum(vals) / tick
    return dict(out)


def cmd_cpu(a) -> None:
    json.dump(cpu_classes(a.pid), open(a.out, "w"))


# ───────────────────────────── report ─────────────────────────────

def cmd_report(a) -> None:
    small = json.load(open(a.small, encoding="utf-8"))
    large = json.load(open(a.large, encoding="utf-8"))
    run = json.load(open(a.run, encoding="utf-8"))
    f = lambda v, d=1: "n/a" if v is None else f"{v:,.{d}f}"
    ratio = lambda s, l: (l / s) if s and l is not None else None
    print(f"### Scale: {small['laws']} laws, then {large['laws']} ({run['mode']}), `docpipe dev`, embedder `hash`\n")
    if run.get("laws_planned", large["laws"]) > large["laws"]:
        print(f"The run's --budget stopped the upload at {large['laws']:,} of the {run['laws_planned']:,} laws "
              "generated: the second point is measured at the laws uploaded.\n")
    print(f"{run['machine']}; {run['started']} – {run['finished']}, commit {run['commit']} "
          f"(the debug dev runner built {run.get('binary', '?')}).\n")
    if run.get("resumed"):
        print(f"In two parts: the kept run stopped by its budget, resumed {run['resumed']} with the same "
              "build, library, database and collection (`--resume`); the run time is the parts' sum.\n")
    print("| route | p50 small | p50 large | ratio (≤ 1.5×) | p99 small | p99 large | ratio (≤ 2×) | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    failed_limits = []
    for k in KINDS:
        s, l = small["latency"][k], large["latency"][k]
        r50, r99 = ratio(s["p50"], l["p50"]), ratio(s["p99"], l["p99"])
        ok50 = r50 is not None and r50 <= P50_LIMIT
        ok99 = r99 is not None and r99 <= P99_LIMIT
        if not ok50:
            failed_limits.append(f"{k} p50")
        if not ok99:
            failed_limits.append(f"{k} p99")
        errors = (s["n"] - s["ok"]) + (l["n"] - l["ok"])
        print(f"| {k} | {f(s['p50'])} ms | {f(l['p50'])} ms | {f(r50, 2)}× {'pass' if ok50 else '**fail**'} "
              f"| {f(s['p99'])} ms | {f(l['p99'])} ms | {f(r99, 2)}× {'pass' if ok99 else '**fail**'} | {errors} |")
    print()
    print("| measure | small | large |")
    print("| --- | ---: | ---: |")
    rows = [("laws (works planned / in PostgreSQL)", lambda p: f"{p['laws']:,} / {p['works']:,}"),
            ("documents (indexed, failed, other)", lambda p: f"{p['documents']:,} ({p['indexed']:,}, {p['failed']:,}, {p['other']:,})"),
            ("versions (planned / work_versions)", lambda p: f"{p['versions_planned'] or 0:,} / {p['versions']:,}"),
            ("articles (indexed article blocks)", lambda p: f"{p['articles']:,}"),
            ("chunks (PostgreSQL) / Milvus entities", lambda p: f"{p['chunks']:,} / {p['milvus_entities'] if p['milvus_entities'] is not None else 'n/a':,}"),
            ("keyword postings rows", lambda p: f"{p['postings']:,}"),
            ("article references rows", lambda p: f"{p['references']:,}"),
            ("PostgreSQL bytes (pg_database_size)", lambda p: f"{p['postgres_bytes']:,} ({p['postgres_bytes'] / 2**20:,.0f} MiB)"),
            ("dev runner (API) peak RSS", lambda p: f"{p['rss_mb']['peak']:,.0f} MB (now {p['rss_mb']['now']:,.0f})"),
            ("search queries with a hit (keyword / hybrid / as_of / all)",
             lambda p: " / ".join(str(p["latency"][k]["extra"].get("with_hits", 0)) for k in ["keyword", "hybrid", "as_of", "versions_all"])),
            ("verify: citations found / checked", lambda p: f"{p['latency']['verify']['extra'].get('found', 0)} / {p['latency']['verify']['extra'].get('checked', 0)}"),
            ("resolve: found", lambda p: f"{p['latency']['resolve']['extra'].get('found', 0)} of {p['latency']['resolve']['n']}"),
            ("parse work p50 / p95; parse latency (queue wait included) p50 / p95, all runs so far",
             lambda p: stage(p, "parse")),
            ("index work p50 / p95; index latency (queue wait included) p50 / p95, all runs so far",
             lambda p: stage(p, "index"))]

    def stage(p, name):
        st = p.get("stages") or {}
        ms = lambda k: "n/a" if st.get(k) is None else f"{st[k] * 1000:,.0f}"
        return (f"{ms(name + '_work_p50')} / {ms(name + '_work_p95')} ms; "
                f"{ms(name + '_latency_p50')} / {ms(name + '_latency_p95')} ms")
    for name, fn in rows:
        print(f"| {name} | {fn(small)} | {fn(large)} |")
    print()
    print("| largest tables (with their indexes and TOAST), large | bytes | rows (estimate) |")
    print("| --- | ---: | ---: |")
    for t in large.get("tables", []):
        print(f"| {t['name']} | {t['bytes'] / 2**20:,.0f} MiB | {t['rows']:,} |")
    print()
    print("| run | value |")
    print("| --- | --- |")
    for phase in run["phases"]:
        print(f"| ingest {phase['name']}: documents / seconds / documents per minute | "
              f"{phase['documents']:,} / {phase['seconds']:,.0f} s / {phase['per_min']:,.0f} |")
    print(f"| **ingest, documents per minute** (both phases, measuring excluded) | **{run['ingest_docs_per_min']:,.0f}** |")
    print(f"| PostgreSQL connections, max: backends / client backends / PgBouncer server (1 s samples: {run['samples']}) "
          f"| {run['max_pg_backends']} / {run['max_pg_clients']} / {run['max_pgbouncer_server']} (waiting clients max {run['max_waiting']}) |")
    print(f"| bound: {run['pools']} pools × DOCPIPE_DB_POOL_SIZE {run['pool_size']} + 1 monitor, at most PgBouncer's {run['pgbouncer_pool']} "
          f"| {run['bound']}: {'within' if run['within_bound'] else '**exceeded**'} |")
    print(f"| run time (generate, ingest, measure twice) | {run['wall_s'] / 60:,.1f} min |")
    if all(ph.get("cpu") for ph in run["phases"]):
        # Where the machine's cores went while each phase ingested: CPU seconds / wall seconds.
        names = sorted({k for ph in run["phases"] for k in ph["cpu"]} - {"machine busy", "machine total", "other"},
                       key=lambda k: -run["phases"][-1]["cpu"].get(k, 0)) + ["other"]
        print(f"\nCPU while ingesting, in cores ({run['cores']} on this machine): CPU seconds of each kind of "
              "process over the phase's wall seconds (`other`: the rest of the machine's busy time: other work, the uploaders, the sampler)\n")
        print("| process | " + " | ".join(ph["name"] for ph in run["phases"]) + " |")
        print("| --- |" + " ---: |" * len(run["phases"]))
        for k in ["machine busy"] + names:
            print(f"| {k} | " + " | ".join(f"{ph['cpu'].get(k, 0) / ph['seconds']:.2f}" for ph in run["phases"]) + " |")
    problems = list(run["problems"])
    for label, p in (("small", small), ("large", large)):
        for key in ("works_missing", "works_unplanned", "works_wrong_versions"):
            if p.get(key):
                problems.append(f"{label}: {key.replace('_', ' ')}: {'; '.join(p[key][:5])}")
        if p["failed"]:
            problems.append(f"{label}: {p['failed']} documents failed: " + "; ".join(
                f"{r['stage']}: {r['reason']} × {r['n']}" for r in p["failures"][:3]))
    if failed_limits:
        print(f"\nOver the issue's limits: {', '.join(failed_limits)}.")
    if problems:
        print("\nProblems:\n")
        for pr in problems:
            print(f"- {pr}")
    print(f"\n{'OK' if run['ok'] else 'NOT OK'}: {run['verdict']}\n")
    pair = lambda key: {k: [round(small["latency"][k][key], 1) if small["latency"][k][key] is not None else None,
                            round(large["latency"][k][key], 1) if large["latency"][k][key] is not None else None]
                        for k in KINDS}
    print(json.dumps({
        "laws_small": small["laws"], "laws": large["laws"], "documents": large["documents"],
        "indexed": large["indexed"], "failed": large["failed"], "versions": large["versions"],
        "articles": large["articles"], "ingest_docs_per_min": round(run["ingest_docs_per_min"], 1),
        "p50_ms": pair("p50"), "p99_ms": pair("p99"),
        "api_peak_rss_mb": [round(small["rss_mb"]["peak"], 1), round(large["rss_mb"]["peak"], 1)],
        "postgres_bytes": large["postgres_bytes"], "milvus_entities": large["milvus_entities"],
    }, ensure_ascii=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("batches")
    b.add_argument("--manifest", required=True)
    b.add_argument("--from", dest="start", type=int, required=True)
    b.add_argument("--to", dest="stop", type=int, required=True)
    b.add_argument("--size", type=int, default=40)
    b.add_argument("--out", required=True)
    q = sub.add_parser("queries")
    q.add_argument("--db", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--seed", type=int, default=41)
    q.add_argument("--searches", type=int, default=200)
    q.add_argument("--others", type=int, default=100)
    m = sub.add_parser("measure")
    for name in ("--label", "--db", "--api", "--milvus", "--collection", "--queries", "--manifest", "--out"):
        m.add_argument(name, required=True)
    m.add_argument("--pid", type=int, required=True)
    m.add_argument("--laws", type=int, required=True)
    m.add_argument("--searches", type=int, default=200)
    m.add_argument("--others", type=int, default=100)
    c = sub.add_parser("cpu")
    c.add_argument("--pid", type=int, required=True)
    c.add_argument("--out", required=True)
    r = sub.add_parser("report")
    for name in ("--small", "--large", "--run"):
        r.add_argument(name, required=True)
    a = ap.parse_args()
    {"batches": cmd_batches, "queries": cmd_queries, "measure": cmd_measure, "cpu": cmd_cpu,
     "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
