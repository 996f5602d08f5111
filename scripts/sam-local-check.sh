#!/usr/bin/env bash
# SAM local, checked: `sam build`, then SAM's own `sam local invoke` for every event in events/
# (each with live ids) and `sam local start-api`, against the running stack. Every answer is
# checked, and so is what it did (the document's status, the job on its queue).
#
#   make sam-local-check            (make up first; it runs `make sam-local` itself)
#   bash scripts/sam-local-check.sh [--no-build]
#
# The dev runner is stopped while the check runs (and started again after, if it ran): it polls the
# same queues, and would take the jobs this check looks for. The documents it makes are keyed under
# sam-check/ (outside uploads/, so no bucket notification fires) and each ends indexed, failed or
# deleted. Functions embed with the hash embedder into a collection of their own
# (docpipe_sam_local, see .local/sam/env.json). Output: .local/sam/check/ (events, answers, logs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOG_TAG=sam-local-check
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
BUILD=1
[[ "${1:-}" == --no-build ]] && BUILD=0

bash scripts/stack.sh status > /dev/null || die "the local stack is not up (make up)"
bash scripts/sam-local.sh status > /dev/null || die "SAM local is not set up (make sam-local)"
eval "$(bash scripts/stack.sh env)"
eval "$(bash scripts/sam-local.sh env)"
WORK="$LOCAL/sam/check"
rm -rf "$WORK"; mkdir -p "$WORK/events" "$WORK/out"
PY="$LOCAL/venv/bin/python"
EV() { "$PY" scripts/sam_local_events.py "$@"; }
sql() { psql "$DATABASE_DIRECT_URL" -XAtqc "$1"; }
T0="$(now)"

if (( BUILD )); then
  t="$(now)"
  log "sam build (every function, release, cargo lambda; log: .local/sam/check/build.log)"
  sam build > "$WORK/build.log" 2>&1 || { tail_log "$WORK/build.log" 40; die "sam build failed"; }
  log "sam build: $(elapsed "$t")s"
fi
[[ -f .aws-sam/build/template.yaml ]] || die "no .aws-sam/build (run sam build, or drop --no-build)"

# ── the dev runner steps aside ──────────────────────────────────────────────────────────────
runner_was_up=0
if bash scripts/dev-runner.sh status | grep -q ' up '; then
  runner_was_up=1
  bash scripts/dev-runner.sh stop > /dev/null
  log "dev runner stopped for the check (started again at the end)"
fi
finish() {
  local rc=$?
  if (( runner_was_up )); then bash scripts/dev-runner.sh start > /dev/null && log "dev runner started again"; fi
  exit $rc
}
trap finish EXIT

failures=0 invokes=0
RESULTS=()
# invoke FUNCTION EVENT CHECK [LABEL]: `sam local invoke`, then CHECK (a Python expression over
# r, the answer, and body, its decoded body) on what the function answered.
invoke() {
  local fn="$1" event="$2" expr="$3" label="${4:-$(basename "$2" .json)}" t dt out err rc=0
  out="$WORK/out/$label.json"; err="$WORK/out/$label.log"
  t="$(now)"
  sam local invoke "$fn" -e "$event" > "$out" 2> "$err" || rc=$?
  dt="$(elapsed "$t")"; invokes=$((invokes + 1))
  local answer; answer="$(tail -n1 "$out" | tr -d '\n' | cut -c1-110)"
  if (( rc == 0 )) && EV check "$out" "$expr"; then
    printf '  ok    %-18s %-36s %5ss  %s\n' "$fn" "$label" "$dt" "$answer"
    RESULTS+=("$(printf '| %s | `%s` | %ss | ok |' "$fn" "$label" "$dt")")
  else
    printf '  FAIL  %-18s %-36s %5ss  rc=%s, expected %s, got: %s\n' "$fn" "$label" "$dt" "$rc" "$expr" "$answer"
    grep -vE '^\s*$' "$err" | tail -n 15 | sed 's/^/          /'
    RESULTS+=("$(printf '| %s | `%s` | %ss | FAIL |' "$fn" "$label" "$dt")")
    failures=$((failures + 1))
  fi
}
# expect LABEL CONDITION...: a check on what an invocation did.
expect() {
  local label="$1"; shift
  if "$@"; then printf '  ok    %s\n' "$label"
  else printf '  FAIL  %s\n' "$label"; failures=$((failures + 1)); fi
}
doc_of() { sql "SELECT doc_id FROM documents WHERE object_name = '$1'"; }
run_of() { sql "SELECT current_run_id FROM documents WHERE doc_id = '$1'"; }
status_is() { [[ "$(sql "SELECT status FROM documents WHERE doc_id = '$1'")" == "$2" ]]; }
job_on() { EV take-job "$1" "$2" "$3" "$4" > "$WORK/out/job-$(basename "$4")" 2>&1; }

echo "[sam-local-check] sam local invoke, against the stack (the dev runner paused)"
STAMP="$(date +%Y%m%d-%H%M%S)"
E=events W="$WORK/events"

