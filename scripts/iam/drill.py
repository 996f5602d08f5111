#!/usr/bin/env python3
"""The workload that scripts/iam-check.sh records: a dev runner with one access key per function
(DOCPIPE_DEV_ROLE_KEYS=1) and the API as a process of its own, against a moto server of the
check's own whose request recorder is on, on the template's clock scaled by 0.01.

What it makes every function do (each step names the calls it is there for):

  phase 1, runner up
    api      healthz (HeadBucket), register + presigned PUT of 3 documents, webhook intake
             (the store stage under the API's role: HEAD, GET, SendMessage)
    store    notifications for those and for a direct PUT (HEAD, GET, SendMessage parse); a
             notification for a key that does not exist (HEAD of both spellings: the missing-key
             path); a document being deleted (transient: ChangeMessageVisibility, its backoff)
    parse    GET original, PUT 4 artifacts, SendMessage index
    index    GET vector_chunks.json; the first embedding hangs until the runner kills the process
             at the function's timeout; a duplicate job meanwhile finds the lease held (transient:
             ChangeMessageVisibility)
    sweeper  the expired lease of the killed worker: GetQueueAttributes, re-drive SendMessage
  phase 2, runner stopped (the API stays up)
    retries (api: HEAD original, SendMessage parse) whose jobs are then: lost (drained: the sweeper
    re-drives it once the queue is empty), dead-lettered (moved to the parse DLQ: the DLQ function
    gives the run up), left with their original deleted (parse: GET of a missing key), or met by
    another worker's parse lease (parse: ChangeMessageVisibility)
  phase 3, runner up again
    everything above finishes; api: download URL and an artifact URL fetched (presigned GETs under
    the API's role), two deletes (DeleteObject, ListObjectsV2 + DeleteObjects); a store-events
    message dead-lettered (the DLQ function); an artifact no row vouches for; a few sweeps (their
    housekeeping lists the artifacts and removes such an orphan)

Every request is signed: the functions with docpipe-<binary>, this script with docpipe-drill,
the resources' set-up with docpipe-setup, the runner's queue set-up with docpipe-dev-runner.

  python scripts/iam/drill.py --work DIR --endpoint URL --docpipe BIN
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

ACCOUNT = "123456789012"
REGION = "us-east-1"
STACK = "docpipe-iam"
# What CloudFormation names the bucket: !Sub "${AWS::StackName}-${AWS::AccountId}-documents".
BUCKET = f"{STACK}-{ACCOUNT}-documents"
QUEUE_PREFIX = f"{STACK}-"
DB_NAME = "docpipe_iam_check"
COLLECTION = "docpipe_iam_check"
API_PORT = int(os.environ.get("IAM_CHECK_API_PORT", "18480"))
SCALE = "0.01"
# Scaled timeouts shorter than this are lifted to it: the store and parse functions get 5 s, the
# index function keeps its 6 s (600 s × 0.01), which is how long the hung index call lives.
TIMEOUT_FLOOR = "5"

LAW = """# 本地检查条例（{n}）

## 第一章 总则

第一条 为了检查每个函数的调用都在其角色的权限之内，制定本条例。

第二条 本条例适用于文档的存储、解析和索引。

## 第二章 附则

