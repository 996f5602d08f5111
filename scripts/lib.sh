# shellcheck shell=bash
# Helpers shared by scripts/stack.sh, scripts/fetch-pdfium.sh, scripts/sam-local.sh, scripts/load.sh and
# scripts/scale.sh. Source it; do not run it.
# Everything the local stack owns lives under $ROOT/.local (git-ignored).

if [[ -z "${ROOT:-}" ]]; then
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
fi
# shellcheck disable=SC2034  # used by the scripts that source this file
LOCAL="$ROOT/.local"

# Diagnostics go to stderr so that `stack.sh env` keeps a clean stdout. A script names itself in
# LOG_TAG before sourcing this file (default: stack).
LOG_TAG="${LOG_TAG:-stack}"
log()  { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "$LOG_TAG" "$*" >&2; }
die()  { printf '[%s] ERROR: %s\n' "$LOG_TAG" "$*" >&2; exit 1; }

now() { date +%s.%N; }
# elapsed START -> seconds with 1 decimal
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }

# Phase timing: `phase_begin NAME` ... `phase_end`.
_PHASE_NAME="" _PHASE_T0=""
PHASE_REPORT=()
phase_begin() { _PHASE_NAME="$1"; _PHASE_T0="$(now)"; log "── $1"; }
phase_end() {
  local t; t="$(elapsed "$_PHASE_T0")"
  log "   $_PHASE_NAME: ${t}s"
  PHASE_REPORT+=("$(printf '%-12s %6ss' "$_PHASE_NAME" "$t")")
}

# Python interpreter used to build the venv: $PYTHON, else Debian's, else whatever python3 is on PATH.
pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  if [[ -x /usr/bin/python3 ]]; then echo /usr/bin/python3; return; fi
  command -v python3 || die "no python3 found"
}

# Python for the fetch scripts' pip downloads: the stack's venv once it exists, else pick_python.
fetch_python() {
  if [[ -x "$LOCAL/venv/bin/python" ]]; then echo "$LOCAL/venv/bin/python"; else pick_python; fi
}

# The benchmarks' Python baselines (.local/bench-venv), kept in step with
# scripts/requirements-bench.txt: a changed list is installed on the next run. Prints the python.
bench_python() {
  local venv="$LOCAL/bench-venv" stamp want
  stamp="$venv/.requirements.sha256"
  want="$(sha256sum "$ROOT/scripts/requirements-bench.txt" | cut -d' ' -f1)"
  if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    log "preparing $venv"
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r "$ROOT/scripts/requirements-bench.txt" >&2
    echo "$want" >"$stamp"
  fi
  echo "$venv/bin/python"
}

# ───────────────────────────── process helpers ─────────────────────────────

read_pid() { if [[ -f "$1" ]]; then tr -dc '0-9' < <(head -n1 "$1"); fi; }

# pid_matches PID PATTERN: the process exists, is not a zombie, and its command line contains
# PATTERN. Guards against pid files that outlived a reboot and now name someone else's process.
pid_matches() {
  local pid="${1:-}" pat="$2" cmd
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmd="$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")" || return 1
  [[ -n "$cmd" && "$cmd" == *"$pat"* ]]
}

# port_bound PORT: something listens on loopback's PORT (127.0.0.1, ::1 or a wildcard address).
# A listener on another address (make sam-local's relays on podman's bridge) does not count: it
# neither blocks the stack's own service on loopback nor stands in for it.
port_bound() {
  ss -Hltn "( sport = :$1 )" 2>/dev/null | awk '{print $4}' \
    | grep -qE "^(127\.0\.0\.1|0\.0\.0\.0|\*|\[::\]|\[::1\]|\[::ffff:127\.0\.0\.1\]):$1\$"
}
port_owner() { ss -Hltnp "( sport = :$1 )" 2>/dev/null | grep -o 'users:.*' | head -n1 || true; }

# wait_until SECONDS CMD...: poll CMD every 0.2 s
wait_until() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}

not_running() { ! pid_matches "$1" "$2"; }

# stop_pid PID PATTERN SIGNAL TIMEOUT: signal, wait, then SIGKILL. Quiet if already gone.
stop_pid() {
  local pid="$1" pat="$2" sig="$3" t="$4"
  pid_matches "$pid" "$pat" || return 0
  kill "-$sig" "$pid" 2>/dev/null || true
  if ! wait_until "$t" not_running "$pid" "$pat"; then
    warn "pid $pid ($pat) ignored SIG$sig for ${t}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_until 10 not_running "$pid" "$pat" || warn "pid $pid still there after SIGKILL"
  fi
}

