#!/usr/bin/env bash
# make destroy: delete the stack (sam delete), then say what stays and how to remove each
# (README, "Deploying to AWS", "Back to nothing").
#
#   make destroy CONFIRM=docpipe                 the stack samconfig.toml names (docpipe)
#   make destroy STACK=docpipe-test CONFIRM=docpipe-test
#   DRY_RUN=1 make destroy CONFIRM=docpipe       read the stack (read-only calls) and print the
#                                                delete without running it; without credentials or
#                                                a stack, <placeholders> stand for its values
#
# CONFIRM must repeat the stack's name: nothing is deleted without it. What outlives the stack:
# the documents bucket (DeletionPolicy RetainExceptOnCreate), the database's tables and rows, the
# Milvus collection, the packaged code in SAM's managed bucket, and the alarms' KMS key for its
# waiting period. The region and credentials are the AWS profile's (AWS_PROFILE, AWS_REGION).
set -euo pipefail
LOG_TAG=destroy
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
. "$ROOT/scripts/lib.sh"
cd "$ROOT"

# The stack: STACK, else samconfig.toml's [default.deploy.parameters] stack_name (as make deploy).
default_stack="$(sed -n 's/^stack_name *= *"\(.*\)"/\1/p' samconfig.toml | head -n 1)"
STACK="${STACK:-${default_stack:-docpipe}}"
DRY_RUN="${DRY_RUN:-}"
if [[ "${CONFIRM:-}" != "$STACK" ]]; then
  again="make destroy CONFIRM=$STACK"
  [[ "$STACK" == "$default_stack" ]] || again="make destroy STACK=$STACK CONFIRM=$STACK"
  die "make destroy deletes the stack $STACK and everything in it (functions, queues, API, alarms, endpoints); confirm with the stack's name: $again"
fi
dry_note=""
[[ -z "$DRY_RUN" ]] || dry_note=" (DRY_RUN: it is not)"
export PATH="$LOCAL/tools-venv/bin:$PATH" SAM_CLI_TELEMETRY=0

run() {  # a command that changes something: printed, and run unless DRY_RUN
  printf '+ %s\n' "$*"
  [[ -n "$DRY_RUN" ]] || "$@"
}

region_args=()
# SAM's clients read AWS_DEFAULT_REGION or the profile's region, not AWS_REGION (as make deploy).
if [[ -z "${AWS_DEFAULT_REGION:-}" && -n "${AWS_REGION:-}" ]]; then region_args=(--region "$AWS_REGION"); fi

# The stack's parameters and the ids of what outlives it, read before the delete (sam and boto3
# come with the template tools' venv, installed on first use: a fresh clone needs nothing else).
bash scripts/lint-template.sh --install-only >/dev/null
PY="$LOCAL/tools-venv/bin/python"
printf '+ %s\n' "aws cloudformation describe-stacks --stack-name $STACK   # its parameters and resources, read first"
facts="$("$PY" - "$STACK" <<'EOF' 2>&1 || true
import json, sys
import boto3
from botocore.exceptions import BotoCoreError, ClientError
stack = sys.argv[1]
try:
    cfn = boto3.client("cloudformation")
    s = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in s.get("Parameters", [])}
    ids = {}
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack):
        for r in page["StackResourceSummaries"]:
            ids[r["LogicalResourceId"]] = r.get("PhysicalResourceId", "")
except (BotoCoreError, ClientError) as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(0)
sam_bucket = ""
try:
    for o in cfn.describe_stacks(StackName="aws-sam-cli-managed-default")["Stacks"][0].get("Outputs", []):
        if o["OutputKey"] == "SourceBucket":
            sam_bucket = o["OutputValue"]
except (BotoCoreError, ClientError):
    pass
print(json.dumps({"region": cfn.meta.region_name, "status": s["StackStatus"], "params": params,
                  "key": ids.get("AlarmsKey", ""), "sam_bucket": sam_bucket}))