# ── store: every store event, each naming an object put in moto first ───────────────────────
invoke StoreFunction "$E/store-s3-test-event.json" 'r == {"result": "test event acknowledged"}'
declare -A DOC
for sample in store-s3-put-moto store-s3-put store-sqs-s3-put store-eventbridge-object-created store-minio-notification; do
  key="sam-check/$STAMP/$sample 条例.md"
  EV put-store "$E/$sample.json" "$key" "$W/$sample.json"
  if [[ "$sample" == store-sqs-s3-put ]]; then
    invoke StoreFunction "$W/$sample.json" 'r == {"batchItemFailures": []}' "$sample"
  else
    invoke StoreFunction "$W/$sample.json" '"stored (" in r["result"]' "$sample"
  fi
  DOC[$sample]="$(doc_of "$key")"
  expect "$sample: ${DOC[$sample]:-no document} is stored" status_is "${DOC[$sample]:-none}" stored
  expect "$sample: its parse job is on the parse queue" \
    job_on "$DOCPIPE_PARSE_QUEUE_URL" "${DOC[$sample]:-none}" "$E/parse-sqs-job.json" "$W/parse-$sample.json"
done

# ── parse and index move a document on ──────────────────────────────────────────────────────
A="${DOC[store-s3-put-moto]}"
invoke ParseFunction "$W/parse-store-s3-put-moto.json" 'r == {"batchItemFailures": []}' parse-sqs-job
expect "$A is parsed" status_is "$A" parsed
expect "its index job is on the index queue" \
  job_on "$DOCPIPE_INDEX_QUEUE_URL" "$A" "$E/index-sqs-job.json" "$W/index-$A.json"
invoke IndexFunction "$W/index-$A.json" 'r == {"batchItemFailures": []}' index-sqs-job
expect "$A is indexed" status_is "$A" indexed

# ── the dead-letter function fails the run of a given-up job ────────────────────────────────
B="${DOC[store-sqs-s3-put]}"
EV job-event "$E/dlq-sqs-parse-job.json" "$W/dlq-$B.json" "$B" "$(run_of "$B")"
invoke DeadLetterFunction "$W/dlq-$B.json" 'r == {"batchItemFailures": []}' dlq-sqs-parse-job
expect "$B failed (dead-lettered)" status_is "$B" failed

# ── the sweeper re-drives an overdue run: its worker's lease ran out an hour ago ─────────────
C="${DOC[store-eventbridge-object-created]}"
RUN_C="$(run_of "$C")"
sql "UPDATE document_processing_runs SET lease_owner = 'sam-check', lease_expires_at = NOW() - interval '1 hour',
       queued_at = NOW() - interval '2 hours' WHERE run_id = $RUN_C" > /dev/null
invoke SweeperFunction "$E/sweeper-schedule.json" 'r["redriven"] >= 1 and r["problems"] == []' sweeper-schedule
expect "$C's run was re-driven once" test "$(sql "SELECT redrives FROM document_processing_runs WHERE run_id = $RUN_C")" = 1
expect "its job is back on the parse queue" \
  job_on "$DOCPIPE_PARSE_QUEUE_URL" "$C" "$E/parse-sqs-job.json" "$W/parse-redriven-$C.json"
invoke ParseFunction "$W/parse-redriven-$C.json" 'r == {"batchItemFailures": []}' parse-redriven
expect "$C is parsed" status_is "$C" parsed
expect "its index job is on the index queue" \
  job_on "$DOCPIPE_INDEX_QUEUE_URL" "$C" "$E/index-sqs-job.json" "$W/index-$C.json"
invoke IndexFunction "$W/index-$C.json" 'r == {"batchItemFailures": []}' index-redriven
expect "$C is indexed" status_is "$C" indexed

# ── the API: every api-* event ──────────────────────────────────────────────────────────────
api() { # SAMPLE DOC_ID CHECK [LABEL] [BODY]
  local out="$W/$1-$2.json"
  EV api-event "$E/$1.json" "$out" "$2" ${5:+"$5"}
  invoke ApiFunction "$out" "$3" "${4:-$1}"
}
api api-get-healthz - 'r["statusCode"] == 200'
api api-list-documents - 'r["statusCode"] == 200 and body["documents"]'
api api-get-document "$A" "r['statusCode'] == 200 and body['status'] == 'indexed'"
api api-get-structure "$A" 'r["statusCode"] == 200'
api api-get-blocks "$A" 'r["statusCode"] == 200'
api api-post-search - 'r["statusCode"] == 200 and body["hits"]' api-post-search \
  '{"query": "本地调用检查条例 第一条", "top_k": 5}'
api api-post-search - 'r["statusCode"] == 200 and body["hits"]' api-post-search-keyword \
  '{"query": "本地调用检查条例 第一条", "top_k": 5, "mode": "keyword"}'
