#!/usr/bin/env bash
# make deploy: the whole deploy in one command (README, "Deploying to AWS").
#
#   make deploy PARAMS="DatabaseUrl=… DatabaseSecretArn=… VpcId=… SubnetIds=a,b SecurityGroupIds=sg-…
#                       PathToS3=create PrivateRouteTableIds=rtb-…,rtb-… PathToSqs=create
#                       PathToSecretsManager=create PathToBedrock=create PathToEvents=create BucketName=…
#                       MilvusUrl=…"
#   make deploy                      a later deploy: CloudFormation keeps every parameter's previous value
#   make deploy STACK=docpipe-test   another stack name than samconfig.toml's
#   make deploy QUOTAS="memory=10240,concurrency=1000"
#                                    the account's Lambda quotas, for deploy-check (default: a new
#                                    account's, 3,008 MB and 10 concurrent executions)
#
# 1. preflight with the deploy's parameters (scripts/preflight.py: the subnets' zones against each
#    endpoint service, existing endpoints, routes, the bucket name, the model, the quotas; online,
#    read-only; SKIP_PREFLIGHT=1 skips it);
# 2. deploy-check with the deploy's parameters (the template's rules, offline), against the account's
#    concurrency quota the preflight read (or QUOTAS);
# 3. the layers (libpdfium.so and the OCR files for x86_64), fetched if missing, and their libraries'
#    symbol versions checked against Amazon Linux 2023's glibc and libstdc++ (scripts/layer_abi.py);
# 4. sam build (cargo lambda, every function);
# 5. sam deploy with samconfig.toml's [default.deploy.parameters], PARAMS, and MigrationRunId set to
#    the commit and the time, so that CloudFormation sends the Migrations custom resource an update
#    on every deploy and the migrations run again (they are idempotent).
# The region and credentials are the AWS profile's (AWS_PROFILE, AWS_REGION, ~/.aws): nothing here
# names an account.
set -euo pipefail
LOG_TAG=deploy
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
PARAMS="${PARAMS:-}"

case " $PARAMS " in
  *" MigrationRunId="*) die "MigrationRunId is set by make deploy (the commit and the time); leave it out of PARAMS" ;;
esac

# The stack, as sam deploy will name it: STACK, else samconfig.toml's stack_name.
stack="${STACK:-$(sed -n 's/^stack_name *= *"\(.*\)"/\1/p' samconfig.toml | head -n 1)}"

log "1/5 preflight: the VPC, the account and the names, asked of AWS with these parameters"
if [[ "${SKIP_PREFLIGHT:-}" == 1 ]]; then
  log "skipped (SKIP_PREFLIGHT=1)"
else
  bash scripts/lint-template.sh --install-only >/dev/null
  quotas_file="$LOCAL/preflight-quotas"
  rm -f "$quotas_file"
  "$LOCAL/tools-venv/bin/python" scripts/preflight.py --stack "$stack" --param "$PARAMS" --quotas-out "$quotas_file" \
    || die "the preflight failed (above); fix the parameters or the VPC, or SKIP_PREFLIGHT=1 to deploy regardless"
  # The account's real concurrency quota, for deploy-check (unless QUOTAS says otherwise).
  if [[ -z "${QUOTAS:-}" && -s "$quotas_file" ]]; then export QUOTAS="$(cat "$quotas_file")"; fi
fi

log "2/5 deploy-check${QUOTAS:+ (QUOTAS=$QUOTAS)}"
if [[ -n "$PARAMS" ]]; then
  bash scripts/deploy-check.sh --param "$PARAMS"
else
  bash scripts/deploy-check.sh
fi

log "3/5 layers"
bash scripts/fetch-pdfium.sh --layer
bash scripts/fetch-ocr.sh --layer
python3 scripts/layer_abi.py "$LOCAL/layers" >&2 || die "a layer's library needs more than Amazon Linux 2023 provides (above)"

# sam and cargo-lambda (with zig) from the template tools' venv.
bash scripts/lint-template.sh --install-only >/dev/null
export PATH="$LOCAL/tools-venv/bin:$HOME/.cargo/bin:$PATH" SAM_CLI_TELEMETRY=0
log "4/5 sam build"
sam build

commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
run_id="$commit-$(date -u +%Y%m%dT%H%M%SZ)"
log "5/5 sam deploy (MigrationRunId=$run_id)"
args=(--parameter-overrides "MigrationRunId=$run_id $PARAMS")
[[ -n "${STACK:-}" ]] && args+=(--stack-name "$STACK")
# SAM's managed-bucket client reads AWS_DEFAULT_REGION or the profile's region, not AWS_REGION.
if [[ -z "${AWS_DEFAULT_REGION:-}" && -n "${AWS_REGION:-}" ]]; then args+=(--region "$AWS_REGION"); fi
sam deploy "${args[@]}"
