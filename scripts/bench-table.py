"""Renders the benchmark table from what scripts/bench.sh left in its output folder (machine.env,
results.jsonl, parse.json, load-last.json), as Markdown on stdout.

usage: python3 scripts/bench-table.py .local/bench
"""
import json, os, sys
out = sys.argv[1]
machine = dict(l.rstrip("\n").split("=", 1) for l in open(f"{out}/machine.env") if "=" in l)
results = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
by = lambda kind: [r for r in results if r.get("bench") == kind]

def fmt(x, digits=0):
    return f"{x:,.{digits}f}"

print(f"## Benchmark table ({machine['date']})\n")
print(f"Machine: {machine['nproc']} cores ({machine['cpu']}), {machine['mem_total_g']} GiB RAM "
      f"({machine['mem_available_g']} GiB available); load average {machine['loadavg_start']} at the start, "
      f"{machine['loadavg_end']} at the end; {machine['busy_start']} compiler/python processes of other "
      f"work running at the start, {machine['busy_end']} at the end. `make bench` took {int(machine['elapsed_s']) // 60} min "
      f"{int(machine['elapsed_s']) % 60} s.\n")
if machine.get("bench_profile", "release") != "release":
    print(f"The driver of the snapshot, index, search and RSS rows was a **{machine['bench_profile']}** build "
          "(BENCH_PROFILE); the parse row and the function binaries are release builds.\n")
print("| measure | docpipe | baseline | ratio |")
print("| --- | ---: | ---: | ---: |")
parse = json.load(open(f"{out}/parse.json"))
engines = {(r["engine"], r["set"]): r for r in parse["best"]}
for c in parse["ratios"]:
    r, b = engines[(c["engine"], c["set"])], engines[(c["baseline"], c["set"])]
    what = "parse + chunk, PDF" if c["set"] == "pdf" else "parse + chunk, Markdown laws"
    if c["engine"].startswith("pdfium"):
        what = "pdfium text layer alone (the floor under any pdfium parser)"
    if c["engine"].startswith("pulldown"):
        what = "pulldown-cmark events alone (the floor under docpipe's Markdown parser)"
    print(f"| {what} ({r['files']} files, {r['bytes'] / 1e6:.2f} MB) | {r['mb_per_s']:.2f} MB/s, peak RSS {r['peak_rss_mb']:.1f} MB | "
          f"{b['engine'].removeprefix('python ')}: {b['mb_per_s']:.2f} MB/s, {b['peak_rss_mb']:.1f} MB | "
          f"**{c['throughput_ratio']:.1f}×** (memory {c['memory_ratio']:.2f}) |")
if "bounded" in parse:
    b = parse["bounded"]
    print(f"| parse + chunk of 30 MB of one run of hex digits without a break (bounded work) | {b['run30_s']:.2f} s | "
          f"30 MB of the laws as text: {b['laws30_s']:.2f} s | **{b['ratio']:.2f}×** |")
for r in by("snapshot"):
    print(f"| snapshot writes, {fmt(r['nodes'])} nodes + {fmt(r['blocks'])} blocks via PgBouncer (median of {r['repeat']}) | "
          f"UNNEST: {fmt(r['unnest_rows_per_s'])} rows/s | row-by-row INSERT: {fmt(r['row_by_row_rows_per_s'])} rows/s | "
          f"**{r['unnest_rows_per_s'] / r['row_by_row_rows_per_s']:.1f}×** |")
for r in by("index"):
    split = ""
    if "embed_s" in r:
        split = (f" ({r['index_s']:.1f} s: embedding {r['embed_s']:.1f} s, inserts {r['insert_s']:.1f} s, "
                 f"clean-up and read-back {r['checks_s']:.1f} s, the rest {max(r['index_s'] - r['embed_s'] - r['insert_s'] - r['checks_s'], 0):.1f} s)")
    print(f"| embed + index, `{r['embedder']}` ({r['chunks']} chunks, {r['documents']} laws, index_job) | "
          f"{fmt(r['index_chunks_per_s'], 1)} chunks/s{split} | raw `MilvusIndex::insert`: {fmt(r['raw_insert_chunks_per_s'])} chunks/s | "
          f"**{r['index_chunks_per_s'] / r['raw_insert_chunks_per_s']:.3f}×** of the ceiling |")