ports_free() { local p; for p in "$@"; do ! port_bound "$p" || return 1; done; }

tail_log() {
  if [[ -f "$1" ]]; then log "last lines of $1:"; tail -n "${2:-30}" "$1" | sed 's/^/    /' >&2; fi
}

# ───────────────── an isolated pipeline set (scripts/load.sh, scripts/scale.sh) ─────────────────
# A database, a bucket with its queues, DLQs and notification, and a Milvus collection of their own,
# beside the main set: named by ISO_DB, ISO_BUCKET, ISO_QUEUE_PREFIX and ISO_COLLECTION. The caller
# has the stack's environment (scripts/stack.sh env) and PY, the stack's venv python.

# with_db URL DB: the URL with its database replaced (postgres://u:p@h:port/db?query -> …/DB?query)
with_db() { sed -E "s#^(postgres(ql)?://[^/]+)/[^?]*#\1/$2#" <<<"$1"; }

iso_milvus_drop() {
  curl -s -m 10 -X POST "$MILVUS_URL/v1/vector/collections/drop" -H 'content-type: application/json' \
    -d "{\"collectionName\":\"$ISO_COLLECTION\"}" >/dev/null || true
}

# iso_remove: the set gone, whatever of it exists.
iso_remove() {
  psql "$DATABASE_DIRECT_URL" -XAtq -c "DROP DATABASE IF EXISTS $ISO_DB WITH (FORCE)" >/dev/null 2>&1 || true
  "$PY" "$ROOT/scripts/resources.py" --delete --bucket "$ISO_BUCKET" --queue-prefix "$ISO_QUEUE_PREFIX" \
    >/dev/null 2>&1 || true
  iso_milvus_drop
}

# iso_create DOCPIPE LOG: a fresh set (what an earlier run kept goes first), the database migrated
# through PgBouncer (DOCPIPE migrate, its output in LOG); exports DATABASE_URL, the set's bucket and
# queue URLs (scripts/resources.py --format env) and DOCPIPE_MILVUS_COLLECTION.
iso_create() {
  iso_remove
  psql "$DATABASE_DIRECT_URL" -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE $ISO_DB" >/dev/null
  iso_attach "$@"
}

# iso_attach DOCPIPE LOG: the set's existing database migrated (DOCPIPE migrate, idempotent), its
# bucket and queues made when missing (the emulator keeps them in memory only); the same exports
# as iso_create. A --resume of scripts/scale.sh attaches to what a kept run left.
iso_attach() {
  local url
  url="$(with_db "$DATABASE_URL" "$ISO_DB")"
  # PgBouncer refuses logins to a database for server_login_retry (15 s) after one failed: the
  # same name dropped by an earlier run's clean-up a moment ago. Wait that out, once.
  if ! DATABASE_URL="$url" "$1" migrate >"$2" 2>&1; then
    grep -q server_login_retry "$2" || { cat "$2" >&2; die "migrate failed"; }
    log "PgBouncer still remembers a failed login to $ISO_DB: migrating again in 16 s"
    sleep 16
    DATABASE_URL="$url" "$1" migrate >"$2" 2>&1 || { cat "$2" >&2; die "migrate failed"; }
  fi
  eval "$("$PY" "$ROOT/scripts/resources.py" --bucket "$ISO_BUCKET" --queue-prefix "$ISO_QUEUE_PREFIX" \
    --format env 2>/dev/null)"
  export DATABASE_URL="$url" DOCPIPE_MILVUS_COLLECTION="$ISO_COLLECTION"
}

# iso_workers QUEUE [WORKERS]: the workers the dev runner runs for QUEUE (StoreEventsQueue,
# ParseQueue, IndexQueue): WORKERS when given (--workers), else the template's MaximumConcurrency.
iso_workers() {
  [[ -n "${2:-}" ]] && { echo "$2"; return; }
  "$PY" - "$1" "$ROOT/template.yaml" <<'PY'
import re, sys
text = open(sys.argv[2]).read()
name = {"StoreEventsQueue": "StoreMaxConcurrency", "ParseQueue": "ParseMaxConcurrency", "IndexQueue": "IndexMaxConcurrency"}[sys.argv[1]]
print(re.search(rf"^  {name}:\n(?:    .*\n)*?    Default: (\d+)", text, re.M).group(1))
PY
}

