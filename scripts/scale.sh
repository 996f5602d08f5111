#!/usr/bin/env bash
# Scale test (issue 41): a library of laws over time through the local pipeline, measured at 150
# laws and at all of them, in one run.
#
#   scripts/scale.sh [LAWS] [--corpus FOLDER] [--small 150] [--keep] [--port 8091] [--workers W]
#                    [--seed 41] [--searches 200] [--others 100] [--stall 900]
#                    [--slice 25] [--budget MINUTES] [--resume]
#   make scale LAWS=5000          # generated from corpus/laws (scripts/scale_library.py)
#   make scale CORPUS=<folder>    # every .md, .txt, .html, .docx and .pdf under a folder, as is
#
# The library (scripts/scale_library.py, into .local/scale/library): LAWS works under distinct
# titles, each in 1 to 8 versions (mean 4) with dated heading notes, articles changed, added and
# removed between versions, about one version in twenty also as a .txt or .html rendition; or
# the real files of --corpus, each file a law.
#
# Everything is its own, as in scripts/load.sh (the helpers are scripts/lib.sh's): database
# docpipe_scale, bucket docpipe-scale with queues scale-*, Milvus collection docpipe_scale, and a
# dev runner with the `hash` embedder that serves the API too, on --port (not the main dev
# runner's 8080). The first SMALL laws (150, or three quarters of LAWS when LAWS ≤ 150) are
# uploaded and waited for until every document is terminal; then measured (scripts/
# scale_measure.py: keyword, hybrid, as_of, versions_all, verify, resolve, article, works_page,
# each timed sequentially; the dev runner's peak RSS; PostgreSQL bytes; Milvus entities; counts);
# then the rest is uploaded, waited for, and measured again with the same queries. Uploads go in
# slices of --slice laws, the next whenever at most SCALE_FEED (200) documents wait (see ingest()).
# With --budget, no slice starts once the run has taken that many minutes: the second point is
# then measured at the laws uploaded, and the report and the JSON say how many (a run that must
# fit a window still ends with figures, never with an unfinished upload). A line every 10 s shows
# the progress. The PostgreSQL backends and PgBouncer's pool are sampled every second
# against the bound the pools allow.
#
# It prints a Markdown report and, as its last line, the JSON object issue 41 names, and exits
# non-zero when a document is lost (fewer documents than uploaded keys), stuck (not terminal; no
# progress for --stall seconds) or doubled (two indexed documents with a content the library
# holds once, more documents than keys, or more Milvus entities than the chunks PostgreSQL
# holds). The database, bucket, queues and collection are removed at the end unless --keep.
#
# --resume goes on from where a --keep run's budget stopped it: the same library (same seed and
# size), database and collection; the bucket and queues made again if the emulator lost them;
# the uploads from the law the last point measured, the first point and its queries kept, and
# the second point measured again at the laws reached. A 5,000-law library takes longer than one
# sitting on a small machine (about 120 documents/min on 2 cores), so it may be built in parts.
# The build must be the one the first point measured (its commit and binary are kept in
# $WORK/build): a resume with another build stops, since the ratios would compare two builds.
# Every document of the kept part must be terminal (the run ended measured), else it stops.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"

LAWS=5000 CORPUS_DIR="" SMALL="" KEEP=0 PORT=8091 WORKERS="" SEED=41 SEARCHES=200 OTHERS=100 STALL=900
SLICE=25 BUDGET="" RESUME=0
UPLOADERS="${SCALE_UPLOADERS:-8}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --corpus) CORPUS_DIR="$2"; shift ;;
    --small) SMALL="$2"; shift ;;
    --keep) KEEP=1 ;;
    --port) PORT="$2"; shift ;;
    --workers) WORKERS="$2"; shift ;;
    --seed) SEED="$2"; shift ;;
    --searches) SEARCHES="$2"; shift ;;
    --others) OTHERS="$2"; shift ;;
    --stall) STALL="$2"; shift ;;
    --slice) SLICE="$2"; shift ;;
    --budget) BUDGET="$2"; shift ;;
    --resume) RESUME=1 ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    [0-9]*) LAWS="$1" ;;
    *) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

LOG_TAG=scale
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"

