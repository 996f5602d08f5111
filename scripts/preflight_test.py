#!/usr/bin/env python3
"""Tests scripts/preflight.py against a moto server of its own (started here on a free port, stopped
at the end): a VPC with subnets, route tables, a NAT gateway, endpoints, a bucket and secrets made
in moto, then the preflight run on good and bad parameter sets, each check's verdict compared with
what it must say. Calls moto does not answer must come out as "could not check" (never ok).

  .local/tools-venv/bin/python scripts/preflight_test.py      (boto3 from the template tools' venv,
                                                               moto_server from the stack's venv)
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
MOTO = os.environ.get("MOTO_SERVER") or os.path.join(ROOT, ".local", "venv", "bin", "moto_server")
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_preflight(env: dict, params: str, stack: str = "docpipe-preflight-test") -> tuple[int, dict[str, list[tuple[str, str]]], str]:
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "preflight.py"), "--stack", stack, "--param", params],
                         env=env, capture_output=True, text=True, timeout=120)
    verdicts: dict[str, list[tuple[str, str]]] = {}
    for line in out.stdout.splitlines():
        m = re.match(r"  (ok|FAIL|warn|\?\?)\s+(\S+)\s+(.*)", line)
        if m:
            verdicts.setdefault(m.group(2), []).append((m.group(1), m.group(3)))
    return out.returncode, verdicts, out.stdout + out.stderr


def main() -> int:
    if not os.access(MOTO, os.X_OK):
        print(f"[preflight-test] no moto_server at {MOTO} (make up installs it; or set MOTO_SERVER)")
        return 1
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([MOTO, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    failures = 0
    cases: list = []
    later: list = []
    stub_cases: list = []
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
                   AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION, AWS_EC2_METADATA_DISABLED="true")
        env.pop("AWS_PROFILE", None)
        os.environ.update({k: env[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
        import boto3
        ec2, s3, sm, kms = (boto3.client(n, region_name=REGION) for n in ("ec2", "s3", "secretsmanager", "kms"))

        # the world: a VPC, two private subnets (zones a, b) on one route table with a NAT default route,
        # a third subnet in zone a, and a second VPC for the bad cases
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        for attr in ("EnableDnsSupport", "EnableDnsHostnames"):
            ec2.modify_vpc_attribute(VpcId=vpc, **{attr: {"Value": True}})
        sub_a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
        sub_b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.2.0/24", AvailabilityZone=f"{REGION}b")["Subnet"]["SubnetId"]
        sub_a2 = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.3.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
        pub = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.9.0/24", AvailabilityZone=f"{REGION}c")["Subnet"]["SubnetId"]
        igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
        eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nat = ec2.create_nat_gateway(SubnetId=pub, AllocationId=eip)["NatGateway"]["NatGatewayId"]
        rt_private = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
        ec2.create_route(RouteTableId=rt_private, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
        for s in (sub_a, sub_b):
            ec2.associate_route_table(RouteTableId=rt_private, SubnetId=s)
        rt_public = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
        ec2.create_route(RouteTableId=rt_public, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
        ec2.associate_route_table(RouteTableId=rt_public, SubnetId=sub_a2)
        sg = ec2.create_security_group(GroupName="docpipe-fn", Description="functions", VpcId=vpc)["GroupId"]
        secret = sm.create_secret(Name="docpipe-db", SecretString='{"username":"docpipe","password":"x"}')["ARN"]
        key = kms.create_key(Description="customer key")["KeyMetadata"]
        secret_cmk = sm.create_secret(Name="docpipe-db-cmk", SecretString="{}", KmsKeyId=key["KeyId"])["ARN"]
        s3.create_bucket(Bucket="docpipe-taken-documents")

        base = (f"VpcId={vpc} SubnetIds={sub_a},{sub_b} SecurityGroupIds={sg} DatabaseSecretArn={secret} "
                f"BucketName=docpipe-free-documents Embedder=bedrock BedrockModelId=amazon.titan-embed-text-v2:0 ")
        cases += [
            ("every endpoint created, nothing in the way",
             base + f"PathToS3=create PrivateRouteTableIds={rt_private} PathToSqs=create PathToSecretsManager=create PathToBedrock=create "
             "PathToEvents=create",
             0, {"subnets": "ok", "security-groups": "ok", "vpc-dns": "ok", "endpoint-zones": ["ok"] * 4, "endpoint-dns": ["ok"] * 4,
                 "s3-gateway": "ok", "bucket-name": "ok", "secret-key": "ok", "bedrock-model": "??", "lambda-quota": "??"}),
            ("a NAT for everything", base + "PathToS3=nat PathToSqs=nat PathToSecretsManager=nat PathToBedrock=nat PathToEvents=nat",
             0, {"nat-route": "ok"}),
            ("a subnet whose default route is an internet gateway, with nat",
             base.replace(f"{sub_a},{sub_b}", f"{sub_a},{sub_a2}") + "PathToS3=nat PathToSqs=nat PathToSecretsManager=nat PathToBedrock=nat",
             1, {"nat-route": "FAIL"}),
            ("two subnets in one zone under interface endpoints",
             base.replace(f"{sub_a},{sub_b}", f"{sub_a},{sub_a2}") + f"PathToS3=nat PathToSqs=create PathToSecretsManager=nat PathToBedrock=nat",
             1, {"subnets": ["FAIL", "warn"]}),
            ("a taken bucket name, a secret under a customer key, no DatabaseSecretKmsKeyArn",
             base.replace("docpipe-free-documents", "docpipe-taken-documents").replace(secret, secret_cmk)
             + "PathToS3=nat PathToSqs=nat PathToSecretsManager=nat PathToBedrock=nat",
             1, {"bucket-name": "FAIL", "secret-key": "FAIL"}),
            ("the same secret with its key given",
             base.replace(secret, secret_cmk) + f"DatabaseSecretKmsKeyArn={key['Arn']} "
             "PathToS3=nat PathToSqs=nat PathToSecretsManager=nat PathToBedrock=nat",
             0, {"secret-key": "ok"}),
            ("SweeperReservedConcurrency=1 (the quota cannot be read from moto)",
             base + "SweeperReservedConcurrency=1 PathToS3=nat PathToSqs=nat PathToSecretsManager=nat PathToBedrock=nat",
             0, {"lambda-quota": "??"}),
        ]
        # the world changes: an S3 gateway endpoint and an SQS endpoint with private DNS appear, DNS hostnames go off
        later += [
            ("PathToS3=create on a route table that has an S3 gateway endpoint; PathToSqs=create beside one with private DNS",
             base + f"PathToS3=create PrivateRouteTableIds={rt_private} PathToSqs=create PathToSecretsManager=nat PathToBedrock=nat",
             1, {"s3-gateway": "FAIL", "endpoint-dns": "FAIL", "vpc-dns": "FAIL"}),
            ("existing where they exist (S3, SQS); existing where none does (Secrets Manager, EventBridge)",
             base + "PathToS3=existing PathToSqs=existing PathToSecretsManager=existing PathToBedrock=nat PathToEvents=existing",
             1, {"s3-gateway": "ok", "endpoint-dns": ["ok", "FAIL", "FAIL"]}),
        ]

        def check(cases):
            nonlocal failures
            for what, params, want_rc, want in cases:
                rc, verdicts, text = run_preflight(env, params)
                problems = []
                if rc != want_rc:
                    problems.append(f"exit {rc}, want {want_rc}")
                for name, status in want.items():
                    got = [v[0] for v in verdicts.get(name, [])]
                    wanted = status if isinstance(status, list) else [status]
                    if sorted(got) != sorted(wanted):
                        problems.append(f"{name}: {got or 'nothing'}, want {wanted}")
                if problems:
                    failures += 1
                    print(f"  FAIL {what}: {'; '.join(problems)}\n" + "\n".join("       " + l for l in text.splitlines()))
                else:
                    print(f"  ok   {what}: " + ", ".join(f"{n} {'/'.join(v[0] for v in verdicts.get(n, []))}" for n in want))

        check(cases)
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{REGION}.s3", VpcEndpointType="Gateway", RouteTableIds=[rt_private])
        ep_sg = ec2.create_security_group(GroupName="endpoints", Description="endpoints", VpcId=vpc)["GroupId"]
        ec2.authorize_security_group_ingress(GroupId=ep_sg, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "UserIdGroupPairs": [{"GroupId": sg}]}])
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{REGION}.sqs", VpcEndpointType="Interface",
                                SubnetIds=[sub_a, sub_b], SecurityGroupIds=[ep_sg], PrivateDnsEnabled=True)
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": False})
        check(later)

        # the calls moto lacks, answered by botocore's Stubber as AWS documents them
        import preflight
        from botocore.stub import Stubber

        def stubbed(name, op, answer):
            c = boto3.client(name, region_name=REGION)
            st = Stubber(c)
            st.add_response(op, answer)
            st.activate()
            return c

        def verdicts_of(fn, params, name, op, answer):
            preflight.RESULTS.clear()
            pf = preflight.Preflight(boto3.session.Session(region_name=REGION), params, "docpipe", {})
            pf.client = lambda n: stubbed(name, op, answer)
            fn(pf)
            return [r.status for r in preflight.RESULTS]

        quota = lambda limit: {"AccountLimit": {"ConcurrentExecutions": limit, "TotalCodeSize": 1, "CodeSizeUnzipped": 1,
                                                "CodeSizeZipped": 1, "UnreservedConcurrentExecutions": limit},
                               "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0}}
        models = lambda ids: {"modelSummaries": [{"modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{i}", "modelId": i,
                                                  "inferenceTypesSupported": ["ON_DEMAND"]} for i in ids]}
        stub_cases += [
            ("a new account's quota (10) with SweeperReservedConcurrency=1", lambda pf: pf.lambda_check(None),
             {"SweeperReservedConcurrency": "1"}, ("lambda", "get_account_settings", quota(10)), ["FAIL"]),
            ("a quota of 1,000 with SweeperReservedConcurrency=1", lambda pf: pf.lambda_check(None),
             {"SweeperReservedConcurrency": "1"}, ("lambda", "get_account_settings", quota(1000)), ["ok"]),
            ("Titan V2 absent from the region's models", lambda pf: pf.bedrock_check(),
             {"Embedder": "bedrock", "BedrockModelId": "amazon.titan-embed-text-v2:0"},
             ("bedrock", "list_foundation_models", models(["amazon.titan-embed-text-v1"])), ["FAIL"]),
            ("Titan V2 offered on demand", lambda pf: pf.bedrock_check(),
             {"Embedder": "bedrock", "BedrockModelId": "amazon.titan-embed-text-v2:0"},
             ("bedrock", "list_foundation_models", models(["amazon.titan-embed-text-v2:0"])), ["ok"]),
        ]
        for what, fn, params, (name, op, answer), want in stub_cases:
            got = verdicts_of(fn, params, name, op, answer)
            if got != want:
                failures += 1
                print(f"  FAIL {what}: {got}, want {want}")
            else:
                print(f"  ok   {what}: {got[0]}")

        from preflight import uncovered
        if uncovered([f"{REGION}a", f"{REGION}c"], [f"{REGION}a", f"{REGION}b"]) != [f"{REGION}c"]:
            failures += 1
            print("  FAIL uncovered(): the zone the service lacks is not named")
        else:
            print(f"  ok   uncovered(): names {REGION}c, the subnets' zone an endpoint service is not offered in")
    finally:
        server.terminate()
        server.wait(timeout=10)
    total = len(cases) + len(later) + len(stub_cases) + 1
    print(f"[preflight-test] {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
