#!/usr/bin/env python3
"""make preflight: what deploy-check cannot know offline, asked of the AWS account before a deploy.

deploy-check holds the template to AWS's rules; this asks the account and the VPC the deploy goes to
whether the parameters fit them (README, "Deploying to AWS"):

  subnets          SubnetIds exist, are in VpcId, one per Availability Zone where interface endpoints are made
  security-groups  SecurityGroupIds exist in VpcId
  vpc-dns          DNS support and DNS hostnames on, where interface endpoints with private DNS are made
  endpoint-zones   each interface endpoint service this stack creates is offered in every zone of SubnetIds
                   (bedrock-runtime is not offered in every zone): the zones it lacks are named
  endpoint-dns     no endpoint with private DNS for that service in the VPC already (PathTo…=create), or
                   one there (PathTo…=existing)
  s3-gateway       PathToS3=create: the route tables exist, carry SubnetIds, and have no S3 gateway
                   endpoint yet (one per route table); existing: one is on every subnet's route table
  nat-route        PathTo…=nat: every subnet's route table sends 0.0.0.0/0 to a NAT gateway (or another
                   target that is not an internet gateway)
  lambda-quota     the account's concurrency quota leaves 100 unreserved beside SweeperReservedConcurrency
  bucket-name      BucketName is free (or this stack's own)
  bedrock-model    BedrockModelId is offered in the region, on demand (Embedder=bedrock)
  secret-key       DatabaseSecretArn exists; a customer managed KMS key over it is DatabaseSecretKmsKeyArn

  python scripts/preflight.py [--param "K=V K2=V2"] [--stack NAME] [--quotas-out FILE]

The parameters are the template's defaults, then the stack's current values (a later deploy keeps
them), then --param (make deploy's PARAMS). The region and credentials are the AWS profile's. A call
the account (or a stand-in such as moto) does not answer is reported as "could not check", never as
a pass; any failure exits 1.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import re
import shlex
import sys
from dataclasses import dataclass

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERFACE_SERVICES = {"PathToSqs": "sqs", "PathToSecretsManager": "secretsmanager", "PathToLogs": "logs",
                      "PathToBedrock": "bedrock-runtime", "PathToEvents": "events"}
UNRESERVED_MINIMUM = 100
DEFAULT_SECRET_KEYS = {"", "alias/aws/secretsmanager"}


@dataclass
class Result:
    status: str  # ok | FAIL | warn | ??
    check: str
    message: str


class Unanswered(Exception):
    """The account (or its stand-in) did not answer the call: the check cannot be made."""


RESULTS: list[Result] = []


def report(status: str, check: str, message: str) -> None:
    RESULTS.append(Result(status, check, message))
    print(f"  {status:5} {check:16} {message}", flush=True)


def call(client, op: str, **kwargs):
    try:
        return getattr(client, op)(**kwargs)
    except ClientError as e:
        err = e.response.get("Error", {})
        code, status = err.get("Code", ""), e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if status >= 500 or code in ("NotImplemented", "InternalFailure", "UnknownOperationException",
                                     "InvalidAction", "UnsupportedOperation", "500", "501"):
            raise Unanswered(f"{op}: {code or status} {plain(err.get('Message', ''))}".strip()) from e
        raise
    except (BotoCoreError, NotImplementedError) as e:
        raise Unanswered(f"{op}: {e}") from e


def plain(text: str) -> str:
    """An error's message on one line; an HTML error page (a stand-in that lacks the call) becomes its title."""
    title = re.search(r"<title>(.*?)</title>", text or "", re.S)
    text = title.group(1) if title else (text or "")
    return " ".join(text.split())[:200]


def checked(name: str):
    """Runs a check; an unanswered call or an unexpected error is 'could not check', with its reason."""
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
            except Unanswered as e:
                report("??", name, f"could not check: {e}")
            except ClientError as e:
                err = e.response.get("Error", {})
                report("??", name, f"could not check: {err.get('Code')}: {plain(err.get('Message', ''))}")
        return run
    return wrap


# ───────────────────────────── parameters ─────────────────────────────