eval "$(bash scripts/stack.sh env)"
# SCALE_NAME (default scale) names the set and its folder, so that a second run can go beside one.
NAME="${SCALE_NAME:-scale}"
[[ "$NAME" =~ ^[a-z][a-z0-9]{0,20}$ ]] || die "SCALE_NAME: lowercase letters and digits, 1-21 of them"
ISO_DB="docpipe_$NAME" ISO_BUCKET="docpipe-$NAME" ISO_QUEUE_PREFIX="$NAME-" ISO_COLLECTION="docpipe_$NAME"
POOL_SIZE="${DOCPIPE_DB_POOL_SIZE:-2}"
PY="$ROOT/.local/venv/bin/python"
DOCPIPE="$CARGO_TARGET_DIR/debug/docpipe"
WORK="$ROOT/.local/$NAME"
LIBRARY="$WORK/library"
API="http://127.0.0.1:$PORT"
mkdir -p "$WORK"
SAMPLES="$WORK/samples.csv" RUNNER_LOG="$WORK/dev-runner.log" PUT_LOG="$WORK/put.log"
SCALE_URL="$(with_db "$DATABASE_URL" "$ISO_DB")"
sql_scale() { psql "$SCALE_URL" -XAtq -v ON_ERROR_STOP=1 -F '|' -c "$1"; }
measure() { "$PY" scripts/scale_measure.py "$@"; }

pg_isready -q -d "$DATABASE_DIRECT_URL" || die "PostgreSQL is not up: make up"
curl -s -m 3 -o /dev/null "$AWS_ENDPOINT_URL" || die "moto is not up: make up"
curl -sf -m 5 -o /dev/null "$MILVUS_URL/v1/vector/collections" || die "Milvus is not up: make up"
! port_bound "$PORT" || die "port $PORT is taken ($(port_owner "$PORT")): --port another"

T_RUN0="$(now)" STARTED="$(date -u '+%Y-%m-%d %H:%M UTC')"
if [[ $RESUME == 1 ]]; then
  # The kept library as it is (not generated again: a changed generator would make another).
  [[ -s "$LIBRARY/summary.json" && -s "$LIBRARY/manifest.jsonl" ]] || die "--resume: no kept library in $LIBRARY"
  SUMMARY="$(cat "$LIBRARY/summary.json")"
  MODE="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["mode"])' "$WORK/run.json")"
  log "the kept library: $SUMMARY"
elif [[ -n "$CORPUS_DIR" ]]; then
  [[ -d "$CORPUS_DIR" ]] || die "no folder $CORPUS_DIR"
  log "copying the real files under $CORPUS_DIR into $LIBRARY"
  SUMMARY="$(python3 scripts/scale_library.py --corpus "$CORPUS_DIR" --out "$LIBRARY")"
  MODE="real files under $(basename "$CORPUS_DIR")"
else
  log "generating $LAWS laws into $LIBRARY (seed $SEED)"
  SUMMARY="$(python3 scripts/scale_library.py --laws "$LAWS" --seed "$SEED" --out "$LIBRARY")"
  MODE="generated from corpus/laws, seed $SEED"
fi
log "library: $SUMMARY"
LAWS="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["laws"])' "$SUMMARY")"
if [[ -z "$SMALL" ]]; then
  if [[ $LAWS -gt 150 ]]; then SMALL=150; else SMALL=$((LAWS * 3 / 4)); fi
fi
[[ $SMALL -ge 1 && $SMALL -lt $LAWS ]] || die "the small point ($SMALL laws) must be between 1 and $LAWS - 1"

# The binary the run measures is kept beside the library ($WORK/bin), so that a --resume runs the
# very build the first point measured, whatever was built since.
if [[ $RESUME == 1 ]]; then
  for f in small.json large.json queries.json phases put.log build run.json bin/docpipe; do
    [[ -e "$WORK/$f" ]] || die "--resume: $WORK/$f is missing (a run with --keep makes it)"
  done
  [[ "$(sha256sum "$WORK/bin/docpipe" | cut -c1-64)" == "$(cat "$WORK/build")" ]] \
    || die "--resume: $WORK/bin/docpipe is not the build the first point measured"
  DOCPIPE="$WORK/bin/docpipe"
