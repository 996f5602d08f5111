#!/usr/bin/env bash
# Runs each function's real Lambda binary under `cargo lambda watch` (the Lambda runtime API,
# locally) and invokes it with `cargo lambda invoke --data-file events/…`, against the running
# stack. One document goes through store → parse → index this way; every answer is checked.
#
#   bash scripts/lambda-invoke.sh          (make up first)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
bash scripts/lint-template.sh --install-only >/dev/null
export PATH="$LOCAL/tools-venv/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
PORT="${DOCPIPE_LAMBDA_PORT:-9100}"
ENV_FILE="$LOCAL/lambda.env"
WORK="$LOCAL/lambda-invoke"
mkdir -p "$WORK"

eval "$(bash scripts/stack.sh env)"
# The functions' environment, as template.yaml gives it, pointed at the local stack. Its own
# collection keeps this check apart from whatever the dev runner indexed with another embedder.
{ bash scripts/stack.sh env | sed 's/^export //'
  # The clock every function checks at start: the template's values, as CloudFormation passes them.
  "$CARGO_TARGET_DIR/debug/docpipe" template-env
  echo "DOCPIPE_EMBEDDER=hash"
  echo "DOCPIPE_MILVUS_COLLECTION=docpipe_lambda_check"
  echo "DOCPIPE_WEBHOOK_TOKEN=lambda-invoke-check"
} > "$ENV_FILE"

cargo lambda watch -A 127.0.0.1 -P "$PORT" --env-file "$ENV_FILE" > "$WORK/watch.log" 2>&1 &
WATCH=$!
trap 'kill $WATCH 2>/dev/null || true; wait $WATCH 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
  sleep 0.2
done

failures=0
invoke() { # NAME EVENT_FILE EXPECTED_SUBSTRING
  local name="$1" event="$2" want="$3" out
  out="$(cargo lambda invoke "$name" --data-file "$event" --invoke-address 127.0.0.1 --invoke-port "$PORT" 2>&1 || true)"
  if grep -qF -- "$want" <<<"$out"; then
    printf '  ok    %-8s %-40s %s\n' "$name" "${event#"$ROOT"/}" "$(tr -d '\n' <<<"$out" | cut -c1-90)"
  else
    printf '  FAIL  %-8s %-40s expected %q, got: %s\n' "$name" "${event#"$ROOT"/}" "$want" "$out"
    failures=$((failures + 1))
  fi
}

echo "[lambda-invoke] functions under cargo lambda watch on 127.0.0.1:$PORT"
invoke store events/store-s3-test-event.json '"test event acknowledged"'

# A real upload: the object, then the S3 event that names it.
# Outside uploads/, so the bucket notification (and a running dev runner) leaves it to this check.
KEY="lambda-check/第一条 check-$(date +%s).md"
printf '# 本地检查条例\n\n## 第一章 总则\n\n第一条 为了检查函数的真实二进制，制定本条例。\n\n第二条 本条例自公布之日起施行。\n' > "$WORK/doc.md"
"$LOCAL/venv/bin/python" - "$KEY" "$WORK" <<'PY'
import sys, json, urllib.parse, boto3
key, work = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:5000", region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
s3.put_object(Bucket="docpipe-local", Key=key, Body=open(f"{work}/doc.md", "rb").read(), ContentType="text/markdown")
event = json.load(open("events/store-s3-put-moto.json"))
event["Records"][0]["s3"]["bucket"]["name"] = "docpipe-local"
event["Records"][0]["s3"]["object"]["key"] = urllib.parse.quote_plus(key)
json.dump(event, open(f"{work}/store-put.json", "w"), ensure_ascii=False)
PY
invoke store "$WORK/store-put.json" 'stored ('

DOC_ID="$(psql "$DATABASE_DIRECT_URL" -Atc "SELECT doc_id FROM documents WHERE object_name = '$KEY'")"
RUN_ID="$(psql "$DATABASE_DIRECT_URL" -Atc "SELECT current_run_id FROM documents WHERE doc_id = '$DOC_ID'")"
for fn in parse index; do
  sed "s/doc_0123456789abcdef0123456789abcdef/$DOC_ID/; s/\\\\\"run_id\\\\\":1}/\\\\\"run_id\\\\\":$RUN_ID}/" \
    "events/$fn-sqs-job.json" > "$WORK/$fn-job.json"
  invoke "$fn" "$WORK/$fn-job.json" '"batchItemFailures":[]'
done
status="$(psql "$DATABASE_DIRECT_URL" -Atc "SELECT status FROM documents WHERE doc_id = '$DOC_ID'")"
if [[ "$status" == indexed ]]; then echo "  ok    $DOC_ID is indexed"; else echo "  FAIL  $DOC_ID is $status"; failures=$((failures + 1)); fi

invoke parse events/parse-sqs-job.json '"batchItemFailures":[]'
invoke dlq events/dlq-sqs-parse-job.json '"batchItemFailures":[]'
invoke sweeper events/sweeper-schedule.json '"redriven":'
if [[ -f functions/api/Cargo.toml && -f events/api-get-healthz.json ]]; then
  invoke api events/api-get-healthz.json '"statusCode":'
fi

if (( failures > 0 )); then
  echo "[lambda-invoke] $failures invocation(s) failed; cargo lambda watch log: $WORK/watch.log" >&2
  exit 1
fi
echo "[lambda-invoke] every function answered as expected"
