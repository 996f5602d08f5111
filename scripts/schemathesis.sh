#!/usr/bin/env bash
# Fuzzes the HTTP API with schemathesis against openapi.yaml: no 5xx, no answer outside the spec
# (status codes, content types, headers, schemas), bad input refused, unsupported methods 405.
#
# The API is served by the dev runner (`docpipe dev --api-only`) on a free port, over a scratch
# database (created, migrated, dropped afterwards), a scratch Milvus collection and the stack's
# bucket, with the hashing embedder; nothing of the developer's own data is touched. Needs the
# stack (`make up`). Exits non-zero when schemathesis finds a failure.
#
#   bash scripts/schemathesis.sh                 # default budget (about 2 minutes)
#   ST_MAX_EXAMPLES=100 bash scripts/schemathesis.sh
#   ST_SEED=$RANDOM bash scripts/schemathesis.sh    # another seed (make test uses a fixed one, so CI is repeatable)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

ST_VERSION="4.32.5"
VENV="$ROOT/.local/schemathesis-venv"
MAX_EXAMPLES="${ST_MAX_EXAMPLES:-30}"
MAX_TIME="${ST_MAX_TIME:-120}"
log() { printf '[schemathesis] %s\n' "$*" >&2; }

if [[ "$("$VENV/bin/schemathesis" --version 2>/dev/null)" != *"$ST_VERSION"* ]]; then
  log "installing schemathesis $ST_VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$ST_VERSION"
fi

eval "$(bash scripts/stack.sh env)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
cargo build --quiet -p docpipe-cli --features e5
DOCPIPE="$CARGO_TARGET_DIR/debug/docpipe"

scratch="docpipe_st_$(date +%s)_$$"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  psql "$DATABASE_DIRECT_URL" -qc "DROP DATABASE IF EXISTS $scratch WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

psql "$DATABASE_DIRECT_URL" -qc "CREATE DATABASE $scratch"
# The same server and credentials, the scratch database (through PgBouncer, as always).
base="${DATABASE_URL%%\?*}"
query=""
[[ "$DATABASE_URL" == *\?* ]] && query="?${DATABASE_URL#*\?}"
export DATABASE_URL="${base%/*}/$scratch$query"
"$DOCPIPE" migrate >/dev/null

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export DOCPIPE_API_URL="http://127.0.0.1:$port"
export DOCPIPE_MILVUS_COLLECTION="schemathesis_chunks"
export DOCPIPE_EMBEDDER="hash"
export DOCPIPE_WEBHOOK_TOKEN="schemathesis-webhook-token-$$"
export DOCPIPE_LOG="${DOCPIPE_LOG:-warn}"
server_log="$ROOT/.local/schemathesis-api.log"
"$DOCPIPE" dev --api-only >"$server_log" 2>&1 &
server_pid=$!

for _ in $(seq 1 60); do
  if curl -fsS -o /dev/null "$DOCPIPE_API_URL/healthz"; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    log "the API did not start; its log:"; cat "$server_log" >&2; exit 1
  fi
  sleep 0.5
done
curl -fsS -o /dev/null "$DOCPIPE_API_URL/healthz" || { log "the API is not healthy"; curl -sS "$DOCPIPE_API_URL/healthz" >&2; exit 1; }
log "API on $DOCPIPE_API_URL (database $scratch); up to $MAX_EXAMPLES examples per operation, ${MAX_TIME}s"

# The webhook's token goes with every request (the other routes ignore it; ignored_auth still
# checks that the webhook refuses requests without it). One worker: CPython 3.11's parser is not thread-safe under hypothesis' lambda descriptions
# ("AST constructor recursion depth mismatch"). positive_data_acceptance is left out: the spec cannot say everything the API checks (a file
# name's 255 *bytes*, the reserved metadata key, a document that does not exist), so a valid-looking
# request may rightly be refused. Everything else is checked.
status=0
"$VENV/bin/schemathesis" run "$ROOT/openapi.yaml" \
  --url "$DOCPIPE_API_URL" \
  --header "Authorization: Bearer $DOCPIPE_WEBHOOK_TOKEN" \
  --header "X-Docpipe-Role: reviewer" \
  --checks all \
  --exclude-checks positive_data_acceptance \
  --max-examples "$MAX_EXAMPLES" \
  --max-time "$MAX_TIME" \
  --seed "${ST_SEED:-20261130}" \
  --phases examples,coverage,fuzzing \
  --workers 1 \
  --request-timeout 30 \
  --generation-database none \
  --suppress-health-check all \
  --no-color || status=$?

if grep -q '"level":"ERROR"' "$server_log"; then
  log "the API logged errors:"; grep '"level":"ERROR"' "$server_log" | head -20 >&2
  status=1
fi
exit "$status"
