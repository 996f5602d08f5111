#!/usr/bin/env bash
# Least privilege, proved: every call each function makes is allowed by exactly its role as
# deployed (template.yaml after SAM's transform), and no GET or HEAD of a key that may be missing
# would answer 403 in AWS.
#
#   bash scripts/iam-check.sh              (make up first: it uses PostgreSQL, PgBouncer, Milvus)
#
# 1. A moto server of this check's own, with its request recorder on (the shared one is left
#    alone), holds the template's bucket (as CloudFormation names it for stack docpipe-iam), the
#    queues, DLQs and the upload notification, the event bus (docpipe-iam-events, the template's
#    ${AWS::StackName}-events), and three secrets (the database's credentials, a Milvus token, the
#    webhook token), so every grant the functions use is exercised.
# 2. scripts/iam/drill.py runs the migrate Lambda binary with CloudFormation's custom-resource
#    events (under a stand-in of Lambda's runtime API), then a dev runner with one access key per
#    function (DOCPIPE_DEV_ROLE_KEYS=1: docpipe-store, docpipe-parse, …) and the API as a process of
#    its own, on a database of its own, with the Bedrock embedder pointed at a Titan V2 stand-in
#    (AWS_ENDPOINT_URL_BEDROCK_RUNTIME) that records each signed InvokeModel, through uploads, the
#    webhook, a missing key, a backoff in each stage, a worker killed at its timeout, a lost job the
#    sweeper re-drives, a dead-lettered job, a deleted original, searches, downloads and deletes
#    (its header lists what each step is for).
# 3. scripts/deploy_check.py --translate-only writes template.yaml as SAM translates it (offline),
#    and scripts/iam/check.mjs maps each recorded request to its IAM action and resource and
#    evaluates it with @cloud-copilot/iam-simulate against that function's translated role, filled
#    in for the local resources: the role's inline policies, the AWS::IAM::Policy resources attached
#    to it, and its managed policies, allowed only from scripts/iam/managed-policies.json's
#    allowlist. S3 answers 403, not 404, for a missing key when the caller may not list the bucket
#    under it (moto always answers 404), so every GetObject must also be covered by s3:ListBucket
#    with s3:prefix = the key. EventBridge is also probed, role by role: events:PutEvents allowed on
#    the stack's bus (DOCPIPE_EVENT_BUS) and denied on the default bus, another bus and another
#    account's; every other events action denied; no PutEvents for a function without the variable.
#    Any denial, any request it cannot map, a wrong probe, a managed policy off the allowlist, or a
#    function with no recorded call fails the check.
#
# Installs what it needs into .local/ (the npm packages pinned by scripts/iam/package-lock.json;
# the template tools' venv for samtranslator); offline once installed.
# DOCPIPE_BIN=path and DOCPIPE_MIGRATE_BIN=path skip building those binaries. Output:
# .local/iam-check/ (the recordings, the translated template, the drill's and the processes' logs,
# report.json).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
WORK="$LOCAL/iam-check"
NODE_DIR="$LOCAL/iam-node"
say() { printf '[iam-check] %s\n' "$*"; }

# ── what it needs ───────────────────────────────────────────────────────────────────────────
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  say "installing nodejs and npm (apt)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm < /dev/null > "$LOCAL/apt-node.log" 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; } < /dev/null >> "$LOCAL/apt-node.log" 2>&1
fi
want="$(cat scripts/iam/package.json scripts/iam/package-lock.json | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$NODE_DIR/.installed" 2>/dev/null || true)" != "$want" || ! -d "$NODE_DIR/node_modules/@cloud-copilot/iam-simulate" ]]; then
  say "npm ci (scripts/iam/package-lock.json) into .local/iam-node"
  rm -rf "$NODE_DIR"; mkdir -p "$NODE_DIR"
  cp scripts/iam/package.json scripts/iam/package-lock.json "$NODE_DIR/"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --omit-lockfile-registry-resolved > npm.log 2>&1) ||
    { tail -n 20 "$NODE_DIR/npm.log" >&2; die "npm ci failed"; }
  echo "$want" > "$NODE_DIR/.installed"
fi
bash scripts/lint-template.sh --install-only >/dev/null

if [[ -z "${DOCPIPE_BIN:-}" ]]; then
  cargo build -q -p docpipe-cli --features e5
  DOCPIPE_BIN="$CARGO_TARGET_DIR/debug/docpipe"
fi
if [[ -z "${DOCPIPE_MIGRATE_BIN:-}" ]]; then
  cargo build -q -p docpipe-migrate-fn
  DOCPIPE_MIGRATE_BIN="$CARGO_TARGET_DIR/debug/migrate"
fi
eval "$(bash scripts/stack.sh env)"
bash scripts/stack.sh status >/dev/null || die "the local stack is not up (make up)"

# ── a moto of its own, recording ────────────────────────────────────────────────────────────
rm -rf "$WORK"; mkdir -p "$WORK"
"$LOCAL/tools-venv/bin/python" scripts/deploy_check.py --translate-only --translated-out "$WORK/translated.json"
PORT="$("$LOCAL/venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
MOTO_ENABLE_RECORDING=true MOTO_RECORDER_FILEPATH="$WORK/recording.jsonl" \
  setsid "$LOCAL/venv/bin/moto_server" -H 127.0.0.1 -p "$PORT" < /dev/null > "$WORK/moto.log" 2>&1 &
MOTO=$!
trap 'kill "$MOTO" 2>/dev/null || true; wait "$MOTO" 2>/dev/null || true' EXIT
for _ in $(seq 1 150); do
  curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/moto-api/" && break
  kill -0 "$MOTO" 2>/dev/null || { tail -n 20 "$WORK/moto.log" >&2; die "moto exited during start"; }
  sleep 0.2
done

# ── the drill, then the check ───────────────────────────────────────────────────────────────
started=$(date +%s)
"$LOCAL/venv/bin/python" scripts/iam/drill.py --work "$WORK" --endpoint "http://127.0.0.1:$PORT" \
  --docpipe "$DOCPIPE_BIN" --migrate "$DOCPIPE_MIGRATE_BIN" 2>&1 | tee "$WORK/drill.log"
kill "$MOTO" 2>/dev/null || true; wait "$MOTO" 2>/dev/null || true
psql "$DATABASE_DIRECT_URL" -qc "DROP DATABASE IF EXISTS docpipe_iam_check WITH (FORCE)" || true
say "drill done in $(( $(date +%s) - started )) s: $(wc -l < "$WORK/recording.jsonl") requests recorded by moto, $(wc -l < "$WORK/bedrock-recording.jsonl") by the Bedrock stand-in"
IAM_CHECK_NODE_MODULES="$NODE_DIR/node_modules" node scripts/iam/check.mjs \
  --template "$WORK/translated.json" --recording "$WORK/recording.jsonl,$WORK/bedrock-recording.jsonl" \
  --values "$WORK/values.json" --managed-policies scripts/iam/managed-policies.json --report "$WORK/report.json"