EOF
)"
get() {
  "$PY" -c 'import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
for p in sys.argv[1].split("."):
    d = (d or {}).get(p, "")
print(d)' "$1" <<<"$facts"
}
error="$(get error 2>/dev/null || echo "${facts//$'\n'/ }")"
if [[ -z "$error" ]]; then
  REGION="$(get region)"; BUCKET="$(get params.BucketName)"; MILVUS_URL="$(get params.MilvusUrl)"
  COLLECTION="$(get params.MilvusCollection)"; MILVUS_TOKEN_ARN="$(get params.MilvusTokenSecretArn)"
  DATABASE_URL="$(get params.DatabaseUrl)"; KEY_ID="$(get key)"; SAM_BUCKET="$(get sam_bucket)"
  log "stack $STACK in $REGION ($(get status)): bucket $BUCKET, Milvus collection $COLLECTION at $MILVUS_URL"
elif [[ -n "$DRY_RUN" ]]; then
  log "DRY_RUN: cannot read stack $STACK ($error); its values are shown as <placeholders>"
  REGION="${AWS_REGION:-${AWS_DEFAULT_REGION:-<region>}}"; BUCKET="<BucketName>"; MILVUS_URL="<MilvusUrl>"
  COLLECTION="<MilvusCollection>"; MILVUS_TOKEN_ARN="<MilvusTokenSecretArn>"
  DATABASE_URL="postgres://<user>@<proxy endpoint>:5432/<database>"; KEY_ID="<AlarmsKey id>"; SAM_BUCKET="<SAM's SourceBucket>"
else
  die "cannot read stack $STACK: $error (the profile's region: AWS_REGION=${AWS_REGION:-unset}, AWS_PROFILE=${AWS_PROFILE:-unset})"
fi

log "deleting stack $STACK: functions in a VPC wait for Lambda to remove their network interfaces, which can take up to 45 minutes"
run sam delete --stack-name "$STACK" --no-prompts "${region_args[@]}"

# The tables the migrations create, from migrations/ (the database may hold other things).
tables="$(grep -hoiE 'CREATE TABLE (IF NOT EXISTS )?[a-z_]+' migrations/*.sql | awk '{print $NF}' | sort -u | tr '\n' ' ')"
db_name="${DATABASE_URL##*/}"; db_name="${db_name%%\?*}"
if [[ -n "$MILVUS_TOKEN_ARN" ]]; then
  token_line="TOKEN=\$(aws secretsmanager get-secret-value --secret-id $MILVUS_TOKEN_ARN --query SecretString --output text)"
else
  token_line="TOKEN=   # MilvusTokenSecretArn is empty: no token"
fi

if [[ -n "$SAM_BUCKET" ]]; then
  sam_item="4. SAM's managed artifact bucket $SAM_BUCKET (stack aws-sam-cli-managed-default): sam delete
   removed this stack's packaged code from it, but the bucket is versioned, so the old versions
   stay, and it serves every SAM application of the account in $REGION. If docpipe is the only one:
     python3 -c \"import boto3; boto3.resource('s3').Bucket('$SAM_BUCKET').object_versions.delete()\"
     aws cloudformation delete-stack --stack-name aws-sam-cli-managed-default
     aws s3 rb s3://$SAM_BUCKET        # if the stack kept it (its DeletionPolicy is Retain)"
else
  sam_item="4. SAM's managed artifact bucket: no stack aws-sam-cli-managed-default in $REGION, nothing to remove."
fi

cat <<EOF

[destroy] stack $STACK is deleted$dry_note. What stays, and how to remove each:

1. The documents bucket, kept on purpose (the originals are the one copy; DeletionPolicy
   RetainExceptOnCreate). It holds uploads/ and artifacts/; the template enables no versioning.
     aws s3 rb s3://$BUCKET --force
   If someone enabled versioning on it, --force leaves the old versions and the delete fails;
   remove every version first:
     python3 -c "import boto3; b=boto3.resource('s3').Bucket('$BUCKET'); b.object_versions.delete(); b.delete()"

2. The database's tables and rows (the migrations' schema, in database $db_name of DatabaseUrl).
   A database of docpipe's own: drop it, connected as its owner to another database of the
   instance (directly, not through RDS Proxy, whose pooled connections FORCE closes too)
     DROP DATABASE "$db_name" WITH (FORCE);
   A database shared with other things: drop docpipe's tables only
     DROP TABLE IF EXISTS $(sed 's/ $//; s/ /, /g' <<<"$tables"), docpipe_migrations CASCADE;
   The database, its user and secret, and RDS Proxy are yours: the stack made none of them.

3. The Milvus collection $COLLECTION at $MILVUS_URL, from a host that reaches it:
     $token_line
     curl -X POST "$MILVUS_URL/v2/vectordb/collections/drop" -H "Authorization: Bearer \$TOKEN" \\
          -H "Content-Type: application/json" -d '{"collectionName": "$COLLECTION"}'
   (REST API v2: Milvus 2.4 and later, Zilliz Cloud), or with pymilvus (pip install pymilvus; any Milvus 2.x):
     TOKEN=\$TOKEN python3 -c "import os; from pymilvus import MilvusClient; MilvusClient(uri='$MILVUS_URL', token=os.environ['TOKEN']).drop_collection('$COLLECTION')"

$sam_item

5. The alarms' KMS key $KEY_ID: CloudFormation scheduled its deletion with the stack, after a waiting
   period of 30 days (its PendingWindowInDays default; KMS allows 7 to 30, and the key is unusable
   meanwhile). To see it, and to shorten the wait to the 7-day minimum:
     aws kms describe-key --key-id $KEY_ID --query 'KeyMetadata.[KeyState,DeletionDate]'
     aws kms cancel-key-deletion --key-id $KEY_ID
     aws kms schedule-key-deletion --key-id $KEY_ID --pending-window-in-days 7

6. Log groups: none stay. The stack's own (/docpipe/$STACK/…) go with it, and each function logs
   only there (LoggingConfig), so Lambda made no /aws/lambda/ group. To be sure:
     aws logs describe-log-groups --log-group-name-prefix /docpipe/$STACK/ --query 'logGroups[].logGroupName'

The VPC, its subnets, route tables, security groups and NAT, the secrets, the Bedrock model and
the account's quotas are yours: the stack made none of them (its endpoints and security groups
went with it).
EOF
