#!/usr/bin/env bash
# `make up`: install what is missing, start the stack, build the CLI (the dev runner, with the e5
# engine), apply the migrations and start the dev runner.
#
# The build is the longest step on a fresh machine and needs only the e5 engine's source, so it
# runs beside the rest of the install and the services' start: the one is compiling, the other
# mostly downloading and waiting for Milvus. Idempotent: what is present is not fetched again,
# what is up is not restarted, a built CLI is not rebuilt.
#
# DOCPIPE_TIMES=FILE appends "<step> <seconds>" lines (the stack's phases, the layers, the build,
# the migrations, the dev runner's start) for the demo's table of where its time went.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOG_TAG=up
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
TIMES="${DOCPIPE_TIMES:-/dev/null}"
mkdir -p "$LOCAL"

bash scripts/stack.sh prepare

BUILD_LOG="$LOCAL/build.log"
log "building the CLI in the background (log: .local/build.log)"
build_started="$(now)"
(
  rc=0
  cargo build -p docpipe-cli --features e5 > "$BUILD_LOG" 2>&1 || rc=$?
  echo "build $(elapsed "$build_started")" >> "$TIMES"
  exit "$rc"
) &
build_pid=$!
# A failed stack start must not leave the build running.
trap 'kill "$build_pid" 2>/dev/null || true' EXIT

bash scripts/stack.sh up
t="$(now)"
bash scripts/fetch-pdfium.sh --layer
bash scripts/fetch-ocr.sh --layer
echo "layers $(elapsed "$t")" >> "$TIMES"

log "waiting for the build"
if ! wait "$build_pid"; then
  tail -n 30 "$BUILD_LOG" >&2
  die "cargo build -p docpipe-cli --features e5 failed (whole log: .local/build.log)"
fi
trap - EXIT
log "build done ($(elapsed "$build_started")s since it started)"

eval "$(bash scripts/stack.sh env)"
t="$(now)"
"$CARGO_TARGET_DIR/debug/docpipe" migrate
bash scripts/dev-runner.sh start
echo "runner $(elapsed "$t")" >> "$TIMES"
