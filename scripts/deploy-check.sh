#!/usr/bin/env bash
# make deploy-check: template.yaml after SAM's transform, against the rules AWS enforces when the
# stack is created and when it runs (scripts/deploy_check.py; each rule names its AWS document).
# Offline: samtranslator comes with aws-sam-cli in the template tools' venv (.local/tools-venv).
#
#   bash scripts/deploy-check.sh                         the template's defaults, every parameter set
#   bash scripts/deploy-check.sh --param "K=V K2=V2"     with the values a deploy passes (make deploy)
#   QUOTAS="memory=10240,concurrency=1000" bash scripts/deploy-check.sh
#                                                        the account's Lambda quotas (default: a new
#                                                        account's, 3,008 MB and 10 concurrent executions)
#
# First a self-test breaks the template once per rule and checks that each rule fires (no rule is
# dead), then the check itself; either failing fails the command.
set -euo pipefail
LOG_TAG=deploy-check
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
bash scripts/lint-template.sh --install-only >/dev/null
# The clock's rules are the functions' own (shared/core/src/clock.rs): the check asks the docpipe
# CLI (`docpipe clock-check`) rather than mirror them. The same build as `make up`'s, so a no-op
# after it; without the e5 engine's source, the CLI builds without it (the clock is the same).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
if [[ -f "$LOCAL/e5/src/e5.c" ]]; then FEATURES=(--features e5); else FEATURES=(); fi
cargo build -q -p docpipe-cli "${FEATURES[@]}" || die "cargo build -p docpipe-cli failed: deploy-check asks the CLI for the clock's rules"
export DOCPIPE_BIN="$CARGO_TARGET_DIR/debug/docpipe"
PY="$LOCAL/tools-venv/bin/python"
mkdir -p "$LOCAL"
SELF_LOG="$LOCAL/deploy-check-self-test.log"
if ! "$PY" scripts/deploy_check.py --self-test > "$SELF_LOG" 2>&1; then
  cat "$SELF_LOG" >&2
  die "the self-test failed: a rule no longer fires on the template it should refuse (log: $SELF_LOG)"
fi
tail -n 1 "$SELF_LOG"
"$PY" scripts/deploy_check.py ${QUOTAS:+--quotas "$QUOTAS"} "$@"
