#!/usr/bin/env bash
# The benchmark table (`make bench`): every row measured side by side in this run, each comparison a
# ratio against its named baseline, printed as Markdown (and kept in .local/bench/latest.md).
#
#   scripts/bench.sh                      # needs the local stack: make up
#   BENCH_LOAD_N=0 scripts/bench.sh       # reuse the last scripts/load.sh figure instead of a run
#   BENCH_LOAD_N=500 scripts/bench.sh     # a bigger end-to-end run (default 200 documents)
#
# Rows and how they are measured (BENCHMARKS.md says more):
#   parse + chunk        scripts/bench-parse.sh: docpipe-parse (release) against pypdf, pdfminer.six
#                        and langchain's Markdown splitters, plus the pdfium floor
#   sensitive-data scan  bench_scan (docpipe-parse, release): precision/recall per kind on
#                        tests/fixtures/sensitive, and ms per MB against parse on the same documents
#   OCR                  scripts/bench-ocr.sh: docpipe-parse (release) on corpus/scanned against
#                        rapidocr-onnxruntime on the same pages: pages/s, peak RSS, char accuracy
#   snapshot writes      UNNEST (db::snapshot::replace) against one execute_typed per row, one
#                        transaction each, through PgBouncer, on a database of its own
#   embed + index        index_job on parsed laws (hash, e5-small) against MilvusIndex::insert of as
#                        many precomputed vectors
#   search               docpipe_search::search (authority check included) against a raw Milvus
#                        search with the query vector computed beforehand
#   verify               POST /citations/verify's work on a 2,000-character passage (8 laws indexed)
#                        against a keyword search of the same passage
#   search as of a date  corpus/versions indexed (every law in two or more versions): p50 with an
#                        `as_of` against the same queries without one, interleaved
#   retrieval            bench_retrieval + scripts/retrieval/score.py: recall@10/@50, MRR@10 and
#                        latency of dense, keyword and hybrid on corpus/questions, beside the
#                        rank_bm25 baseline on the same blocks; bench_keyword_scale: the keyword
#                        query at a million articles
#   re-embedding         bench_reembed: corpus/questions/laws indexed with hash, rebuilt to e5-small
#                        while a client searches: time, search p50 during against before, recall@10
#                        of both collections, failed or empty searches across the switch
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
CORPUS="${DOCPIPE_CORPUS:-$ROOT/corpus}"
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
BENCH_PARSE_JSON="$OUT/parse.json" bash scripts/bench-parse.sh >"$OUT/parse.md"

# 1a. The sensitive-data scan on its labelled set: precision and recall per kind, and its cost per
# MB beside parse's on the same documents (its own table).
log "sensitive-data scan: bench_scan"
cargo run --release -q -p docpipe-parse --example bench_scan >"$OUT/scan.md"

# 1b. OCR on the scans against the Python pipeline with the same models (its own table).
log "OCR: scripts/bench-ocr.sh"
BENCH_OCR_JSON="$OUT/ocr.json" bash scripts/bench-ocr.sh >"$OUT/ocr.md"

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
  cargo build --release -q -p docpipe-tests --example bench_pipeline --example bench_retrieval \
    --example bench_keyword_scale --example bench_reembed "${FEATURES[@]}"
else
  cargo build -q -p docpipe-tests --example bench_pipeline --example bench_retrieval \
    --example bench_keyword_scale --example bench_reembed "${FEATURES[@]}"
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
log "search as of a date on corpus/versions: as_of against none, $QUERIES queries"
"$BENCH" versions-search --queries "$QUERIES" >>"$RESULTS"
log "citations: verify on a 2,000-character passage against a keyword search of it"
"$BENCH" verify --rounds 50 >>"$RESULTS"

# 3b. Retrieval on corpus/questions: dense, keyword and hybrid beside the rank_bm25 baseline on the
#     same blocks, with the best embedder built in. The laws are indexed once per embedder into a
#     database and collection that outlive the run (a second run embeds nothing), then the keyword
#     index is repeated to BENCH_KEYWORD_ARTICLES blocks and queried again.
RETRIEVAL_EMBEDDER="${EMBEDDERS[${#EMBEDDERS[@]}-1]}"
log "retrieval: corpus/questions with $RETRIEVAL_EMBEDDER"
DOCPIPE_EMBEDDER="$RETRIEVAL_EMBEDDER" RUST_LOG=warn \
  "$CARGO_TARGET_DIR/$PROFILE/examples/bench_retrieval" --out "$OUT/retrieval"
"$ROOT/.local/bench-venv/bin/python" scripts/retrieval/score.py "$OUT/retrieval" \
  --json "$OUT/retrieval.json" --tune-fusion >"$OUT/retrieval.md"