else
  if [[ "${SCALE_NO_BUILD:-0}" != 1 ]]; then
    log "building docpipe (debug, e5 compiled in as make up builds it)"
    cargo build -q -p docpipe-cli --features e5
  fi
  [[ -x "$DOCPIPE" ]] || die "$DOCPIPE not built"
  mkdir -p "$WORK/bin" && cp -p "$DOCPIPE" "$WORK/bin/docpipe"
  sha256sum "$WORK/bin/docpipe" | cut -c1-64 >"$WORK/build"
  DOCPIPE="$WORK/bin/docpipe"
fi
# What the dev runner runs, read now: a build or a checkout during the run changes neither.
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!*.md' 2>/dev/null || echo '+changes')"
BUILT="$(date -u -r "$DOCPIPE" '+%Y-%m-%d %H:%M UTC')"

ISO_RUNNER_PID="" SAMPLER_PID="" CLEANED=0
clean_up() {
  [[ $CLEANED == 1 ]] && return 0
  CLEANED=1
  [[ -n "$SAMPLER_PID" ]] && kill "$SAMPLER_PID" 2>/dev/null && { wait "$SAMPLER_PID" 2>/dev/null || true; }
  SAMPLER_PID=""
  iso_stop_runner
  if [[ $KEEP == 1 ]]; then
    log "kept: database $ISO_DB, bucket $ISO_BUCKET, queues ${ISO_QUEUE_PREFIX}*, collection $ISO_COLLECTION (and $LIBRARY)"
  else
    log "removing database $ISO_DB, bucket $ISO_BUCKET, queues ${ISO_QUEUE_PREFIX}*, collection $ISO_COLLECTION"
    iso_remove
  fi
  return 0
}
cleanup() { local rc=$?; set +e; clean_up; exit "$rc"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $RESUME == 1 ]]; then
  # What the kept run left: its database and collection as they are; the bucket and queues (which
  # the emulator keeps in memory) made again when missing; the kept documents all terminal.
  [[ "$(psql "$DATABASE_DIRECT_URL" -XAtq -c "SELECT count(*) FROM pg_database WHERE datname = '$ISO_DB'")" == 1 ]] \
    || die "--resume: no database $ISO_DB"
  curl -sf -m 10 "$MILVUS_URL/v1/vector/collections/describe?collectionName=$ISO_COLLECTION" | grep -q '"code":200' \
    || die "--resume: no Milvus collection $ISO_COLLECTION"
  iso_attach "$DOCPIPE" "$WORK/migrate.log"
  RESUME_FROM="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["laws"])' "$WORK/large.json")"
  [[ $RESUME_FROM -lt $LAWS ]] || die "--resume: the kept run measured all $LAWS laws already"
  IFS='|' read -r kept_docs kept_terminal <<<"$(sql_scale "SELECT count(*), count(*) FILTER (WHERE status IN ('indexed','failed')) FROM documents")"
  [[ "$kept_docs" == "$kept_terminal" ]] || die "--resume: $((kept_docs - kept_terminal)) kept documents are not terminal"
  cp "$WORK/large.json" "$WORK/large-$RESUME_FROM.json" && cp "$WORK/run.json" "$WORK/run-$RESUME_FROM.json"
  log "resuming at law $((RESUME_FROM + 1)) of $LAWS: database $ISO_DB ($kept_docs documents, all terminal) and collection $ISO_COLLECTION as kept"
else
  log "fresh database $ISO_DB, bucket $ISO_BUCKET, queues ${ISO_QUEUE_PREFIX}*, collection $ISO_COLLECTION"
  iso_create "$DOCPIPE" "$WORK/migrate.log"
fi
export DOCPIPE_EMBEDDER=hash DOCPIPE_DB_POOL_SIZE="$POOL_SIZE" DOCPIPE_API_URL="$API"

# The connection bound (scripts/lib.sh): the function processes, the dev runner and its API.
iso_connection_bound "$WORKERS" "$POOL_SIZE" 1
log "connection bound: $ISO_POOLS pools x DOCPIPE_DB_POOL_SIZE=$POOL_SIZE + 1 monitor = $ISO_BOUND (PgBouncer default_pool_size $ISO_PGB_POOL)"

