#!/usr/bin/env bash
# SAM's own local invocation (`sam local invoke`, `sam local start-api`) on a machine without
# Docker: podman serves Docker's API, and the `provided.al2023` base image SAM asks for is built
# here from Debian packages (no registry serves Amazon's).
#
#   bash scripts/sam-local.sh up       install what is missing, start podman's API service and the
#                                      relays to the stack, build the base image once, write the
#                                      local files (.local/sam/env.json)
#   bash scripts/sam-local.sh down     stop what `up` started (by pid); quiet if nothing runs
#   bash scripts/sam-local.sh env      print `export` lines: DOCKER_HOST, PATH (sam, cargo-lambda), …
#   bash scripts/sam-local.sh status   print each part up/down; exit 1 if any is down
#
#   eval "$(bash scripts/sam-local.sh env)"; sam build; sam local invoke StoreFunction -e events/…
#
# What `up` sets up, and why:
# - podman 4.3 and runc from Debian (crun, podman's default, fails on this kernel: "setrlimit
#   RLIMIT_NOFILE: Operation not permitted"), configured by .local/podman/containers.conf (runc,
#   cgroupfs, no default ulimits) with its storage under .local/podman/storage.
# - `podman system service` on a unix socket: SAM talks to it as DOCKER_HOST.
# - The network. SAM reaches the runtime interface emulator through a published port of each
#   container, so its containers cannot share the host's network (every one would listen on the
#   host's 8080, which is the dev runner's API), and SAM has no option for it anyway: podman 4.3's
#   Docker API puts them on its bridge. The stack listens on 127.0.0.1 only, so `up` starts a
#   relay (socat) on the bridge's gateway address for PgBouncer and moto; Milvus listens on every
#   interface already. Inside a container the stack is at that address (host.containers.internal).
# - The base image `public.ecr.aws/lambda/provided:al2023-x86_64`, the tag SAM builds its rapid
#   image from: a Debian 12 minimal root (debootstrap) with the runtime's layout (/var/runtime,
#   /var/task, /opt, /lambda-entrypoint.sh, the runtime interface emulator that the aws-sam-cli
#   package ships). Rebuilt only when its recipe below changes. `--skip-pull-image` (samconfig.toml)
#   keeps SAM from asking a registry for it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOG_TAG=sam-local
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"

