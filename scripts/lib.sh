# shellcheck shell=bash
# Helpers shared by scripts/stack.sh and scripts/fetch-pdfium.sh. Source it; do not run it.
# Everything the local stack owns lives under $ROOT/.local (git-ignored).

if [[ -z "${ROOT:-}" ]]; then
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
fi
# shellcheck disable=SC2034  # used by the scripts that source this file
LOCAL="$ROOT/.local"

# Diagnostics go to stderr so that `stack.sh env` keeps a clean stdout.
log()  { printf '[stack] %s\n' "$*" >&2; }
warn() { printf '[stack] WARNING: %s\n' "$*" >&2; }
die()  { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

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