log "starting the dev runner: docpipe dev ${WORKERS:+--workers $WORKERS }(API on $API, embedder hash)"
iso_start_runner "$DOCPIPE" "$RUNNER_LOG" ${WORKERS:+--workers "$WORKERS"}
wait_until 30 curl -sf -m 2 -o /dev/null "$API/healthz" || { tail_log "$RUNNER_LOG"; die "the API does not answer on $API"; }

# A resume samples into a file of its own (both are read at the end).
[[ $RESUME == 1 ]] && SAMPLES="$WORK/samples-resumed.csv"
iso_sample >"$SAMPLES" &
SAMPLER_PID=$!

# The documents of the bucket so far, and how many are terminal (indexed or failed).
counts() {
  sql_scale "SELECT count(*), count(*) FILTER (WHERE status IN ('indexed','failed')),
    count(*) FILTER (WHERE status = 'indexed'), count(*) FILTER (WHERE status = 'failed')
    FROM documents" 2>/dev/null || echo "0|0|0|0"
}

# upload FROM TO: puts the files of laws FROM..TO-1; UPLOADED counts every key put so far.
UPLOADED=0 STUCK=0
if [[ $RESUME == 1 ]]; then
  UPLOADED="$(grep -c '^put s3://' "$PUT_LOG" || true)"
else
  : >"$WORK/phases" && : >"$PUT_LOG" && rm -f "$WORK/samples-resumed.csv"
