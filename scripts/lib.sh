# shellcheck shell=bash
# Helpers shared by scripts/stack.sh, scripts/fetch-pdfium.sh and scripts/sam-local.sh. Source it; do not run it.
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
