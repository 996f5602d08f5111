#!/usr/bin/env bash
# Checks template.yaml the way AWS will: `sam validate --lint` and `cfn-lint`, both offline.
# The tools live in a venv of their own under .local/ (installed on first use).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
. "$ROOT/scripts/lib.sh"
VENV="$LOCAL/tools-venv"
REQS="$ROOT/scripts/requirements-tools.txt"
STAMP="$VENV/.requirements.sha256"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/sam" || "$(cat "$STAMP" 2>/dev/null)" != "$want" ]]; then
  log "installing the template tools into $VENV"
  "$(pick_python)" -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$REQS"
  echo "$want" > "$STAMP"
fi
[[ "${1:-}" == --install-only ]] && exit 0
cd "$ROOT"
# Neither tool needs credentials; a region keeps them from looking for a profile.
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 SAM_CLI_TELEMETRY=0
"$VENV/bin/cfn-lint" template.yaml
"$VENV/bin/sam" validate --lint --region us-east-1 --template-file template.yaml
echo "[lint-template] template.yaml: cfn-lint and sam validate --lint clean"