# iso_connection_bound WORKERS POOL_SIZE EXTRA_POOLS: sets ISO_POOLS and ISO_BOUND. Every function
# process of the dev runner (a Lambda container each: store, parse and index workers, one per DLQ)
# and the dev runner itself (its sweeper) hold a pool of DOCPIPE_DB_POOL_SIZE, as each Lambda
# container does, and so does the API when the dev runner serves it (EXTRA_POOLS 1); PgBouncer
# (RDS Proxy's part) multiplexes them onto its pool. The caller's status queries add one client.
iso_connection_bound() {
  local workers="$1" pool="$2" extra="${3:-0}" pgb
  ISO_POOLS=$(( $(iso_workers StoreEventsQueue "$workers") + $(iso_workers ParseQueue "$workers") \
    + $(iso_workers IndexQueue "$workers") + 3 + 1 + extra ))
  ISO_BOUND=$((ISO_POOLS * pool + 1))
  pgb="$(grep -E '^default_pool_size' "$ROOT/.local/pgbouncer/pgbouncer.ini" 2>/dev/null | awk -F= '{gsub(/ /,"",$2); print $2}')"
  ISO_PGB_POOL="${pgb:-20}"
  [[ $ISO_BOUND -gt $ISO_PGB_POOL ]] && ISO_BOUND=$ISO_PGB_POOL
  return 0
}

# iso_start_runner DOCPIPE LOG ARGS…: `DOCPIPE dev ARGS…` in the background (ISO_RUNNER_PID), its
# output in LOG, waited for until its index poller runs.
iso_start_runner() {
  local docpipe="$1" runner_log="$2"; shift 2
  "$docpipe" dev "$@" >"$runner_log" 2>&1 &
  ISO_RUNNER_PID=$!
  for _ in $(seq 100); do
    grep -q "index ←" "$runner_log" 2>/dev/null && return 0
    kill -0 "$ISO_RUNNER_PID" 2>/dev/null || { tail -20 "$runner_log" >&2; die "the dev runner exited"; }
    sleep 0.2
  done
  tail -20 "$runner_log" >&2
  die "the dev runner's index poller did not start in 20 s"
}

# iso_stop_runner: the dev runner stopped (TERM, then KILL after 5 s), if it runs.
iso_stop_runner() {
  if [[ -n "${ISO_RUNNER_PID:-}" ]] && kill -0 "$ISO_RUNNER_PID" 2>/dev/null; then
    kill -TERM "$ISO_RUNNER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$ISO_RUNNER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$ISO_RUNNER_PID" 2>/dev/null || true
    wait "$ISO_RUNNER_PID" 2>/dev/null || true
  fi
  ISO_RUNNER_PID=""
}

# iso_sample: once a second until killed, a CSV line of the backends on ISO_DB (pg_stat_activity,
# direct) and PgBouncer's pools for it (SHOW POOLS), with a header first.
iso_sample() {
  echo "t,pg_backends,pg_clients,cl_active,cl_waiting,sv_active,sv_idle,sv_used,sv_total"
  while :; do
    local t pg pools tick
    sleep 1 & tick=$!
    t="$(date +%s.%N)"
    # Every backend on the database (autovacuum workers included), and the client backends alone.
    pg="$(psql "$DATABASE_DIRECT_URL" -XAtq -F , -c \
      "SELECT count(*), count(*) FILTER (WHERE backend_type = 'client backend')
       FROM pg_stat_activity WHERE datname = '$ISO_DB'" 2>/dev/null || echo ",")"
    pools="$(psql "$PGBOUNCER_ADMIN_URL" -XAq -F ',' -c 'SHOW POOLS' 2>/dev/null || true)"
    awk -F, -v t="$t" -v pg="$pg" -v db="$ISO_DB" '
      NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
      $col["database"] == db {
        ca += $col["cl_active"]; cw += $col["cl_waiting"]; sa += $col["sv_active"]
        si += $col["sv_idle"]; su += $col["sv_used"]
        st += $col["sv_active"] + $col["sv_idle"] + $col["sv_used"] + $col["sv_tested"] + $col["sv_login"]
      }
      END { printf "%s,%s,%d,%d,%d,%d,%d,%d\n", t, pg, ca, cw, sa, si, su, st }' <<<"$pools"
    wait "$tick"
  done
}
