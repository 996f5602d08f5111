#!/usr/bin/env bash
# The benchmark table (`make bench`): every row measured side by side in this run, each comparison a
# ratio against its named baseline, printed as Markdown (and kept in .local/bench/latest.md).
#
#   scripts/bench.sh                      # needs the local stack: make up
#   BENCH_LOAD_N=0 scripts/bench.sh       # reuse the last scripts/load.sh figure instead of a run
#   BENCH_LOAD_N=500 scripts/bench.sh     # a bigger end-to-end run (default 200 documents)
#
# Rows and how they are measured (BENCHMARKS.md says more):
#   parse + chunk        scripts/bench-parse.sh: docpipe-parse (release) against pypdf + langchain
#   snapshot writes      UNNEST (db::snapshot::replace) against one execute_typed per row, one
#                        transaction each, through PgBouncer, on a database of its own
#   embed + index        index_job on parsed laws (hash, e5-small) against MilvusIndex::insert of as
#                        many precomputed vectors
#   search               docpipe::search::search (authority check included) against a raw Milvus
#                        search with the query vector computed beforehand
#   end to end           scripts/load.sh: documents per minute through the local pipeline
#   init, binary size    each function binary (release, stripped) started against a stand-in
#                        runtime API: spawn to its first GET .../invocation/next, median of 5
#   peak RSS             store, parse and index of the corpus's largest supported file, each stage
#                        in a process of its own, VmHWM
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
T_START="$(date +%s)"
log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }

eval "$(bash scripts/stack.sh env)"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/../shared/corpus}"
export DOCPIPE_CORPUS="$CORPUS"
OUT="$ROOT/.local/bench"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"
LOAD_N="${BENCH_LOAD_N:-200}"
INIT_STARTS="${BENCH_INIT_STARTS:-5}"
QUERIES="${BENCH_QUERIES:-200}"
CHUNKS="${BENCH_CHUNKS:-400}"

pg_isready -q -d "$DATABASE_DIRECT_URL" || die "the local stack is not up: make up"

busy() { ps -eo comm= | grep -cE '^(rustc|cargo|cc1|cc1plus|ld|clippy-driver|python3?)$' || true; }
{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "nproc=$(nproc)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "mem_total_g=$(free -g | awk '/^Mem:/ { print $2 }')"
  echo "mem_available_g=$(free -g | awk '/^Mem:/ { print $7 }')"
  echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "busy_start=$(busy)"
} >"$OUT/machine.env"

# 1. Parse + chunk against the Python baseline (its own script, its own table).
log "parse + chunk: scripts/bench-parse.sh"
bash scripts/bench-parse.sh >"$OUT/parse.md"

# 2. Builds: the functions as they ship (release, stripped, no e5), and this benchmark with e5 when
#    its engine has been fetched.
log "building the function binaries (release)"
cargo build --release -q -p docpipe-store-fn -p docpipe-parse-fn -p docpipe-index-fn \
  -p docpipe-dlq-fn -p docpipe-sweeper-fn -p docpipe-api-fn
FEATURES=() EMBEDDERS=(hash)
if [[ -f "${DOCPIPE_E5_SRC:-$ROOT/.local/e5/src}/e5.c" && -n "${DOCPIPE_E5_MODEL:-}" ]]; then
  FEATURES=(--features e5) EMBEDDERS=(hash e5-small)
else
  log "e5 engine not fetched: hash only (make up fetches it)"
fi
# BENCH_PROFILE=debug builds the benchmark driver without optimisation (minutes instead of a
# release link on a busy machine); the e5 engine is compiled -O3 either way, and the figures say which.
PROFILE="${BENCH_PROFILE:-release}"
log "building bench_pipeline ($PROFILE${FEATURES:+, e5})"
if [[ "$PROFILE" == release ]]; then
  cargo build --release -q -p docpipe-tests --example bench_pipeline "${FEATURES[@]}"
else
  cargo build -q -p docpipe-tests --example bench_pipeline "${FEATURES[@]}"
fi
BENCH="$CARGO_TARGET_DIR/$PROFILE/examples/bench_pipeline"
echo "bench_profile=$PROFILE" >>"$OUT/machine.env"

# 3. Snapshot writes, index, search.
log "snapshot writes: UNNEST vs row by row"
"$BENCH" snapshot --nodes 5000 --blocks 5000 --repeat 5 >>"$RESULTS"
for e in "${EMBEDDERS[@]}"; do
  log "embed + index and search: $e ($CHUNKS chunks, $QUERIES queries)"
  "$BENCH" index-search --embedder "$e" --chunks "$CHUNKS" --queries "$QUERIES" >>"$RESULTS"
done

