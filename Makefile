# docpipe's interface for people and scripts. `make demo` is the main job; `make test` proves it.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -euo pipefail -c

# One target dir outside the clone, so a fresh clone (CI) reuses what was built before.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/docpipe/target
# make deploy / deploy-check: the stack's parameters, as sam deploy's --parameter-overrides takes
# them (exported, so that any quoting in the values reaches the scripts intact); QUOTAS, the
# account's Lambda quotas deploy-check holds the template to ("memory=10240,concurrency=1000";
# default: a new account's, 3,008 MB and 10).
export PARAMS STACK QUOTAS CONFIRM DRY_RUN

.PHONY: up down env status test demo bench load build lint layers lint-template iam-check \
	sam-local sam-env sam-local-check deploy-check deploy destroy preflight scale

# The e5 engine is compiled into the CLI (dev runner) and the tests: `make up` fetches its source.
FEATURES := --features docpipe-cli/e5,docpipe-tests/e5

build:
	cargo build --workspace --features docpipe-cli/e5

## up: install what is missing, start the stack, build the CLI (beside the install and the start),
## apply the migrations, start the dev runner
up:
	bash scripts/up.sh

## down: stop exactly what `up` started (and what `sam-local` started, if it ran)
down:
	bash scripts/dev-runner.sh stop
	bash scripts/sam-local.sh down
	bash scripts/stack.sh down

## env: export lines for the stack (eval "$(make -s env)")
env:
	@bash scripts/stack.sh env

status:
	bash scripts/stack.sh status
	bash scripts/dev-runner.sh status

lint: lint-template
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features -- -D warnings

## lint-template: sam validate --lint and cfn-lint on template.yaml (offline)
lint-template:
	bash scripts/lint-template.sh

## deploy-check: template.yaml after SAM's transform against the rules AWS enforces at creation and
## at run time (event source visibility and order, bucket name, alarm topic key, log groups, alarms
## on emitted metrics, network paths, the clock), each naming its AWS document; offline.
## `make deploy` runs it with the deploy's parameters (PARAMS)
deploy-check:
	if [[ -n "$${PARAMS:-}" ]]; then bash scripts/deploy-check.sh --param "$$PARAMS"; else bash scripts/deploy-check.sh; fi

## preflight: the deploy's parameters (PARAMS, STACK) asked of the AWS account, read-only: each
## interface endpoint service offered in the subnets' zones, endpoints already in the VPC, the S3
## gateway on the route tables, NAT routes, the concurrency quota, the bucket name, the Bedrock model,
## the database secret's key. `make deploy` runs it first
preflight:
	bash scripts/lint-template.sh --install-only >/dev/null
	stack="$${STACK:-$$(sed -n 's/^stack_name *= *"\(.*\)"/\1/p' samconfig.toml | head -n 1)}"
	.local/tools-venv/bin/python scripts/preflight.py --stack "$$stack" --param "$${PARAMS:-}"

## deploy: deploy-check with your parameters, the layers, sam build, sam deploy (samconfig.toml's
## deploy section; MigrationRunId = commit and time, so every deploy runs the migrations). First
## time: make deploy PARAMS="DatabaseUrl=… BucketName=… …" (README, "Deploying to AWS"); later
## deploys keep the previous values. STACK=name for another stack than samconfig.toml's
deploy:
	bash scripts/deploy.sh

## destroy: sam delete of the stack (STACK, as deploy), then what stays and how to remove each: the
## bucket, the database's tables, the Milvus collection, SAM's artifact bucket, the KMS key in its
## waiting period. Refuses to run without CONFIRM=<stack name>; DRY_RUN=1 prints the delete only
destroy:
	bash scripts/destroy.sh

## layers: the Lambda layers' contents (libpdfium.so at lib/ of the pdfium layer, i.e. /opt/lib;
## ONNX Runtime, a fallback libstdc++.so.6 and the OCR models at ocr/ of the OCR layer, i.e.
## /opt/ocr), fetched for the functions' architecture (x86_64) whatever the host; from a fresh clone
## too (the local stack's copies are reused when they are the same build); then every library's
## symbol versions against what Amazon Linux 2023 provides (scripts/layer_abi.py)
layers:
	bash scripts/fetch-pdfium.sh --layer
	bash scripts/fetch-ocr.sh --layer
	python3 scripts/layer_abi.py .local/layers

## test: bring up what the tests need, then run every test against the real stack
test: up lint deploy-check
	bash scripts/test.sh $(FEATURES)
	bash scripts/lambda-invoke.sh
	bash scripts/iam-check.sh
	bash scripts/schemathesis.sh
	.local/tools-venv/bin/python scripts/preflight_test.py

## sam-local: what `sam local invoke` and `sam local start-api` need here, installed and started
## once: podman's Docker API (no Docker engine), relays to the stack, a provided.al2023 base image
sam-local:
	bash scripts/sam-local.sh up

## sam-env: export lines for sam (eval "$(make -s sam-env)"; with `make -s env` for the stack)
sam-env:
	@bash scripts/sam-local.sh env

## sam-local-check: sam build, then sam local invoke for every event in events/ (live ids) and
## sam local start-api beside the dev runner's API, all checked (make up first)
sam-local-check: sam-local
	bash scripts/sam-local-check.sh

## iam-check: every call each function made in a drill, against its role in template.yaml (make up first)
iam-check:
	bash scripts/iam-check.sh

## demo: the stack and the dev runner, then 62 laws and 4 scans uploaded through the API with the docpipe CLI,
## watched until each is indexed or failed, a summary and two searches (idempotent: a second run
## uploads nothing new)
demo:
	bash scripts/demo.sh

## bench: the benchmark table, as Markdown (BENCHMARKS.md carries the latest figures). It does not
## run `make scale` (21 minutes at 600 laws on 2 cores, about two hours or more at 5,000): run that on its own
bench:
	bash scripts/bench.sh

## load: N documents (default 1000) through an isolated dev runner: `make load N=200`;
## `make load N=300 EMBEDDER=e5-small` with the local default embedder
load:
	EMBEDDER=$(or $(EMBEDDER),hash) bash scripts/load.sh $(or $(N),1000)

## scale: a library of laws over time through an isolated dev runner (`hash`), measured at 150 laws
## and at all of them, the last line one JSON object (issue 41): `make scale LAWS=5000` generates
## the library from corpus/laws (LAWS default 5000), `make scale CORPUS=<folder>` takes every .md,
## .txt, .html, .docx and .pdf under a folder as it is; BUDGET=<minutes> stops starting slices of
## 25 laws past it and measures the second point at the laws uploaded, keeping the set
## (--keep); `make scale RESUME=1 [BUDGET=…]` goes on from there with the same build and library
scale:
	bash scripts/scale.sh $(if $(RESUME),--resume --keep,$(if $(CORPUS),--corpus "$(CORPUS)",$(or $(LAWS),5000)) $(if $(BUDGET),--keep)) $(if $(BUDGET),--budget $(BUDGET))
