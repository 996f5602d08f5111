#!/usr/bin/env bash
# The main job, on the running stack (make demo brings it up first): drop sample documents into the
# bucket like any S3 client would, and watch the dev runner carry each one through the pipeline.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
eval "$(bash scripts/stack.sh env)"
BIN="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}/debug/docpipe"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/../shared/corpus}"
[[ -d "$CORPUS" ]] || { echo "corpus not found at $CORPUS (set DOCPIPE_CORPUS)" >&2; exit 1; }

files=("$CORPUS"/laws-formats/*/*)
mapfile -t laws < <(ls "$CORPUS"/laws/*.md | head -n 30)
echo "[demo] uploading ${#files[@]} files from laws-formats and ${#laws[@]} laws"
"$BIN" put "${files[@]}" "${laws[@]}" | tail -n 3
echo "[demo] waiting for every document to be stored (dev runner log: .local/dev-runner.log)"
"$BIN" docs --wait-for stored --timeout 300