# 4. Init time and size of every function. In AWS the index and API functions embed with Bedrock:
#    that is the configuration they start with here (no call is made during init).
log "function init: $INIT_STARTS starts each"
DOCPIPE_EMBEDDER=bedrock RUST_LOG=warn "$BENCH" init --bin-dir "$CARGO_TARGET_DIR/release" \
  --starts "$INIT_STARTS" store parse index dlq sweeper api >>"$RESULTS"

# 5. Peak RSS per stage on the corpus's largest supported file.
LARGEST="$(find "$CORPUS" -path "$CORPUS/malformed" -prune -o -type f \
  \( -iname '*.pdf' -o -iname '*.docx' -o -iname '*.html' -o -iname '*.htm' -o -iname '*.md' -o -iname '*.txt' \) \
  -printf '%s\t%p\n' | sort -n | tail -1 | cut -f2)"
log "peak RSS per stage: $LARGEST"
"$BENCH" rss "$LARGEST" --embedder hash >>"$RESULTS"

# 6. End to end through the local pipeline.
if [[ "$LOAD_N" -gt 0 ]]; then
  log "end to end: scripts/load.sh $LOAD_N"
  bash scripts/load.sh "$LOAD_N" --json "$OUT/load-$LOAD_N.json" >"$OUT/load.md"
  cp "$OUT/load-$LOAD_N.json" "$OUT/load-last.json"
fi
[[ -f "$OUT/load-last.json" ]] || log "no load figure: run scripts/load.sh"

{
  echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "busy_end=$(busy)"
  echo "elapsed_s=$(($(date +%s) - T_START))"
} >>"$OUT/machine.env"

python3 - "$OUT" <<'PYEOF' | tee "$OUT/latest.md"
import json, os, sys
out = sys.argv[1]
machine = dict(l.rstrip("\n").split("=", 1) for l in open(f"{out}/machine.env") if "=" in l)
results = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
by = lambda kind: [r for r in results if r.get("bench") == kind]

def parse_rows():
    rows = {}
    for line in open(f"{out}/parse.md"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0] in ("pdf", "md"):
            rows[(cells[0], cells[4].split()[0])] = cells
    return rows

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
p = parse_rows()
labels = {"pdf": "parse + chunk, PDF", "md": "parse + chunk, Markdown laws"}
for s in ("pdf", "md"):
    r, b = p.get((s, "rust")), p.get((s, "python"))
    if r and b:
        print(f"| {labels[s]} ({r[1]} files, {r[3]} MB) | {r[6]} MB/s | pypdf + langchain: {b[6]} MB/s | "
              f"**{float(r[6]) / float(b[6]):.1f}×** |")
for r in by("snapshot"):
    print(f"| snapshot writes, {fmt(r['nodes'])} nodes + {fmt(r['blocks'])} blocks via PgBouncer (median of {r['repeat']}) | "
          f"UNNEST: {fmt(r['unnest_rows_per_s'])} rows/s | row-by-row INSERT: {fmt(r['row_by_row_rows_per_s'])} rows/s | "
          f"**{r['unnest_rows_per_s'] / r['row_by_row_rows_per_s']:.1f}×** |")
for r in by("index"):
    print(f"| embed + index, `{r['embedder']}` ({r['chunks']} chunks, {r['documents']} laws, index_job) | "
          f"{fmt(r['index_chunks_per_s'], 1)} chunks/s | raw `MilvusIndex::insert`: {fmt(r['raw_insert_chunks_per_s'])} chunks/s | "
          f"**{r['index_chunks_per_s'] / r['raw_insert_chunks_per_s']:.2f}×** of the ceiling |")
for r in by("search"):
    print(f"| search p50 / p99, `{r['embedder']}` ({r['collection_chunks']} chunks, {r['queries']} queries, top {r['top_k']}, "
          f"authority check included) | {r['search_p50_ms']:.1f} / {r['search_p99_ms']:.1f} ms | raw Milvus search: "
          f"{r['raw_milvus_p50_ms']:.1f} / {r['raw_milvus_p99_ms']:.1f} ms | **{r['search_p50_ms'] / r['raw_milvus_p50_ms']:.1f}×** at p50 |")
load = None
if os.path.exists(f"{out}/load-last.json"):
    load = json.load(open(f"{out}/load-last.json"))
    ok = "all indexed" if load["indexed"] == load["n"] else f"{load['indexed']} indexed, {load['failed']} failed"
    print(f"| end to end, scripts/load.sh ({load['n']} documents, {load['workers']} workers per stage, `hash`, debug dev runner) | "
          f"**{fmt(load['docs_per_min'])} documents/min** ({ok}, {load['lost']} lost, {load['stuck']} stuck) | "
          f"— | max {load['max_pg_backends']} PostgreSQL connections, bound {load['bound']} |")

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
PYEOF
