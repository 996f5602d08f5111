#!/usr/bin/env python3
"""The workload that scripts/iam-check.sh records: a dev runner with one access key per function
(DOCPIPE_DEV_ROLE_KEYS=1) and the API as a process of its own, against a moto server of the
check's own whose request recorder is on, on the template's clock scaled by 0.01. The embedder is
Bedrock's (Titan Text Embeddings V2, 256 dimensions), answered by a stand-in on 127.0.0.1 that the
AWS SDK reaches through its service-specific endpoint variable AWS_ENDPOINT_URL_BEDROCK_RUNTIME
and that records each signed InvokeModel (POST /model/<modelId>/invoke) as moto records its calls.

What it makes every function do (each step names the calls it is there for):

  set-up
    migrate  the migrate Lambda binary under a stand-in of Lambda's runtime API, with
             CloudFormation's create, update and delete events for the Migrations custom resource
             (GetSecretValue; the schema of the drill's database is the one it creates), each
             answered at a local response URL
  phase 1, runner up
    api      healthz (HeadBucket), register + presigned PUT of 3 documents, webhook intake
             (the store stage under the API's role: HEAD, GET, SendMessage)
    store    notifications for those and for a direct PUT (HEAD, GET, SendMessage parse); a
             notification for a key that does not exist (HEAD of both spellings: the missing-key
             path); a document being deleted (transient: ChangeMessageVisibility, its backoff)
    parse    GET original, PUT 4 artifacts, SendMessage index
    index    GET vector_chunks.json; InvokeModel for every chunk; the first InvokeModel hangs until
             the runner kills the process at the function's timeout; a duplicate job meanwhile finds
             the lease held (transient: ChangeMessageVisibility)
    sweeper  the expired lease of the killed worker: GetQueueAttributes, re-drive SendMessage
  phase 2, runner stopped (the API stays up)
    retries (api: HEAD original, SendMessage parse) whose jobs are then: lost (drained: the sweeper
    re-drives it once the queue is empty), dead-lettered (moved to the parse DLQ: the DLQ function
    gives the run up), left with their original deleted (parse: GET of a missing key), or met by
    another worker's parse lease (parse: ChangeMessageVisibility)
  phase 3, runner up again
    everything above finishes; api: a dense and a hybrid search (InvokeModel for the query), download
    URL and an artifact URL fetched (presigned GETs under the API's role), two deletes (DeleteObject, ListObjectsV2 + DeleteObjects); a store-events
    message dead-lettered (the DLQ function); an artifact no row vouches for; a few sweeps (their
    housekeeping lists the artifacts and removes such an orphan)
  throughout
    every function that changes a document publishes docpipe's events (PutEvents) to the set's bus,
    docpipe-iam-events (DOCPIPE_EVENT_BUS; the template's ${AWS::StackName}-events for this stack);
    a rule of the drill's on that bus copies them to a queue, and the drill names the detail types
    that arrived

Every request is signed: the functions with docpipe-<binary>, this script with docpipe-drill,
the resources' set-up with docpipe-setup, the runner's queue set-up with docpipe-dev-runner.

  python scripts/iam/drill.py --work DIR --endpoint URL --docpipe BIN --migrate BIN
"""
from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import math
import os
import queue
import select
import signal
import subprocess
import sys
import threading
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
# The template's BucketName parameter, as the check fills it in (values.json).
BUCKET = f"{STACK}-{ACCOUNT}-documents"
QUEUE_PREFIX = f"{STACK}-"
DB_NAME = "docpipe_iam_check"
COLLECTION = "docpipe_iam_check"
API_PORT = int(os.environ.get("IAM_CHECK_API_PORT", "18480"))
SCALE = "0.01"
# Scaled timeouts shorter than this are lifted to it: the store and parse functions get 5 s, the
# index function keeps its 6 s (600 s × 0.01), which is how long the hung index call lives.
TIMEOUT_FLOOR = "5"
# The template's default Bedrock model; Titan V2 gives 256, 512 or 1024 dimensions.
BEDROCK_MODEL = "amazon.titan-embed-text-v2:0"
EMBED_DIM = 256

LAW = """# 本地检查条例（{n}）

## 第一章 总则

第一条 为了检查每个函数的调用都在其角色的权限之内，制定本条例。

第二条 本条例适用于文档的存储、解析和索引。

## 第二章 附则

第三条 本条例自公布之日起施行。{salt}
"""


def log(msg: str) -> None:
    print(f"[iam-drill] {time.strftime('%H:%M:%S')} {msg}", flush=True)