for r in by("search"):
    # Where a hybrid search's time goes: the dense side's steps each on their own, then the modes.
    parts = ""
    if "authority_check_p50_ms" in r:
        parts = (f" (p50 of each part alone: query embedding {r['embed_query_p50_ms']:.1f}, Milvus "
                 f"{r['raw_milvus_p50_ms']:.1f}, PostgreSQL authority check {r['authority_check_p50_ms']:.1f}; "
                 f"dense mode {r['dense_search_p50_ms']:.1f}, keyword mode {r['keyword_search_p50_ms']:.1f})")
    print(f"| search p50 / p99, `{r['embedder']}` ({r['collection_chunks']} chunks, {r['queries']} queries, top {r['top_k']}, "
          f"hybrid, authority check included) | {r['search_p50_ms']:.1f} / {r['search_p99_ms']:.1f} ms{parts} | raw Milvus search: "
          f"{r['raw_milvus_p50_ms']:.1f} / {r['raw_milvus_p99_ms']:.1f} ms | **{r['search_p50_ms'] / r['raw_milvus_p50_ms']:.1f}×** at p50 |")
for r in by("versions_search"):
    print(f"| search as of a date, {r['mode']} ({r['works']} laws in {r['versions']} versions, every law in two or more; "
          f"{r['queries']} queries, hash embedder), p50 / p99 | `as_of` {r['as_of']}: {r['as_of_p50_ms']:.1f} / {r['as_of_p99_ms']:.1f} ms "
          f"(`versions: all`, nothing left out: {r['all_versions_p50_ms']:.1f} ms) | no `as_of` (today, in force): "
          f"{r['no_as_of_p50_ms']:.1f} / {r['no_as_of_p99_ms']:.1f} ms | **{r['as_of_over_no_as_of']:.2f}×** at p50 "
          f"({r['as_of_over_all_versions']:.2f}× `all`) |")
for r in by("verify"):
    print(f"| citations verified: a {r['passage_chars']:,}-character passage with {r['citations']} citations of 8 "
          f"indexed laws, {r['rounds']} rounds interleaved | verify p50 / p99: {r['verify_p50_ms']:.1f} / "
          f"{r['verify_p99_ms']:.1f} ms | keyword search of the same passage: {r['keyword_search_p50_ms']:.1f} ms | "
          f"**{r['verify_over_keyword_search']:.2f}×** at p50 |")
for r in by("keyword-scale"):
    b, s = r["base"], r["scaled"]
    print(f"| keyword query at {r['blocks']:,} articles ({r['postings']:,} postings, {r['postings_size']}; the corpus's "
          f"{r['base_blocks']:,} repeated), p50 / p99 over {r['queries']} questions, each term's postings bounded at "
          f"{r['postings_per_term']:,} | {s['bounded']['p50_ms']:.1f} / {s['bounded']['p99_ms']:.1f} ms "
          f"(unbounded {s['unbounded']['p50_ms']:.1f} / {s['unbounded']['p99_ms']:.1f} ms; same top 10: "
          f"{s['top10_overlap_bounded_vs_unbounded']:.1%}) | the corpus itself: {b['bounded']['p50_ms']:.1f} / "
          f"{b['bounded']['p99_ms']:.1f} ms | **{s['bounded']['p50_ms'] / b['bounded']['p50_ms']:.1f}×** the time at "
          f"{r['blocks'] / r['base_blocks']:.0f}× the articles |")
    if "recall@10" in b["bounded"]:
        print(f"| keyword recall@10 on corpus/questions ({r['queries']} questions, {r['base_blocks']:,} articles), "
              f"each term's postings bounded at {r['postings_per_term']:,} and at most {r['max_query_terms']} terms | "
              f"{b['bounded']['recall@10']:.4f} | unbounded: {b['unbounded']['recall@10']:.4f} | "
              f"**{b['bounded']['recall@10'] - b['unbounded']['recall@10']:+.4f}** |")
