"""The sample events of events/, with live ids, for scripts/sam-local-check.sh.

The samples name fixed ids (doc_0123…, run 1, uploads/report 2026.pdf). These commands put a real
object in moto and write a store event that names it, take a document's job off its queue (as
Lambda's poller would) and write the SQS event that carries it, and fill a document's id into an API
event. Run with the stack's venv (boto3); the stack's environment (`make env`) says where moto is.

  put-store SAMPLE KEY OUT                 an object at KEY, and SAMPLE (events/store-*.json) naming it
  take-job QUEUE_URL DOC_ID SAMPLE OUT     the doc's job from the queue (deleted there), in SAMPLE
  job-event SAMPLE OUT DOC_ID RUN_ID       SAMPLE (an SQS event) carrying the job of DOC_ID, RUN_ID
  api-event SAMPLE OUT DOC_ID [BODY]       SAMPLE (an HTTP API event) about DOC_ID, with BODY
  check RESPONSE EXPR                      exit 1 unless EXPR holds (r: the response, body: its body)
"""

import hashlib
import json
import os
import sys
import time
import urllib.parse

SAMPLE_DOC = "doc_0123456789abcdef0123456789abcdef"
BUCKET = os.environ.get("DOCPIPE_BUCKET", "docpipe-local")
ACCOUNT = "123456789012"


def client(service):
    import boto3

    return boto3.client(
        service,
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
    )


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def dump(value, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)


def s3_record(record, key, size, etag):
    """An S3 event record naming the object, its key encoded as the record's sender encodes it."""
    obj = record["s3"]["object"]
    sample_key = obj["key"]
    # moto and MinIO: form-encoded (`+` for a space); AWS: as given; SAM's generator: percent-encoded.
    if "+" in sample_key or "%2F" in sample_key:
        obj["key"] = urllib.parse.quote_plus(key)
    elif "%20" in sample_key:
        obj["key"] = urllib.parse.quote(key)
    else:
        obj["key"] = key
    obj["size"] = size
    if "eTag" in obj:
        obj["eTag"] = etag
    record["s3"]["bucket"]["name"] = BUCKET
    if "arn" in record["s3"]["bucket"]:
        record["s3"]["bucket"]["arn"] = f"arn:aws:s3:::{BUCKET}"
    record["eventTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


def put_store(sample, key, out):
    name = os.path.basename(sample)
    body = (
        f"# 本地调用检查条例（{name}）\n\n## 第一章 总则\n\n"
        f"第一条 为了检查 SAM 本地调用，制定本条例。键：{key}。\n\n"
        "第二条 本条例自公布之日起施行。\n"
    ).encode()
    put = client("s3").put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="text/markdown")
    etag = put["ETag"].strip('"')
    event = load(sample)
    if "Records" in event and "body" in event["Records"][0]:  # SQS carrying the S3 event
        record = event["Records"][0]
        inner = json.loads(record["body"])
        s3_record(inner["Records"][0], key, len(body), etag)
        record["body"] = json.dumps(inner)
        record["md5OfBody"] = hashlib.md5(record["body"].encode()).hexdigest()
        record["eventSourceARN"] = f"arn:aws:sqs:us-east-1:{ACCOUNT}:docpipe-store-events"
    elif "Records" in event:  # S3 (or MinIO) notification
        s3_record(event["Records"][0], key, len(body), etag)
        if "Key" in event:
            event["Key"] = f"{BUCKET}/{key}"
    elif event.get("detail-type") == "Object Created":  # EventBridge
        event["detail"]["bucket"]["name"] = BUCKET
        event["detail"]["object"].update({"key": key, "size": len(body), "etag": etag})
        event["resources"] = [f"arn:aws:s3:::{BUCKET}"]
    else:
        sys.exit(f"{sample}: not a store event this script knows")
    dump(event, out)


def job_record(record, message_id, receipt, body, queue):
    record["messageId"] = message_id
    record["receiptHandle"] = receipt
    record["body"] = body
    record["md5OfBody"] = hashlib.md5(body.encode()).hexdigest()
    record["eventSourceARN"] = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue}"


def take_job(queue_url, doc_id, sample, out):
    """Receives until DOC_ID's job shows (others are made visible again at once), deletes it."""
    sqs = client("sqs")
    queue = queue_url.rstrip("/").rsplit("/", 1)[-1]
    deadline = time.time() + 30
    while time.time() < deadline:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
        for m in got:
            try:
                ours = json.loads(m["Body"]).get("doc_id") == doc_id
            except (ValueError, AttributeError):
                ours = False
            if not ours:
                sqs.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
                continue
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
            event = load(sample)
            job_record(event["Records"][0], m["MessageId"], m["ReceiptHandle"], m["Body"], queue)
            event["Records"][0]["attributes"]["ApproximateReceiveCount"] = m["Attributes"].get(
                "ApproximateReceiveCount", "1"
            )
            dump(event, out)
            print(m["Body"])
            return
    sys.exit(f"no job for {doc_id} on {queue} within 30 s")


def job_event(sample, out, doc_id, run_id):
    event = load(sample)
    record = event["Records"][0]
    queue = record["eventSourceARN"].rsplit(":", 1)[-1]
    body = json.dumps({"v": 1, "doc_id": doc_id, "run_id": int(run_id)}, separators=(",", ":"))
    job_record(record, record["messageId"], record["receiptHandle"], body, queue)
    dump(event, out)


def api_event(sample, out, doc_id, body=None):
    with open(sample, encoding="utf-8") as f:
        text = f.read().replace(SAMPLE_DOC, doc_id)
    event = json.loads(text)
    if body is not None:
        event["body"] = body
        event["headers"]["content-length"] = str(len(body.encode()))
    dump(event, out)


def check(response, expr):
    with open(response, encoding="utf-8") as f:
        text = f.read().strip()
    try:
        r = json.loads(text.splitlines()[-1]) if text else None
    except ValueError:
        sys.exit(f"not JSON: {text[:300]}")
    body = None
    if isinstance(r, dict) and isinstance(r.get("body"), str):
        try:
            body = json.loads(r["body"])
        except ValueError:
            body = r["body"]
    if not eval(expr, {}, {"r": r, "body": body}):  # noqa: S307 (the check's own expressions)
        sys.exit(1)


def main(argv):
    commands = {
        "put-store": put_store,
        "take-job": take_job,
        "job-event": job_event,
        "api-event": api_event,
        "check": check,
    }
    if len(argv) < 2 or argv[1] not in commands:
        sys.exit(__doc__)
    commands[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