PODMAN_DIR="$LOCAL/podman"
SAM_DIR="$LOCAL/sam"
TOOLS_VENV="$LOCAL/tools-venv"
CONF="$PODMAN_DIR/containers.conf"
STORAGE_CONF="$PODMAN_DIR/storage.conf"
SERVICE_PID="$PODMAN_DIR/service.pid"
# Unix sockets have a ~107-byte path limit; a deep checkout falls back to a short path in /tmp.
if (( ${#PODMAN_DIR} + 12 < 107 )); then SOCK="$PODMAN_DIR/podman.sock"
else SOCK="/tmp/docpipe-podman-$(printf '%s' "$ROOT" | md5sum | cut -c1-10).sock"; fi
SERVICE_PAT="system service --time=0 unix://$SOCK"
# What the containers reach on the host: PgBouncer and moto (relayed), Milvus (direct).
RELAY_PORTS=(6432 5000)
DIRECT_PORTS=(19530)
MOTO_PORT=5000 PGB_PORT=6432 MILVUS_PORT=19530
BASE_IMAGE="public.ecr.aws/lambda/provided:al2023-x86_64"
# The runtime interface emulator the aws-sam-cli package ships (samcli/local/rapid/).
rie_path() {
  "$TOOLS_VENV/bin/python" -c 'import os, samcli; print(os.path.join(os.path.dirname(samcli.__file__), "local", "rapid", "aws-lambda-rie-x86_64"))'
}
SUITE=bookworm
# The image's settings, as Amazon's provided.al2023 image has them (LANG: Debian's minimal root
# has C.UTF-8 only). Part of the recipe: a change rebuilds the image.
IMAGE_CHANGES=(
  "ENV PATH=/var/lang/bin:/usr/local/bin:/usr/bin/:/bin:/opt/bin"
  "ENV LD_LIBRARY_PATH=/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib"
  "ENV LANG=C.UTF-8"
  "ENV TZ=:/etc/localtime"
  "ENV LAMBDA_TASK_ROOT=/var/task"
  "ENV LAMBDA_RUNTIME_DIR=/var/runtime"
  "WORKDIR /var/task"
  'ENTRYPOINT ["/lambda-entrypoint.sh"]'
)
# Amazon's entrypoint, for `podman run IMAGE bootstrap` outside SAM (SAM starts the emulator itself).
ENTRYPOINT_SH='#!/bin/sh
# The provided.al2023 entrypoint: the handler is the one argument; outside Lambda (no
# AWS_LAMBDA_RUNTIME_API) the runtime interface emulator runs the bootstrap.
if [ $# -ne 1 ]; then
  echo "entrypoint requires the handler name to be the first argument" 1>&2
  exit 142
fi
export _HANDLER="$1"
RUNTIME_ENTRYPOINT=/var/runtime/bootstrap
[ -x "$RUNTIME_ENTRYPOINT" ] || RUNTIME_ENTRYPOINT=/var/task/bootstrap
if [ -z "${AWS_LAMBDA_RUNTIME_API}" ]; then
  exec /usr/local/bin/aws-lambda-rie "$RUNTIME_ENTRYPOINT"
else
  exec "$RUNTIME_ENTRYPOINT"
fi'

podman_env() { CONTAINERS_CONF="$CONF" CONTAINERS_STORAGE_CONF="$STORAGE_CONF" "$@"; }
pm() { podman_env podman "$@"; }

# ───────────────────────────── up: phases ─────────────────────────────

phase_packages() {
  local pkgs=() p
  for p in podman runc socat debootstrap; do command -v "$p" >/dev/null || pkgs+=("$p"); done
  [[ -x /usr/lib/cni/bridge || -x /usr/libexec/cni/bridge ]] || pkgs+=(containernetworking-plugins)
  if (( ${#pkgs[@]} == 0 )); then log "apt: nothing to install ($(podman --version), runc $(runc --version | head -n1 | awk '{print $3}'))"; return 0; fi
  log "apt: installing ${pkgs[*]} (log: .local/apt-sam.log)"
  # No service may start from a maintainer script (there is no systemd; podman ships units).
  local policy=/usr/sbin/policy-rc.d made_policy=0 rc=0
  if [[ ! -e "$policy" ]]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 0755 "$policy"; made_policy=1; fi
  {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" ||
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; }
  } < /dev/null > "$LOCAL/apt-sam.log" 2>&1 || rc=$?
  (( made_policy )) && rm -f "$policy"
  (( rc == 0 )) || { tail_log "$LOCAL/apt-sam.log"; die "apt-get install ${pkgs[*]} failed (rc=$rc)"; }
}

phase_tools() {
  # aws-sam-cli, cfn-lint and cargo-lambda (with zig), pinned by scripts/requirements-tools.txt.
  bash "$ROOT/scripts/lint-template.sh" --install-only
  [[ -x "$TOOLS_VENV/bin/sam" && -x "$TOOLS_VENV/bin/cargo-lambda" ]] || die "sam or cargo-lambda missing from $TOOLS_VENV"
  RIE="$(rie_path)"
  [[ -f "$RIE" ]] || die "the aws-sam-cli package has no runtime interface emulator at $RIE"
  log "tools: $("$TOOLS_VENV/bin/sam" --version), $("$TOOLS_VENV/bin/cargo-lambda" lambda --version 2>/dev/null || echo cargo-lambda)"
}

phase_config() {
  mkdir -p "$PODMAN_DIR/storage" "$PODMAN_DIR/run" "$SAM_DIR"
  cat > "$CONF" <<EOF
# written by scripts/sam-local.sh up; edits are lost
[containers]
# The kernel refuses the rlimits podman sets by default (setrlimit RLIMIT_NOFILE: EPERM).
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
# No journald here.
events_logger = "file"
EOF
  cat > "$STORAGE_CONF" <<EOF
# written by scripts/sam-local.sh up; edits are lost
[storage]
driver = "overlay"
graphroot = "$PODMAN_DIR/storage"
runroot = "$PODMAN_DIR/run"
EOF
}

service_up() { curl -sf -o /dev/null --max-time 2 --unix-socket "$SOCK" http://d/_ping; }

phase_service() {
  local pid; pid="$(read_pid "$SERVICE_PID")"
  if pid_matches "$pid" "$SERVICE_PAT" && service_up; then log "podman API service already running (pid $pid, $SOCK)"; return 0; fi
  stop_pid "$pid" "$SERVICE_PAT" TERM 10
  rm -f "$SOCK"
  log "starting podman's API service on unix://$SOCK (log: .local/podman/service.log)"
  # Children never inherit fd 9 (the stack lock).
  env CONTAINERS_CONF="$CONF" CONTAINERS_STORAGE_CONF="$STORAGE_CONF" \
    setsid podman system service --time=0 "unix://$SOCK" \
    < /dev/null > "$PODMAN_DIR/service.log" 2>&1 9>&- &
  echo $! > "$SERVICE_PID"
  wait_until 30 service_up || { tail_log "$PODMAN_DIR/service.log"; die "podman's API service does not answer /_ping"; }
  log "podman API service ready (pid $(cat "$SERVICE_PID")): $(curl -s --unix-socket "$SOCK" http://d/version | python3 -c 'import json,sys; v=json.load(sys.stdin); print("Podman", v["Version"], "API", v["ApiVersion"])')"
}

# The recipe: everything the image is made of. Its hash labels the image; another hash rebuilds.
image_recipe() {
  printf 'debootstrap --variant=minbase --include=ca-certificates %s\n' "$SUITE"
  printf '%s\n' "${IMAGE_CHANGES[@]}"
  printf '%s\n' "$ENTRYPOINT_SH"
  sha256sum < "$RIE" | cut -d' ' -f1
}

debian_mirror() {
  local m="${DOCPIPE_DEBIAN_MIRROR:-}"
  [[ -n "$m" ]] || m="$(sed -n 's/^URIs: *\([^ ]*debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)"
  [[ -n "$m" ]] || m="$(awk '$1 == "deb" && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)"
  echo "${m:-http://deb.debian.org/debian}"
}

phase_image() {
  local want have
  want="$(image_recipe | sha256sum | cut -c1-16)"
  have="$(pm image inspect --format '{{index .Labels "docpipe.recipe"}}' "$BASE_IMAGE" 2>/dev/null || true)"
  if [[ "$have" == "$want" ]]; then log "base image $BASE_IMAGE is current (recipe $want)"; return 0; fi
  local t0 work="$SAM_DIR/image" mirror; t0="$(now)"; mirror="$(debian_mirror)"
  log "building $BASE_IMAGE (recipe $want): debootstrap $SUITE from $mirror (log: .local/sam/image.log)"
  rm -rf "$work"; mkdir -p "$work"
  debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$work/rootfs" "$mirror" \
    < /dev/null > "$SAM_DIR/image.log" 2>&1 || { tail_log "$SAM_DIR/image.log"; die "debootstrap failed"; }
  local r="$work/rootfs"
  # What a function does not need: the package caches, documentation, locales.
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "$r"/usr/share/doc/* \
    "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* "$r"/var/log/*
  # The runtime's layout.
  mkdir -p "$r/var/runtime" "$r/var/task" "$r/opt" "$r/var/lang/bin" "$r/usr/local/bin"
  install -m 0755 "$RIE" "$r/usr/local/bin/aws-lambda-rie"
  printf '%s\n' "$ENTRYPOINT_SH" > "$r/lambda-entrypoint.sh"; chmod 0755 "$r/lambda-entrypoint.sh"
  local changes=() c
  for c in "${IMAGE_CHANGES[@]}"; do changes+=(--change "$c"); done
  changes+=(--change "LABEL docpipe.recipe=$want")
  tar -C "$r" --numeric-owner -cf - . | pm import "${changes[@]}" - "$BASE_IMAGE" >> "$SAM_DIR/image.log" 2>&1 ||
    { tail_log "$SAM_DIR/image.log"; die "podman import failed"; }
  rm -rf "$work"
  # SAM's own images (the emulator added, the layers) were built from the old base: SAM reuses an
  # image it finds, so they go.
  local old
  old="$(pm images --format '{{.Repository}}:{{.Tag}}' | grep -E '^(public\.ecr\.aws/lambda/provided:al2023-rapid-|(localhost/)?samcli/lambda-provided:)' || true)"
  [[ -z "$old" ]] || { log "removing SAM's images of the old base: $(echo $old)"; pm rmi -f $old > /dev/null; }
  log "base image built in $(elapsed "$t0")s: $(pm image inspect --format '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
}

# The bridge's gateway, as containers see the host. Known once a container has run on the bridge.
gateway() { pm network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}' 2>/dev/null | head -n1; }

phase_smoke() {
  # A container on the bridge, through Docker's API as SAM makes them: it proves the engine runs
  # one and brings the bridge (its gateway is where the relays listen) up.
  local out
  out="$(DOCKER_HOST="unix://$SOCK" "$TOOLS_VENV/bin/python" - "$BASE_IMAGE" <<'PY' 2>&1
import sys, docker
client = docker.from_env()
out = client.containers.run(sys.argv[1], entrypoint=["/bin/sh", "-c"],
                            command=["test -x /usr/local/bin/aws-lambda-rie && getent hosts host.containers.internal"],
                            remove=True)
print(out.decode().strip())
PY
)" || die "a container of $BASE_IMAGE does not run through podman's Docker API: $out"
  GW="$(gateway)"
  [[ -n "$GW" ]] || die "podman's bridge has no gateway address (podman network inspect podman)"
  log "a container runs through Docker's API; the host is $GW to it ($out)"
}

relay_pat() { echo "TCP-LISTEN:$1,bind=$GW,"; }

listening_on() { # PORT ADDRESS: some listener serves ADDRESS:PORT (its own bind, or a wildcard)
  ss -Hltn "( sport = :$1 )" 2>/dev/null | awk '{print $4}' | grep -qE "^($2|0\.0\.0\.0|\*|\[::\]):$1$"
}

phase_relays() {
  local p pid
  for p in "${RELAY_PORTS[@]}"; do
    pid="$(read_pid "$PODMAN_DIR/relay-$p.pid")"
    if pid_matches "$pid" "$(relay_pat "$p")"; then continue; fi
    listening_on "$p" "$GW" && die "$GW:$p is taken by another process ($(port_owner "$p"))"
    setsid socat "TCP-LISTEN:$p,bind=$GW,reuseaddr,fork" "TCP:127.0.0.1:$p" \
      < /dev/null > "$PODMAN_DIR/relay-$p.log" 2>&1 9>&- &
    echo $! > "$PODMAN_DIR/relay-$p.pid"
    wait_until 10 listening_on "$p" "$GW" || { tail_log "$PODMAN_DIR/relay-$p.log"; die "the relay on $GW:$p did not start"; }
    log "relay $GW:$p → 127.0.0.1:$p (pid $(cat "$PODMAN_DIR/relay-$p.pid"))"
  done
  for p in "${DIRECT_PORTS[@]}"; do
    listening_on "$p" "$GW" || warn "nothing serves $GW:$p (is the stack up? make up)"
  done
}

# The functions' environment for `sam local invoke --env-vars`: the stack as containers reach it.
# SAM overrides only variables the template declares, and a declared variable also takes its value
# from the shell (`make env` sets several): every one of those is set here.
write_env_vars() {
  local q="http://$GW:$MOTO_PORT/123456789012"
  cat > "$SAM_DIR/env.json.tmp" <<EOF
{
  "Parameters": {
    "DATABASE_URL": "postgres://docpipe:docpipe@$GW:$PGB_PORT/docpipe",
    "DOCPIPE_DB_SECRET_ARN": "",
    "DOCPIPE_AWS_ENDPOINT_URL": "http://$GW:$MOTO_PORT",
    "DOCPIPE_BUCKET": "docpipe-local",
    "DOCPIPE_STORE_QUEUE_URL": "$q/docpipe-store-events",
    "DOCPIPE_PARSE_QUEUE_URL": "$q/docpipe-parse",
    "DOCPIPE_INDEX_QUEUE_URL": "$q/docpipe-index",
    "MILVUS_URL": "http://$GW:$MILVUS_PORT",
    "DOCPIPE_MILVUS_TOKEN_SECRET_ARN": "",
    "DOCPIPE_EMBEDDER": "${DOCPIPE_SAM_EMBEDDER:-hash}",
    "DOCPIPE_MILVUS_COLLECTION": "${DOCPIPE_SAM_COLLECTION:-docpipe_sam_local}",
    "DOCPIPE_EVENT_BUS": "docpipe-events"
  },
  "ParseFunction": {
    "DOCPIPE_PDFIUM_LIB": "/opt/lib/libpdfium.so",
    "DOCPIPE_OCR_DIR": "/opt/ocr"
  },
  "ApiFunction": {
    "DOCPIPE_WEBHOOK_TOKEN_SECRET_ARN": ""
  }
}
EOF
  mv -f "$SAM_DIR/env.json.tmp" "$SAM_DIR/env.json"
  log "wrote .local/sam/env.json (the stack at $GW; embedder ${DOCPIPE_SAM_EMBEDDER:-hash}, collection ${DOCPIPE_SAM_COLLECTION:-docpipe_sam_local})"
}

# ───────────────────────────── down ─────────────────────────────

cmd_down() {
  local p pid
  for p in "${RELAY_PORTS[@]}"; do
    pid="$(read_pid "$PODMAN_DIR/relay-$p.pid")"
    if [[ -n "$pid" ]] && pid_matches "$pid" "TCP-LISTEN:$p,"; then
      kill -TERM -- "-$pid" 2>/dev/null || true   # the relay and its connections (its own group)
      stop_pid "$pid" "TCP-LISTEN:$p," TERM 5
      log "stopped the relay on :$p"
    fi
    rm -f "$PODMAN_DIR/relay-$p.pid"
  done
  pid="$(read_pid "$SERVICE_PID")"
  if pid_matches "$pid" "$SERVICE_PAT"; then
    # SAM removes its containers after each invoke; one left by an interrupted invoke goes too.
    local left
    left="$(pm ps -aq --filter label=sam.cli.container.type 2>/dev/null || true)"
    [[ -z "$left" ]] || { pm rm -f $left > /dev/null 2>&1 || true; log "removed SAM's leftover containers"; }
    stop_pid "$pid" "$SERVICE_PAT" TERM 15
    log "stopped podman's API service"
  fi
  rm -f "$SERVICE_PID" "$SOCK"
}

# ───────────────────────────── env, status ─────────────────────────────

cmd_env() {
  _e() { printf 'export %s=%q\n' "$1" "$2"; }
  _e DOCKER_HOST "unix://$SOCK"
  _e CONTAINERS_CONF "$CONF"
  _e CONTAINERS_STORAGE_CONF "$STORAGE_CONF"
  # sam and cargo-lambda (sam build calls it), and cargo.
  printf 'export PATH=%q:"$PATH"\n' "$TOOLS_VENV/bin:$HOME/.cargo/bin"
  _e CARGO_TARGET_DIR "${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
  _e SAM_CLI_TELEMETRY 0
  _e AWS_DEFAULT_REGION us-east-1
  _e AWS_REGION us-east-1
  _e AWS_ACCESS_KEY_ID test
  _e AWS_SECRET_ACCESS_KEY test
}

cmd_status() {
  local down=0 pid p
  _line() { printf '  %-12s %-5s %s\n' "$@"; }
  pid="$(read_pid "$SERVICE_PID")"
  if pid_matches "$pid" "$SERVICE_PAT" && service_up; then _line podman-api up "pid $pid, unix://$SOCK"
  else _line podman-api down "unix://$SOCK"; down=1; fi
  if [[ -f "$STORAGE_CONF" ]] && command -v podman > /dev/null && [[ -n "$(pm image inspect --format '{{index .Labels "docpipe.recipe"}}' "$BASE_IMAGE" 2>/dev/null)" ]]; then
    _line base-image ok "$BASE_IMAGE"
  else _line base-image miss "$BASE_IMAGE"; down=1; fi
  GW="$([[ -f "$CONF" ]] && command -v podman > /dev/null && gateway || true)"
  for p in "${RELAY_PORTS[@]}"; do
    pid="$(read_pid "$PODMAN_DIR/relay-$p.pid")"
    if [[ -n "$GW" ]] && pid_matches "$pid" "$(relay_pat "$p")"; then _line "relay :$p" up "pid $pid, $GW:$p → 127.0.0.1:$p"
    else _line "relay :$p" down ""; down=1; fi
  done
  return $down
}

cmd_up() {
  [[ "$(id -u)" == 0 ]] || die "'up' must run as root (apt-get, rootful podman)"
  mkdir -p "$LOCAL"
  exec 9> "$LOCAL/.sam-local.lock"
  flock -w 900 9 || die "another sam-local.sh up holds $LOCAL/.sam-local.lock"
  local t0; t0="$(now)"
  phase_begin packages; phase_packages; phase_end
  phase_begin tools;    phase_tools;    phase_end
  phase_begin engine;   phase_config; phase_service; phase_end
  phase_begin image;    phase_image;    phase_end
  phase_begin network;  phase_smoke; phase_relays; write_env_vars; phase_end
  echo
  echo "SAM local is ready ($(elapsed "$t0")s)"
  printf '  %s\n' "${PHASE_REPORT[@]}"
  echo
  cmd_status || true
  echo
  echo "  eval \"\$(make -s env)\"; eval \"\$(make -s sam-env)\""
  echo "  sam build && sam local invoke StoreFunction -e events/store-s3-test-event.json"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  env) cmd_env ;;
  status) cmd_status ;;
  -h|--help|help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2 ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
