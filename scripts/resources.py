#!/usr/bin/env python3
"""Create docpipe's S3 + SQS + EventBridge resources on the local moto server, idempotently.

Default set (what `scripts/stack.sh up` creates):
  bucket  docpipe-local
  queues  docpipe-store-events, docpipe-parse, docpipe-index, each with a DLQ <name>-dlq
          (no timing here: the dev runner gives each queue the template's visibility timeout,
          retention and redrive policy when it starts, as CloudFormation does in AWS; see
          shared/core/src/clock.rs)
  bucket notification: s3:ObjectCreated:* with key prefix uploads/ -> docpipe-store-events
  event bus  docpipe-events (<queue prefix>events, as the template's <stack>-events; the functions
          publish docpipe's events to it: DOCPIPE_EVENT_BUS)

CLI:
  python scripts/resources.py                                   # the default set
  python scripts/resources.py --bucket b1 --queue-prefix t1-    # a separate set for a test
  python scripts/resources.py --verify                          # + prove a put reaches the queue
  python scripts/resources.py --format env|json                 # print URLs (default: human summary)
  python scripts/resources.py --delete --bucket b1 --queue-prefix t1-   # remove a set (its bus too)

Library:
  from resources import ensure_resources
  res = ensure_resources(bucket="b1", queue_prefix="t1-")
  res["queues"]["parse"]["url"], res["queues"]["parse"]["dlq_url"], res["event_bus"]["name"], ...

Endpoint / credentials come from the arguments, else AWS_ENDPOINT_URL / AWS_REGION, else
http://127.0.0.1:5000, us-east-1, test/test.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.parse
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

DEFAULT_ENDPOINT = "http://127.0.0.1:5000"
DEFAULT_REGION = "us-east-1"
DEFAULT_BUCKET = "docpipe-local"
DEFAULT_QUEUE_PREFIX = "docpipe-"
DEFAULT_KEY_PREFIX = "uploads/"
# logical name -> queue suffix; env var stem
QUEUES = {
    "store": "store-events",
    "parse": "parse",
    "index": "index",
}
DLQ_RETENTION_SECONDS = 14 * 24 * 3600
# The set's event bus: <queue prefix>events (docpipe-events by default; t1-events for a test's set).
EVENT_BUS_SUFFIX = "events"


_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_QUEUE_RE = re.compile(r"^[A-Za-z0-9_-]{0,60}$")
_EVENT_BUS_RE = re.compile(r"^[/.\-_A-Za-z0-9]{1,256}$")


def event_bus_name(queue_prefix: str) -> str:
    return f"{queue_prefix}{EVENT_BUS_SUFFIX}"


def check_names(bucket: str, queue_prefix: str) -> None:
    """S3 and SQS naming rules, checked up front for a clear message (moto enforces them too)."""
    if not _BUCKET_RE.match(bucket) or ".." in bucket:
        raise ValueError(f"invalid bucket name {bucket!r}: 3-63 chars of a-z 0-9 . - "
                         "(starting and ending with a letter or digit)")
    if not _QUEUE_RE.match(queue_prefix):
        raise ValueError(f"invalid queue prefix {queue_prefix!r}: letters, digits, - and _ only")
    if not _EVENT_BUS_RE.match(event_bus_name(queue_prefix)) or event_bus_name(queue_prefix) == "default":
        raise ValueError(f"invalid event bus name {event_bus_name(queue_prefix)!r}")


def _client_args(endpoint: str | None, region: str | None) -> dict:
    return dict(
        endpoint_url=endpoint or os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT,
        region_name=region or os.environ.get("AWS_REGION") or DEFAULT_REGION,
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"},
                      connect_timeout=5, read_timeout=30),
    )


def clients(endpoint: str | None = None, region: str | None = None):
    kw = _client_args(endpoint, region)
    return boto3.client("s3", **kw), boto3.client("sqs", **kw), kw["region_name"]


def events_client(endpoint: str | None = None, region: str | None = None):
    return boto3.client("events", **_client_args(endpoint, region))


def _ensure_event_bus(events, name: str) -> str:
    """Create the custom event bus unless it exists. Returns its ARN."""
    try:
        return events.describe_event_bus(Name=name)["Arn"]
    except ClientError as e:
        if e.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
    try:
        return events.create_event_bus(Name=name)["EventBusArn"]
    except ClientError as e:  # created meanwhile by another caller
        if e.response["Error"]["Code"] != "ResourceAlreadyExistsException":
            raise
        return events.describe_event_bus(Name=name)["Arn"]


def _ensure_queue(sqs, name: str, attributes: dict[str, str]) -> tuple[str, str]:
    """Create the queue or bring an existing one to `attributes`. Returns (url, arn)."""
    try:
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("QueueAlreadyExists", "QueueNameExists",
                                               "AWS.SimpleQueueService.QueueNameExists"):
            raise
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    else:
        # create_queue on an existing queue with the same attributes returns it unchanged; make sure
        # attributes that differ from a previous run are applied either way.
        current = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        diff = {k: v for k, v in attributes.items() if _norm_attr(k, current.get(k)) != _norm_attr(k, v)}
        if diff:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=diff)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _norm_attr(key: str, val):
    if val is None:
        return None
    if key == "RedrivePolicy":
        try:
            d = json.loads(val)
            return (d.get("deadLetterTargetArn"), int(d.get("maxReceiveCount")))
        except (ValueError, TypeError):
            return val
    return str(val)


def _ensure_bucket(s3, bucket: str, region: str) -> None:
    try:
        s3.head_bucket(Bucket=bucket)
        return
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("404", "NoSuchBucket", "NotFound"):
            raise
    kw = {"Bucket": bucket}
    if region != "us-east-1":
        kw["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**kw)
    except ClientError as e:
        if e.response["Error"]["Code"] != "BucketAlreadyOwnedByYou":
            raise


def _notification_key(cfgs) -> set:
    out = set()
    for c in cfgs or []:
        rules = c.get("Filter", {}).get("Key", {}).get("FilterRules", [])
        prefix = next((r["Value"] for r in rules if r["Name"].lower() == "prefix"), "")
        suffix = next((r["Value"] for r in rules if r["Name"].lower() == "suffix"), "")
        out.add((c["QueueArn"], tuple(sorted(c["Events"])), prefix, suffix))
    return out


def _ensure_notification(s3, bucket: str, queue_arn: str, key_prefix: str) -> bool:
    """Returns True when the configuration was (re)written (which makes S3 send an s3:TestEvent)."""
    want = [{
        "Id": "docpipe-store-events",
        "QueueArn": queue_arn,
        "Events": ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": key_prefix}]}},
    }]
    have = s3.get_bucket_notification_configuration(Bucket=bucket)
    if (_notification_key(have.get("QueueConfigurations")) == _notification_key(want)
            and not have.get("TopicConfigurations") and not have.get("LambdaFunctionConfigurations")):
        return False
    s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"QueueConfigurations": want})
    return True


def ensure_resources(bucket: str = DEFAULT_BUCKET, queue_prefix: str = DEFAULT_QUEUE_PREFIX,
                     key_prefix: str = DEFAULT_KEY_PREFIX, endpoint: str | None = None,
                     region: str | None = None) -> dict:
    check_names(bucket, queue_prefix)
    s3, sqs, region = clients(endpoint, region)
    queues = {}
    for logical, suffix in QUEUES.items():
        name = f"{queue_prefix}{suffix}"
        dlq_url, dlq_arn = _ensure_queue(sqs, f"{name}-dlq", {
            "MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS),
        })
        url, arn = _ensure_queue(sqs, name, {})
        queues[logical] = {"name": name, "url": url, "arn": arn,
                           "dlq_name": f"{name}-dlq", "dlq_url": dlq_url, "dlq_arn": dlq_arn}
    _ensure_bucket(s3, bucket, region)
    rewritten = _ensure_notification(s3, bucket, queues["store"]["arn"], key_prefix)
    bus = event_bus_name(queue_prefix)
    bus_arn = _ensure_event_bus(events_client(endpoint, region), bus)
    return {"bucket": bucket, "key_prefix": key_prefix, "region": region,
            "endpoint": s3.meta.endpoint_url, "queues": queues, "notification_written": rewritten,
            "event_bus": {"name": bus, "arn": bus_arn}}


def delete_resources(bucket: str = DEFAULT_BUCKET, queue_prefix: str = DEFAULT_QUEUE_PREFIX,
                     endpoint: str | None = None, region: str | None = None) -> None:
    s3, sqs, _ = clients(endpoint, region)
    try:
        paginator = s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket):
            objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if objs:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": objs})
        s3.delete_bucket(Bucket=bucket)
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("NoSuchBucket", "404"):
            raise
    for suffix in QUEUES.values():
        for name in (f"{queue_prefix}{suffix}", f"{queue_prefix}{suffix}-dlq"):
            try:
                sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"])
            except ClientError as e:
                if "NonExistentQueue" not in e.response["Error"]["Code"]:
                    raise
    events = events_client(endpoint, region)
    bus = event_bus_name(queue_prefix)
    try:
        # DeleteEventBus wants the bus's rules deleted first (a test's set may have put some on it).
        for rule in events.list_rules(EventBusName=bus).get("Rules", []):
            ids = [t["Id"] for t in events.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus).get("Targets", [])]
            if ids:
                events.remove_targets(Rule=rule["Name"], EventBusName=bus, Ids=ids)
            events.delete_rule(Name=rule["Name"], EventBusName=bus)
        events.delete_event_bus(Name=bus)
    except ClientError as e:
        if e.response["Error"]["Code"] != "ResourceNotFoundException":
            raise


def verify_delivery(res: dict, endpoint: str | None = None, region: str | None = None,
                    timeout: float = 15.0) -> float:
    """Put an object under the watched prefix and wait for its ObjectCreated event on the store
    queue. Consumes only its own message and deletes the probe object. Returns seconds taken."""
    s3, sqs, _ = clients(endpoint, region)
    key = f"{res['key_prefix']}_stack-probe/{uuid.uuid4().hex} probe.txt"
    url = res["queues"]["store"]["url"]
    t0 = time.monotonic()
    s3.put_object(Bucket=res["bucket"], Key=key, Body=b"probe")
    try:
        while time.monotonic() - t0 < timeout:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                       VisibilityTimeout=5).get("Messages", [])
            for m in msgs:
                try:
                    body = json.loads(m["Body"])
                except ValueError:
                    body = {}
                keys = [urllib.parse.unquote_plus(r.get("s3", {}).get("object", {}).get("key", ""))
                        for r in body.get("Records", []) or []]
                if key in keys:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                    return time.monotonic() - t0
                # not ours: make it visible again at once for whoever else reads the queue
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"],
                                              VisibilityTimeout=0)
        raise RuntimeError(f"no S3 event for s3://{res['bucket']}/{key} on {url} within {timeout}s")
    finally:
        s3.delete_object(Bucket=res["bucket"], Key=key)


def env_lines(res: dict) -> list[str]:
    q = res["queues"]
    lines = [f"export DOCPIPE_BUCKET={res['bucket']}"]
    for logical in QUEUES:
        stem = logical.upper()
        lines.append(f"export DOCPIPE_{stem}_QUEUE_URL={q[logical]['url']}")
        lines.append(f"export DOCPIPE_{stem}_DLQ_URL={q[logical]['dlq_url']}")
    lines.append(f"export DOCPIPE_EVENT_BUS={res['event_bus']['name']}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", default=None, help=f"default $AWS_ENDPOINT_URL or {DEFAULT_ENDPOINT}")
    p.add_argument("--region", default=None, help=f"default $AWS_REGION or {DEFAULT_REGION}")
    p.add_argument("--bucket", default=DEFAULT_BUCKET)
    p.add_argument("--queue-prefix", default=DEFAULT_QUEUE_PREFIX,
                   help="queue names are <prefix>store-events, <prefix>parse, <prefix>index (+ -dlq); "
                        "the event bus is <prefix>events")
    p.add_argument("--prefix", "--key-prefix", dest="key_prefix", default=DEFAULT_KEY_PREFIX,
                   help="key prefix that triggers the store-events notification")
    p.add_argument("--verify", action="store_true", help="put a probe object and wait for its event")
    p.add_argument("--delete", action="store_true", help="delete the set instead of creating it")
    p.add_argument("--format", choices=("text", "env", "json"), default="text")
    a = p.parse_args(argv)
    try:
        check_names(a.bucket, a.queue_prefix)
    except ValueError as e:
        p.error(str(e))
    try:
        return _run(a)
    except ClientError as e:
        print(f"resources.py: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # connection refused etc.: one line, not a traceback
        print(f"resources.py: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def _run(a) -> int:

    if a.delete:
        delete_resources(a.bucket, a.queue_prefix, a.endpoint, a.region)
        print(f"deleted bucket {a.bucket}, queues {a.queue_prefix}* and event bus {event_bus_name(a.queue_prefix)}",
              file=sys.stderr)
        return 0

    res = ensure_resources(a.bucket, a.queue_prefix, a.key_prefix, a.endpoint, a.region)
    if a.verify:
        took = verify_delivery(res, a.endpoint, a.region)
        res["verified_seconds"] = round(took, 3)
    if a.format == "json":
        print(json.dumps(res, indent=2))
    elif a.format == "env":
        print("\n".join(env_lines(res)))
    # the human summary goes to stdout, or to stderr when stdout carries env/json
    out = sys.stdout if a.format == "text" else sys.stderr
    print(f"bucket s3://{res['bucket']}  notify {res['key_prefix']}* -> {res['queues']['store']['name']}"
          + ("  (notification written)" if res["notification_written"] else ""), file=out)
    for q in res["queues"].values():
        print(f"queue  {q['url']}  (dlq {q['dlq_name']})", file=out)
    print(f"bus    {res['event_bus']['arn']}", file=out)
    if a.verify:
        print(f"verify put {res['key_prefix']}... -> S3 event on {res['queues']['store']['name']} "
              f"in {res['verified_seconds']}s", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
