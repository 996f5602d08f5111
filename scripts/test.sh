#!/usr/bin/env bash
# Runs every test against the running stack (make test brings it up first). Each integration test
# creates a database of its own; databases left by earlier runs are dropped first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
eval "$(bash scripts/stack.sh env)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"

stale=$(psql "$DATABASE_DIRECT_URL" -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'docpipe\_t\_%'")
for db in $stale; do psql "$DATABASE_DIRECT_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"; done
[[ -z "$stale" ]] || echo "[test] dropped $(wc -w <<<"$stale") stale test databases"

if ! command -v cargo-nextest >/dev/null; then
  echo "[test] installing cargo-nextest"
  cargo install cargo-nextest --locked
fi
cargo nextest run --workspace --no-fail-fast "$@"
