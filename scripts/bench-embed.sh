#!/usr/bin/env bash
# Throughput and peak memory of the local embedders (hash, and e5-small when its engine has been
# fetched) on ~200-character chunks of the Chinese laws in the corpus, and single-query latency
# (p50/p99, one embed_query at a time) on the corpus's questions; prints a Markdown table. e5-small
# runs three ways: e5-small-ref (upstream's path, weights re-expanded per call), e5-small-avx2 and
# e5-small (resident weights; AVX512-VNNI when the CPU has it), with the ratios after the table.
#
#   bash scripts/bench-embed.sh              # 100 chunks, 200 questions (e5 takes ~1-2 min)
#   CHUNKS=500 QUERIES=400 bash scripts/bench-embed.sh
#   DOCPIPE_E5_THREADS=1 bash scripts/bench-embed.sh   # one thread per query (a 1-vCPU Lambda)
#   DOCPIPE_CORPUS=/path/to/corpus bash scripts/bench-embed.sh
#
# Release build without the Bedrock SDK (the benchmark does not use it, and it is most of the
# build time). e5 is included when .local/e5 (or DOCPIPE_E5_SRC) holds the engine source.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
CHUNKS="${CHUNKS:-100}"
QUERIES="${QUERIES:-200}"
E5_SRC="${DOCPIPE_E5_SRC:-$LOCAL/e5/src}"

FEATURES=()
if [[ -f "$E5_SRC/e5.c" ]]; then
  FEATURES=(--features e5)
else
  warn "e5 engine not fetched ($E5_SRC): benchmarking hash only; run scripts/fetch-e5.sh for e5-small"
fi

log "building the benchmark (release)"
cargo build --quiet --release -p docpipe-embed --no-default-features "${FEATURES[@]}" --example bench_embed
"$CARGO_TARGET_DIR/release/examples/bench_embed" --chunks "$CHUNKS" --queries "$QUERIES"
