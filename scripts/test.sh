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
# The liveness and fault drills start dev runners of their own from this binary: it must be current.
cargo build -p docpipe-cli --features e5
# Everything but the fault tests runs in parallel; the fault tests stop and kill shared services, so
# they run afterwards, alone and one at a time.
status=0
cargo nextest run --workspace --no-fail-fast -E 'not binary(faults)' "$@" || status=$?
cargo nextest run --workspace --no-fail-fast -E 'binary(faults)' -j 1 "$@" || status=$?
exit "$status"