api api-post-retry "$B" 'r["statusCode"] == 202'
expect "$B's retry queued a parse job" \
  job_on "$DOCPIPE_PARSE_QUEUE_URL" "$B" "$E/parse-sqs-job.json" "$W/parse-retry-$B.json"
api api-post-document - 'r["statusCode"] == 201 and body["doc_id"]'
P="$("$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(json.loads(r["body"])["doc_id"])' "$WORK/out/api-post-document.json" 2>/dev/null || true)"
# Every document the check made and did not index goes: the registered upload, the retried one,
# and the two stored ones whose jobs were taken off the queue above.
for d in "$P" "$B" "${DOC[store-s3-put]}" "${DOC[store-minio-notification]}"; do
  [[ -n "$d" ]] || continue
  api api-delete-document "$d" 'r["statusCode"] in (202, 204)' "api-delete-document-$d"
done

# ── sam local start-api: the same router, through SAM's API emulation ───────────────────────
echo "[sam-local-check] sam local start-api"
API_PORT="${SAM_API_PORT:-3000}"
sam local start-api --port "$API_PORT" > "$WORK/start-api.log" 2>&1 &
API_PID=$!
api_up() { (exec 3<> "/dev/tcp/127.0.0.1/$API_PORT") 2> /dev/null; }
wait_until 60 api_up || { tail_log "$WORK/start-api.log"; die "sam local start-api did not listen on $API_PORT"; }
if (( runner_was_up )); then bash scripts/dev-runner.sh start > /dev/null; runner_was_up=0; log "dev runner started again (its API answers beside SAM's)"; fi
for _ in $(seq 1 50); do curl -s -o /dev/null --max-time 1 "$DOCPIPE_API_URL/healthz" && break; sleep 0.2; done
compare() { # LABEL METHOD PATH [BODY]: SAM's answer and the dev runner's, status and body alike
  local label="$1" method="$2" path="$3" body="${4:-}" a b t dt
  t="$(now)"
  a="$(curl -s --max-time 60 -X "$method" ${body:+-H 'content-type: application/json' --data "$body"} -w '\n%{http_code}' "http://127.0.0.1:$API_PORT$path" || true)"
  dt="$(elapsed "$t")"
  b="$(curl -s --max-time 60 -X "$method" ${body:+-H 'content-type: application/json' --data "$body"} -w '\n%{http_code}' "$DOCPIPE_API_URL$path" || true)"
  printf '%s\n' "$a" > "$WORK/out/start-api-$label.txt"; printf '%s\n' "$b" > "$WORK/out/dev-runner-$label.txt"
  if "$PY" - "$a" "$b" <<'PY'
import json, re, sys
# What differs from one request to the next (an id, a latency, "indexed 45 s ago"), and the
# embedder's name in a search's parameters: the dev runner embeds with e5-small, the functions with
# the hash embedder (a keyword search uses neither).
VARIES = {"request_id", "took_ms", "latency_ms", "embedding_model"}
def scrub(v):
    if isinstance(v, dict):
        return {k: scrub(x) for k, x in v.items() if k not in VARIES}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    if isinstance(v, str):
        return re.sub(r"\d+ (s|min|h) ago", "… ago", v)
    return v
def norm(text):
    body, _, code = text.rpartition("\n")
    try:
        value = json.loads(body)
    except ValueError:
        value = body
    return code, scrub(value)
sys.exit(0 if norm(sys.argv[1]) == norm(sys.argv[2]) else 1)
PY
  then printf '  ok    %-40s %5ss  %s\n' "$method $path" "$dt" "$(head -c 100 <<<"$a" | tr -d '\n')"
       RESULTS+=("$(printf '| start-api | `%s %s` | %ss | ok |' "$method" "$path" "$dt")")
  else printf '  FAIL  %-40s differs from the dev runner: SAM %s | dev runner %s\n' "$method $path" "$(head -c 200 <<<"$a")" "$(head -c 200 <<<"$b")"
       RESULTS+=("$(printf '| start-api | `%s %s` | %ss | FAIL |' "$method" "$path" "$dt")")
       failures=$((failures + 1)); fi
}
compare healthz GET /healthz
compare documents GET "/documents?limit=5"
compare document GET "/documents/$A"
compare search POST /search '{"query": "本地调用检查条例 第一条", "top_k": 3, "mode": "keyword"}'
compare intake-failures GET /intake-failures
compare no-route GET /no/such/route
kill "$API_PID" 2>/dev/null || true; wait "$API_PID" 2>/dev/null || true

# ── the two indexed documents go too: the check leaves nothing behind ───────────────────────
for d in "$A" "$C"; do
  api api-delete-document "$d" 'r["statusCode"] in (202, 204)' "api-delete-document-$d"
done

echo
printf '%s\n' "${RESULTS[@]}" > "$WORK/results.md"
if (( failures > 0 )); then
  die "$failures check(s) failed ($invokes invocations, $(elapsed "$T0")s); answers and logs: .local/sam/check/out/"
fi
log "every event answered as expected: $invokes sam local invocations and start-api, $(elapsed "$T0")s"
