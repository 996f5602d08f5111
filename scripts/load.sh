#!/usr/bin/env bash
# Load test: N documents (default 1000) through the local pipeline, isolated from the main dev runner.
#
#   scripts/load.sh [N] [--keep] [--workers W] [--timeout 1800] [--json FILE] [--embedder e5-small]
#   make load N=300 EMBEDDER=e5-small
#
# The laws corpus (corpus/laws/*.md, 378 files) is uploaded round after round under unique keys
# (uploads/r{round}/{name}) until N objects are in the bucket, as fast as the uploaders go, and the
# bucket notification carries each one into the pipeline, like any S3 client's upload.
#
# Everything is its own: database docpipe_load (created through DATABASE_DIRECT_URL, migrated through
# PgBouncer), bucket docpipe-load with queues load-* and their notification (scripts/resources.py),
# Milvus collection docpipe_load, and a dev runner (`docpipe dev --workers W --no-api`) started with
# that environment and stopped at the end. The dev runner runs on the template's clock and takes its
# workers per function from the template (ScalingConfig.MaximumConcurrency) unless --workers is
# given. The embedder is `hash` by default (the pipeline's own throughput: S3, SQS, PostgreSQL,
# parsing, Milvus); `--embedder e5-small` (EMBEDDER=e5-small) runs the local default, whose ~10
# chunks/s on two cores makes the index queue a backlog: the liveness model's test under load.
#
# While it waits (up to --timeout seconds) for every document to be terminal, it samples every second
# the PostgreSQL backends on docpipe_load (pg_stat_activity, direct) and PgBouncer's SHOW POOLS, and
# checks them against the bound the pools allow. It prints a Markdown report and exits non-zero if
# a document was lost (fewer documents than uploaded keys) or stuck (not terminal by the timeout).
# The database, bucket, queues and collection are removed at the end unless --keep is given.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"

N=1000 KEEP=0 WORKERS="" TIMEOUT=1800 JSON_OUT="" UPLOADERS="${LOAD_UPLOADERS:-8}"
EMBEDDER="${EMBEDDER:-hash}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) KEEP=1 ;;
    --workers) WORKERS="$2"; shift ;;
    --timeout) TIMEOUT="$2"; shift ;;
    --json) JSON_OUT="$2"; shift ;;
    --embedder) EMBEDDER="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    [0-9]*) N="$1" ;;
    *) echo "load.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

LOG_TAG=load
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"

eval "$(bash scripts/stack.sh env)"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/corpus}"
DB_NAME=docpipe_load BUCKET=docpipe-load QUEUE_PREFIX=load- COLLECTION=docpipe_load
ISO_DB=$DB_NAME ISO_BUCKET=$BUCKET ISO_QUEUE_PREFIX=$QUEUE_PREFIX ISO_COLLECTION=$COLLECTION
POOL_SIZE="${DOCPIPE_DB_POOL_SIZE:-2}"
PY="$ROOT/.local/venv/bin/python"
DOCPIPE="$CARGO_TARGET_DIR/debug/docpipe"
WORK="$ROOT/.local/load"
mkdir -p "$WORK"
SAMPLES="$WORK/samples.csv" RUNNER_LOG="$WORK/dev-runner.log" PUT_LOG="$WORK/put.log"

LOAD_URL="$(with_db "$DATABASE_URL" "$DB_NAME")"
sql_load() { psql "$LOAD_URL" -XAtq -v ON_ERROR_STOP=1 -F '|' -c "$1"; }