第三条 本条例自公布之日起施行。{salt}
"""


def log(msg: str) -> None:
    print(f"[iam-drill] {time.strftime('%H:%M:%S')} {msg}", flush=True)


class Drill:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        self.endpoint = a.endpoint
        self.base_env = dict(os.environ)
        self.direct_url = os.environ["DATABASE_DIRECT_URL"]
        self.db_direct = _with_db(self.direct_url, DB_NAME)
        pooled = urllib.parse.urlsplit(_with_db(os.environ["DATABASE_URL"], DB_NAME))
        # The functions get no password: it comes from Secrets Manager, as in AWS.
        self.db_pooled = pooled._replace(netloc=f"{pooled.username}@{pooled.hostname}:{pooled.port}").geturl()
        self.db_user, self.db_password = pooled.username, pooled.password
        self.api = f"http://127.0.0.1:{API_PORT}"
        self.processes: dict[str, subprocess.Popen] = {}
        self.runner_starts = 0
        cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"})
        kw = dict(endpoint_url=self.endpoint, region_name=REGION,
                  aws_access_key_id="docpipe-drill", aws_secret_access_key="test")
        self.s3 = boto3.client("s3", config=cfg, **kw)
        self.sqs = boto3.client("sqs", config=cfg, **kw)

    # ── set-up ──────────────────────────────────────────────────────────────────────────────

    def setup(self) -> None:
        os.environ["AWS_ACCESS_KEY_ID"] = "docpipe-setup"
        os.environ["AWS_SECRET_ACCESS_KEY"] = "test"
        import resources
        res = resources.ensure_resources(bucket=BUCKET, queue_prefix=QUEUE_PREFIX,
                                         endpoint=self.endpoint, region=REGION)
        self.queues = res["queues"]
        sm = boto3.client("secretsmanager", endpoint_url=self.endpoint, region_name=REGION,
                          aws_access_key_id="docpipe-setup", aws_secret_access_key="test")
        self.webhook_token = uuid.uuid4().hex
        secrets = {
            "db": json.dumps({"username": self.db_user, "password": self.db_password}),
            "milvus-token": "root:Milvus",
            "webhook-token": self.webhook_token,
        }
        self.secret_arns = {name: sm.create_secret(Name=f"{STACK}-{name}", SecretString=value)["ARN"]
                            for name, value in secrets.items()}
        q = self.queues
        values = {
            "stack_name": STACK,
            "account_id": ACCOUNT,
            "region": REGION,
            "endpoint": self.endpoint,
            "queues": {
                "StoreEventsQueue": q["store"]["name"], "StoreEventsDeadLetterQueue": q["store"]["dlq_name"],
                "ParseQueue": q["parse"]["name"], "ParseDeadLetterQueue": q["parse"]["dlq_name"],
                "IndexQueue": q["index"]["name"], "IndexDeadLetterQueue": q["index"]["dlq_name"],
            },
            "parameters": {
                "NotificationMode": "sqs",
                "DatabaseSecretArn": self.secret_arns["db"],
                "MilvusTokenSecretArn": self.secret_arns["milvus-token"],
                "WebhookTokenSecretArn": self.secret_arns["webhook-token"],
            },
        }
        with open(os.path.join(self.work, "values.json"), "w") as f:
            json.dump(values, f, indent=2)
        psql(self.direct_url, f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        psql(self.direct_url, f"CREATE DATABASE {DB_NAME}")
        migrated = subprocess.run([self.a.docpipe, "migrate"], capture_output=True, text=True,
                                  env={**self.base_env, "DATABASE_URL": self.db_direct})
        if migrated.returncode != 0:
            raise SystemExit(f"[iam-drill] docpipe migrate failed:\n{migrated.stdout}{migrated.stderr}")
        milvus = os.environ.get("MILVUS_URL", "http://127.0.0.1:19530")
        post_json(f"{milvus}/v1/vector/collections/drop", {"collectionName": COLLECTION}, ok_errors=True)

    def function_env(self) -> dict:
        q = self.queues
        env = {k: v for k, v in self.base_env.items()
               if not k.startswith(("DOCPIPE_", "AWS_", "MILVUS_", "DATABASE_"))}
        env.update({
            "DOCPIPE_DEV_ROLE_KEYS": "1",
            "DOCPIPE_TEMPLATE": os.path.join(ROOT, "template.yaml"),
            "DOCPIPE_TIME_SCALE": SCALE,
            "DOCPIPE_TIMEOUT_FLOOR_SECS": TIMEOUT_FLOOR,
            "DATABASE_URL": self.db_pooled,
            "DOCPIPE_DB_SECRET_ARN": self.secret_arns["db"],
            "DOCPIPE_DB_POOL_SIZE": "2",
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "docpipe-unassigned",
            "AWS_SECRET_ACCESS_KEY": "test",
            "DOCPIPE_BUCKET": BUCKET,
            "DOCPIPE_STORE_QUEUE_URL": q["store"]["url"],
            "DOCPIPE_PARSE_QUEUE_URL": q["parse"]["url"],
            "DOCPIPE_INDEX_QUEUE_URL": q["index"]["url"],
            "DOCPIPE_STORE_DLQ_URL": q["store"]["dlq_url"],
            "DOCPIPE_PARSE_DLQ_URL": q["parse"]["dlq_url"],
            "DOCPIPE_INDEX_DLQ_URL": q["index"]["dlq_url"],
            "MILVUS_URL": os.environ.get("MILVUS_URL", "http://127.0.0.1:19530"),
            "DOCPIPE_MILVUS_TOKEN_SECRET_ARN": self.secret_arns["milvus-token"],
            "DOCPIPE_MILVUS_COLLECTION": COLLECTION,
            "DOCPIPE_EMBEDDER": "hash",
            "DOCPIPE_API_URL": self.api,
            "DOCPIPE_WEBHOOK_TOKEN_SECRET_ARN": self.secret_arns["webhook-token"],
            "DOCPIPE_LOG": "warn",
        })
        for var in ("DOCPIPE_PDFIUM_LIB", "DOCPIPE_OCR_DIR"):
            if os.environ.get(var):
                env[var] = os.environ[var]
        return env

    # ── processes ───────────────────────────────────────────────────────────────────────────

    def start(self, name: str, args: list[str], extra: dict | None = None) -> None:
        out = open(os.path.join(self.work, f"{name}.log"), "a")
        self.processes[name] = subprocess.Popen(
            [self.a.docpipe, *args], env={**self.function_env(), **(extra or {})},
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self, name: str) -> None:
        p = self.processes.pop(name, None)
        if p is None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the runner's function processes go with it
        except ProcessLookupError:
            pass
        p.wait()

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)

    def start_runner(self) -> None:
        self.runner_starts += 1
        self.start("runner", ["dev", "--no-api", "--wait-seconds", "1"],
                   # The first embedding in any index process hangs until the runner kills it.
                   {"DOCPIPE_HASH_HANG_ONCE": os.path.join(self.work, "index-hang-once")})

    # ── the pipeline as a client sees it ────────────────────────────────────────────────────

    def sql(self, query: str) -> str:
        return psql(self.db_direct, query)

    def status(self, doc_id: str) -> tuple[str, str]:
        row = self.sql(f"SELECT status, COALESCE(current_run_id::text, '') FROM documents WHERE doc_id = '{doc_id}'")
        return tuple(row.split("|")) if row else ("gone", "")

    def wait(self, what: str, check, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.processes.items():
                if p.poll() is not None:
                    tail = open(os.path.join(self.work, f"{name}.log")).read()[-3000:]
                    raise SystemExit(f"[iam-drill] the {name} process exited ({p.returncode}) while waiting for {what}:\n{tail}")
            if check():
                return
            time.sleep(0.25)
        raise SystemExit(f"[iam-drill] timed out after {timeout:.0f} s waiting for {what}")

    def wait_status(self, doc_id: str, want: str, timeout: float = 60.0, run_after: str | None = None) -> None:
        def done():
            status, run = self.status(doc_id)
            return status == want and (run_after is None or (run and int(run) > int(run_after)))
        self.wait(f"{doc_id} {want}", done, timeout)

    def register_and_upload(self, name: str, body: bytes) -> str:
        reg = post_json(f"{self.api}/documents", {"file_name": name, "content_type": "text/markdown"})
        req = urllib.request.Request(reg["upload_url"], data=body, method="PUT", headers=reg["upload_headers"])
        urllib.request.urlopen(req, timeout=10).read()
        return reg["doc_id"]

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="text/markdown")

    def doc_of_key(self, key: str) -> str:
        return self.sql(f"SELECT doc_id FROM documents WHERE object_name = '{key}'")

    def drain(self, url: str) -> list[dict]:
        got = []
        while True:
            msgs = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
            if not msgs:
                return got
            for m in msgs:
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            got.extend(msgs)

    def retry(self, doc_id: str) -> str:
        post_json(f"{self.api}/documents/{doc_id}/retry", {})
        return self.status(doc_id)[1]

    # ── the workload ────────────────────────────────────────────────────────────────────────

    def run(self) -> None:
        q = self.queues
        self.start("api", ["dev", "--api-only"])
        self.wait("the API", lambda: get_status(f"{self.api}/healthz") == 200, 60)
        self.start_runner()
        law = lambda n: LAW.format(n=n, salt=uuid.uuid4().hex).encode()

        log("phase 1: one upload, whose index call hangs; a duplicate of its job meets the lease")
        a = self.register_and_upload("甲 条例.md", law("甲"))
        # The first index call hangs (DOCPIPE_HASH_HANG_ONCE) until the runner kills its process at
        # the function's timeout; while that worker holds the run's lease, a duplicate of the job
        # finds the lease taken and backs off. Then the sweeper finds the lease run out.
        hang = os.path.join(self.work, "index-hang-once")
        self.wait("the index call to hang", lambda: os.path.exists(hang), 60)
        _, run = self.status(a)
        self.sqs.send_message(QueueUrl=q["index"]["url"], MessageBody=json.dumps({"v": 1, "doc_id": a, "run_id": int(run)}))
        self.wait("the duplicate index job to back off",
                  lambda: self.sql(f"SELECT count(*) FROM run_events WHERE run_id = {run} AND stage = 'index' AND kind = 'backoff'") not in ("", "0"), 30)

        log("phase 1: more uploads through the API, a direct PUT, the webhook, a missing key")
        b = self.register_and_upload("乙条例.md", law("乙"))
        c = self.register_and_upload("丙条例.md", law("丙"))
        direct_key = "uploads/直接 上传+1.md"
        self.put(direct_key, law("丁"))
        webhook_key = f"uploads/webhook-{uuid.uuid4().hex[:8]}.md"
        self.put(webhook_key, law("戊"))
        minio = {"EventName": "s3:ObjectCreated:Put", "Key": f"{BUCKET}/{webhook_key}", "Records": [{
            "eventVersion": "2.0", "eventSource": "minio:s3", "eventName": "s3:ObjectCreated:Put",
            "s3": {"bucket": {"name": BUCKET}, "object": {"key": urllib.parse.quote(webhook_key, safe=""), "size": 1}}}]}
        post_json(f"{self.api}/notifications/s3", minio, token=self.webhook_token)
        # AWS's spelling of a key (`+` for a space): the decoded and the raw key are both HEADed.
        missing = {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": REGION,
                                "eventName": "ObjectCreated:Put",
                                "s3": {"bucket": {"name": BUCKET}, "object": {"key": "uploads/never+arrived.md", "size": 5}}}]}
        self.sqs.send_message(QueueUrl=q["store"]["url"], MessageBody=json.dumps(missing))

        self.wait("the direct PUT to be stored", lambda: bool(self.doc_of_key(direct_key)), 30)
        d = self.doc_of_key(direct_key)
        for doc_id in (a, b, c, d):
            self.wait_status(doc_id, "indexed", 90)
        w = self.doc_of_key(webhook_key)
        self.wait_status(w, "indexed", 60)

        log("phase 1: new content for a document that is being deleted (store backs off)")
        _, d_run = self.status(d)
        self.sql(f"UPDATE documents SET deleting_at = NOW() WHERE doc_id = '{d}'")
        self.put(direct_key, law("丁 second"))
        self.wait("the store to back off",
                  lambda: "being deleted" in open(os.path.join(self.work, "runner.log")).read(), 30)
        time.sleep(2)
        self.sql(f"UPDATE documents SET deleting_at = NULL WHERE doc_id = '{d}'")
        self.wait_status(d, "indexed", 60, run_after=d_run)

        log("phase 2: the runner stops; retries whose jobs are lost, dead-lettered, orphaned, contended")
        self.stop("runner")
        # A long poll the runner left open still takes a message sent within its wait (1 s).
        time.sleep(2.5)
        e = w
        self.retry(b)
        self.retry(c)
        drained = self.drain(q["parse"]["url"])
        assert len(drained) == 2, f"expected the two retries' parse jobs, drained {len(drained)}"
        lost_b = next(m for m in drained if json.loads(m["Body"])["doc_id"] == b)
        dead_c = next(m for m in drained if json.loads(m["Body"])["doc_id"] == c)
        self.sqs.send_message(QueueUrl=q["parse"]["dlq_url"], MessageBody=dead_c["Body"])
        self.retry(a)
        a_key = self.sql(f"SELECT object_name FROM documents WHERE doc_id = '{a}'")
        self.s3.delete_object(Bucket=BUCKET, Key=a_key)
        e_run = self.retry(e)
        # Another worker's parse lease, held for 8 more seconds.
        self.sql(f"UPDATE document_processing_runs SET lease_owner = 'parse-iam-drill', lease_renewed_at = NOW(), "
                 f"lease_expires_at = NOW() + interval '8 seconds' WHERE run_id = {e_run}")
        self.start_runner()

        log("phase 3: the runner again; downloads, deletes, a dead-lettered upload event, sweeps")
        self.wait_status(a, "failed", 60)
        self.wait_status(c, "failed", 60)
        self.wait_status(e, "indexed", 60)
        self.wait_status(b, "indexed", 90)
        for what, query in (
            ("the contended parse job backed off", f"stage = 'parse' AND kind = 'backoff' AND run_id = {e_run}"),
            ("the lost parse job was re-driven", f"stage = 'parse' AND kind = 'redrive' AND doc_id = {sql_str(b)}"),
        ):
            if self.sql(f"SELECT count(*) FROM run_events WHERE {query}") in ("", "0"):
                raise SystemExit(f"[iam-drill] expected: {what}")
        download = get_json(f"{self.api}/documents/{d}/download")
        urllib.request.urlopen(download["url"], timeout=10).read()
        artifacts = get_json(f"{self.api}/documents/{d}/artifacts")["artifacts"]
        urllib.request.urlopen(artifacts[0]["download_url"], timeout=10).read()
        self.sqs.send_message(QueueUrl=q["store"]["dlq_url"], MessageBody=json.dumps(missing))
        # An artifact no row vouches for (the sweeper's reconcile removes such objects).
        self.s3.put_object(Bucket=BUCKET, Key=f"artifacts/doc_{uuid.uuid4().hex}/1/layouts.json", Body=b"[]")
        for doc_id in (b, d):
            req = urllib.request.Request(f"{self.api}/documents/{doc_id}", method="DELETE")
            urllib.request.urlopen(req, timeout=30).read()
        self.wait("the dead-letter queues to be empty", lambda: all(
            self.queue_empty(q[k]["dlq_url"]) for k in ("store", "parse", "index")), 30)
        time.sleep(8)  # a few sweeps (every 3 s on this clock) with the deletes done
        for doc_id in (a, c):
            log(f"  {doc_id}: {self.sql(f'SELECT status, error_message FROM documents WHERE doc_id = {sql_str(doc_id)}')}")
        log(f"done; the runner started {self.runner_starts} time(s)")

    def queue_empty(self, url: str) -> bool:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return all(attrs.get(k, "0") == "0" for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"))


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _with_db(url: str, db: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts._replace(path=f"/{db}").geturl()


def psql(url: str, query: str) -> str:
    out = subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qAtc", query],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def post_json(url: str, body: dict, token: str | None = None, ok_errors: bool = False) -> dict:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
    except urllib.error.HTTPError as e:
        if ok_errors:
            return {}
        raise SystemExit(f"[iam-drill] POST {url}: {e.code} {e.read().decode(errors='replace')}")
    except urllib.error.URLError:
        if ok_errors:
            return {}
        raise
    return json.loads(text) if text else {}


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--docpipe", required=True)
    a = p.parse_args()
    drill = Drill(a)
    try:
        drill.setup()
        drill.run()
    finally:
        drill.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
