#!/usr/bin/env bash
# Starts or stops the dev runner (`docpipe dev`) in the background: it polls the pipeline's queues
# and invokes the same handlers the Lambda functions run. Log: .local/dev-runner.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOCAL="$ROOT/.local"
PIDFILE="$LOCAL/dev-runner.pid"
LOG="$LOCAL/dev-runner.log"
BIN="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}/debug/docpipe"

running() {
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "docpipe dev"
}

case "${1:-}" in
  start)
    if running; then echo "[dev-runner] already running (pid $(cat "$PIDFILE"))"; exit 0; fi
    mkdir -p "$LOCAL"
    eval "$(bash "$ROOT/scripts/stack.sh" env)"
    # `docpipe dev` names itself in argv, which `running` checks before trusting a pid file.
    nohup "$BIN" dev >> "$LOG" 2>&1 < /dev/null &
    echo $! > "$PIDFILE"
    sleep 1
    running || { tail -n 20 "$LOG" >&2; echo "[dev-runner] failed to start" >&2; exit 1; }
    echo "[dev-runner] started (pid $(cat "$PIDFILE")), log $LOG"
    ;;
  stop)
    if running; then
      pid="$(cat "$PIDFILE")"
      kill -INT "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do running || break; sleep 0.1; done
      running && kill -KILL "$pid" 2>/dev/null || true
      echo "[dev-runner] stopped"
    fi
    rm -f "$PIDFILE"
    ;;
  restart) "$0" stop; "$0" start ;;
  status)
    if running; then echo "  dev-runner up    pid $(cat "$PIDFILE")"; else echo "  dev-runner down"; fi
    ;;
  *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