def template_defaults() -> dict[str, str]:
    try:
        from samcli.yamlhelper import yaml_parse
    except ImportError:  # the template tools' venv has it; elsewhere, the template's defaults are not read
        return {}
    with open(os.path.join(ROOT, "template.yaml"), encoding="utf-8") as f:
        t = yaml_parse(f.read())
    out = {}
    for name, p in (t.get("Parameters") or {}).items():
        if "Default" in p:
            d = p["Default"]
            out[name] = ",".join(map(str, d)) if isinstance(d, list) else str(d)
    return out


def parse_params(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        for tok in shlex.split(item):
            k, sep, v = tok.partition("=")
            if not sep:
                raise SystemExit(f"[preflight] --param {tok!r}: expected Key=Value")
            out[k] = v
    return out


def as_list(v: str) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


# ───────────────────────────── checks ─────────────────────────────

class Preflight:
    def __init__(self, session, params: dict[str, str], stack: str, stack_resources: dict[str, str]):
        cfg = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=20)
        self.session, self.p, self.stack, self.stack_resources = session, params, stack, stack_resources
        self.region = session.region_name
        self.ec2 = session.client("ec2", config=cfg)
        self.cfg = cfg
        self.subnets: list[dict] = []
        self.route_table_of: dict[str, str] = {}

    def client(self, name: str):
        return self.session.client(name, config=self.cfg)

    def path(self, param: str) -> str:
        return self.p.get(param, "")

    def creates_interface(self) -> list[str]:
        out = []
        for param, svc in INTERFACE_SERVICES.items():
            if self.path(param) == "create" and (svc != "bedrock-runtime" or self.p.get("Embedder") == "bedrock"):
                out.append(svc)
        return out

    def service_name(self, svc: str) -> str:
        return f"com.amazonaws.{self.region}.{svc}"

    # ── the VPC ──
    @checked("subnets")
    def subnets_check(self):
        ids = as_list(self.p.get("SubnetIds", ""))
        if not ids:
            report("FAIL", "subnets", "no SubnetIds given")
            return
        try:
            self.subnets = call(self.ec2, "describe_subnets", SubnetIds=ids)["Subnets"]
        except ClientError as e:
            report("FAIL", "subnets", f"{e.response['Error']['Code']}: {e.response['Error']['Message']}")
            return
        vpc = self.p.get("VpcId", "")
        elsewhere = [s["SubnetId"] for s in self.subnets if s["VpcId"] != vpc]
        zones: dict[str, list[str]] = {}
        for s in self.subnets:
            zones.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
        shown = ", ".join(f"{s['SubnetId']} ({s['AvailabilityZone']})" for s in self.subnets)
        if elsewhere:
            report("FAIL", "subnets", f"{', '.join(elsewhere)} not in VpcId {vpc}")
        doubled = {z: s for z, s in zones.items() if len(s) > 1}
        if doubled and self.creates_interface():
            report("FAIL", "subnets", "an interface endpoint takes one subnet per zone, and SubnetIds has "
                   + "; ".join(f"{', '.join(s)} in {z}" for z, s in doubled.items()))
        if len(zones) < 2:
            report("warn", "subnets", f"one Availability Zone only ({shown}): Lambda advises two or more")
        if not elsewhere and not (doubled and self.creates_interface()):
            report("ok", "subnets", f"{shown} in {vpc}")

    @checked("security-groups")
    def groups_check(self):
        ids = as_list(self.p.get("SecurityGroupIds", ""))
        try:
            groups = call(self.ec2, "describe_security_groups", GroupIds=ids)["SecurityGroups"]
        except ClientError as e:
            report("FAIL", "security-groups", f"{e.response['Error']['Code']}: {e.response['Error']['Message']}")
            return
        wrong = [g["GroupId"] for g in groups if g["VpcId"] != self.p.get("VpcId")]
        if wrong:
            report("FAIL", "security-groups", f"{', '.join(wrong)} not in VpcId {self.p.get('VpcId')}")
        else:
            report("ok", "security-groups", f"{', '.join(ids)} in {self.p.get('VpcId')}")

    @checked("vpc-dns")
    def vpc_dns_check(self):
        if not self.creates_interface():
            return
        vpc = self.p.get("VpcId", "")
        off = []
        for attr, key in (("enableDnsSupport", "EnableDnsSupport"), ("enableDnsHostnames", "EnableDnsHostnames")):
            value = call(self.ec2, "describe_vpc_attribute", VpcId=vpc, Attribute=attr)[key]["Value"]
            if not value:
                off.append(attr)
        if off:
            report("FAIL", "vpc-dns", f"{vpc} has {' and '.join(off)} off: interface endpoints with private DNS need both on")
        else:
            report("ok", "vpc-dns", f"{vpc}: DNS support and hostnames on (private DNS of the endpoints)")

    def route_tables(self):
        """Each subnet's route table (its own association, else the VPC's main table)."""
        if self.route_table_of or not self.subnets:
            return self.route_table_of
        vpc = self.p.get("VpcId", "")
        tables = call(self.ec2, "describe_route_tables", Filters=[{"Name": "vpc-id", "Values": [vpc]}])["RouteTables"]
        main = next((t["RouteTableId"] for t in tables for a in t.get("Associations", []) if a.get("Main")), None)
        for s in self.subnets:
            own = next((t["RouteTableId"] for t in tables for a in t.get("Associations", [])
                        if a.get("SubnetId") == s["SubnetId"]), None)
            self.route_table_of[s["SubnetId"]] = own or main or "?"
        self._tables = {t["RouteTableId"]: t for t in tables}
        return self.route_table_of

    def endpoints(self, svc: str, kind: str | None = None) -> list[dict]:
        filters = [{"Name": "vpc-id", "Values": [self.p.get("VpcId", "")]},
                   {"Name": "service-name", "Values": [self.service_name(svc)]}]
        if kind:
            filters.append({"Name": "vpc-endpoint-type", "Values": [kind]})
        eps = call(self.ec2, "describe_vpc_endpoints", Filters=filters)["VpcEndpoints"]
        return [e for e in eps if e.get("State", "").lower() not in ("deleted", "deleting", "failed", "rejected")]

    # ── interface endpoints ──
    @checked("endpoint-zones")
    def endpoint_zones_check(self):
        zones = sorted({s["AvailabilityZone"] for s in self.subnets})
        for svc in self.creates_interface():
            name = self.service_name(svc)
            try:
                details = call(self.ec2, "describe_vpc_endpoint_services", ServiceNames=[name])["ServiceDetails"]
            except ClientError as e:
                if e.response["Error"]["Code"] == "InvalidServiceName":
                    report("FAIL", "endpoint-zones", f"{name} is not offered in {self.region}: choose nat for it, or another region")
                    continue
                raise
            offered = sorted({z for d in details for z in d.get("AvailabilityZones", [])})
            lacking = uncovered(zones, offered)
            if lacking:
                subnets = ", ".join(f"{s['SubnetId']} ({s['AvailabilityZone']})" for s in self.subnets
                                    if s["AvailabilityZone"] in lacking)
                report("FAIL", "endpoint-zones", f"{name} is offered in {', '.join(offered)}, not in {', '.join(lacking)} "
                       f"where {subnets} are: CreateVpcEndpoint fails; give subnets in offered zones, or choose nat or existing")
            else:
                report("ok", "endpoint-zones", f"{name} is offered in every zone of SubnetIds ({', '.join(zones)})")

    @checked("endpoint-dns")
    def endpoint_dns_check(self):
        for param, svc in INTERFACE_SERVICES.items():
            choice = self.path(param)
            if svc == "bedrock-runtime" and self.p.get("Embedder") != "bedrock":
                continue
            if choice not in ("create", "existing"):
                continue
            dns = [e for e in self.endpoints(svc, "Interface") if e.get("PrivateDnsEnabled")]
            if choice == "create" and dns:
                report("FAIL", "endpoint-dns", f"{param}=create, but {', '.join(e['VpcEndpointId'] for e in dns)} already gives "
                       f"{svc} private DNS in the VPC: CloudFormation's create fails; choose {param}=existing")
            elif choice == "create":
                report("ok", "endpoint-dns", f"no {svc} endpoint with private DNS in the VPC yet ({param}=create)")
            elif not dns:
                report("FAIL", "endpoint-dns", f"{param}=existing, but the VPC has no {svc} endpoint with private DNS: "
                       "choose create or nat")
            else:
                ep = dns[0]
                admits = self.admits_functions(ep.get("Groups", []))
                report("ok" if admits else "warn", "endpoint-dns",
                       f"{ep['VpcEndpointId']} gives {svc} private DNS ({param}=existing)"
                       + ("" if admits else f"; none of its groups ({', '.join(g['GroupId'] for g in ep.get('Groups', []))}) "
                          "visibly admits SecurityGroupIds or the subnets on 443: check them"))

    def admits_functions(self, groups: list[dict]) -> bool:
        ids = [g["GroupId"] for g in groups]
        if not ids:
            return False
        fn_groups = set(as_list(self.p.get("SecurityGroupIds", "")))
        cidrs = [ipaddress.ip_network(s["CidrBlock"]) for s in self.subnets if s.get("CidrBlock")]
        for g in call(self.ec2, "describe_security_groups", GroupIds=ids)["SecurityGroups"]:
            for perm in g.get("IpPermissions", []):
                proto = perm.get("IpProtocol")
                if not (proto == "-1" or (proto == "tcp" and perm.get("FromPort", 0) <= 443 <= perm.get("ToPort", 0))):
                    continue
                if fn_groups & {p.get("GroupId") for p in perm.get("UserIdGroupPairs", [])}:
                    return True
                for r in perm.get("IpRanges", []):
                    net = ipaddress.ip_network(r["CidrIp"])
                    if cidrs and all(c.subnet_of(net) for c in cidrs):
                        return True
        return False

    # ── S3 ──
    @checked("s3-gateway")
    def s3_check(self):
        choice = self.path("PathToS3")
        if choice not in ("create", "existing") or not self.subnets:
            return
        of = self.route_tables()
        gateways = self.endpoints("s3", "Gateway")
        on_tables = {rt: ep["VpcEndpointId"] for ep in gateways for rt in ep.get("RouteTableIds", [])}
        if choice == "create":
            given = as_list(self.p.get("PrivateRouteTableIds", ""))
            unknown = [t for t in given if t not in getattr(self, "_tables", {})]
            taken = {t: on_tables[t] for t in given if t in on_tables}
            missing = {s: t for s, t in of.items() if t not in given}
            if unknown:
                report("FAIL", "s3-gateway", f"PrivateRouteTableIds {', '.join(unknown)} are not route tables of {self.p.get('VpcId')}")
            if taken:
                report("FAIL", "s3-gateway", "an S3 gateway endpoint is already on " + ", ".join(f"{t} ({e})" for t, e in taken.items())
                       + ": AWS allows one per route table, so the create fails; choose PathToS3=existing")
            if missing:
                report("FAIL", "s3-gateway", "SubnetIds route through tables not in PrivateRouteTableIds: "
                       + ", ".join(f"{s} uses {t}" for s, t in missing.items()) + " (their S3 traffic would not take the endpoint)")
            if not (unknown or taken or missing):
                report("ok", "s3-gateway", f"PrivateRouteTableIds ({', '.join(given)}) carry SubnetIds and have no S3 gateway endpoint yet")
        else:
            without = {s: t for s, t in of.items() if t not in on_tables}
            if without:
                report("FAIL", "s3-gateway", "PathToS3=existing, but no S3 gateway endpoint is on "
                       + ", ".join(f"{t} (of {s})" for s, t in without.items()) + ": choose create or nat")
            else:
                report("ok", "s3-gateway", "an S3 gateway endpoint is on every subnet's route table: "
                       + ", ".join(sorted({f"{t} ({on_tables[t]})" for t in of.values()})))

    @checked("nat-route")
    def nat_check(self):
        nat = sorted(p for p in ["PathToS3", *INTERFACE_SERVICES] if self.path(p) == "nat")
        if not nat or not self.subnets:
            return
        of = self.route_tables()
        bad, via = [], set()
        for subnet, rt in of.items():
            routes = self._tables.get(rt, {}).get("Routes", [])
            default = next((r for r in routes if r.get("DestinationCidrBlock") == "0.0.0.0/0"), None)
            if default is None:
                bad.append(f"{subnet} ({rt}): no 0.0.0.0/0 route")
            elif default.get("NatGatewayId"):
                via.add(default["NatGatewayId"])
            elif str(default.get("GatewayId", "")).startswith("igw-"):
                bad.append(f"{subnet} ({rt}): 0.0.0.0/0 goes to {default['GatewayId']}, an internet gateway, and Lambda's "
                           "network interfaces have no public address")
            else:
                target = next((default[k] for k in ("TransitGatewayId", "NetworkInterfaceId", "VpcPeeringConnectionId",
                                                    "GatewayId", "InstanceId") if default.get(k)), "?")
                via.add(f"{target} (not a NAT gateway: confirm it reaches the internet)")
        if bad:
            report("FAIL", "nat-route", f"{', '.join(nat)}=nat, but " + "; ".join(bad))
        else:
            report("ok", "nat-route", f"{', '.join(nat)}=nat: every subnet's 0.0.0.0/0 goes to {', '.join(sorted(via))}")

    # ── the account ──
    @checked("lambda-quota")
    def lambda_check(self, quotas_out: str | None):
        settings = call(self.client("lambda"), "get_account_settings")
        limit = settings["AccountLimit"]["ConcurrentExecutions"]
        reserved = int(self.p.get("SweeperReservedConcurrency") or 0)
        if quotas_out:
            with open(quotas_out, "w") as f:
                f.write(f"concurrency={limit}\n")
        if reserved > limit - UNRESERVED_MINIMUM:
            report("FAIL", "lambda-quota", f"the account's concurrency quota is {limit}; SweeperReservedConcurrency={reserved} "
                   f"would leave fewer than {UNRESERVED_MINIMUM} unreserved: Lambda refuses it (set 0, or raise the quota)")
        else:
            report("ok", "lambda-quota", f"concurrency quota {limit} (deploy-check: QUOTAS=concurrency={limit}), "
                   f"{reserved} reserved; the memory quota has no API: deploy-check assumes 3,008 MB unless QUOTAS says more")

    @checked("bucket-name")
    def bucket_check(self):
        name = self.p.get("BucketName", "")
        if not name:
            report("FAIL", "bucket-name", "no BucketName given")
            return
        try:
            call(self.client("s3"), "head_bucket", Bucket=name)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code"))
            if code in ("404", "NoSuchBucket", "NotFound"):
                report("ok", "bucket-name", f"{name} is free")
            elif code in ("403", "AccessDenied", "Forbidden"):
                report("FAIL", "bucket-name", f"{name} exists and belongs to another account: choose another name")
            elif code in ("301", "PermanentRedirect"):
                report("FAIL", "bucket-name", f"{name} exists in another region: choose another name")
            else:
                raise
            return
        if self.stack_resources.get("DocumentsBucket") == name:
            report("ok", "bucket-name", f"{name} is stack {self.stack}'s own")
        else:
            report("FAIL", "bucket-name", f"{name} exists in this account outside stack {self.stack} (left by a deleted stack? "
                   "`make destroy` says how to remove it): the create fails; remove it or choose another name")

    @checked("bedrock-model")
    def bedrock_check(self):
        if self.p.get("Embedder") != "bedrock":
            return
        model = self.p.get("BedrockModelId", "")
        models = call(self.client("bedrock"), "list_foundation_models", byProvider="Amazon")["modelSummaries"]
        found = next((m for m in models if m.get("modelId") == model), None)
        if found is None:
            report("FAIL", "bedrock-model", f"{model} is not offered in {self.region}: deploy to a region that offers it "
                   "(README: Titan Text Embeddings V2's regions)")
        elif "ON_DEMAND" not in found.get("inferenceTypesSupported", ["ON_DEMAND"]):
            report("FAIL", "bedrock-model", f"{model} is offered in {self.region}, but not on demand")
        else:
            life = (found.get("modelLifecycle") or {}).get("status", "ACTIVE")
            report("ok" if life == "ACTIVE" else "warn", "bedrock-model", f"{model} is offered in {self.region} on demand ({life})")

    @checked("secret-key")
    def secret_check(self):
        arn = self.p.get("DatabaseSecretArn", "")
        if not arn:
            return
        sm = self.client("secretsmanager")
        try:
            secret = call(sm, "describe_secret", SecretId=arn)
        except ClientError as e:
            if e.response["Error"]["Code"] == "ResourceNotFoundException":
                report("FAIL", "secret-key", f"DatabaseSecretArn {arn} does not exist in {self.region}")
                return
            raise
        key = secret.get("KmsKeyId", "") or ""
        given = self.p.get("DatabaseSecretKmsKeyArn", "")
        if key in DEFAULT_SECRET_KEYS or key.endswith("alias/aws/secretsmanager"):
            report("ok", "secret-key", f"{secret['Name']} is under Secrets Manager's own key")
        elif not given:
            report("FAIL", "secret-key", f"{secret['Name']} is under the customer managed key {key}: give "
                   "DatabaseSecretKmsKeyArn=<that key's ARN>, or every function fails to read it (kms:Decrypt)")
        elif key != given and not given.endswith(key.split("/")[-1]):
            report("warn", "secret-key", f"{secret['Name']} is under {key}, DatabaseSecretKmsKeyArn is {given}: check they are one key")
        else:
            report("ok", "secret-key", f"{secret['Name']} is under {key}, which DatabaseSecretKmsKeyArn grants")