fi
upload() {
  rm -rf "$WORK/batches" && mkdir -p "$WORK/batches"
  measure batches --manifest "$LIBRARY/manifest.jsonl" --from "$1" --to "$2" --out "$WORK/batches" >/dev/null
  # shellcheck disable=SC2016
  printf '%s\n' "$WORK"/batches/* | xargs -P "$UPLOADERS" -I{} bash -c '
    mapfile -t lines <"{}"; "$0" put --prefix "${lines[0]}" "${lines[@]:1}"' "$DOCPIPE" >>"$PUT_LOG" 2>&1 \
    || { tail -5 "$PUT_LOG" >&2; die "an upload failed"; }
  UPLOADED="$(grep -c '^put s3://' "$PUT_LOG" || true)"
}

# ingest NAME FROM TO: uploads the files of laws FROM..TO-1, --slice laws at a time, each slice
# once no more than FEED documents wait (uploaded, not terminal), then waits until every document
# is terminal. Fed, not dumped: the local SQS (moto) scans a queue's every message on each
# receive, so a backlog of thousands slows every poll of every worker, which SQS does not; a
# backlog of FEED keeps every worker busy and the emulator out of the measure. With --budget, no
# slice starts past it: REACHED is where the upload stopped. Appends a phase line (name,
# documents, seconds) to $WORK/phases.
FEED="${SCALE_FEED:-200}"
ingest() {
  local name="$1" from="$2" to="$3" t0 docs terminal indexed failed last_terminal=-1 last_change \
    now_s elapsed rate last_line=0 before next spent
  before="$(sql_scale "SELECT count(*) FROM documents WHERE status IN ('indexed','failed')")"
  log "$name: laws $((from + 1))–$to, $SLICE at a time whenever at most $FEED documents wait, $UPLOADERS uploaders"
  measure cpu --pid "$ISO_RUNNER_PID" --out "$WORK/cpu-$name-0.json"
  t0="$(now)" last_change="$(date +%s)" REACHED="$from"
  while :; do
    IFS='|' read -r docs terminal indexed failed <<<"$(counts)"
    now_s="$(date +%s)"
    elapsed="$(elapsed "$t0")"
    if [[ "$terminal" != "$last_terminal" ]]; then last_terminal="$terminal" last_change="$now_s"; fi
    if [[ $REACHED -lt $to && $((UPLOADED - terminal)) -le $FEED ]]; then
      spent=$(( now_s - ${T_RUN0%.*} ))
      if [[ -n "$BUDGET" ]] && (( spent >= BUDGET * 60 )); then
        log "budget: ${spent}s spent, over --budget $BUDGET min: no more uploads, $REACHED of $LAWS laws"
        to="$REACHED"
      else
        next=$((REACHED + SLICE)); [[ $next -le $to ]] || next=$to
        upload "$REACHED" "$next"
        REACHED="$next" last_change="$(date +%s)"
        continue
      fi
    fi
    if (( now_s - last_line >= 10 )) || [[ $REACHED -ge $to && "$docs" -ge "$UPLOADED" && "$terminal" -eq "$docs" ]]; then
      rate="$(awk -v n="$((terminal - before))" -v s="$elapsed" 'BEGIN { printf "%.0f", (s > 0 ? n / s * 60 : 0) }')"
      printf '[scale] %s: %s laws uploaded, %s of %s documents terminal (%s indexed, %s failed), %s/min, %ss\n' \
        "$name" "$(printf "%'d" "$REACHED")" "$(printf "%'d" "$terminal")" "$(printf "%'d" "$UPLOADED")" \
        "$(printf "%'d" "$indexed")" "$(printf "%'d" "$failed")" "$rate" "${elapsed%.*}" >&2
      last_line="$now_s"
    fi
    if [[ $REACHED -ge $to && "$docs" -ge "$UPLOADED" && "$terminal" -eq "$docs" ]]; then break; fi
    if (( now_s - last_change >= STALL )); then
      STUCK=1; log "$name: no document became terminal for ${STALL}s: stuck"; break
    fi
    sleep 1
  done
  printf '%s %s %s\n' "$name" "$((terminal - before))" "$(elapsed "$t0")" >>"$WORK/phases"
  measure cpu --pid "$ISO_RUNNER_PID" --out "$WORK/cpu-$name-1.json"
}

measure_point() { # LABEL LAWS
  # Both points in the same state: the tables vacuumed and analysed, as autovacuum leaves them some
  # time after a load. Right after one, the postings' visibility map lags the inserts and their
  # index-only scans go to the table (3,086 heap fetches in one search at 3,375 laws), so an
  # unvacuumed point measures how recently the load ended, not the library's size.
  local t0; t0="$(now)"
  psql "$(with_db "$DATABASE_DIRECT_URL" "$ISO_DB")" -XAtq -v ON_ERROR_STOP=1 -c "SET client_min_messages = error" -c "VACUUM (ANALYZE)" >/dev/null \
    || die "VACUUM (ANALYZE) of $ISO_DB failed"
  log "vacuumed and analysed $ISO_DB in $(elapsed "$t0")s"
  log "measuring at $2 laws ($SEARCHES queries per search mode, $OTHERS per other route)"
  measure measure --label "$1" --laws "$2" --db "$SCALE_URL" --api "$API" --pid "$ISO_RUNNER_PID" \
    --milvus "$MILVUS_URL" --collection "$ISO_COLLECTION" --queries "$WORK/queries.json" \
    --manifest "$LIBRARY/manifest.jsonl" --searches "$SEARCHES" --others "$OTHERS" --out "$WORK/$1.json"
}

if [[ $RESUME == 1 ]]; then
  ingest resumed "$RESUME_FROM" "$LAWS"
else
  SMALL_BUDGET="$BUDGET" BUDGET=""   # the first point is always measured whole
  ingest small 0 "$SMALL"
  BUDGET="$SMALL_BUDGET"
  measure queries --db "$SCALE_URL" --out "$WORK/queries.json" --seed "$SEED" --searches "$SEARCHES" --others "$OTHERS" >&2
  measure_point small "$SMALL"
  ingest large "$SMALL" "$LAWS"
fi
measure_point large "$REACHED"
sleep 1
kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=""

# The run's facts, then the report; the checks decide the exit status.
MACHINE="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
"$PY" - "$WORK" "$SAMPLES" "$UPLOADED" "$STUCK" "$ISO_BOUND" "$ISO_POOLS" "$POOL_SIZE" "$ISO_PGB_POOL" \
  "$MACHINE" "$STARTED" "$COMMIT" "$T_RUN0" "$MODE" "$BUILT" "$LAWS" "$RESUME" <<'PY'
import csv, json, os, sys, time
(work, samples, uploaded, stuck, bound, pools, pool, pgb, machine, started, commit, t0, mode, built,
 laws_planned, resume) = sys.argv[1:]
uploaded, stuck, bound = int(uploaded), int(stuck), int(bound)
# A resumed run is one run in two parts: the kept part's start, build and wall time carry over.
kept = json.load(open(f"{work}/run.json")) if resume == "1" else None
large = json.load(open(f"{work}/large.json"))
phases = []
for line in open(f"{work}/phases"):
    name, docs, secs = line.split()
    a, b = (json.load(open(f"{work}/cpu-{name}-{i}.json")) for i in (0, 1))
    cpu = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    cpu["other"] = cpu["machine busy"] - sum(v for k, v in cpu.items() if not k.startswith("machine"))
    phases.append({"name": name, "documents": int(docs), "seconds": float(secs), "cpu": cpu,
                   "per_min": int(docs) / float(secs) * 60 if float(secs) > 0 else 0})
total_s = sum(p["seconds"] for p in phases)
rows = [r for f in sorted({f"{work}/samples.csv", samples}) if os.path.exists(f) for r in csv.DictReader(open(f))]
col = lambda k: [int(r[k]) for r in rows if r.get(k, "").strip()]
pgc, sv = col("pg_clients"), col("sv_total")
lost = max(uploaded - large["documents"], 0)
extra_docs = max(large["documents"] - uploaded, 0)
entities, chunks = large["milvus_entities"], large["chunks"]
doubled = large["doubled_contents"] + extra_docs + (max(entities - chunks, 0) if entities is not None else 0)
problems = []
if lost: problems.append(f"lost: {lost} uploaded keys have no document")
if large["other"] or stuck: problems.append(f"stuck: {large['other']} documents not terminal")
if large["doubled_contents"]: problems.append(f"doubled: {large['doubled_contents']} indexed documents repeat a content the library holds once")
if extra_docs: problems.append(f"doubled: {extra_docs} more documents than uploaded keys")
if entities is None: problems.append("Milvus's entities could not be counted")
elif entities > chunks: problems.append(f"doubled: Milvus holds {entities - chunks} entities more than the {chunks} chunks PostgreSQL holds")
elif entities < chunks: problems.append(f"Milvus holds {chunks - entities} entities fewer than the {chunks} chunks PostgreSQL holds")
if large["keys_planned"] != uploaded: problems.append(f"{uploaded} keys uploaded, {large['keys_planned']} planned")
ok = not (lost or large["other"] or stuck or doubled or entities is None)
run = {"mode": mode, "machine": machine, "cores": os.cpu_count(), "started": kept["started"] if kept else started,
       "resumed": started if kept else None, "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
       "commit": kept["commit"] if kept else commit, "phases": phases, "laws_planned": int(laws_planned),
       "binary": kept["binary"] if kept else built,
       "ingest_docs_per_min": sum(p["documents"] for p in phases) / total_s * 60 if total_s else 0,
       "samples": len(rows), "max_pg_backends": max(col("pg_backends") or [0]), "max_pg_clients": max(pgc or [0]),
       "max_pgbouncer_server": max(sv or [0]), "max_waiting": max(col("cl_waiting") or [0]),
       "bound": bound, "pools": int(pools), "pool_size": int(pool), "pgbouncer_pool": int(pgb),
       "within_bound": max(pgc or [0]) <= bound and max(sv or [0]) <= bound,
       "wall_s": time.time() - float(t0) + (kept["wall_s"] if kept else 0), "problems": problems, "ok": ok,
       "verdict": f"{uploaded:,} keys, {large['documents']:,} documents, {lost} lost, {large['other']} stuck, {doubled} doubled"}
json.dump(run, open(f"{work}/run.json", "w"), ensure_ascii=False, indent=1)
PY
REPORT="$(measure report --small "$WORK/small.json" --large "$WORK/large.json" --run "$WORK/run.json")"
printf '%s\n' "$REPORT" >"$WORK/report.md"
OK=0
"$PY" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$WORK/run.json" || OK=1
[[ $OK == 0 ]] || log "lost, stuck or doubled documents: see the report ($WORK/report.md)"
# Cleaned up before the report, so that its JSON line is the last thing printed.
clean_up
printf '%s\n' "$REPORT"
exit "$OK"