load = None
if os.path.exists(f"{out}/load-last.json"):
    load = json.load(open(f"{out}/load-last.json"))
    ok = "all indexed" if load["indexed"] == load["n"] else f"{load['indexed']} indexed, {load['failed']} failed"
    print(f"| end to end, scripts/load.sh ({load['n']} documents, workers per stage: {load['workers']}, `{load.get('embedder', 'hash')}`, debug dev runner) | "
          f"**{fmt(load['docs_per_min'])} documents/min** ({ok}, {load['lost']} lost, {load['stuck']} stuck) | "
          f"— | max {load['max_pg_backends']} PostgreSQL connections, bound {load['bound']} |")

if os.path.exists(f"{out}/load-e5.json"):
    e2e = json.load(open(f"{out}/load-e5.json"))
    raw = next((r for r in by("index") if r["embedder"] == "e5-small" and r.get("embed_s")), None)
    if raw and e2e.get("chunks_per_s"):
        raw_cps = raw["chunks"] / raw["embed_s"]
        lat = e2e["latency_s"]
        print(f"| end to end with `e5-small` ({e2e['n']} laws, {e2e['chunks']:,} chunks, first upload → last indexed, debug dev runner, "
              f"{e2e['indexed']} indexed, {e2e['failed']} failed, {e2e['stuck']} stuck) | **{e2e['chunks_per_s']:.1f} chunks/s** | "
              f"e5-small's own `embed_passages` (release, same run): {raw_cps:.1f} chunks/s | **{e2e['chunks_per_s'] / raw_cps:.2f}×**: "
              f"the rest is the debug build's embedder, parse (p50 {lat['parse_work_p50'] * 1000:.0f} ms a law), "
              f"inserts and commits (index work p50 {lat['index_work_p50']:.1f} s a law, embedding included) |")

print("\n| function | init, median of starts (ms) | starts | stripped binary |")
print("| --- | ---: | ---: | ---: |")
for r in by("init"):
    med = "failed: " + str(r["error"]) if r["init_median_ms"] is None else f"{r['init_median_ms']:.0f}"
    print(f"| {r['function']} | {med} | {r['starts']} | {r['binary_bytes'] / 1e6:.1f} MB |")

rss = by("rss")
if rss:
    f = rss[0]
    idle = next((r for r in rss if r["stage"] == "idle"), None)
    print(f"\nPeak RSS per stage (VmHWM, one process per stage) on the largest supported file of the corpus, "
          f"`{os.path.relpath(f['file'], os.path.dirname(os.path.dirname(f['file'])))}` ({f['file_bytes'] / 1e6:.2f} MB):\n")
    print("| stage | peak RSS | time | vs. the same process with no stage run |")
    print("| --- | ---: | ---: | ---: |")
    for r in rss:
        if r.get("error"):
            print(f"| {r['stage']} | failed: {r['error']} | | |")
            continue
        detail = r.get("detail")
        extra = ""
        if isinstance(detail, dict):
            extra = " (" + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in detail.items()) + ")"
        emb = f", `{r['embedder']}`" if r.get("embedder") else ""
        ratio = f"{r['vm_hwm_kb'] / idle['vm_hwm_kb']:.2f}×" if idle and r is not idle else "baseline"
        print(f"| {r['stage']}{emb}{extra} | {r['vm_hwm_kb'] / 1024:.1f} MB | {r['seconds']:.2f} s | {ratio} |")
