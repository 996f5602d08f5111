#!/usr/bin/env python3
"""deploy-check: template.yaml read the way CloudFormation will create it, against AWS's own rules.

The template is first transformed by samtranslator (SAM's own translator, offline: the managed
policies come from the map samtranslator bundles, no AWS call), so every rule looks at what
CloudFormation receives: the roles SAM generates, its event source mappings, its policies. Then
every rule runs over every parameter set that changes which resources exist (each allowed value
of a parameter a Condition reads), with the template's defaults and, for the parameters without
one, the placeholders below (or the values given with --param, as `make deploy` does). Each rule
names the AWS document it comes from; any finding fails the check.

  python scripts/deploy_check.py [--template template.yaml] [--param Key=Value ...]
  python scripts/deploy_check.py --self-test        every rule fires on a known-bad variant
  python scripts/deploy_check.py --translate-only --translated-out FILE   (the IAM check's input)

Rules (the --list option prints them with their documents):
  esm-visibility         a queue that feeds a function hides a message at least that function's timeout
  esm-visibility-6x      ... and six times it, or the queue is in SIX_X_EXCEPTIONS with its reason
  esm-policy-order       a mapping depends on the policy that lets its role receive from its queue
  managed-policy         a role carries only allowlisted managed policies (scripts/iam/managed-policies.json)
  esm-after-migrations   a mapping waits for the migrations custom resource (the schema exists first)
  functions-after-migrations  every other function depends on the migrations (an update migrates first)
  bucket-name            a bucket name is valid for S3 whatever the stack is called
  bucket-retain          the documents bucket survives a stack delete or replacement, not a failed first create
  bucket-tls             the bucket refuses requests without TLS
  bucket-multipart       the bucket aborts incomplete multipart uploads
  alarm-topic-key        an alarm's SNS topic is under a key CloudWatch may use
  kms-key-admin          a KMS key's policy lets the account administer it
  log-group-order        a function's log group exists before the function
  alarm-metric           each alarm watches a metric, with dimensions, that something emits
  alarm-cannot-fire      no alarm watches a count its queue's consumer drains or a redrive skips
  alarm-coverage         dead letters, queue age, errors, throttles, API 5xx, access logs, actions
  network-path           each AWS service a function in a VPC calls has a path (endpoint, or a confirmed one per service)
  migrations-response-path  the migrations' function reaches CloudFormation's presigned S3 response URL
  clock                  the clock the functions check at start (shared/core/src/clock.rs), on every queue
  scheduled-overlap      a scheduled function cannot overlap itself (reserved concurrency 1 or a database lease)
  account-memory         no function's MemorySize is above the account's memory quota (--account-memory-mb)
  account-concurrency    reserved concurrency leaves 100 of the account's quota unreserved (--account-concurrency)

The account's quotas default to a new account's (3,008 MB, 10 concurrent executions):
  --account-memory-mb 10240 --account-concurrency 1000, or --quotas memory=10240,concurrency=1000
"""
from __future__ import annotations

import argparse
import copy
import fnmatch
import ipaddress
import itertools
import json
import logging
import os
import re
import shlex
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGION, ACCOUNT, PARTITION = "us-east-1", "123456789012", "aws"
# samtranslator asks boto3 for a region before it translates; no call is made.
os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
# samtranslator's own usage metrics warn when nobody publishes them.
logging.getLogger("samtranslator").setLevel(logging.ERROR)

# ───────────────────────────── rules and their documents ─────────────────────────────