shopt -s nullglob
LAWS=("$CORPUS"/laws/*.md)
[[ ${#LAWS[@]} -gt 0 ]] || die "no laws under $CORPUS/laws"
pg_isready -q -d "$DATABASE_DIRECT_URL" || die "PostgreSQL is not up: make up"
curl -s -m 3 -o /dev/null "$AWS_ENDPOINT_URL" || die "moto is not up: make up"

if [[ "${LOAD_NO_BUILD:-0}" != 1 ]]; then
  log "building docpipe (debug, e5 compiled in as make up builds it)"
  cargo build -q -p docpipe-cli --features e5
fi
[[ -x "$DOCPIPE" ]] || die "$DOCPIPE not built"

ISO_RUNNER_PID="" SAMPLER_PID=""
cleanup() {
  local rc=$?
  set +e
  [[ -n "$SAMPLER_PID" ]] && kill "$SAMPLER_PID" 2>/dev/null && { wait "$SAMPLER_PID" 2>/dev/null || true; }
  iso_stop_runner
  if [[ $KEEP == 1 ]]; then
    log "kept: database $DB_NAME, bucket $BUCKET, queues ${QUEUE_PREFIX}*, collection $COLLECTION"
  else
    log "removing database $DB_NAME, bucket $BUCKET, queues ${QUEUE_PREFIX}*, collection $COLLECTION"
    iso_remove
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A fresh set every run: whatever an earlier --keep left goes first.
log "fresh database $DB_NAME, bucket $BUCKET, queues ${QUEUE_PREFIX}*, collection $COLLECTION"
iso_create "$DOCPIPE" "$WORK/migrate.log"
export DOCPIPE_EMBEDDER="$EMBEDDER" DOCPIPE_DB_POOL_SIZE="$POOL_SIZE"
# LOAD_PUBLISH_EVENTS=0: the events are recorded but not published (no bus), the baseline of
# publishing's cost.
[[ "${LOAD_PUBLISH_EVENTS:-1}" == 1 ]] || export DOCPIPE_EVENT_BUS=

# The connection bound (scripts/lib.sh): every function process and the dev runner hold a pool.
iso_connection_bound "$WORKERS" "$POOL_SIZE" 0
POOLS=$ISO_POOLS BOUND=$ISO_BOUND PGB_POOL=$ISO_PGB_POOL
log "connection bound: $POOLS pools x DOCPIPE_DB_POOL_SIZE=$POOL_SIZE + 1 monitor = $BOUND (PgBouncer default_pool_size $PGB_POOL)"

log "starting the dev runner: docpipe dev ${WORKERS:+--workers $WORKERS }--no-api (embedder $EMBEDDER)"
iso_start_runner "$DOCPIPE" "$RUNNER_LOG" ${WORKERS:+--workers "$WORKERS"} --no-api

# Samples once a second: backends on docpipe_load, and PgBouncer's pool for it.
iso_sample >"$SAMPLES" &
SAMPLER_PID=$!

# Upload: batches of 40 files of one round each, $UPLOADERS `docpipe put` processes at a time.
rm -rf "$WORK/batches" && mkdir -p "$WORK/batches"
for ((i = 0; i < N; i++)); do
  round=$((i / ${#LAWS[@]})) k=$((i % ${#LAWS[@]}))
  printf '%s\n' "${LAWS[k]}" >>"$WORK/batches/r$round-$(printf '%04d' $((k / 40)))"
done
log "uploading $N documents (${#LAWS[@]} laws x $(((N + ${#LAWS[@]} - 1) / ${#LAWS[@]})) rounds) with $UPLOADERS uploaders"
T_UPLOAD0="$(date +%s.%N)"
# shellcheck disable=SC2016
printf '%s\n' "$WORK"/batches/* | xargs -P "$UPLOADERS" -I{} bash -c '
  batch="$(basename "{}")"; mapfile -t files <"{}"
  "$0" put --prefix "uploads/${batch%-*}/" "${files[@]}"' "$DOCPIPE" >"$PUT_LOG" 2>&1 \
  || { tail -5 "$PUT_LOG" >&2; die "an upload failed"; }
T_UPLOADED="$(date +%s.%N)"
UPLOADED="$(grep -c '^put s3://' "$PUT_LOG" || true)"
UPLOAD_S="$(awk -v a="$T_UPLOAD0" -v b="$T_UPLOADED" 'BEGIN { printf "%.1f", b - a }')"
log "uploaded $UPLOADED objects in ${UPLOAD_S}s"

# Wait until every uploaded key has a document and every document is terminal.
STUCK=0 last=""
while :; do
  counts="$(sql_load "SELECT count(*), count(*) FILTER (WHERE status IN ('indexed','failed')),
                             count(*) FILTER (WHERE status = 'indexed') FROM documents" 2>/dev/null || echo "0|0|0")"
  IFS='|' read -r docs terminal indexed <<<"$counts"
  elapsed="$(awk -v a="$T_UPLOAD0" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", b - a }')"
  line="$docs documents, $terminal terminal ($indexed indexed)"
  [[ "$line" != "$last" ]] && log "[${elapsed}s] $line" && last="$line"
  if [[ "$docs" -ge "$UPLOADED" && "$terminal" -eq "$docs" ]]; then break; fi
  if [[ "$elapsed" -ge "$TIMEOUT" ]]; then STUCK=1; log "timeout after ${TIMEOUT}s"; break; fi
  sleep 1
done
sleep 1
kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=""
# The events every outcome recorded, and how many reached the bus by now (the functions publish
# after their batches; the sweeper the rest).
log "events: $(sql_load "SELECT count(*) || ' recorded, ' || count(sent_at) || ' sent to ' ||
                                 '${DOCPIPE_EVENT_BUS:-no bus}' FROM event_outbox" 2>/dev/null || echo 'unknown')"

# The report, from PostgreSQL (the authority) and the samples.
REPORT="$(sql_load "
WITH r AS (
  SELECT r.*, d.status FROM document_processing_runs r JOIN documents d ON d.current_run_id = r.run_id),
lat AS (
  SELECT extract(epoch FROM stored_at - started_at) AS store_s,
         extract(epoch FROM parsed_at - stored_at) AS parse_s,
         extract(epoch FROM indexed_at - parsed_at) AS index_s,
         extract(epoch FROM indexed_at - started_at) AS total_s,
         (metadata->'parse'->>'duration_ms')::float8 / 1000 AS parse_work_s,
         (metadata->'index'->>'duration_ms')::float8 / 1000 AS index_work_s
  FROM r WHERE run_status = 'succeeded')
SELECT
  (SELECT count(*) FROM documents),
  (SELECT count(*) FROM documents WHERE status = 'indexed'),
  (SELECT count(*) FROM documents WHERE status = 'failed'),
  (SELECT count(*) FROM documents WHERE status NOT IN ('indexed', 'failed')),
  (SELECT count(*) FROM document_processing_runs),
  (SELECT coalesce(sum(chunk_count), 0) FROM documents WHERE status = 'indexed'),
  (SELECT extract(epoch FROM max(greatest(indexed_at, finished_at))) FROM document_processing_runs),
  (SELECT extract(epoch FROM min(started_at)) FROM document_processing_runs),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY store_s), percentile_cont(0.95) WITHIN GROUP (ORDER BY store_s),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY parse_s), percentile_cont(0.95) WITHIN GROUP (ORDER BY parse_s),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY index_s), percentile_cont(0.95) WITHIN GROUP (ORDER BY index_s),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY total_s), percentile_cont(0.95) WITHIN GROUP (ORDER BY total_s),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY parse_work_s), percentile_cont(0.95) WITHIN GROUP (ORDER BY parse_work_s),
  percentile_cont(0.5) WITHIN GROUP (ORDER BY index_work_s), percentile_cont(0.95) WITHIN GROUP (ORDER BY index_work_s)
FROM lat")"
FAILURES="$(sql_load "SELECT failure_stage || ': ' || left(error_message, 120), count(*) FROM document_processing_runs
                      WHERE run_status = 'failed' GROUP BY 1 ORDER BY 2 DESC LIMIT 5" || true)"

MACHINE="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
"$PY" - "$REPORT" "$SAMPLES" "$T_UPLOAD0" "$UPLOADED" "$N" "$UPLOAD_S" "$BOUND" "$POOL_SIZE" "${WORKERS:-template}" \
  "$STUCK" "$MACHINE" "$JSON_OUT" "$FAILURES" "$EMBEDDER" "$POOLS" <<'PYEOF'
import csv, json, os, sys
(report, samples, t0, uploaded, n, upload_s, bound, pool, workers, stuck, machine, json_out,
 failures, embedder, pools) = sys.argv[1:]
f = report.split("|")
num = lambda x: float(x) if x not in ("", None) else float("nan")
docs, indexed, failed, nonterminal, runs, chunks = (int(x or 0) for x in f[:6])
last, first = num(f[6]), num(f[7])
lat = [num(x) for x in f[8:20]]
uploaded, n, bound = int(uploaded), int(n), int(bound)
rows = list(csv.DictReader(open(samples)))
pg = [int(r["pg_backends"]) for r in rows if r["pg_backends"].strip()]
pgc = [int(r["pg_clients"]) for r in rows if r["pg_clients"].strip()]
sv = [int(r["sv_total"]) for r in rows]
cl = [int(r["cl_active"]) + int(r["cl_waiting"]) for r in rows]
cw = [int(r["cl_waiting"]) for r in rows]
t0 = float(t0)
wall = last - t0
per_min = (indexed + failed) / wall * 60 if wall > 0 else float("nan")
lost = max(uploaded - docs, 0)
ok = lost == 0 and nonterminal == 0 and docs == uploaded == n
within = (max(pgc or [0]) <= bound) and (max(sv or [0]) <= bound)
ms = lambda s: f"{s * 1000:,.0f} ms" if s == s else "n/a"
print(f"### Load test: {n} documents, `docpipe dev` (workers: {workers}), embedder `{embedder}`\n")
print("| measure | value |")
print("| --- | --- |")
print(f"| uploaded keys / documents | {uploaded} / {docs} (lost: {lost}) |")
print(f"| all terminal | {'yes' if nonterminal == 0 else f'no: {nonterminal} stuck'} |")
print(f"| statuses | {indexed} indexed, {failed} failed, {nonterminal} other |")
print(f"| runs | {runs} ({runs - docs} beyond one per document) |")
print(f"| chunks indexed | {chunks:,} |")
print(f"| upload time ({n} PUTs) | {float(upload_s):.1f} s |")
print(f"| first upload → last document terminal | {wall:.1f} s |")
print(f"| **documents per minute** | **{per_min:,.0f}** |")
print(f"| **chunks per second** (indexed chunks / first upload → last terminal) | **{chunks / wall if wall > 0 else float('nan'):,.1f}** |")
print(f"| store p50 / p95 (stored_at − started_at: 0 by construction, one transaction opens the run and stores it) | {ms(lat[0])} / {ms(lat[1])} |")
print(f"| parse latency p50 / p95 (parsed_at − stored_at, queue wait included) | {ms(lat[2])} / {ms(lat[3])} |")
print(f"| index latency p50 / p95 (indexed_at − parsed_at, queue wait included) | {ms(lat[4])} / {ms(lat[5])} |")
print(f"| parse work p50 / p95 (runs.metadata parse.duration_ms: fetch, parse, artifacts, commit) | {ms(lat[8])} / {ms(lat[9])} |")
print(f"| index work p50 / p95 (runs.metadata index.duration_ms: fetch, embed, insert, checks, commit) | {ms(lat[10])} / {ms(lat[11])} |")
print(f"| run p50 / p95 (indexed_at − started_at, queue waits included) | {ms(lat[6])} / {ms(lat[7])} |")
print(f"| PostgreSQL backends on the database, max: all / client backends (1 s samples: {len(pg)}) | {max(pg or [0])} / {max(pgc or [0])} |")
print(f"| PgBouncer server connections, max / clients max / clients waiting max | {max(sv or [0])} / {max(cl or [0])} / {max(cw or [0])} |")
print(f"| bound: {pools} function processes × DOCPIPE_DB_POOL_SIZE {pool} + 1 monitor, at most PgBouncer's pool | {bound}: {'within' if within else '**exceeded**'} |")
if failures.strip():
    print("\nFailures (stage: reason, count):\n")
    for line in failures.strip().splitlines():
        print(f"- {line.replace('|', ' × ')}")
print(f"\n{'OK' if ok else 'NOT OK'}: {machine}.")
if json_out:
    json.dump({"n": n, "uploaded": uploaded, "documents": docs, "indexed": indexed, "failed": failed,
               "stuck": nonterminal, "lost": lost, "wall_s": wall, "docs_per_min": per_min,
               "latency_s": dict(zip(["store_p50", "store_p95", "parse_p50", "parse_p95", "index_p50",
                                      "index_p95", "run_p50", "run_p95", "parse_work_p50", "parse_work_p95",
                                      "index_work_p50", "index_work_p95"], lat)),
               "max_pg_backends": max(pg or [0]), "max_pg_clients": max(pgc or [0]), "max_pgbouncer_server": max(sv or [0]),
               "bound": bound, "workers": workers, "embedder": embedder,
               "chunks": chunks, "chunks_per_s": chunks / wall if wall > 0 else None}, open(json_out, "w"))
PYEOF

if [[ "$STUCK" == 1 ]] || [[ "$(sql_load "SELECT count(*) FROM documents WHERE status NOT IN ('indexed','failed')")" -gt 0 ]]; then
  log "documents stuck: not terminal within ${TIMEOUT}s"; exit 1
fi
DOCS="$(sql_load "SELECT count(*) FROM documents")"
if [[ "$DOCS" -ne "$N" || "$UPLOADED" -ne "$N" ]]; then
  log "documents lost: $N planned, $UPLOADED uploaded, $DOCS documents"; exit 1
fi