def uncovered(subnet_zones: list[str], offered: list[str]) -> list[str]:
    """The subnets' zones an endpoint service is not offered in."""
    return sorted(set(subnet_zones) - set(offered))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--param", action="append", default=[], help="Key=Value (several, or one quoted string), as make deploy's PARAMS")
    ap.add_argument("--stack", default=os.environ.get("STACK") or "docpipe")
    ap.add_argument("--quotas-out", help="write the account's concurrency quota here (concurrency=N), for deploy-check")
    a = ap.parse_args()
    session = boto3.session.Session()
    if not session.region_name:
        print("[preflight] no region: set AWS_REGION or the profile's region")
        return 1
    cfg = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=20)
    try:
        who = session.client("sts", config=cfg).get_caller_identity()
    except (BotoCoreError, ClientError) as e:
        print(f"[preflight] no usable credentials for {session.region_name}: {e}")
        return 1
    params = template_defaults()
    resources: dict[str, str] = {}
    state = "new"
    cfn = session.client("cloudformation", config=cfg)
    try:
        stack = cfn.describe_stacks(StackName=a.stack)["Stacks"][0]
        state = stack["StackStatus"]
        params.update({p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters", [])})
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=a.stack):
            resources.update({r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in page["StackResourceSummaries"]})
    except (ClientError, BotoCoreError):
        pass
    params.update(parse_params(a.param))
    print(f"[preflight] account {who['Account']}, region {session.region_name}, stack {a.stack} ({state})")
    pf = Preflight(session, params, a.stack, resources)
    pf.subnets_check()
    pf.groups_check()
    pf.vpc_dns_check()
    pf.endpoint_zones_check()
    pf.endpoint_dns_check()
    pf.s3_check()
    pf.nat_check()
    pf.lambda_check(a.quotas_out)
    pf.bucket_check()
    pf.bedrock_check()
    pf.secret_check()
    failed = [r for r in RESULTS if r.status == "FAIL"]
    unknown = [r for r in RESULTS if r.status == "??"]
    print(f"[preflight] {len(failed)} failed, {len(unknown)} could not be checked, "
          f"{sum(r.status == 'ok' for r in RESULTS)} ok, {sum(r.status == 'warn' for r in RESULTS)} warning(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