LAMBDA_SQS = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html"
RULES: dict[str, tuple[str, list[str]]] = {
    "esm-visibility": (
        "a queue that is an event source of a function hides a message at least as long as the function's timeout "
        "(CreateEventSourceMapping refuses it otherwise: 'Queue visibility timeout: 30 seconds is less than Function timeout')",
        [LAMBDA_SQS + "#events-sqs-queueconfig"]),
    "esm-visibility-6x": (
        "AWS: set the source queue's visibility timeout to at least six times the function's timeout "
        "(exceptions, with their reasons, in SIX_X_EXCEPTIONS of this script and the README)",
        [LAMBDA_SQS + "#events-sqs-queueconfig"]),
    "esm-policy-order": (
        "an event source mapping is created after the grant of sqs:ReceiveMessage, sqs:DeleteMessage and "
        "sqs:GetQueueAttributes on its queue to its function's role: a grant in an AWS::IAM::Policy needs DependsOn "
        "(aws/serverless-application-model#2534)",
        [LAMBDA_SQS + "#events-sqs-permissions",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html",
         "https://github.com/aws/serverless-application-model/issues/2534"]),
    "managed-policy": (
        "a role carries only the allowlisted AWS managed policies (least privilege: SAM's AWSLambdaSQSQueueExecutionRole "
        "grants receive and delete on every queue of the account)",
        ["https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege",
         "https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AWSLambdaSQSQueueExecutionRole.html"]),
    "functions-after-migrations": (
        "every function but the one serving the migrations depends on the migrations custom resource, so that an update "
        "runs the migrations before any function runs new code (CloudFormation updates a resource after what it depends on)",
        ["https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks-update-behaviors.html"]),
    "esm-after-migrations": (
        "nothing consumes before the schema exists: every event source mapping depends on the migrations custom resource",
        ["https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/template-custom-resources.html",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html"]),
    "bucket-name": (
        "a bucket name follows S3's naming rules (3-63 characters, lowercase letters, digits, hyphens, no xn-- prefix, "
        "not an IP address; periods break virtual-hosted HTTPS) whatever the stack name is (stack names allow "
        "uppercase and 128 characters)",
        ["https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-using-console-create-stack-parameters.html"]),
    "bucket-retain": (
        "the documents bucket has DeletionPolicy RetainExceptOnCreate and UpdateReplacePolicy Retain (S3 deletes only "
        "empty buckets: a stack delete would fail on it, and a replacement would lose every original; plain Retain also "
        "keeps the bucket a failed first create made, and the next create with that name fails)",
        ["https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html",
         "https://docs.aws.amazon.com/AmazonS3/latest/userguide/delete-bucket.html"]),
    "bucket-tls": (
        "the bucket's policy denies every request without TLS (aws:SecureTransport false)",
        ["https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html"]),
    "bucket-multipart": (
        "a lifecycle rule aborts incomplete multipart uploads (their parts are stored and billed until removed)",
        ["https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpu-abort-incomplete-mpu-lifecycle-config.html"]),
    "alarm-topic-key": (
        "an SNS topic an alarm publishes to is not under alias/aws/sns (whose policy CloudWatch may not change), and its "
        "key's policy lets cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey*",
        ["https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services"]),
    "kms-key-admin": (
        "a KMS key's policy lets the account administer it (CreateKey refuses a policy that locks the caller out)",
        ["https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#key-policy-default-allow-root-enable-iam",
         "https://docs.aws.amazon.com/kms/latest/APIReference/API_CreateKey.html"]),
    "log-group-order": (
        "a function's log group is a template resource created before the function (LoggingConfig.LogGroup): a group named "
        "/aws/lambda/<function> comes after it, and if the function runs first Lambda creates the group and the stack "
        "fails with 'already exists'; a function without one logs to a group outside the stack",
        ["https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-loggroups.html",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-function-loggingconfig.html"]),
    "alarm-metric": (
        "each alarm's namespace, metric and dimension set is one that is emitted: AWS/SQS, AWS/Lambda and AWS/ApiGateway "
        "(HTTP APIs) as AWS documents them, the docpipe namespace as shared/core/src/metrics.rs emits it (EMF)",
        ["https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html",
         "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html",
         "https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-metrics.html",
         "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html"]),
    "alarm-cannot-fire": (
        "no alarm on ApproximateNumberOfMessagesVisible of a queue a function consumes (it drains in seconds), nor on "
        "NumberOfMessagesSent of a dead-letter queue (messages moved by a redrive policy are not counted)",
        ["https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html",
         "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html"]),
    "alarm-coverage": (
        "alarms reach a person: each has actions; dead letters counted as they arrive (NumberOfMessagesReceived); the age "
        "of the oldest message on each work queue; errors and throttles of every function; 5xx and access logs of every "
        "HTTP API",
        ["https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Best_Practice_Recommended_Alarms_AWS_Services.html",
         "https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-logging.html"]),
    "network-path": (
        "each AWS service a function in a VPC calls (what its role grants; a custom resource's handler also answers "
        "CloudFormation's presigned S3 URL) has a path: a VPC endpoint in the template (interface endpoints with private "
        "DNS and a security group admitting the functions on 443; the S3 gateway endpoint on route tables), or a path the "
        "operator confirms for that service (PathToS3, PathToSqs, PathToSecretsManager, PathToBedrock, PathToEvents, "
        "PathToLogs, PathToIam: existing or nat)",
        ["https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc-internet.html",
         "https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc-endpoints.html",
         "https://docs.aws.amazon.com/vpc/latest/privatelink/create-interface-endpoint.html",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html"]),
    "migrations-response-path": (
        "the function that serves the migrations custom resource has a path to CloudFormation's presigned S3 response URL "
        "(its bucket is cloudformation-custom-resource-response-<region>): an S3 endpoint whose policy admits that bucket, "
        "or a confirmed path (PathToS3 existing or nat); otherwise the deploy waits out ServiceTimeout twice and ends in a "
        "failed rollback",
        ["https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-vpce-bucketnames.html",
         "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html"]),
    "clock": (
        "the clock every function checks at start (shared/core/src/clock.rs, asked through docpipe clock-check) holds, on every queue with an event "
        "source: the functions' variables are the resources' values; SQS's limits (visibility <= 12 h, retention 60 s to "
        "14 days); a dead-letter queue keeps a message longer than its source",
        ["https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html",
         "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html",
         LAMBDA_SQS]),
    "scheduled-overlap": (
        "a scheduled function cannot overlap itself: reserved concurrency 1, or a lease in the database that its code "
        "takes for as long as its invocation can last (LEASED_SCHEDULES); no asynchronous retries (the next schedule "
        "comes anyway); a timeout shorter than the period",
        ["https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html",
         "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html"]),
    "account-memory": (
        "no function asks for more memory than the account's Lambda memory quota (--account-memory-mb; new accounts "
        "have reduced concurrency and memory quotas, often 3,008 MB, and CreateFunction refuses more)",
        ["https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
         "https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html"]),
    "account-concurrency": (
        "the functions' reserved concurrency leaves 100 of the account's concurrency unreserved "
        "(--account-concurrency; new accounts may have 10): reserved <= quota - 100, or Lambda refuses the reservation "
        "('decreases account's UnreservedConcurrentExecution below its minimum value of [100]')",
        ["https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html",
         "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"]),
}

# The account's Lambda quotas the account rules check against (--account-memory-mb, --account-concurrency,
# or --quotas memory=…,concurrency=…): a new account's, by default.
QUOTAS = {"memory": 3008, "concurrency": 10}
# Lambda keeps this much of the account's concurrency unreserved.
UNRESERVED_MINIMUM = 100
# Scheduled functions whose code takes a lease in the database for as long as one invocation can run,
# so that a second invocation does nothing: binary -> (source file, the lease's marker in it, the
# variable that gives the lease its length, which must equal the function's Timeout).
LEASED_SCHEDULES = {
    "sweeper": ("shared/pipeline/src/services.rs", "SWEEPER_LEASE", "DOCPIPE_SWEEPER_TIMEOUT_SECS"),
}

# Queues whose visibility timeout departs from AWS's 6x guidance on purpose, and why (README,
# "Deploying to AWS", the clock).
SIX_X_EXCEPTIONS = {
    "ParseQueue": "1,800 s is 2x the parse timeout (900 s): the lease and the backoff set the message's visibility on "
                  "every delivery (at the start the function's time, the lease and the next backoff; after a failure the "
                  "backoff), so the queue's own timeout only matters when a parse crashes before it can; 5,400 s would hold "
                  "a crashed parse's message 90 minutes before SQS hands it out again",
}

# The template's parameters without a default, for the check (any value the template accepts).
PLACEHOLDERS = {
    "DatabaseUrl": "postgres://docpipe@docpipe.proxy-example.us-east-1.rds.amazonaws.com:5432/docpipe?sslmode=require",
    "DatabaseSecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:docpipe-db-AbCdEf",
    "MilvusUrl": "http://milvus.internal:19530",
    "BucketName": "docpipe-example-documents",
    "VpcId": "vpc-0example",
    "SubnetIds": "subnet-0example1,subnet-0example2",
    "SecurityGroupIds": "sg-0example",
    "PathToS3": "create",
    "PathToSqs": "create",
    "PathToSecretsManager": "create",
    "PathToBedrock": "create",
    "PathToEvents": "create",
}
# Placeholders that replace a default: the S3 gateway endpoint needs route tables (a template Rule
# refuses PathToS3=create without them), and the check must see that path.
PLACEHOLDERS_OVER_DEFAULT = {"PrivateRouteTableIds": "rtb-0example1,rtb-0example2",
                             # IAM has no endpoint the template can create: with AuthMode=iam
                             # (the default) a template Rule wants the operator's path.
                             "PathToIam": "nat"}
# The parameter that chooses each endpoint service's network path, and the values by which the
# operator confirms a path the template does not create (the parameters' Descriptions say so).
PATH_PARAMS = {"s3": "PathToS3", "sqs": "PathToSqs", "secretsmanager": "PathToSecretsManager",
               "bedrock-runtime": "PathToBedrock", "events": "PathToEvents", "logs": "PathToLogs",
               "iam": "PathToIam"}
CONFIRMED_PATH_VALUES = {"existing", "nat"}
# Parameters whose values are checked one parameter at a time (each value with the others at the
# base set's), not in every combination: each chooses the path of its own service only.
INDEPENDENT_PARAMS = set(PATH_PARAMS.values())
# CloudFormation's custom-resource response buckets (the presigned ResponseURL's host), per region.
CFN_RESPONSE_BUCKET = "cloudformation-custom-resource-response-{region}"
# Stack names the bucket-name rule tries (CloudFormation allows [A-Za-z][A-Za-z0-9-]{0,127}).
STACK_NAME_PROBES = ["docpipe", "Docpipe-Prod", "docpipe-" + "x" * 120]

# ───────────────────────────── the template, translated ─────────────────────────────


def load_sam(path: str) -> dict:
    from samcli.yamlhelper import yaml_parse
    with open(path, encoding="utf-8") as f:
        return yaml_parse(f.read())


def translate(sam: dict, params: dict[str, str]) -> dict:
    """SAM's transform, offline. Local code paths become S3 URIs (the translator wants one)."""
    import samtranslator
    from samtranslator.translator.transform import transform
    sam = copy.deepcopy(sam)
    for r in (sam.get("Resources") or {}).values():
        props = r.get("Properties") or {}
        if r.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = "s3://deploy-check/code.zip"
        if r.get("Type") == "AWS::Serverless::LayerVersion" and isinstance(props.get("ContentUri"), str):
            props["ContentUri"] = "s3://deploy-check/layer.zip"
    data = os.path.join(os.path.dirname(samtranslator.__file__), "internal", "data", "aws_managed_policies.json")
    with open(data) as f:
        managed = json.load(f)[PARTITION]

    class BundledPolicies:
        def load(self):
            return managed
    values = dict(params)
    values.update({"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": PARTITION,
                   "AWS::StackName": "docpipe"})
    return transform(sam, values, BundledPolicies(), passthrough_metadata=True)


def samtranslator_version() -> str:
    import samtranslator
    return samtranslator.__version__


# ───────────────────────────── evaluation ─────────────────────────────

NOVALUE = object()
TOKEN = re.compile(r"\{\{([A-Za-z0-9]+)(?:\.([A-Za-z0-9.]+))?\}\}")


def token(rid: str, attr: str | None = None) -> str:
    return "{{%s%s}}" % (rid, "." + attr if attr else "")


def ids_in(value) -> list[str]:
    """The template resources a value refers to (as evaluated: `{{Id}}`, `{{Id.Attr}}`)."""
    out = []
    for s in walk_strings(value):
        out.extend(m.group(1) for m in TOKEN.finditer(s))
    return out


def walk_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from walk_strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from walk_strings(v)


class Ctx:
    """One parameter set over the translated template: conditions and intrinsic functions resolved,
    references to resources kept as tokens (an SQS queue's ARN and URL are spelled around its name
    token, so that a grant written either way matches)."""

    def __init__(self, cfn: dict, params: dict[str, str], stack_name: str = "docpipe", label: str = ""):
        self.cfn = cfn
        self.res: dict = cfn.get("Resources") or {}
        self.label = label
        self.raw_params = params
        self.params = {}
        for name, p in (cfn.get("Parameters") or {}).items():
            raw = params.get(name, "")
            t = str(p.get("Type", "String"))
            self.params[name] = [v.strip() for v in str(raw).split(",")] if (t.startswith("List<") or t == "CommaDelimitedList") else str(raw)
        self.pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": PARTITION,
                       "AWS::StackName": stack_name, "AWS::URLSuffix": "amazonaws.com",
                       "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack_name}/id",
                       "AWS::NotificationARNs": []}
        self._conditions: dict[str, bool] = {}

    # resources
    def active(self, rid: str) -> bool:
        c = self.res[rid].get("Condition")
        return c is None or self.condition(c)

    def of_type(self, *types: str) -> list[tuple[str, dict]]:
        return [(rid, r) for rid, r in self.res.items() if r.get("Type") in types and self.active(rid)]

    def type_of(self, rid: str) -> str | None:
        r = self.res.get(rid)
        return r.get("Type") if r else None

    def props(self, rid: str) -> dict:
        return self.res[rid].get("Properties") or {}

    def prop(self, rid: str, *path, default=None):
        node = self.props(rid)
        for p in path:
            if not isinstance(node, dict) or p not in node:
                return default
            node = node[p]
        v = self.val(node)
        return default if v is NOVALUE else v

    # evaluation
    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.val(self.cfn["Conditions"][name]))
        return self._conditions[name]

    def ref(self, name: str):
        if name == "AWS::NoValue":
            return NOVALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.params:
            return self.params[name]
        t = self.type_of(name)
        if t == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{token(name, 'QueueName')}"
        if t == "AWS::EC2::SecurityGroup":
            return token(name, "GroupId")
        if t is None:
            raise KeyError(f"Ref {name}: no such parameter or resource")
        return token(name)

    def get_att(self, rid: str, attr: str):
        t = self.type_of(rid)
        if t is None:
            raise KeyError(f"GetAtt {rid}.{attr}: no such resource")
        if t == "AWS::SQS::Queue" and attr == "Arn":
            return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{token(rid, 'QueueName')}"
        if t == "AWS::SQS::Queue" and attr == "QueueUrl":
            return self.ref(rid)
        if t == "AWS::Lambda::Function" and attr == "Arn":
            return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{token(rid)}"
        if t == "AWS::EC2::SecurityGroup" and attr == "GroupId":
            return token(rid, "GroupId")
        return token(rid, attr)

    def sub(self, text: str, variables: dict | None = None) -> str:
        variables = variables or {}

        def one(m):
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return to_str(self.val(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                rid, attr = name.split(".", 1)
                return to_str(self.get_att(rid, attr))
            return to_str(self.ref(name))
        return re.sub(r"\$\{([^}]+)\}", one, text)

    def val(self, node):
        if isinstance(node, list):
            return [v for v in (self.val(x) for x in node) if v is not NOVALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (k, v), = node.items()
            if k == "Ref":
                return self.ref(v)
            if k == "Fn::GetAtt":
                rid, attr = (v if isinstance(v, list) else v.split(".", 1))
                return self.get_att(rid, attr)
            if k == "Fn::Sub":
                return self.sub(v[0], v[1]) if isinstance(v, list) else self.sub(v)
            if k == "Fn::If":
                return self.val(v[1]) if self.condition(v[0]) else self.val(v[2])
            if k == "Fn::Equals":
                return to_str(self.val(v[0])) == to_str(self.val(v[1]))
            if k == "Fn::Not":
                return not self.val(v[0])
            if k == "Fn::And":
                return all(self.val(c) for c in v)
            if k == "Fn::Or":
                return any(self.val(c) for c in v)
            if k == "Condition":
                return self.condition(v)
            if k == "Fn::Join":
                return v[0].join(to_str(x) for x in self.val(v[1]))
            if k == "Fn::Split":
                return to_str(self.val(v[1])).split(v[0])
            if k == "Fn::Select":
                return self.val(v[1])[int(self.val(v[0]))]
            if k == "Fn::GetAZs":
                return [f"{REGION}a", f"{REGION}b", f"{REGION}c"]
            if k == "Fn::FindInMap":
                m, a, b = (self.val(x) for x in v[:3])
                return self.cfn["Mappings"][m][a][b]
            if k == "Fn::Base64":
                return self.val(v)
            if k == "Fn::ImportValue":
                return "{{import:%s}}" % to_str(self.val(v))
            if k.startswith("Fn::"):
                raise ValueError(f"{k} is not modelled by deploy-check")
        out = {}
        for k, v in node.items():
            e = self.val(v)
            if e is not NOVALUE:
                out[k] = e
        return out

    # template Rules: a parameter set they refuse never reaches resource creation
    def rule_failures(self) -> list[str]:
        failures = []
        for name, rule in (self.cfn.get("Rules") or {}).items():
            if "RuleCondition" in rule and not self.rule_val(rule["RuleCondition"]):
                continue
            for a in rule.get("Assertions") or []:
                if not self.rule_val(a["Assert"]):
                    failures.append(f"{name}: {a.get('AssertDescription', 'assertion failed')}")
        return failures

    def rule_val(self, node):
        if isinstance(node, dict) and len(node) == 1:
            (k, v), = node.items()
            if k == "Fn::Contains":
                haystack, needle = self.rule_val(v[0]), self.rule_val(v[1])
                return needle in (haystack if isinstance(haystack, list) else [haystack])
            if k == "Fn::EachMemberEquals":
                items, want = self.rule_val(v[0]), self.rule_val(v[1])
                return all(i == want for i in items)
            if k == "Fn::EachMemberIn":
                items, allowed = self.rule_val(v[0]), self.rule_val(v[1])
                return all(i in allowed for i in items)
            if k in ("Fn::Equals",):
                return to_str(self.rule_val(v[0])) == to_str(self.rule_val(v[1]))
            if k == "Fn::Not":
                return not self.rule_val(v[0])
            if k == "Fn::And":
                return all(self.rule_val(c) for c in v)
            if k == "Fn::Or":
                return any(self.rule_val(c) for c in v)
            if k == "Ref":
                return self.ref(v)
        return self.val(node)


def to_str(v) -> str:
    if isinstance(v, list):
        return ",".join(to_str(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def number(v, default: float | None = None) -> float | None:
    if v is None or v is NOVALUE or v == "":
        return default
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


# ───────────────────────────── dependencies ─────────────────────────────


def raw_refs(node) -> set[str]:
    """Resources a raw (unevaluated) node refers to: Ref, Fn::GetAtt, Fn::Sub's ${X} and ${X.Y}."""
    found: set[str] = set()
    if isinstance(node, list):
        for x in node:
            found |= raw_refs(x)
    elif isinstance(node, dict):
        for k, v in node.items():
            if k == "Ref" and isinstance(v, str):
                found.add(v)
            elif k == "Fn::GetAtt":
                found.add(v[0] if isinstance(v, list) else v.split(".", 1)[0])
            elif k == "Fn::Sub":
                text = v[0] if isinstance(v, list) else v
                found |= {m.split(".", 1)[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text)}
                if isinstance(v, list):
                    found |= raw_refs(v[1])
            else:
                found |= raw_refs(v)
    return found


def depends_closure(cfn: dict, rid: str) -> set[str]:
    """Every resource CloudFormation creates before `rid`: DependsOn and references, transitively."""
    res = cfn.get("Resources") or {}
    seen: set[str] = set()
    todo = [rid]
    while todo:
        cur = todo.pop()
        r = res.get(cur)
        if r is None:
            continue
        deps = r.get("DependsOn") or []
        deps = set([deps] if isinstance(deps, str) else deps)
        deps |= raw_refs(r.get("Properties") or {}) | raw_refs(r.get("Metadata") or {})
        for d in deps:
            if d in res and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


# ───────────────────────────── IAM, as deployed ─────────────────────────────


def managed_policies() -> dict:
    with open(os.path.join(ROOT, "scripts", "iam", "managed-policies.json")) as f:
        return json.load(f)["policies"]


MANAGED = managed_policies()


@dataclass
class Grant:
    source: str          # the role (inline), "managed:<name>", or an AWS::IAM::Policy's id
    kind: str            # inline | managed | attached
    statement: dict


def role_of(ctx: Ctx, fid: str) -> str | None:
    ids = ids_in(ctx.prop(fid, "Role"))
    return ids[0] if ids else None


def role_grants(ctx: Ctx, role: str) -> list[Grant]:
    grants: list[Grant] = []
    for p in ctx.prop(role, "Policies", default=[]) or []:
        for s in as_list((p.get("PolicyDocument") or {}).get("Statement")):
            grants.append(Grant(role, "inline", s))
    for arn in ctx.prop(role, "ManagedPolicyArns", default=[]) or []:
        name = to_str(arn).rsplit("/", 1)[-1]
        for s in (MANAGED.get(name) or {}).get("statements", []):
            grants.append(Grant(f"managed:{name}", "managed", s))
    for pid, _ in ctx.of_type("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        roles = ctx.prop(pid, "Roles", default=[]) or []
        if token(role) in [to_str(r) for r in roles]:
            for s in as_list((ctx.prop(pid, "PolicyDocument") or {}).get("Statement")):
                grants.append(Grant(pid, "attached", s))
    return grants


def as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def matches(patterns, value: str) -> bool:
    return any(fnmatch.fnmatchcase(value.lower(), to_str(p).lower()) for p in as_list(patterns))


def granting(grants: list[Grant], action: str, resource: str) -> list[Grant]:
    return [g for g in grants if g.statement.get("Effect") == "Allow"
            and matches(g.statement.get("Action"), action)
            and matches(g.statement.get("Resource"), resource)]


def queue_arn(qid: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{token(qid, 'QueueName')}"


# ───────────────────────────── the template's shape ─────────────────────────────


def functions(ctx: Ctx) -> dict[str, dict]:
    out = {}
    for fid, r in ctx.of_type("AWS::Lambda::Function"):
        binary = ((r.get("Metadata") or {}).get("BuildProperties") or {}).get("Binary") or fid
        out[fid] = {"binary": binary, "timeout": number(ctx.prop(fid, "Timeout"), 3.0),
                    "memory": number(ctx.prop(fid, "MemorySize"), 128.0),
                    "reserved": number(ctx.prop(fid, "ReservedConcurrentExecutions"))}
    return out


def sqs_mappings(ctx: Ctx) -> list[dict]:
    """Active event source mappings whose source is a queue of the template."""
    out = []
    for eid, _ in ctx.of_type("AWS::Lambda::EventSourceMapping"):
        src = ids_in(ctx.prop(eid, "EventSourceArn"))
        fn = ids_in(ctx.prop(eid, "FunctionName"))
        if src and ctx.type_of(src[0]) == "AWS::SQS::Queue" and fn:
            out.append({"id": eid, "queue": src[0], "function": fn[0]})
    return out


def redrive_targets(ctx: Ctx) -> dict[str, list[str]]:
    """dead-letter queue -> the queues that redrive into it."""
    out: dict[str, list[str]] = {}
    for qid, _ in ctx.of_type("AWS::SQS::Queue"):
        rp = ctx.prop(qid, "RedrivePolicy")
        if isinstance(rp, dict):
            for dlq in ids_in(rp.get("deadLetterTargetArn")):
                out.setdefault(dlq, []).append(qid)
    return out


def visibility(ctx: Ctx, qid: str) -> float:
    return number(ctx.prop(qid, "VisibilityTimeout"), 30.0)  # SQS's default


def retention(ctx: Ctx, qid: str) -> float:
    return number(ctx.prop(qid, "MessageRetentionPeriod"), 345600.0)  # SQS's default, 4 days


def custom_resources(ctx: Ctx) -> dict[str, str | None]:
    """custom resource -> the function that serves it (its ServiceToken), if in the template."""
    out = {}
    for rid, r in ctx.res.items():
        t = r.get("Type", "")
        if (t.startswith("Custom::") or t == "AWS::CloudFormation::CustomResource") and ctx.active(rid):
            fn = [i for i in ids_in(ctx.prop(rid, "ServiceToken")) if ctx.type_of(i) == "AWS::Lambda::Function"]
            out[rid] = fn[0] if fn else None
    return out


def fmt_s(v: float) -> str:
    return f"{v:,.0f} s"


# ───────────────────────────── rules ─────────────────────────────


@dataclass(frozen=True)
class Finding:
    rule: str
    where: str
    message: str


def rule_esm(ctx: Ctx) -> list[Finding]:
    out = []
    fns = functions(ctx)
    customs = custom_resources(ctx)
    for m in sqs_mappings(ctx):
        eid, q, f = m["id"], m["queue"], m["function"]
        timeout = fns.get(f, {}).get("timeout", 3.0)
        vis = visibility(ctx, q)
        given = "" if ctx.props(q).get("VisibilityTimeout") is not None else " (SQS's default: the queue sets no VisibilityTimeout)"
        if vis < timeout:
            out.append(Finding("esm-visibility", eid,
                               f"queue {q} hides a message {fmt_s(vis)}{given}, less than {f}'s timeout {fmt_s(timeout)}: "
                               f"Lambda refuses the mapping (\"Queue visibility timeout: {vis:.0f} seconds is less than "
                               f"Function timeout: {timeout:.0f} seconds\") and the stack rolls back"))
        elif vis < 6 * timeout and q not in SIX_X_EXCEPTIONS:
            out.append(Finding("esm-visibility-6x", eid,
                               f"queue {q}'s visibility {fmt_s(vis)} is {vis / timeout:.1f}x {f}'s timeout {fmt_s(timeout)}, "
                               f"under AWS's 6x; raise it to {fmt_s(6 * timeout)} or record why in SIX_X_EXCEPTIONS and the README"))
        # the grant of the poller's calls, and the order
        role = role_of(ctx, f)
        if role is None:
            continue
        grants = role_grants(ctx, role)
        before = depends_closure(ctx.cfn, eid)
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
            g = granting(grants, action, queue_arn(q))
            if not g:
                out.append(Finding("esm-policy-order", eid,
                                   f"{f}'s role {role} is granted no {action} on {q}: Lambda refuses the mapping "
                                   f"(\"The function execution role does not have permissions to call ReceiveMessage on SQS\")"))
                break
            ordered = [x for x in g if x.kind in ("inline", "managed") or x.source in before]
            if not ordered:
                out.append(Finding("esm-policy-order", eid,
                                   f"{action} on {q} comes from {', '.join(sorted({x.source for x in g}))}, which the mapping does "
                                   f"not depend on: CloudFormation may create the mapping first, and Lambda then refuses it "
                                   f"(aws/serverless-application-model#2534); add DependsOn"))
                break
        # the schema before any consumer
        migrations = [c for c, fn in customs.items() if fn is not None]
        if not migrations:
            out.append(Finding("esm-after-migrations", eid,
                               "no custom resource in the template runs the migrations, so nothing creates the schema before "
                               f"{f} consumes {q}"))
        elif not any(c in before for c in migrations):
            out.append(Finding("esm-after-migrations", eid,
                               f"does not depend on the migrations ({', '.join(migrations)}): {f} may consume {q} before the schema exists"))
    return out


def rule_functions_after_migrations(ctx: Ctx) -> list[Finding]:
    out = []
    customs = custom_resources(ctx)
    migrations = [c for c, fn in customs.items() if fn is not None]
    servers = {fn for fn in customs.values() if fn is not None}
    if not migrations:
        return out  # esm-after-migrations reports a template without them
    for fid in sorted(functions(ctx)):
        if fid in servers:
            continue
        if not set(migrations) & depends_closure(ctx.cfn, fid):
            out.append(Finding("functions-after-migrations", fid, f"does not depend on the migrations ({', '.join(migrations)}): "
                                                                  "on an update CloudFormation may give it new code before the schema "
                                                                  "it expects exists (add DependsOn)"))
    return out


def rule_managed_policies(ctx: Ctx) -> list[Finding]:
    out = []
    for rid, _ in ctx.of_type("AWS::IAM::Role"):
        for arn in ctx.prop(rid, "ManagedPolicyArns", default=[]) or []:
            name = to_str(arn).rsplit("/", 1)[-1]
            info = MANAGED.get(name)
            if info is None:
                out.append(Finding("managed-policy", rid, f"managed policy {to_str(arn)} is not in scripts/iam/managed-policies.json: what it grants is unchecked"))
            elif not info["allowed"]:
                granted = sorted({a for s in info["statements"] for a in as_list(s["Action"]) if not a.startswith("logs:")})
                out.append(Finding("managed-policy", rid, f"carries {name}, which grants {', '.join(granted)} on every resource (*); "
                                                          "grant them on the one queue instead"))
    return out


S3_BAD_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
S3_BAD_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def s3_name_problems(name: str) -> list[str]:
    p = []
    if not 3 <= len(name) <= 63:
        p.append(f"{len(name)} characters (3 to 63)")
    if re.search(r"[^a-z0-9.-]", name):
        p.append("characters other than lowercase letters, digits, periods and hyphens")
    if name[:1] and not re.match(r"[a-z0-9]", name[:1]) or name[-1:] and not re.match(r"[a-z0-9]", name[-1:]):
        p.append("does not begin and end with a letter or digit")
    if ".." in name:
        p.append("two adjacent periods")
    try:
        ipaddress.IPv4Address(name)
        p.append("formatted as an IP address")
    except ValueError:
        pass
    if name.startswith(S3_BAD_PREFIXES):
        p.append(f"a reserved prefix ({', '.join(S3_BAD_PREFIXES)})")
    if name.endswith(S3_BAD_SUFFIXES):
        p.append(f"a reserved suffix ({', '.join(S3_BAD_SUFFIXES)})")
    if "." in name and not p:
        p.append("periods (virtual-hosted-style HTTPS, which the SDKs use, cannot match the certificate)")
    return p


BUCKET_BAD_PROBES = ["ab", "a" * 64, "Docpipe-documents", "docpipe_documents", "-docpipe", "docpipe-", "xn--docpipe",
                     "sthree-docpipe", "amzn-s3-demo-docpipe", "docpipe-s3alias", "docpipe--ol-s3", "docpipe--x-s3",
                     "192.168.5.4", "doc..pipe", "docpipe.documents"]
BUCKET_GOOD_PROBES = ["docpipe-documents", "abc", "a" * 63, "123-documents", "xn-docpipe"]


def pattern_accepts(p: dict, value: str) -> bool:
    if "MinLength" in p and len(value) < int(p["MinLength"]):
        return False
    if "MaxLength" in p and len(value) > int(p["MaxLength"]):
        return False
    if "AllowedValues" in p:
        return value in [str(v) for v in p["AllowedValues"]]
    if "AllowedPattern" in p:
        # CloudFormation's AllowedPattern is a Java regular expression that must match the whole value.
        return re.fullmatch(p["AllowedPattern"], value) is not None
    return True


def rule_buckets(ctx: Ctx) -> list[Finding]:
    out = []
    params = ctx.cfn.get("Parameters") or {}
    policies = ctx.of_type("AWS::S3::BucketPolicy")
    for bid, r in ctx.of_type("AWS::S3::Bucket"):
        raw = ctx.props(bid).get("BucketName")
        if raw is not None:
            for stack in STACK_NAME_PROBES:
                name = to_str(Ctx(ctx.cfn, ctx.raw_params, stack_name=stack).prop(bid, "BucketName"))
                if "{{" in name:
                    continue
                problems = s3_name_problems(name)
                if problems:
                    out.append(Finding("bucket-name", bid, f"with stack name {stack!r} the bucket is named {name!r}: {'; '.join(problems)}"))
                    break
            if isinstance(raw, dict) and set(raw) == {"Ref"} and raw["Ref"] in params:
                p = params[raw["Ref"]]
                lets_in = [b for b in BUCKET_BAD_PROBES if pattern_accepts(p, b)]
                keeps_out = [g for g in BUCKET_GOOD_PROBES if not pattern_accepts(p, g)]
                if lets_in:
                    out.append(Finding("bucket-name", bid, f"parameter {raw['Ref']} accepts names S3 refuses or that break HTTPS: "
                                                           f"{', '.join(repr(b) for b in lets_in)} (AllowedPattern, MinLength, MaxLength)"))
                if keeps_out:
                    out.append(Finding("bucket-name", bid, f"parameter {raw['Ref']} refuses valid names: {', '.join(repr(g) for g in keeps_out)}"))
        # what a deploy must keep, and how it is used
        if r.get("DeletionPolicy") != "RetainExceptOnCreate" or r.get("UpdateReplacePolicy") != "Retain":
            why = ("a failed first create leaves the bucket behind, and the next create with its name fails"
                   if r.get("DeletionPolicy") == "Retain" and r.get("UpdateReplacePolicy") == "Retain" else
                   "a stack delete fails on the non-empty bucket, a replacement drops every original")
            out.append(Finding("bucket-retain", bid, f"DeletionPolicy {r.get('DeletionPolicy', 'Delete (default)')}, UpdateReplacePolicy "
                                                     f"{r.get('UpdateReplacePolicy', 'Delete (default)')}: {why} (want RetainExceptOnCreate "
                                                     "and Retain)"))
        tls = False
        for pid, _ in policies:
            if token(bid) not in to_str(ctx.prop(pid, "Bucket")):
                continue
            for s in as_list((ctx.prop(pid, "PolicyDocument") or {}).get("Statement")):
                cond = (s.get("Condition") or {}).get("Bool") or {}
                if s.get("Effect") == "Deny" and to_str(cond.get("aws:SecureTransport")).lower() == "false":
                    tls = True
        if not tls:
            out.append(Finding("bucket-tls", bid, "no bucket policy denies requests with aws:SecureTransport false"))
        rules = (ctx.prop(bid, "LifecycleConfiguration") or {}).get("Rules") or []
        if not any(x.get("AbortIncompleteMultipartUpload") and x.get("Status") == "Enabled" for x in rules):
            out.append(Finding("bucket-multipart", bid, "no enabled lifecycle rule with AbortIncompleteMultipartUpload"))
    return out


def key_of(ctx: Ctx, value) -> str | None:
    for i in ids_in(value):
        t = ctx.type_of(i)
        if t == "AWS::KMS::Key":
            return i
        if t == "AWS::KMS::Alias":
            return key_of(ctx, ctx.prop(i, "TargetKeyId"))
    return None


def principal_services(s: dict) -> list[str]:
    p = s.get("Principal") or {}
    return [to_str(x) for x in as_list(p.get("Service"))] if isinstance(p, dict) else []


def rule_alarm_keys(ctx: Ctx) -> list[Finding]:
    out = []
    topics: dict[str, list[str]] = {}
    for aid, _ in ctx.of_type("AWS::CloudWatch::Alarm"):
        for k in ("AlarmActions", "OKActions", "InsufficientDataActions"):
            for t in ids_in(ctx.prop(aid, k)):
                if ctx.type_of(t) == "AWS::SNS::Topic":
                    topics.setdefault(t, []).append(aid)
    for tid, alarms in topics.items():
        key = ctx.prop(tid, "KmsMasterKeyId")
        if key is None:
            continue
        if to_str(key).endswith("alias/aws/sns"):
            out.append(Finding("alarm-topic-key", tid, f"is encrypted with alias/aws/sns, which CloudWatch cannot use: "
                                                       f"{len(alarms)} alarm(s) ({', '.join(sorted(set(alarms))[:3])}, …) would never be delivered"))
            continue
        kid = key_of(ctx, key)
        if kid is None:
            continue  # a key outside the template: its policy is the operator's
        need = {"kms:Decrypt": False, "kms:GenerateDataKey": False}
        for s in as_list((ctx.prop(kid, "KeyPolicy") or {}).get("Statement")):
            if s.get("Effect") == "Allow" and "cloudwatch.amazonaws.com" in principal_services(s):
                for a in need:
                    need[a] = need[a] or matches(s.get("Action"), a)
        missing = [a for a, ok in need.items() if not ok]
        if missing:
            out.append(Finding("alarm-topic-key", tid, f"its key {kid} does not let cloudwatch.amazonaws.com {', '.join(missing)}: "
                                                       "the alarms' notifications are dropped"))
    for kid, _ in ctx.of_type("AWS::KMS::Key"):
        admin = False
        for s in as_list((ctx.prop(kid, "KeyPolicy") or {}).get("Statement")):
            p = s.get("Principal") or {}
            aws = [to_str(x) for x in as_list(p.get("AWS"))] if isinstance(p, dict) else []
            root = any(a in (ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root") for a in aws)
            if s.get("Effect") == "Allow" and root and matches(s.get("Action"), "kms:PutKeyPolicy"):
                admin = True
        if not admin:
            out.append(Finding("kms-key-admin", kid, "its key policy does not let the account (root) administer the key "
                                                     "(kms:PutKeyPolicy): CreateKey refuses it, or the key becomes unmanageable"))
    return out


def rule_log_groups(ctx: Ctx) -> list[Finding]:
    out = []
    fns = functions(ctx)
    named_after: dict[str, str] = {}
    for lid, _ in ctx.of_type("AWS::Logs::LogGroup"):
        name = to_str(ctx.prop(lid, "LogGroupName") or "")
        m = re.fullmatch(r"/aws/lambda/\{\{([A-Za-z0-9]+)\}\}", name)
        if m and m.group(1) in fns:
            named_after[m.group(1)] = lid
            out.append(Finding("log-group-order", lid, f"is /aws/lambda/<{m.group(1)}>, so CloudFormation creates it after the function; "
                                                       "a function that runs first gets its group from Lambda, and the stack fails "
                                                       "(\"already exists\")"))
    for fid in fns:
        lg = (ctx.prop(fid, "LoggingConfig") or {}).get("LogGroup")
        if lg is None:
            if fid not in named_after:
                out.append(Finding("log-group-order", fid, "has no LoggingConfig.LogGroup: Lambda creates /aws/lambda/<name> itself, "
                                                           "outside the stack (no retention, left behind by a delete)"))
            continue
        if not any(ctx.type_of(i) == "AWS::Logs::LogGroup" for i in ids_in(lg)):
            out.append(Finding("log-group-order", fid, f"LoggingConfig.LogGroup {to_str(lg)} is not a log group of the template"))
    return out


# ── metrics: AWS's, and docpipe's as the Rust code emits them ──

SQS_METRICS = {"ApproximateAgeOfOldestMessage", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesVisible", "NumberOfEmptyReceives", "NumberOfDeduplicatedSentMessages",
               "NumberOfMessagesDeleted", "NumberOfMessagesReceived", "NumberOfMessagesSent", "SentMessageSize"}
LAMBDA_METRICS = {"Invocations", "Errors", "DeadLetterErrors", "DestinationDeliveryFailures", "Throttles", "OversizedRecordCount",
                  "ProvisionedConcurrencyInvocations", "ProvisionedConcurrencySpilloverInvocations", "RecursiveInvocationsDropped",
                  "Duration", "PostRuntimeExtensionsDuration", "IteratorAge", "OffsetLag", "ConcurrentExecutions",
                  "ProvisionedConcurrentExecutions", "ProvisionedConcurrencyUtilization", "UnreservedConcurrentExecutions",
                  "ClaimedAccountConcurrency", "AsyncEventsReceived", "AsyncEventAge", "AsyncEventsDropped"}
LAMBDA_ACCOUNT_METRICS = {"ConcurrentExecutions", "UnreservedConcurrentExecutions", "ClaimedAccountConcurrency"}
HTTP_API_METRICS = {"4xx", "5xx", "Count", "IntegrationLatency", "Latency", "DataProcessed"}
REST_API_METRICS = {"4XXError", "5XXError", "CacheHitCount", "CacheMissCount", "Count", "IntegrationLatency", "Latency"}


def rust_metrics(root: str = ROOT) -> tuple[str, dict[str, list[dict]]]:
    """The namespace and, per metric, the dimension sets shared/core/src/metrics.rs emits, for the emitting
    functions the code calls: {metric: [{dimension: literal value or None (computed)}]}."""
    path = os.path.join(root, "shared", "core", "src", "metrics.rs")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ns = re.search(r'const NAMESPACE: &str = "([^"]+)"', text)
    if not ns:
        raise SystemExit(f"[deploy-check] no NAMESPACE in {path}")
    callers = called_functions(root)
    emitted: dict[str, list[dict]] = {}
    for m in re.finditer(r"pub fn (\w+)\s*\([^)]*\)\s*\{(.*?)\n\}", text, re.S):
        fn, body = m.group(1), m.group(2)
        if fn not in callers:
            continue
        for e in re.finditer(r"emit\(\s*&\[(.*?)\]\s*,\s*&\[(.*?)\]\s*,?\s*\)", body, re.S):
            dims = {}
            for d in re.finditer(r'\(\s*"(\w+)"\s*,\s*([^)]*?(?:\(\))?)\s*\)', e.group(1)):
                lit = re.fullmatch(r'"([^"]*)"', d.group(2).strip())
                dims[d.group(1)] = lit.group(1) if lit else None
            for metric in re.findall(r'\(\s*"(\w+)"\s*,\s*"\w+"\s*,', e.group(2)):
                emitted.setdefault(metric, []).append(dims)
    return ns.group(1), emitted


def called_functions(root: str) -> set[str]:
    """`metrics::<fn>(` calls anywhere in the Rust sources (the library crates, functions, cli) besides metrics.rs."""
    called: set[str] = set()
    for base in ("shared/core/src", "shared/db/src", "shared/search/src", "shared/pipeline/src", "functions", "cli/src"):
        for d, _, files in os.walk(os.path.join(root, base)):
            for name in files:
                if name.endswith(".rs") and not (name == "metrics.rs" and d.endswith("shared/core/src")):
                    with open(os.path.join(d, name), encoding="utf-8") as f:
                        called |= set(re.findall(r"metrics::(\w+)\s*\(", f.read()))
    return called


def alarm_metrics(ctx: Ctx, aid: str) -> list[tuple[str, str, dict, str | None]]:
    """(namespace, metric, {dimension: value}, statistic) of each metric an alarm reads."""
    out = []
    p = ctx.props(aid)
    if "MetricName" in p:
        dims = {d["Name"]: to_str(d["Value"]) for d in ctx.prop(aid, "Dimensions", default=[]) or []}
        out.append((to_str(ctx.prop(aid, "Namespace")), to_str(ctx.prop(aid, "MetricName")), dims,
                    ctx.prop(aid, "Statistic")))
    for q in ctx.prop(aid, "Metrics", default=[]) or []:
        ms = q.get("MetricStat")
        if ms:
            m = ms["Metric"]
            dims = {d["Name"]: to_str(d["Value"]) for d in m.get("Dimensions") or []}
            out.append((to_str(m.get("Namespace")), to_str(m.get("MetricName")), dims, ms.get("Stat")))
    return out


def rule_alarms(ctx: Ctx, emitted_ns: str, emitted: dict[str, list[dict]]) -> list[Finding]:
    out = []
    fns = functions(ctx)
    consumed = {m["queue"] for m in sqs_mappings(ctx)}
    dlqs = redrive_targets(ctx)
    work_queues = {q for q in consumed if isinstance(ctx.prop(q, "RedrivePolicy"), dict)}
    http_apis = {a for a, _ in ctx.of_type("AWS::ApiGatewayV2::Api") if to_str(ctx.prop(a, "ProtocolType")) == "HTTP"}
    stage_names = {to_str(ctx.prop(s, "StageName")) for s, _ in ctx.of_type("AWS::ApiGatewayV2::Stage")}
    covered: dict[str, set[str]] = {"dlq": set(), "age": set(), "errors": set(), "throttles": set(), "5xx": set()}

    def queue_of(v):
        m = re.fullmatch(r"\{\{([A-Za-z0-9]+)\.QueueName\}\}", v)
        return m.group(1) if m and ctx.type_of(m.group(1)) == "AWS::SQS::Queue" else None

    for aid, _ in ctx.of_type("AWS::CloudWatch::Alarm"):
        if not ctx.prop(aid, "AlarmActions"):
            out.append(Finding("alarm-coverage", aid, "has no AlarmActions: it reaches nobody"))
        for ns, name, dims, stat in alarm_metrics(ctx, aid):
            what = f"{ns}/{name} {{{', '.join(f'{k}={v}' for k, v in sorted(dims.items()))}}}"
            if ns == "AWS/SQS":
                if name not in SQS_METRICS:
                    out.append(Finding("alarm-metric", aid, f"{what}: SQS emits no metric {name}"))
                    continue
                if set(dims) != {"QueueName"}:
                    out.append(Finding("alarm-metric", aid, f"{what}: SQS's only dimension is QueueName"))
                    continue
                q = queue_of(dims["QueueName"])
                if q is None:
                    continue
                if name == "ApproximateNumberOfMessagesVisible" and q in consumed:
                    out.append(Finding("alarm-cannot-fire", aid, f"{what}: {q} is drained by its event source in seconds, so its visible "
                                                                 "count is almost never above 0 at a sample; count arrivals (NumberOfMessagesReceived) "
                                                                 "or watch ApproximateAgeOfOldestMessage"))
                if name == "NumberOfMessagesSent" and q in dlqs:
                    out.append(Finding("alarm-cannot-fire", aid, f"{what}: {q} is a dead-letter queue, and messages moved there by a redrive "
                                                                 "policy are not counted in NumberOfMessagesSent"))
                if name == "NumberOfMessagesReceived" and q in dlqs:
                    covered["dlq"].add(q)
                if name == "ApproximateAgeOfOldestMessage":
                    covered["age"].add(q)
            elif ns == "AWS/Lambda":
                if name not in LAMBDA_METRICS:
                    out.append(Finding("alarm-metric", aid, f"{what}: Lambda emits no metric {name}"))
                    continue
                allowed = [set(), {"FunctionName"}, {"FunctionName", "Resource"}, {"FunctionName", "ExecutedVersion"}]
                if set(dims) not in allowed or (not dims and name not in LAMBDA_ACCOUNT_METRICS):
                    out.append(Finding("alarm-metric", aid, f"{what}: not a dimension set Lambda emits {name} with"))
                    continue
                fn = ids_in(dims.get("FunctionName", ""))
                if dims.get("FunctionName") and not (fn and fn[0] in fns):
                    out.append(Finding("alarm-metric", aid, f"{what}: FunctionName is not a function of the template"))
                elif fn:
                    if name == "Errors":
                        covered["errors"].add(fn[0])
                    if name == "Throttles":
                        covered["throttles"].add(fn[0])
            elif ns == "AWS/ApiGateway":
                if "ApiId" in dims:
                    if name not in HTTP_API_METRICS:
                        hint = " (REST APIs' name; HTTP APIs emit 5xx and 4xx)" if name in REST_API_METRICS else ""
                        out.append(Finding("alarm-metric", aid, f"{what}: an HTTP API emits no metric {name}{hint}"))
                        continue
                    if set(dims) not in ({"ApiId"}, {"ApiId", "Stage"}, {"ApiId", "Stage", "Route"}):
                        out.append(Finding("alarm-metric", aid, f"{what}: HTTP APIs emit by ApiId; ApiId, Stage; ApiId, Stage, Route"))
                        continue
                    if "Stage" in dims and dims["Stage"] not in stage_names:
                        out.append(Finding("alarm-metric", aid, f"{what}: no stage {dims['Stage']} in the template"))
                    if "Route" in dims:
                        out.append(Finding("alarm-metric", aid, f"{what}: route metrics are emitted only with detailed metrics, "
                                                                "which no stage enables"))
                    api = ids_in(dims["ApiId"])
                    if not (api and api[0] in http_apis):
                        out.append(Finding("alarm-metric", aid, f"{what}: ApiId is not an HTTP API of the template"))
                    elif name == "5xx":
                        covered["5xx"].add(api[0])
                elif name not in REST_API_METRICS:
                    out.append(Finding("alarm-metric", aid, f"{what}: API Gateway emits no metric {name}"))
            elif ns == emitted_ns:
                sets = emitted.get(name)
                if not sets:
                    out.append(Finding("alarm-metric", aid, f"{what}: shared/core/src/metrics.rs emits no {name} (from a function the code calls); "
                                                            f"it emits {', '.join(sorted(emitted)) or 'nothing'}"))
                    continue
                if not any(set(s) == set(dims) and all(s[k] is None or s[k] == dims[k] for k in s) for s in sets):
                    shown = "; ".join("{" + ", ".join(f"{k}={v if v is not None else '…'}" for k, v in s.items()) + "}" for s in sets)
                    out.append(Finding("alarm-metric", aid, f"{what}: {name} is emitted with {shown} only (an EMF metric is identified "
                                                            "by its whole dimension set)"))
            else:
                out.append(Finding("alarm-metric", aid, f"{what}: a namespace nothing in the template or the code emits"))
    for q in sorted(dlqs):
        if q not in covered["dlq"]:
            out.append(Finding("alarm-coverage", q, "a dead-letter queue without an alarm on NumberOfMessagesReceived: dead letters "
                                                    "arrive unannounced"))
    for q in sorted(work_queues - covered["age"]):
        out.append(Finding("alarm-coverage", q, "a work queue without an ApproximateAgeOfOldestMessage alarm: a stalled stage goes unnoticed"))
    for f in sorted(set(fns) - covered["errors"]):
        out.append(Finding("alarm-coverage", f, "no alarm on its Errors"))
    for f in sorted(set(fns) - covered["throttles"]):
        out.append(Finding("alarm-coverage", f, "no alarm on its Throttles"))
    for a in sorted(http_apis - covered["5xx"]):
        out.append(Finding("alarm-coverage", a, "no alarm on the HTTP API's 5xx"))
    for s, _ in ctx.of_type("AWS::ApiGatewayV2::Stage"):
        if not (ctx.prop(s, "AccessLogSettings") or {}).get("DestinationArn"):
            out.append(Finding("alarm-coverage", s, "the stage writes no access logs (AccessLogSettings)"))
    return out


# ── network ──

# IAM service prefix -> the endpoint service name (com.amazonaws.<region>.<name>) its API answers on.
ENDPOINT_SERVICE = {"s3": "s3", "sqs": "sqs", "secretsmanager": "secretsmanager", "bedrock": "bedrock-runtime",
                    "events": "events", "logs": "logs", "kms": "kms", "sns": "sns", "dynamodb": "dynamodb", "ssm": "ssm",
                    "iam": "iam"}
# Calls Lambda's own poller makes with the function's role, outside the function's network.
POLLER_ACTIONS = {"sqs:receivemessage", "sqs:deletemessage", "sqs:getqueueattributes"}
# Calls Lambda makes with the role on the function's behalf (ENIs, log delivery, traces).
PLATFORM_PREFIXES = {"ec2", "xray"}


def services_called(ctx: Ctx, fid: str) -> dict[str, str]:
    """service -> why, for the calls the function's code may make (its role's grants)."""
    out: dict[str, str] = {}
    role = role_of(ctx, fid)
    for g in role_grants(ctx, role) if role else []:
        if g.statement.get("Effect") != "Allow" or g.kind == "managed":
            continue  # the allowlisted managed policies hold the platform's grants only
        if "kms:ViaService" in json.dumps(g.statement.get("Condition") or {}):
            continue  # used by that service on the caller's behalf, not called from the VPC
        for a in as_list(g.statement.get("Action")):
            a = to_str(a)
            prefix = a.split(":", 1)[0].lower()
            if a.lower() in POLLER_ACTIONS or prefix in PLATFORM_PREFIXES:
                continue
            out.setdefault(prefix, f"its role grants {a}")
    for cid, served_by in custom_resources(ctx).items():
        if served_by == fid:
            out.setdefault("s3", f"it answers {cid}'s presigned S3 response URL")
    return out


def path_problem(ctx: Ctx, name: str, fn_groups: set[str]) -> str | None:
    """Why a function in the VPC, in fn_groups, has no path to the endpoint service `name`; None when it has one."""
    param = PATH_PARAMS.get(name)
    value = ctx.params.get(param) if param else None
    if value in CONFIRMED_PATH_VALUES:
        return None  # the operator confirms an endpoint of the VPC's or a NAT route
    eps = [eid for eid, _ in ctx.of_type("AWS::EC2::VPCEndpoint")
           if to_str(ctx.prop(eid, "ServiceName")).rsplit(".", 1)[-1] == name]
    if not eps:
        if param in ctx.params:
            why = f"{param}={value} confirms no other path ({' or '.join(sorted(CONFIRMED_PATH_VALUES))})"
        else:
            why = f"no parameter confirms another path ({param or 'PathTo…'} {' or '.join(sorted(CONFIRMED_PATH_VALUES))})"
        return f"the template creates no {name} endpoint, and {why}: the call times out"
    problems = []
    for eid in eps:
        kind = to_str(ctx.prop(eid, "VpcEndpointType") or "Gateway")
        if kind == "Gateway":
            if not [r for r in as_list(ctx.prop(eid, "RouteTableIds")) if to_str(r)]:
                problems.append(f"{eid}: a gateway endpoint on no route table")
            continue
        if ctx.prop(eid, "PrivateDnsEnabled") not in (True, "true", "True"):
            problems.append(f"{eid}: PrivateDnsEnabled is off, so the SDK's {name} hostname does not reach it")
        if not endpoint_admits(ctx, eid, fn_groups):
            problems.append(f"{eid}: none of its security groups admits the function's groups on TCP 443")
    return "; ".join(problems) if len(problems) == len(eps) else None


def in_vpc(ctx: Ctx, fid: str) -> set[str] | None:
    """The function's security groups when it runs in a VPC, else None."""
    vpc = ctx.prop(fid, "VpcConfig")
    if not vpc or not vpc.get("SubnetIds"):
        return None
    return set(to_str(g) for g in as_list(vpc.get("SecurityGroupIds")))


def rule_network(ctx: Ctx) -> list[Finding]:
    out = []
    for fid in functions(ctx):
        fn_groups = in_vpc(ctx, fid)
        if fn_groups is None:
            continue
        for svc, why in sorted(services_called(ctx, fid).items()):
            name = ENDPOINT_SERVICE.get(svc, svc)
            problem = path_problem(ctx, name, fn_groups)
            if problem:
                out.append(Finding("network-path", fid, f"runs in a VPC and calls {name} ({why}); {problem}"))
    return out


def policy_allows(policy: dict, action: str, resource: str) -> bool:
    """An endpoint policy (principal *) allows the action on the resource: an Allow matches and no Deny does."""
    stmts = as_list(policy.get("Statement"))
    def hit(s):
        return matches(s.get("Action", "*"), action) and matches(s.get("Resource", "*"), resource)
    return any(s.get("Effect") == "Allow" and hit(s) for s in stmts) and not any(s.get("Effect") == "Deny" and hit(s) for s in stmts)


def rule_migrations_path(ctx: Ctx) -> list[Finding]:
    """The function serving a custom resource reaches CloudFormation's presigned S3 response URL."""
    out = []
    bucket = CFN_RESPONSE_BUCKET.format(region=REGION.replace("-", ""))
    for cid, fid in custom_resources(ctx).items():
        if fid is None:
            continue
        fn_groups = in_vpc(ctx, fid)
        if fn_groups is None:
            continue
        unanswered = (f"CloudFormation never hears from {fid}: {cid} fails after its ServiceTimeout, and the rollback's "
                      "delete event waits as long again before the stack ends in a failed rollback")
        problem = path_problem(ctx, "s3", fn_groups)
        if problem:
            out.append(Finding("migrations-response-path", cid, f"{fid} runs in a VPC and answers a presigned S3 URL; {problem}: "
                                                                 + unanswered))
            continue
        if ctx.params.get(PATH_PARAMS["s3"]) in CONFIRMED_PATH_VALUES:
            continue
        for eid, _ in ctx.of_type("AWS::EC2::VPCEndpoint"):
            if to_str(ctx.prop(eid, "ServiceName")).rsplit(".", 1)[-1] != "s3":
                continue
            policy = ctx.prop(eid, "PolicyDocument")
            if isinstance(policy, dict) and not policy_allows(policy, "s3:PutObject", f"arn:aws:s3:::{bucket}/response"):
                out.append(Finding("migrations-response-path", cid, f"{eid}'s endpoint policy does not allow s3:PutObject on "
                                                                     f"{bucket} (the presigned response URL's bucket): " + unanswered))
    return out


def network_notes(ctx: Ctx) -> list[str]:
    """Not findings: what the endpoints this stack creates do to the rest of the VPC."""
    names = []
    for eid, _ in ctx.of_type("AWS::EC2::VPCEndpoint"):
        if to_str(ctx.prop(eid, "VpcEndpointType")) != "Interface" or ctx.prop(eid, "PrivateDnsEnabled") not in (True, "true"):
            continue
        names.append(to_str(ctx.prop(eid, "ServiceName")).rsplit(".", 1)[-1])
    if names and not ctx.params.get("EndpointClientCidr"):
        return [f"the interface endpoints this stack creates ({', '.join(names)}) take those names over for the whole VPC "
                "(private DNS) and admit docpipe's functions only: other workloads in the VPC lose those services unless "
                "EndpointClientCidr admits them (or choose existing)"]
    return []


def endpoint_admits(ctx: Ctx, eid: str, fn_groups: set[str]) -> bool:
    groups = [to_str(g) for g in as_list(ctx.prop(eid, "SecurityGroupIds"))]
    rules = []
    for g in groups:
        for sid in ids_in(g):
            for rule in as_list(ctx.prop(sid, "SecurityGroupIngress")):
                rules.append(rule)
    for iid, _ in ctx.of_type("AWS::EC2::SecurityGroupIngress"):
        if to_str(ctx.prop(iid, "GroupId")) in groups:
            rules.append(ctx.props(iid) and ctx.val(ctx.props(iid)))
    for r in rules:
        proto = to_str(r.get("IpProtocol"))
        lo, hi = number(r.get("FromPort"), -1), number(r.get("ToPort"), -1)
        port_ok = proto == "-1" or (proto in ("tcp", "6") and lo <= 443 <= hi)
        if port_ok and to_str(r.get("SourceSecurityGroupId", "")) in fn_groups:
            return True
    return False


# ── the clock ──

def docpipe_binary() -> str:
    """The docpipe CLI, which holds the clock's rules (shared/core/src/clock.rs): scripts/deploy-check.sh builds it."""
    path = os.environ.get("DOCPIPE_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/docpipe/target"), "debug", "docpipe")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"[deploy-check] no docpipe binary at {path}: run scripts/deploy-check.sh (it builds one), or set DOCPIPE_BIN")
    return path


_CLOCK_CACHE: dict[str, dict] = {}


def clock_check(envs: list[dict[str, str]]) -> dict:
    """`docpipe clock-check`: the variables the clock reads, and each environment's problems, from the
    Rust that every function runs at start. Nothing of the clock is written twice."""
    import subprocess
    key = json.dumps(envs, sort_keys=True)
    if key not in _CLOCK_CACHE:
        out = subprocess.run([docpipe_binary(), "clock-check"], input=key, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"[deploy-check] docpipe clock-check failed: {out.stderr.strip()}")
        _CLOCK_CACHE[key] = json.loads(out.stdout.strip().splitlines()[-1])
    return _CLOCK_CACHE[key]


def clock_variables() -> list[str]:
    return clock_check([])["variables"]




def rule_clock(ctx: Ctx, variables: list[str]) -> list[Finding]:
    out = []
    fns = functions(ctx)
    envs = {fid: {k: to_str(v) for k, v in ((ctx.prop(fid, "Environment") or {}).get("Variables") or {}).items()} for fid in fns}
    mappings = sqs_mappings(ctx)
    # Every function checks the clock at start: each needs every variable clock.rs reads.
    for fid, env in envs.items():
        missing = [v for v in variables if v not in env]
        if missing:
            out.append(Finding("clock", fid, f"its environment lacks {', '.join(missing)} (clock.rs's VARIABLES): it refuses to start"))
    # Each queue with an event source: its function's clock names it, and agrees with the resources.
    for m in mappings:
        f, q = m["function"], m["queue"]
        stage = fns[f]["binary"].upper()
        env = envs.get(f, {})
        tvar, vvar = f"DOCPIPE_{stage}_TIMEOUT_SECS", f"DOCPIPE_{stage}_VISIBILITY_SECS"
        absent = [v for v in (tvar, vvar) if v not in env]
        if absent:
            out.append(Finding("clock", m["id"], f"{f} consumes {q}, but its environment carries no {' or '.join(absent)}: "
                                                 "the function cannot check its queue's clock at start (extend clock.rs's VARIABLES)"))
            continue
        if number(env[tvar]) != fns[f]["timeout"]:
            out.append(Finding("clock", f, f"{tvar}={env[tvar]} but the function's Timeout is {fns[f]['timeout']:.0f}"))
        if number(env[vvar]) != visibility(ctx, q):
            out.append(Finding("clock", q, f"{vvar}={env[vvar]} but the queue's VisibilityTimeout is {visibility(ctx, q):.0f}"))
        rp = ctx.prop(q, "RedrivePolicy")
        if isinstance(rp, dict):
            if "DOCPIPE_MAX_RECEIVE_COUNT" in env and number(rp.get("maxReceiveCount")) != number(env["DOCPIPE_MAX_RECEIVE_COUNT"]):
                out.append(Finding("clock", q, f"maxReceiveCount {to_str(rp.get('maxReceiveCount'))} but DOCPIPE_MAX_RECEIVE_COUNT="
                                               f"{env['DOCPIPE_MAX_RECEIVE_COUNT']}"))
            if "DOCPIPE_QUEUE_RETENTION_SECS" in env and retention(ctx, q) != number(env["DOCPIPE_QUEUE_RETENTION_SECS"]):
                out.append(Finding("clock", q, f"MessageRetentionPeriod {retention(ctx, q):.0f} but DOCPIPE_QUEUE_RETENTION_SECS="
                                               f"{env['DOCPIPE_QUEUE_RETENTION_SECS']}"))
    # A dead-letter queue keeps a message longer than its source: a message keeps its enqueue time.
    for dlq, sources in redrive_targets(ctx).items():
        for src in sources:
            if retention(ctx, dlq) <= retention(ctx, src):
                out.append(Finding("clock", dlq, f"keeps a message {fmt_s(retention(ctx, dlq))}, not longer than its source {src} "
                                                 f"({fmt_s(retention(ctx, src))}): a dead letter can expire on arrival"))
    # The sweep period the functions read is the schedule's.
    for rid, _ in ctx.of_type("AWS::Events::Rule"):
        m = re.fullmatch(r"rate\((\d+) minutes?\)", to_str(ctx.prop(rid, "ScheduleExpression") or ""))
        targets = [i for t in as_list(ctx.prop(rid, "Targets")) for i in ids_in(t.get("Arn"))]
        for fid in targets:
            env = envs.get(fid, {})
            if m and "DOCPIPE_SWEEP_PERIOD_MINUTES" in env and fns.get(fid, {}).get("binary") == "sweeper" \
                    and number(m.group(1)) != number(env["DOCPIPE_SWEEP_PERIOD_MINUTES"]):
                out.append(Finding("clock", rid, f"runs every {m.group(1)} min but DOCPIPE_SWEEP_PERIOD_MINUTES={env['DOCPIPE_SWEEP_PERIOD_MINUTES']}"))
    # clock.rs's own rules, on the values the functions get (the Globals: every function the same).
    groups: dict[tuple, list[str]] = {}
    for fid, env in envs.items():
        if all(v in env for v in variables):
            groups.setdefault(tuple((v, env[v]) for v in variables), []).append(fid)
    for values, fids in groups.items():
        where = fids[0] if len(fids) == 1 else f"the clock of {len(fids)} functions ({', '.join(sorted(fids)[:3])}, …)"
        for problem in clock_problems(dict(values)):
            out.append(Finding("clock", where, problem))
    return out


def clock_problems(env: dict[str, str]) -> list[str]:
    """What the functions' clock (shared/core/src/clock.rs `Clock::read`, at scale 1) refuses in this environment."""
    return clock_check([env])["problems"][0]


def rule_schedules(ctx: Ctx) -> list[Finding]:
    out = []
    fns = functions(ctx)
    configs = {}
    for cid, _ in ctx.of_type("AWS::Lambda::EventInvokeConfig"):
        for f in ids_in(ctx.prop(cid, "FunctionName")):
            configs[f] = cid
    for rid, _ in ctx.of_type("AWS::Events::Rule", "AWS::Scheduler::Schedule"):
        expr = to_str(ctx.prop(rid, "ScheduleExpression") or "")
        m = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expr)
        period = float(m.group(1)) * {"minute": 60, "hour": 3600, "day": 86400}[m.group(2).rstrip("s")] if m else None
        targets = as_list(ctx.prop(rid, "Targets")) or [ctx.prop(rid, "Target") or {}]
        for t in targets:
            for f in ids_in(t.get("Arn")):
                if f not in fns:
                    continue
                rc = number(ctx.prop(f, "ReservedConcurrentExecutions"))
                if rc != 1:
                    lease = lease_problem(ctx, f, fns[f])
                    if lease:
                        out.append(Finding("scheduled-overlap", f, f"scheduled by {rid} with {'no' if rc is None else f'{rc:.0f}'} reserved "
                                                                   f"concurrency, and {lease}: two runs can overlap (set "
                                                                   "ReservedConcurrentExecutions 1, or hold a lease for the invocation's length)"))
                cid = configs.get(f)
                retries = number(ctx.prop(cid, "MaximumRetryAttempts"), 2.0) if cid else 2.0
                if retries != 0:
                    out.append(Finding("scheduled-overlap", f, f"a failed scheduled run is retried {retries:.0f} time(s) (Lambda's default is 2), "
                                                               "on top of the next schedule; set EventInvokeConfig MaximumRetryAttempts 0"))
                if period is not None and fns[f]["timeout"] >= period:
                    out.append(Finding("scheduled-overlap", f, f"timeout {fmt_s(fns[f]['timeout'])} is not shorter than its period {fmt_s(period)}"))
    return out


def lease_problem(ctx: Ctx, fid: str, fn: dict) -> str | None:
    """Why a scheduled function's database lease does not keep its runs apart, or None when it does."""
    known = LEASED_SCHEDULES.get(fn["binary"])
    if known is None:
        return f"its code ({fn['binary']}) takes no lease this check knows of (LEASED_SCHEDULES)"
    path, marker, var = known
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            if marker not in f.read():
                return f"{path} no longer holds {marker}"
    except OSError:
        return f"{path} cannot be read"
    env = {k: to_str(v) for k, v in ((ctx.prop(fid, "Environment") or {}).get("Variables") or {}).items()}
    if var not in env:
        return f"its environment carries no {var}, the lease's length"
    if number(env[var]) != fn["timeout"]:
        return f"its lease lasts {env[var]} s ({var}) but an invocation may run {fmt_s(fn['timeout'])} (Timeout)"
    return None


def rule_account(ctx: Ctx) -> list[Finding]:
    out = []
    fns = functions(ctx)
    for fid, fn in sorted(fns.items()):
        if fn["memory"] > QUOTAS["memory"]:
            out.append(Finding("account-memory", fid, f"MemorySize {fn['memory']:,.0f} MB is above the account's memory quota "
                                                      f"({QUOTAS['memory']:,} MB): CreateFunction refuses it; lower it or raise the "
                                                      "quota first (then give --account-memory-mb)"))
    reserved = {fid: fn["reserved"] for fid, fn in fns.items() if fn["reserved"]}
    total = sum(reserved.values())
    room = QUOTAS["concurrency"] - UNRESERVED_MINIMUM
    if total > max(room, 0):
        out.append(Finding("account-concurrency", ", ".join(sorted(reserved)),
                           f"reserve {total:.0f} concurrent execution(s), but an account concurrency quota of "
                           f"{QUOTAS['concurrency']:,} leaves {max(room, 0):,} to reserve ({UNRESERVED_MINIMUM} stay unreserved): "
                           "Lambda refuses the reservation; drop it or raise the quota first (then give --account-concurrency)"))
    return out


def account_notes(ctx: Ctx) -> list[str]:
    """Not findings: what the event sources may run at once, against the account's concurrency."""
    caps, open_ended = 0, []
    for eid, _ in ctx.of_type("AWS::Lambda::EventSourceMapping"):
        m = number((ctx.prop(eid, "ScalingConfig") or {}).get("MaximumConcurrency"))
        if m is None:
            open_ended.append(eid)
        else:
            caps += m
    if caps >= QUOTAS["concurrency"]:
        return [f"the event sources may run {caps:.0f} functions at once (ScalingConfig.MaximumConcurrency), at or above the "
                f"account's concurrency quota ({QUOTAS['concurrency']:,}): the API and the sweeper would be throttled while they do"
                + (f"; {len(open_ended)} more mapping(s) set no maximum" if open_ended else "")]
    return []


# ───────────────────────────── the run ─────────────────────────────


def parameter_sets(cfn: dict, overrides: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    params = cfn.get("Parameters") or {}
    base: dict[str, str] = {}
    for name, p in params.items():
        if name in overrides:
            base[name] = overrides[name]
        elif name in PLACEHOLDERS_OVER_DEFAULT:
            base[name] = PLACEHOLDERS_OVER_DEFAULT[name]
        elif "Default" in p:
            d = p["Default"]
            base[name] = ",".join(map(str, d)) if isinstance(d, list) else str(d)
        elif name in PLACEHOLDERS:
            base[name] = PLACEHOLDERS[name]
        else:
            t = str(p.get("Type", "String"))
            base[name] = {"AWS::EC2::VPC::Id": "vpc-0example", "List<AWS::EC2::Subnet::Id>": "subnet-0example",
                          "List<AWS::EC2::SecurityGroup::Id>": "sg-0example", "Number": str(p.get("MinValue", 1))}.get(
                t, str((p.get("AllowedValues") or ["example"])[0]))
    in_conditions = {r for c in (cfn.get("Conditions") or {}).values() for r in raw_refs(c)}
    varied = [n for n in params if "AllowedValues" in params[n] and n in in_conditions and n not in overrides]
    vary = [n for n in varied if n not in INDEPENDENT_PARAMS]
    # The independent ones: the base set's values, then each other value of each, one at a time.
    alone: list[dict[str, str]] = [{}]
    for n in varied:
        if n in INDEPENDENT_PARAMS:
            alone += [{n: str(v)} for v in params[n]["AllowedValues"] if str(v) != base[n]]
    sets = []
    for combo in itertools.product(*[[str(v) for v in params[n]["AllowedValues"]] for n in vary]):
        for extra in alone:
            values = dict(base, **dict(zip(vary, combo)), **extra)
            label = ", ".join([f"{n}={v}" for n, v in zip(vary, combo)] + [f"{n}={v}" for n, v in extra.items()])
            sets.append((label, values))
    return sets or [("", base)]


def run_rules(cfn: dict, params: dict[str, str], label: str = "", only: set[str] | None = None) -> tuple[list[Finding], list[str]]:
    """(findings, the template Rules that refuse this set: then nothing is created and nothing is checked)."""
    ctx = Ctx(cfn, params, label=label)
    refused = ctx.rule_failures()
    if refused:
        return [], refused
    ns, emitted = rust_metrics()
    variables = clock_variables()
    findings: list[Finding] = []
    checks = [
        ({"esm-visibility", "esm-visibility-6x", "esm-policy-order", "esm-after-migrations"}, lambda: rule_esm(ctx)),
        ({"managed-policy"}, lambda: rule_managed_policies(ctx)),
        ({"functions-after-migrations"}, lambda: rule_functions_after_migrations(ctx)),
        ({"bucket-name", "bucket-retain", "bucket-tls", "bucket-multipart"}, lambda: rule_buckets(ctx)),
        ({"alarm-topic-key", "kms-key-admin"}, lambda: rule_alarm_keys(ctx)),
        ({"log-group-order"}, lambda: rule_log_groups(ctx)),
        ({"alarm-metric", "alarm-cannot-fire", "alarm-coverage"}, lambda: rule_alarms(ctx, ns, emitted)),
        ({"network-path"}, lambda: rule_network(ctx)),
        ({"migrations-response-path"}, lambda: rule_migrations_path(ctx)),
        ({"clock"}, lambda: rule_clock(ctx, variables)),
        ({"scheduled-overlap"}, lambda: rule_schedules(ctx)),
        ({"account-memory", "account-concurrency"}, lambda: rule_account(ctx)),
    ]
    for rules, check in checks:
        if only is None or rules & only:
            findings.extend(check())
    return findings, []


def check(cfn: dict, overrides: dict[str, str]) -> tuple[dict[Finding, list[str]], list[tuple[str, list[str]]], int]:
    results: dict[Finding, list[str]] = {}
    refused = []
    sets = parameter_sets(cfn, overrides)
    for label, params in sets:
        found, refusal = run_rules(cfn, params, label)
        if refusal:
            refused.append((label, refusal))
        for f in found:
            results.setdefault(f, []).append(label)
    return results, refused, len(sets)


def report(results: dict[Finding, list[str]], refused, nsets: int, out=sys.stdout) -> None:
    by_rule: dict[str, list[tuple[Finding, list[str]]]] = {}
    for f, labels in results.items():
        by_rule.setdefault(f.rule, []).append((f, labels))
    for rule in RULES:
        items = by_rule.get(rule)
        if not items:
            continue
        title, urls = RULES[rule]
        print(f"FAIL {rule}: {title}", file=out)
        for u in urls:
            print(f"     {u}", file=out)
        for f, labels in sorted(items, key=lambda x: (x[0].where, x[0].message)):
            when = "" if len(labels) == nsets else f"  [with {'; '.join(sorted(set(labels))[:4])}{' …' if len(set(labels)) > 4 else ''}]"
            print(f"  - {f.where}: {f.message}{when}", file=out)
    for label, why in refused:
        print(f"note: parameter set {label or '(defaults)'} is refused by the template's Rules ({'; '.join(why)}): not checked", file=out)


# ───────────────────────────── self-test ─────────────────────────────


def self_test(sam: dict, cfn: dict, base_params: dict[str, str]) -> int:
    """Every rule fires on a variant of the template that breaks it: no rule is dead."""
    def res(t):
        return t["Resources"]

    def first(t, typ, pred=lambda rid, r: True):
        for rid, r in res(t).items():
            if r.get("Type") == typ and pred(rid, r):
                return rid
        raise SystemExit(f"[deploy-check] self-test: the template has no {typ} to break")

    def esm(t, queue_pred):
        return first(t, "AWS::Lambda::EventSourceMapping",
                     lambda rid, r: queue_pred(json.dumps(r["Properties"].get("EventSourceArn"))))

    def drop_depends(t, rid, pred):
        r = res(t)[rid]
        r["DependsOn"] = [d for d in as_list(r.get("DependsOn")) if not pred(d)]

    def sam_queue_event(s):
        # the old shape: a SAM SQS event, which brings AWSLambdaSQSQueueExecutionRole
        f = first(s, "AWS::Serverless::Function", lambda rid, r: (r.get("Metadata") or {}).get("BuildProperties", {}).get("Binary") == "parse")
        s["Resources"][f]["Properties"]["Events"] = {"Jobs": {"Type": "SQS", "Properties": {"Queue": {"Fn::GetAtt": ["ParseQueue", "Arn"]}, "BatchSize": 1}}}
        for rid in [rid for rid, r in s["Resources"].items() if r.get("Type") == "AWS::Lambda::EventSourceMapping" and "ParseQueue" in json.dumps(r)]:
            del s["Resources"][rid]

    def alarm_on(t, ns, metric):
        return first(t, "AWS::CloudWatch::Alarm", lambda rid, r: r["Properties"].get("Namespace") == ns and r["Properties"].get("MetricName") == metric)

    def sweeper(t):
        return first(t, "AWS::Lambda::Function", lambda rid, r: (r.get("Metadata") or {}).get("BuildProperties", {}).get("Binary") == "sweeper")

    def set_param(name, value):
        return lambda t: None, {name: value}

    def add_function_log_group(t):
        res(t)["LegacyLogGroup"] = {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": {"Fn::Sub": "/aws/lambda/${StoreFunction}"}}}
        del res(t)["StoreFunction"]["Properties"]["LoggingConfig"]

    def strip_endpoint(t, svc):
        for rid in [rid for rid, r in res(t).items() if r.get("Type") == "AWS::EC2::VPCEndpoint" and svc in json.dumps(r["Properties"].get("ServiceName"))]:
            del res(t)[rid]
        for r in res(t).values():
            if r.get("Type") == "AWS::CloudFormation::WaitConditionHandle":
                r.pop("Metadata", None)

    def no_ingress(t):
        for rid in [rid for rid, r in res(t).items() if r.get("Type") == "AWS::EC2::SecurityGroupIngress"]:
            del res(t)[rid]
        for r in res(t).values():
            if r.get("Type") == "AWS::EC2::SecurityGroup":
                r["Properties"].pop("SecurityGroupIngress", None)

    def no_migrations(t):
        for rid in [rid for rid, r in res(t).items() if r["Type"].startswith("Custom::")]:
            del res(t)[rid]
        for rid, r in res(t).items():
            if "DependsOn" in r:
                drop_depends(t, rid, lambda d: d not in res(t))

    def sqs_dims(t):
        a = alarm_on(t, "AWS/SQS", "ApproximateAgeOfOldestMessage")
        res(t)[a]["Properties"]["Dimensions"].append({"Name": "Stage", "Value": "x"})

    def add_alarm(t, aid, props):
        res(t)[aid] = {"Type": "AWS::CloudWatch::Alarm", "Properties": dict({"Statistic": "Sum", "Period": 300, "EvaluationPeriods": 1,
                                                                           "Threshold": 0, "ComparisonOperator": "GreaterThanThreshold",
                                                                           "AlarmActions": [{"Ref": "AlarmsTopic"}]}, **props)}

    cases = [
        # (rule, what is broken, mutate translated, mutate SAM before translating, parameter overrides)
        ("esm-visibility", "a dead-letter queue with SQS's default visibility (30 s)",
         lambda t: res(t)["ParseDeadLetterQueue"]["Properties"].pop("VisibilityTimeout"), None, {}),
        ("esm-visibility-6x", "the index queue at 2x its function's timeout", None, None, {"IndexVisibilityTimeout": "1200"}),
        ("esm-policy-order", "the index mapping without DependsOn on its consume policy",
         lambda t: drop_depends(t, esm(t, lambda s: "IndexQueue" in s), lambda d: res(t).get(d, {}).get("Type") == "AWS::IAM::Policy"), None, {}),
        ("esm-policy-order", "a consume policy that grants another queue",
         lambda t: res(t)[first(t, "AWS::IAM::Policy", lambda rid, r: "IndexQueue" in json.dumps(r))]["Properties"]["PolicyDocument"]["Statement"][0]
         .__setitem__("Resource", {"Fn::GetAtt": ["ParseQueue", "Arn"]}), None, {}),
        ("managed-policy", "a SAM SQS event (AWSLambdaSQSQueueExecutionRole)", None, sam_queue_event, {}),
        ("esm-after-migrations", "the parse mapping and its function without DependsOn on the migrations",
         lambda t: [drop_depends(t, rid, lambda d: res(t).get(d, {}).get("Type", "").startswith("Custom::"))
                    for rid in (esm(t, lambda s: '"ParseQueue"' in s), "ParseFunction")], None, {}),
        ("esm-after-migrations", "no migrations custom resource", no_migrations, None, {}),
        ("bucket-name", "the bucket named after the stack",
         lambda t: res(t)["DocumentsBucket"]["Properties"].__setitem__("BucketName", {"Fn::Sub": "${AWS::StackName}-${AWS::AccountId}-documents"}), None, {}),
        ("bucket-name", "a BucketName parameter without AllowedPattern",
         lambda t: t["Parameters"]["BucketName"].pop("AllowedPattern"), None, {}),
        ("bucket-retain", "the bucket deleted with the stack", lambda t: res(t)["DocumentsBucket"].pop("DeletionPolicy"), None, {}),
        ("bucket-retain", "DeletionPolicy Retain (a failed first create leaves the bucket behind)",
         lambda t: res(t)["DocumentsBucket"].__setitem__("DeletionPolicy", "Retain"), None, {}),
        ("functions-after-migrations", "the API function without DependsOn on the migrations",
         lambda t: drop_depends(t, "ApiFunction", lambda d: d == "Migrations"), None, {}),
        ("bucket-tls", "no TLS-only bucket policy",
         lambda t: res(t).pop(first(t, "AWS::S3::BucketPolicy")), None, {}),
        ("bucket-multipart", "no multipart clean-up", lambda t: res(t)["DocumentsBucket"]["Properties"].pop("LifecycleConfiguration"), None, {}),
        ("alarm-topic-key", "the alarms' topic under alias/aws/sns",
         lambda t: res(t)["AlarmsTopic"]["Properties"].__setitem__("KmsMasterKeyId", "alias/aws/sns"), None, {}),
        ("alarm-topic-key", "a key CloudWatch may not use",
         lambda t: res(t)[first(t, "AWS::KMS::Key")]["Properties"]["KeyPolicy"].__setitem__(
             "Statement", [s for s in res(t)[first(t, "AWS::KMS::Key")]["Properties"]["KeyPolicy"]["Statement"]
                           if "cloudwatch" not in json.dumps(s)]), None, {}),
        ("kms-key-admin", "a key the account cannot administer",
         lambda t: res(t)[first(t, "AWS::KMS::Key")]["Properties"]["KeyPolicy"].__setitem__(
             "Statement", [s for s in res(t)[first(t, "AWS::KMS::Key")]["Properties"]["KeyPolicy"]["Statement"]
                           if ":root" not in json.dumps(s)]), None, {}),
        ("log-group-order", "a /aws/lambda/${StoreFunction} group and no LoggingConfig", add_function_log_group, None, {}),
        ("log-group-order", "a function without LoggingConfig", lambda t: res(t)["ApiFunction"]["Properties"].pop("LoggingConfig"), None, {}),
        ("alarm-metric", "the stuck-runs alarm on a metric the code does not emit",
         lambda t: res(t)[alarm_on(t, "docpipe", "RunsSwept")]["Properties"].__setitem__("MetricName", "RunsStuck"), None, {}),
        ("alarm-metric", "RunsSwept with a dimension set it is not emitted with",
         lambda t: res(t)[alarm_on(t, "docpipe", "RunsSwept")]["Properties"]["Dimensions"].append({"Name": "class", "Value": "lost"}), None, {}),
        ("alarm-metric", "an SQS alarm with a dimension SQS does not emit", sqs_dims, None, {}),
        ("alarm-metric", "the HTTP API's 5xx under the REST API's name",
         lambda t: res(t)[alarm_on(t, "AWS/ApiGateway", "5xx")]["Properties"].__setitem__("MetricName", "5XXError"), None, {}),
        ("alarm-cannot-fire", "a dead-letter alarm on the visible count",
         lambda t: add_alarm(t, "VisibleDeadLetters", {"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
                                                       "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["IndexDeadLetterQueue", "QueueName"]}}]}), None, {}),
        ("alarm-cannot-fire", "a dead-letter alarm on NumberOfMessagesSent",
         lambda t: add_alarm(t, "SentDeadLetters", {"Namespace": "AWS/SQS", "MetricName": "NumberOfMessagesSent",
                                                    "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["IndexDeadLetterQueue", "QueueName"]}}]}), None, {}),
        ("alarm-coverage", "no age alarm on the parse queue",
         lambda t: res(t).pop(first(t, "AWS::CloudWatch::Alarm", lambda rid, r: r["Properties"].get("MetricName") == "ApproximateAgeOfOldestMessage"
                                    and "ParseQueue" in json.dumps(r["Properties"].get("Dimensions")))), None, {}),
        ("alarm-coverage", "no access logs", lambda t: res(t)["HttpApiStage"]["Properties"].pop("AccessLogSettings"), None, {}),
        ("network-path", "PathToSqs=create without the SQS endpoint", lambda t: strip_endpoint(t, "sqs"), None, {"PathToSqs": "create"}),
        ("network-path", "the Bedrock embedder with PathToBedrock=none (and the template's Rule left out)",
         lambda t: t.get("Rules", {}).pop("BedrockNeedsAPath", None), None, {"PathToBedrock": "none", "Embedder": "bedrock"}),
        ("network-path", "PathToEvents=create without the EventBridge endpoint (the functions' PutEvents)",
         lambda t: strip_endpoint(t, "events"), None, {"PathToEvents": "create"}),
        ("network-path", "PathToS3=create without the S3 gateway (the originals and artifacts among others)",
         lambda t: strip_endpoint(t, "s3"), None, {"PathToS3": "create"}),
        ("network-path", "interface endpoints without private DNS",
         lambda t: [r["Properties"].__setitem__("PrivateDnsEnabled", False) for r in res(t).values()
                    if r.get("Type") == "AWS::EC2::VPCEndpoint" and "Interface" in json.dumps(r)], None, {"PathToSecretsManager": "create"}),
        ("network-path", "no endpoint admits the functions on 443", no_ingress, None, {"PathToSqs": "create"}),
        ("migrations-response-path", "PathToS3=create without the S3 gateway: the migrations cannot answer CloudFormation",
         lambda t: strip_endpoint(t, "s3"), None, {"PathToS3": "create"}),
        ("migrations-response-path", "an S3 endpoint policy that admits the documents bucket only",
         lambda t: res(t)["S3GatewayEndpoint"]["Properties"].__setitem__("PolicyDocument", {
             "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:*",
                                                     "Resource": ["arn:aws:s3:::docpipe-example-documents", "arn:aws:s3:::docpipe-example-documents/*"]}]}),
         None, {"PathToS3": "create"}),
        ("clock", "a lease longer than the queues' visibility", None, None, {"LeaseSeconds": "4000"}),
        ("clock", "the DLQ function's clock left out of the environment",
         lambda t: [((r["Properties"].get("Environment") or {}).get("Variables") or {}).pop("DOCPIPE_DLQ_VISIBILITY_SECS", None)
                    for r in res(t).values() if r.get("Type") == "AWS::Lambda::Function"], None, {}),
        ("clock", "a retention shorter than a retry cycle", None, None, {"QueueRetentionSeconds": "3600"}),
        ("scheduled-overlap", "the sweeper without reserved concurrency, its lease shorter than its timeout",
         lambda t: res(t)[sweeper(t)]["Properties"]["Environment"]["Variables"].__setitem__("DOCPIPE_SWEEPER_TIMEOUT_SECS", "60"),
         None, {}),
        ("scheduled-overlap", "the sweeper retried asynchronously",
         lambda t: [r["Properties"].__setitem__("MaximumRetryAttempts", 2) for r in res(t).values()
                    if r.get("Type") == "AWS::Lambda::EventInvokeConfig" and sweeper(t) in json.dumps(r["Properties"].get("FunctionName"))],
         None, {}),
        ("account-memory", "the parse function at 3,584 MB in a new account", None, None, {"ParseMemorySize": "3584"}),
        ("account-concurrency", "the sweeper reserving 1 in an account of 10", None, None, {"SweeperReservedConcurrency": "1"}),
    ]
    failures = 0
    baseline, _ = run_rules(cfn, base_params, "self-test")
    base_by_rule: dict[str, set] = {}
    for f in baseline:
        base_by_rule.setdefault(f.rule, set()).add(f)
    fired_rules: set[str] = set()
    for rule, what, mutate_cfn, mutate_sam, params in cases:
        values = dict(base_params, **params)
        if mutate_sam is not None:
            s = copy.deepcopy(sam)
            mutate_sam(s)
            t = translate(s, values)
        else:
            t = copy.deepcopy(cfn)
        if mutate_cfn is not None:
            mutate_cfn(t)
        found, refused = run_rules(t, values, "self-test")
        new = [f for f in found if f.rule == rule and f not in base_by_rule.get(rule, set())]
        if refused:
            print(f"  FAIL {rule:24} {what}: the variant's parameters are refused by the template's Rules ({refused})")
            failures += 1
        elif new:
            fired_rules.add(rule)
            print(f"  ok   {rule:24} {what}: {new[0].where}: {new[0].message[:110]}{'…' if len(new[0].message) > 110 else ''}")
        else:
            print(f"  FAIL {rule:24} {what}: the rule did not fire")
            failures += 1
    dead = sorted(set(RULES) - fired_rules)
    for rule in dead:
        print(f"  FAIL {rule:24} no self-test case makes it fire")
    # the S3 name rules themselves
    for name in BUCKET_BAD_PROBES:
        if not s3_name_problems(name):
            print(f"  FAIL bucket-name: {name!r} passes s3_name_problems")
            failures += 1
    for name in BUCKET_GOOD_PROBES:
        if s3_name_problems(name):
            print(f"  FAIL bucket-name: {name!r} is refused by s3_name_problems: {s3_name_problems(name)}")
            failures += 1
    failures += len(dead)
    print(f"[deploy-check] self-test: {len(cases)} broken variants, {len(fired_rules)} of {len(RULES)} rules fired, "
          f"{failures} failure(s)")
    return 1 if failures else 0


# ───────────────────────────── main ─────────────────────────────


def parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        for tok in shlex.split(item):
            if "=" not in tok:
                raise SystemExit(f"[deploy-check] --param {tok!r}: expected Key=Value")
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", default=os.path.join(ROOT, "template.yaml"))
    ap.add_argument("--param", action="append", default=[], help="Key=Value (several, or one quoted string of them), as sam deploy's --parameter-overrides")
    ap.add_argument("--translated-out", help="write the translated template (the base parameter set) here as JSON")
    ap.add_argument("--translate-only", action="store_true", help="translate and write --translated-out, check nothing")
    ap.add_argument("--self-test", action="store_true", help="break the template once per rule and check that each rule fires")
    ap.add_argument("--list", action="store_true", help="the rules and their AWS documents")
    ap.add_argument("--account-memory-mb", type=int, help=f"the account's Lambda memory quota (default {QUOTAS['memory']}, a new account's)")
    ap.add_argument("--account-concurrency", type=int, help=f"the account's Lambda concurrency quota (default {QUOTAS['concurrency']}, a new account's)")
    ap.add_argument("--quotas", default="", help="memory=MB,concurrency=N (make's QUOTAS), the same as the two options above")
    a = ap.parse_args()
    for item in [x.strip() for x in a.quotas.replace(" ", ",").split(",") if x.strip()]:
        k, _, v = item.partition("=")
        if k not in QUOTAS or not v.isdigit():
            raise SystemExit(f"[deploy-check] --quotas {a.quotas!r}: expected memory=MB,concurrency=N")
        QUOTAS[k] = int(v)
    if a.account_memory_mb is not None:
        QUOTAS["memory"] = a.account_memory_mb
    if a.account_concurrency is not None:
        QUOTAS["concurrency"] = a.account_concurrency
    if a.list:
        for rule, (title, urls) in RULES.items():
            print(f"{rule}: {title}\n  " + "\n  ".join(urls))
        return 0
    overrides = parse_overrides(a.param)
    sam = load_sam(a.template)
    base_label, base = parameter_sets(sam, overrides)[0]
    base = dict(base)
    for name, value in PLACEHOLDERS.items():
        if name in (sam.get("Parameters") or {}) and name not in overrides:
            base.setdefault(name, value)
    try:
        cfn = translate(sam, base)
    except Exception as e:  # samtranslator's InvalidDocumentException carries the reasons
        causes = getattr(e, "causes", None)
        detail = "; ".join(str(c) for c in causes) if causes else str(e)
        print(f"[deploy-check] SAM cannot transform {a.template}: {detail}")
        return 1
    if a.translated_out:
        os.makedirs(os.path.dirname(os.path.abspath(a.translated_out)), exist_ok=True)
        with open(a.translated_out, "w") as f:
            json.dump(cfn, f, indent=1, sort_keys=True)
    if a.translate_only:
        return 0
    if a.self_test:
        print(f"[deploy-check] self-test on {os.path.relpath(a.template, os.getcwd())} (samtranslator {samtranslator_version()})")
        return self_test(sam, cfn, base)
    results, refused, nsets = check(cfn, overrides)
    print(f"[deploy-check] {os.path.relpath(a.template, os.getcwd())}: translated by samtranslator {samtranslator_version()} "
          f"(offline), {len(RULES)} rules over {nsets} parameter set(s), for an account with a memory quota of "
          f"{QUOTAS['memory']:,} MB and a concurrency quota of {QUOTAS['concurrency']:,}")
    report(results, refused, nsets)
    for note in account_notes(Ctx(cfn, base)) + network_notes(Ctx(cfn, base)):
        print(f"note: {note}")
    rules_hit = {f.rule for f in results}
    if results:
        print(f"[deploy-check] FAILED: {len(results)} finding(s) under {len(rules_hit)} rule(s)")
        return 1
    # A set that differs from the values given only by the check's own one-at-a-time choice of a path
    # parameter is no deploy's: its refusal does not count.
    refused_given = [r for r in refused if not any(f"{n}=" in r[0] for n in INDEPENDENT_PARAMS)]
    if refused_given and (overrides or len(refused) == nsets):
        # The values given (or every set) would be refused by CloudFormation before anything is created.
        print(f"[deploy-check] FAILED: the template's Rules refuse {len(refused_given)} of {nsets} parameter set(s)"
              f"{' with the values given' if overrides else ''}")
        return 1
    print("[deploy-check] every rule holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