class LocalAws(http.server.ThreadingHTTPServer):
    """What AWS plays for the drill besides moto, on one port of 127.0.0.1:

    - Bedrock Runtime's InvokeModel for Titan Text Embeddings V2 (POST /model/<modelId>/invoke):
      checks the request's shape (model, JSON body with inputText and dimensions) and answers
      {"embedding": [...], "inputTextTokenCount": n}, a deterministic unit vector of the text's
      character bigrams. Every request is recorded as moto records its own (method, url, headers,
      body), so that check.mjs maps it to bedrock:InvokeModel on the model's ARN and evaluates it
      against the signer's role. The first one hangs (creating `hang_file`) until its caller goes
      away: the index function's process, killed by the runner at its timeout.
    - Lambda's runtime API (/2018-06-01/runtime/...), which hands the migrate binary the events put
      on `events`, and the custom resource's response URL (PUT /cfn-response/<n>), which keeps what
      the function answered CloudFormation in `responses`.
    """

    daemon_threads = True

    def __init__(self, recording: str, hang_file: str):
        super().__init__(("127.0.0.1", 0), LocalAwsHandler)
        self.recording = open(recording, "a")
        self.hang_file = hang_file
        self.lock = threading.Lock()
        self.hung = False
        self.refused: list[str] = []
        self.invocations: dict[str, int] = {}
        self.events: "queue.Queue[dict]" = queue.Queue()
        self.responses: dict[str, dict] = {}
        self.lambda_results: dict[str, tuple[str, str]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class LocalAwsHandler(http.server.BaseHTTPRequestHandler):
    server: LocalAws
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def body(self) -> bytes:
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status: int, payload: dict | None = None, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/2018-06-01/runtime/invocation/next":
            event = self.server.events.get()  # blocks until the drill sends one
            self.reply(200, event["payload"], {
                "Lambda-Runtime-Aws-Request-Id": event["id"],
                "Lambda-Runtime-Deadline-Ms": str(int((time.time() + 300) * 1000)),
                "Lambda-Runtime-Invoked-Function-Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STACK}-MigrateFunction",
                "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000;Sampled=0",
            })
            return
        self.reply(404, {"message": f"no route for GET {self.path}"})

    def do_PUT(self) -> None:
        if self.path.startswith("/cfn-response/"):
            self.server.responses[self.path.rsplit("/", 1)[1]] = json.loads(self.body() or b"{}")
            self.reply(200)
            return
        self.reply(404, {"message": f"no route for PUT {self.path}"})

    def do_POST(self) -> None:
        path = self.path
        if path.startswith("/2018-06-01/runtime/"):
            body = self.body().decode(errors="replace")
            parts = path.split("/")
            if len(parts) >= 6 and parts[3] == "invocation":
                self.server.lambda_results[parts[4]] = (parts[5], body)
            else:
                self.server.lambda_results["init"] = ("init-error", body)
            self.reply(202, {})
            return
        if path.startswith("/model/"):
            self.invoke_model(path, self.body())
            return
        self.reply(404, {"message": f"no route for POST {path}"})

    def invoke_model(self, path: str, raw: bytes) -> None:
        s = self.server
        headers = {k: v for k, v in self.headers.items()}
        with s.lock:
            s.recording.write(json.dumps({"method": "POST", "url": s.url + path, "headers": headers,
                                          "body": raw.decode(errors="replace"), "body_encoded": False}) + "\n")
            s.recording.flush()
        key = (headers.get("Authorization") or headers.get("authorization") or "").split("Credential=")[-1].split("/")[0]
        parts = path.split("/")
        model = urllib.parse.unquote(parts[2]) if len(parts) == 4 and parts[3] == "invoke" else None
        try:
            req = json.loads(raw)
        except ValueError:
            req = None
        problem = None
        if model != BEDROCK_MODEL:
            problem = f"model {model!r} (the drill's embedder asks for {BEDROCK_MODEL})"
        elif not isinstance(req, dict) or not isinstance(req.get("inputText"), str) or req.get("dimensions") != EMBED_DIM:
            problem = f"a request body Titan V2 would refuse: {raw[:200]!r}"
        elif "application/json" not in (headers.get("Content-Type") or headers.get("content-type") or ""):
            problem = "no JSON content type"
        if problem:
            s.refused.append(f"{key}: {problem}")
            self.reply(400, {"message": problem}, {"x-amzn-ErrorType": "ValidationException"})
            return
        with s.lock:
            s.invocations[key] = s.invocations.get(key, 0) + 1
            hang = not s.hung
            s.hung = True
        if hang:
            # Hold the caller until it goes away (the runner kills the index process at its timeout).
            open(s.hang_file, "w").close()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                ready, _, _ = select.select([self.connection], [], [], 0.5)
                if ready and not self.connection.recv(1, socket_peek()):
                    break
            self.close_connection = True
            return
        text = req["inputText"]
        self.reply(200, {"embedding": titan_like(text, EMBED_DIM), "inputTextTokenCount": max(1, len(text) // 2)})


def socket_peek() -> int:
    import socket
    return socket.MSG_PEEK


def titan_like(text: str, dim: int) -> list[float]:
    v = [0.0] * dim
    chars = text or " "
    for a, b in zip(chars, chars[1:] + " "):
        h = int.from_bytes(hashlib.blake2b((a + b).encode(), digest_size=4).digest(), "little")
        v[h % dim] += 1.0 if h & 1 << 31 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


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
        self.hang_file = os.path.join(self.work, "index-hang-once")
        self.local = LocalAws(os.path.join(self.work, "bedrock-recording.jsonl"), self.hang_file)
        threading.Thread(target=self.local.serve_forever, daemon=True).start()
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
        self.event_bus = res["event_bus"]["name"]
        self.tap_events()
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
            # The bus the functions publish to; the template's must resolve to the same name.
            "event_bus": self.event_bus,
            "queues": {
                "StoreEventsQueue": q["store"]["name"], "StoreEventsDeadLetterQueue": q["store"]["dlq_name"],
                "ParseQueue": q["parse"]["name"], "ParseDeadLetterQueue": q["parse"]["dlq_name"],
                "IndexQueue": q["index"]["name"], "IndexDeadLetterQueue": q["index"]["dlq_name"],
            },
            "parameters": {
                "BucketName": BUCKET,
                "Embedder": "bedrock",
                "BedrockModelId": BEDROCK_MODEL,
                "EmbedDimension": str(EMBED_DIM),
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
        self.custom_resource_migrations()
        milvus = os.environ.get("MILVUS_URL", "http://127.0.0.1:19530")
        post_json(f"{milvus}/v1/vector/collections/drop", {"collectionName": COLLECTION}, ok_errors=True)

    def tap_events(self) -> None:
        """A rule on the bus (source docpipe) with a queue as its target, so that the drill can name
        the events that reached the bus. Set up under docpipe-setup, like the resources."""
        kw = dict(endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="docpipe-setup",
                  aws_secret_access_key="test")
        sqs, events = boto3.client("sqs", **kw), boto3.client("events", **kw)
        name = f"{QUEUE_PREFIX}events-tap"
        self.tap_url = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.tap_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name=name, EventBusName=self.event_bus, EventPattern=json.dumps({"source": ["docpipe"]}))
        events.put_targets(Rule=name, EventBusName=self.event_bus, Targets=[{"Id": "tap", "Arn": arn}])

    def events_seen(self) -> dict[str, int]:
        seen: dict[str, int] = {}
        for m in self.drain(self.tap_url):
            kind = json.loads(m["Body"]).get("detail-type", "?")
            seen[kind] = seen.get(kind, 0) + 1
        return seen

    def custom_resource_migrations(self) -> None:
        """The Migrations custom resource's create, update and delete, as CloudFormation sends them,
        through the migrate binary under the runtime API stand-in; the schema is what it creates."""
        log("migrations: the migrate Lambda answers CloudFormation's create, update and delete")
        stack_id = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/{uuid.uuid4()}"
        token = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STACK}-MigrateFunction"
        events = []
        for n, kind in enumerate(("Create", "Update", "Delete")):
            payload = {"RequestType": kind, "ServiceToken": token, "ResponseURL": f"{self.local.url}/cfn-response/{n}",
                       "StackId": stack_id, "RequestId": str(uuid.uuid4()), "LogicalResourceId": "Migrations",
                       "ResourceType": "Custom::Migrations",
                       "ResourceProperties": {"ServiceToken": token, "ServiceTimeout": "900", "RunId": f"iam-drill-{n}"}}
            if kind != "Create":
                payload["PhysicalResourceId"] = "docpipe-migrations"
            if kind == "Update":
                payload["OldResourceProperties"] = {"ServiceToken": token, "ServiceTimeout": "900", "RunId": "iam-drill-0"}
            events.append({"id": str(uuid.uuid4()), "payload": payload, "n": str(n), "kind": kind})
        out = open(os.path.join(self.work, "migrate.log"), "a")
        # As in the template, the migrations' function has no bus to publish to.
        env = {k: v for k, v in self.function_env().items() if k != "DOCPIPE_EVENT_BUS"}
        env = {**env, "AWS_ACCESS_KEY_ID": "docpipe-migrate",
               "AWS_LAMBDA_RUNTIME_API": self.local.url.removeprefix("http://"),
               "AWS_LAMBDA_FUNCTION_NAME": f"{STACK}-MigrateFunction", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "AWS_LAMBDA_LOG_GROUP_NAME": f"/docpipe/{STACK}/migrate",
               "AWS_LAMBDA_LOG_STREAM_NAME": "drill"}
        proc = subprocess.Popen([self.a.migrate], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            for e in events:
                self.local.events.put(e)
                deadline = time.monotonic() + 120
                while e["n"] not in self.local.responses:
                    if proc.poll() is not None:
                        raise SystemExit(f"[iam-drill] the migrate function exited ({proc.returncode}):\n"
                                         + open(os.path.join(self.work, "migrate.log")).read()[-3000:])
                    if time.monotonic() > deadline:
                        raise SystemExit(f"[iam-drill] the migrate function did not answer the {e['kind']} event")
                    time.sleep(0.1)
                answer = self.local.responses[e["n"]]
                if answer.get("Status") != "SUCCESS" or answer.get("PhysicalResourceId") != "docpipe-migrations":
                    raise SystemExit(f"[iam-drill] the migrate function answered the {e['kind']} event: {answer}")
                log(f"  {e['kind']}: {answer.get('Status')}, {answer.get('Reason')}")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if self.sql_direct("SELECT count(*) FROM documents") != "0":
            raise SystemExit("[iam-drill] the migrated database is not empty")

    def sql_direct(self, query: str) -> str:
        return psql(self.db_direct, query)

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
            "DOCPIPE_EMBEDDER": "bedrock",
            "DOCPIPE_EMBED_DIM": str(EMBED_DIM),
            "DOCPIPE_BEDROCK_MODEL_ID": BEDROCK_MODEL,
            # The SDK's service-specific endpoint (ahead of AWS_ENDPOINT_URL, which is moto).
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.local.url,
            "DOCPIPE_API_URL": self.api,
            "DOCPIPE_WEBHOOK_TOKEN_SECRET_ARN": self.secret_arns["webhook-token"],
            "DOCPIPE_EVENT_BUS": self.event_bus,
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
        # The first embedding (the Bedrock stand-in's first InvokeModel) hangs until the runner
        # kills its index process at the function's timeout.
        self.start("runner", ["dev", "--no-api", "--wait-seconds", "1"])

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
        self.wait("the index call to hang", lambda: os.path.exists(self.hang_file), 60)
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
        for mode in ("dense", "hybrid"):
            found = post_json(f"{self.api}/search", {"query": "检查每个函数的调用", "mode": mode, "top_k": 3})
            if not found.get("results") and not found.get("hits"):
                log(f"  search ({mode}) found nothing: {json.dumps(found, ensure_ascii=False)[:300]}")
        # A re-embedding (hash, 256 dimensions): the API sends its first step to the index queue,
        # the index function reads the stored chunks and fills the new collection, search switches.
        started = post_json(f"{self.api}/index/rebuild",
                            {"embedder": {"DOCPIPE_EMBEDDER": "hash", "DOCPIPE_EMBED_DIM": "256"},
                             "grace_secs": 10},
                            extra={"x-docpipe-role": "reviewer"})
        self.wait("the re-embedding to switch",
                  lambda: get_json(f"{self.api}/index")["active"].get("generation") == started["generation"], 120)
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
        calls = self.local.invocations
        log(f"done; the runner started {self.runner_starts} time(s); InvokeModel by {calls}")
        seen = self.events_seen()
        log("events on the bus: " + (", ".join(f"{k} {n}" for k, n in sorted(seen.items())) if seen else
                                     "none (is DOCPIPE_EVENT_BUS read? scripts/iam/check.mjs probes the grant regardless)"))
        if self.local.refused:
            raise SystemExit(f"[iam-drill] Bedrock requests the stand-in refused: {self.local.refused[:5]}")
        for who in ("docpipe-index", "docpipe-api"):
            if not calls.get(who):
                raise SystemExit(f"[iam-drill] {who} made no InvokeModel call (AWS_ENDPOINT_URL_BEDROCK_RUNTIME not honoured?)")

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


def post_json(url: str, body: dict, token: str | None = None, ok_errors: bool = False,
              extra: dict | None = None) -> dict:
    headers = {"content-type": "application/json", **(extra or {})}
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
    p.add_argument("--migrate", required=True, help="the migrate Lambda binary (functions/migrate)")
    a = p.parse_args()
    drill = Drill(a)
    try:
        drill.setup()
        drill.run()
    finally:
        drill.stop_all()
        drill.local.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