RETRIEVAL_DB="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["database"])' "$OUT/retrieval/ingest.json")"
log "keyword index at ${BENCH_KEYWORD_ARTICLES:-1000000} articles (from $RETRIEVAL_DB)"
"$CARGO_TARGET_DIR/$PROFILE/examples/bench_keyword_scale" --source "$RETRIEVAL_DB" \
  --articles "${BENCH_KEYWORD_ARTICLES:-1000000}" \
  --articles-jsonl "$OUT/retrieval/articles.jsonl" >>"$RESULTS"

# 3c. Re-embedding: corpus/questions/laws indexed with hash, rebuilt to e5-small through the index
#     queue while a client searches; the rebuild's time, search p50 during it against before, the
#     recall@10 of both collections, the searches that failed or were empty across the switch.
if [[ ${#FEATURES[@]} -gt 0 ]]; then
  log "re-embedding: hash to e5-small on corpus/questions/laws"
  DOCPIPE_LOG=warn "$CARGO_TARGET_DIR/$PROFILE/examples/bench_reembed" >"$OUT/reembed.md"
else
  echo "(the e5 engine is not fetched: no re-embedding row)" >"$OUT/reembed.md"
fi

# 4. Init time and size of every function. In AWS the index and API functions embed with Bedrock:
#    that is the configuration they start with here (no call is made during init).
#    Each also checks the template's clock at start, as CloudFormation passes it.
log "function init: $INIT_STARTS starts each"
DOCPIPE="$CARGO_TARGET_DIR/debug/docpipe"
[[ -x "$DOCPIPE" ]] || cargo build -q -p docpipe-cli
TEMPLATE_ENV=()
while IFS= read -r kv; do TEMPLATE_ENV+=("$kv"); done < <("$DOCPIPE" template-env)
env "${TEMPLATE_ENV[@]}" DOCPIPE_EMBEDDER=bedrock RUST_LOG=warn "$BENCH" init --bin-dir "$CARGO_TARGET_DIR/release" \
  --starts "$INIT_STARTS" store parse index dlq sweeper api >>"$RESULTS"

# 5. Peak RSS per stage on the corpus's largest supported file, and on its largest scan (OCR).
# Malformed files are refused by design.
LARGEST="$(find "$CORPUS" \( -path "$CORPUS/malformed" -o -path "$CORPUS/scanned" \) -prune -o -type f \
  \( -iname '*.pdf' -o -iname '*.docx' -o -iname '*.html' -o -iname '*.htm' -o -iname '*.md' -o -iname '*.txt' \) \
  -printf '%s\t%p\n' | sort -n | tail -1 | cut -f2)"
log "peak RSS per stage: $LARGEST"
"$BENCH" rss "$LARGEST" --embedder hash >>"$RESULTS"
LARGEST_SCAN="$(find "$CORPUS/scanned" -type f -iname '*.pdf' -printf '%s\t%p\n' | sort -n | tail -1 | cut -f2)"
log "peak RSS per stage: $LARGEST_SCAN"
"$BENCH" rss "$LARGEST_SCAN" --embedder hash >>"$RESULTS"

# 6. End to end through the local pipeline.
if [[ "$LOAD_N" -gt 0 ]]; then
  log "end to end: scripts/load.sh $LOAD_N"
  bash scripts/load.sh "$LOAD_N" --json "$OUT/load-$LOAD_N.json" >"$OUT/load.md"
  cp "$OUT/load-$LOAD_N.json" "$OUT/load-last.json"
fi
[[ -f "$OUT/load-last.json" ]] || log "no load figure: run scripts/load.sh"
# End to end with the real embedder, beside e5's own speed (index-search above, same run): the gap
# between the two is the pipeline's overhead.
E2E_N="${BENCH_E5_LOAD_N:-24}"
if [[ " ${EMBEDDERS[*]} " == *" e5-small "* && "$E2E_N" -gt 0 ]]; then
  log "end to end with e5-small: scripts/load.sh $E2E_N --embedder e5-small"
  bash scripts/load.sh "$E2E_N" --embedder e5-small --json "$OUT/load-e5.json" >"$OUT/load-e5.md"
fi

{
  echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "busy_end=$(busy)"
  echo "elapsed_s=$(($(date +%s) - T_START))"
} >>"$OUT/machine.env"

{
  python3 scripts/bench-table.py "$OUT"
  printf '\n## Retrieval\n\n'
  cat "$OUT/retrieval.md"
  printf '\n## OCR\n\n'
  cat "$OUT/ocr.md"
  printf '\n## Sensitive-data scan\n\n'
  cat "$OUT/scan.md"
  printf '\n## Re-embedding, blue/green\n\n'
  grep '^|' "$OUT/reembed.md" || true
} | tee "$OUT/latest.md"
