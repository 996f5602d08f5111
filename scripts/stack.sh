#!/usr/bin/env bash
# docpipe's local stack, as plain processes (no Docker): PostgreSQL + PgBouncer (the RDS Proxy
# stand-in), moto (S3 + SQS + bucket notifications + EventBridge) and Milvus 2.3.5 standalone.
#
#   bash scripts/stack.sh up        install what is missing, start what is down, (re)create resources
#   bash scripts/stack.sh prepare   only what a build needs: apt packages, the venv, the e5 engine's source
#   bash scripts/stack.sh down      stop what `up` started (by pid), wait until the ports are free
#   bash scripts/stack.sh env       print `export` lines for the stack (only those, on stdout)
#   bash scripts/stack.sh status    print each service up/down; exit 1 if any is down
#
#   eval "$(bash scripts/stack.sh env)"
#
# Everything lives under .local/ at the repo root: <name>.log, <name>.pid, pg/, pgbouncer/, milvus/,
# venv/, lib/libpdfium.so. Runs as root (CI), with no stdin. Every service is configured for
# 127.0.0.1; Milvus 2.3.5 has no listen-address setting, so its gRPC ports and 9091 listen on all
# interfaces (it advertises 127.0.0.1 and etcd binds 127.0.0.1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"

HOST=127.0.0.1
PG_PORT=55432
PGB_PORT=6432
MOTO_PORT=5000
MILVUS_PORT=19530
MILVUS_HEALTH_PORT=9091
# Every port Milvus standalone opens, pinned (see write_milvus_launcher) so that a taken port is
# an error instead of a silent move to the next one. 22930 (indexCoord) is configured but unused in 2.3. Its embedded etcd listens on 2379 (clients) and 2380 (peers).
MILVUS_ETCD_PORT=2379
MILVUS_ETCD_PEER_PORT=2380
declare -A MILVUS_PORTS=(
  [proxy]=$MILVUS_PORT [proxy-internal]=19529 [root-coord]=53100 [query-coord]=19531
  [query-node]=21123 [index-coord]=22930 [index-node]=21121 [data-coord]=13333
  [data-node]=21124 [etcd]=$MILVUS_ETCD_PORT
)
MILVUS_ALL_PORTS=("${MILVUS_PORTS[@]}" "$MILVUS_ETCD_PEER_PORT" "$MILVUS_HEALTH_PORT")

DB_USER=docpipe DB_PASS=docpipe DB_NAME=docpipe
AWS_ACCOUNT=123456789012
BUCKET=docpipe-local
QUEUE_PREFIX=docpipe-
# The bus the functions publish docpipe's events to (scripts/resources.py names it <queue prefix>events).
EVENT_BUS="${QUEUE_PREFIX}events"

VENV="$LOCAL/venv"
REQS="$ROOT/scripts/requirements-stack.txt"
PGBASE="$LOCAL/pg"
PGDATA="$PGBASE/data"
PGB_DIR="$LOCAL/pgbouncer"
MILVUS_DATA="$LOCAL/milvus"

# ───────────────────────────── process helpers ─────────────────────────────

# read_pid, pid_matches, wait_until, stop_pid, port_bound, tail_log: scripts/lib.sh

# require_ports_free SERVICE PORT...: before a start, fail clearly if a foreign process holds a port.
require_ports_free() {
  local svc="$1" p; shift
  for p in "$@"; do
    if port_bound "$p"; then
      wait_until 10 ports_free "$p" ||
        die "$svc: port $HOST:$p is held by another process ($(port_owner "$p")); stop it, or run '$0 down' if it is ours"
    fi
  done
}

# Children never inherit fd 9 (the stack lock): a server holding it would block every later up/down.
as_postgres() { runuser -u postgres -- "$@" 9>&-; }

# ───────────────────────────── discovery ─────────────────────────────

# The PostgreSQL bin dir: the one matching an existing cluster, else the newest installed.
find_pgbin() {
  local d best=""
  if [[ -s "$PGDATA/PG_VERSION" ]]; then
    d="/usr/lib/postgresql/$(cat "$PGDATA/PG_VERSION")/bin"
    [[ -x "$d/initdb" ]] && { echo "$d"; return 0; }
  fi
  while read -r d; do [[ -x "$d/initdb" ]] && best="$d"; done \
    < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V)
  [[ -n "$best" ]] && echo "$best"
}

find_pgbouncer() { command -v pgbouncer 2>/dev/null || { [[ -x /usr/sbin/pgbouncer ]] && echo /usr/sbin/pgbouncer; }; }

# Unix sockets have a ~107-byte path limit; a deep checkout falls back to a short dir in /tmp.
pg_socket_dir() {
  if (( ${#PGBASE} + 20 < 107 )); then echo "$PGBASE"
  else echo "/tmp/docpipe-pg-$(printf '%s' "$ROOT" | md5sum | cut -c1-10)"; fi
}

queue_url() { echo "http://$HOST:$MOTO_PORT/$AWS_ACCOUNT/$1"; }

# ───────────────────────────── up: phases ─────────────────────────────

phase_packages() {
  local pkgs=() py
  [[ -n "$(find_pgbouncer)" ]] || pkgs+=(pgbouncer)
  [[ -n "$(find_pgbin)" ]] || pkgs+=(postgresql)
  command -v curl >/dev/null || pkgs+=(curl)
  command -v ss >/dev/null || pkgs+=(iproute2)
  command -v runuser >/dev/null && command -v setsid >/dev/null && command -v flock >/dev/null || pkgs+=(util-linux)
  if [[ ! -x "$VENV/bin/python" ]]; then
    py="$(pick_python)"
    "$py" -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
  fi
  if (( ${#pkgs[@]} == 0 )); then
    log "apt: nothing to install ($(find_pgbouncer), $(find_pgbin))"
    return 0
  fi
  log "apt: installing ${pkgs[*]}"
  # Keep maintainer scripts from starting a system-wide pgbouncer/postgresql (it would take 6432).
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 0755 "$policy"; made_policy=1
  fi
  local rc=0
  {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${pkgs[@]}"
  } < /dev/null > "$LOCAL/apt.log" 2>&1 || rc=$?
  (( made_policy )) && rm -f "$policy"
  (( rc == 0 )) || { tail_log "$LOCAL/apt.log"; die "apt-get install ${pkgs[*]} failed (rc=$rc)"; }
  [[ -n "$(find_pgbouncer)" && -n "$(find_pgbin)" ]] || die "pgbouncer/postgresql still missing after apt-get"
}

phase_venv() {
  local stamp="$VENV/.stack-requirements" want
  want="$(sha256sum "$REQS" | cut -d' ' -f1)"
  if [[ -x "$VENV/bin/python" ]] && ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    warn "venv at $VENV is broken (its interpreter moved?): recreating"
    rm -rf "$VENV"
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    local py; py="$(pick_python)"
    log "creating venv with $py ($("$py" --version 2>&1))"
    "$py" -m venv "$VENV"
  fi
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
     "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ("moto", "boto3", "milvus", "flask")))' >/dev/null 2>&1 &&
     [[ -x "$VENV/bin/moto_server" && -x "$VENV/bin/milvus-server" ]]; then
    log "venv up to date ($(venv_versions))"
    return 0
  fi
  log "pip install -r scripts/requirements-stack.txt (log: .local/pip.log)"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQS" \
      < /dev/null > "$LOCAL/pip.log" 2>&1; then
    tail_log "$LOCAL/pip.log"; die "pip install failed"
  fi
  echo "$want" > "$stamp"
  log "venv ready ($(venv_versions))"
}

venv_versions() {
  "$VENV/bin/python" - <<'EOF' 2>/dev/null || echo "?"
from importlib.metadata import version
print(" ".join(f"{p}=={version(p)}" for p in ("moto", "boto3", "milvus")))
EOF
}

# Make sure user postgres can reach $1 (the repo may sit under a root-only directory).
ensure_postgres_can_reach() {
  local target="$1" d path=""
  as_postgres test -x "$target" 2>/dev/null && return 0
  IFS='/' read -r -a parts <<< "${target#/}"
  for d in "${parts[@]}"; do
    path="$path/$d"
    if ! as_postgres test -x "$path" 2>/dev/null; then
      chmod o+x "$path"
      log "chmod o+x $path (user postgres must traverse it to reach .local/pg)"
    fi
  done
}

phase_postgres() {
  PGBIN="$(find_pgbin)" || die "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
  if [[ -s "$PGDATA/PG_VERSION" && ! -x "/usr/lib/postgresql/$(cat "$PGDATA/PG_VERSION")/bin/initdb" ]]; then
    die "cluster $PGDATA is PostgreSQL $(cat "$PGDATA/PG_VERSION") but only $PGBIN is installed: remove .local/pg to start over"
  fi
  id postgres >/dev/null 2>&1 || die "user postgres does not exist (is the postgresql package installed?)"
  local sock; sock="$(pg_socket_dir)"
  mkdir -p "$PGBASE" "$sock"
  chown postgres:postgres "$PGBASE" "$sock"; chmod 0755 "$PGBASE" "$sock"
  ensure_postgres_can_reach "$PGBASE"
  touch "$LOCAL/postgres.log"; chown postgres:postgres "$LOCAL/postgres.log"

  if [[ ! -f "$PGDATA/global/pg_control" ]]; then
    [[ -e "$PGDATA" ]] && { warn "removing incomplete cluster dir $PGDATA (initdb never finished)"; rm -rf "$PGDATA"; }
    local pwfile="$PGBASE/.initdb-pw"
    ( umask 077; echo postgres > "$pwfile" ); chown postgres:postgres "$pwfile"
    log "initdb $PGDATA ($("$PGBIN/postgres" --version))"
    as_postgres "$PGBIN/initdb" -D "$PGDATA" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-local=trust --auth-host=scram-sha-256 --pwfile="$pwfile" \
      < /dev/null > "$LOCAL/initdb.log" 2>&1 || { rm -f "$pwfile"; tail_log "$LOCAL/initdb.log"; die "initdb failed"; }
    rm -f "$pwfile"
  fi

  # Our settings live in docpipe.conf, rewritten on every up and included from postgresql.conf.
  local esc_sock="${sock//\'/\'\'}"
  cat > "$PGDATA/docpipe.conf.tmp" <<EOF
# written by scripts/stack.sh up; edits are lost
listen_addresses = '$HOST'
port = $PG_PORT
unix_socket_directories = '$esc_sock'
max_connections = 200
password_encryption = scram-sha-256
# Durable commits, as RDS gives: the fault tests crash PostgreSQL and expect committed rows back.
synchronous_commit = on
shared_buffers = 128MB
log_timezone = 'UTC'
timezone = 'UTC'
log_min_duration_statement = -1
EOF
  chown postgres:postgres "$PGDATA/docpipe.conf.tmp"
  local conf_changed=0
  cmp -s "$PGDATA/docpipe.conf.tmp" "$PGDATA/docpipe.conf" || conf_changed=1
  mv -f "$PGDATA/docpipe.conf.tmp" "$PGDATA/docpipe.conf"
  grep -q "^include_if_exists = 'docpipe.conf'" "$PGDATA/postgresql.conf" ||
    echo "include_if_exists = 'docpipe.conf'" >> "$PGDATA/postgresql.conf"

  local pmpid; pmpid="$(read_pid "$PGDATA/postmaster.pid")"
  if pid_matches "$pmpid" "$PGDATA"; then
    if (( conf_changed )); then
      log "postgres: settings changed, restarting (pid $pmpid)"
      as_postgres "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w -t 60 stop >/dev/null
    else
      wait_until 60 "$PGBIN/pg_isready" -q -h "$HOST" -p "$PG_PORT" ||
        { tail_log "$LOCAL/postgres.log"; die "postgres pid $pmpid runs but does not answer on $PG_PORT"; }
      log "postgres already running (pid $pmpid)"
    fi
  fi
  pmpid="$(read_pid "$PGDATA/postmaster.pid")"
  if ! pid_matches "$pmpid" "$PGDATA"; then
    if [[ -f "$PGDATA/postmaster.pid" ]]; then
      log "postgres: removing stale postmaster.pid (pid ${pmpid:-?} is not our postmaster)"
      rm -f "$PGDATA/postmaster.pid"
    fi
    local lock="$sock/.s.PGSQL.$PG_PORT.lock"
    if [[ -f "$lock" ]] && ! pid_matches "$(read_pid "$lock")" "$PGDATA"; then rm -f "$lock" "$sock/.s.PGSQL.$PG_PORT"; fi
    require_ports_free postgres "$PG_PORT"
    log "starting postgres on $HOST:$PG_PORT"
    as_postgres "$PGBIN/pg_ctl" -D "$PGDATA" -l "$LOCAL/postgres.log" -w -t 90 start < /dev/null > /dev/null ||
      { tail_log "$LOCAL/postgres.log"; die "pg_ctl start failed"; }
    pmpid="$(read_pid "$PGDATA/postmaster.pid")"
  fi
  echo "$pmpid" > "$LOCAL/postgres.pid"

  # Role and database (idempotent). Superuser over the unix socket (local trust). CREATEROLE: the
  # credential-rotation test makes a login role of its own and changes its password.
  "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$PG_PORT" -U postgres -d postgres <<SQL >/dev/null
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_USER') THEN
    CREATE ROLE $DB_USER LOGIN CREATEDB CREATEROLE PASSWORD '$DB_PASS';
  ELSE
    ALTER ROLE $DB_USER LOGIN CREATEDB CREATEROLE PASSWORD '$DB_PASS';
  END IF;
END \$\$;
SELECT 'CREATE DATABASE $DB_NAME OWNER $DB_USER' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB_NAME')\gexec
SQL
  "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 "postgres://$DB_USER:$DB_PASS@$HOST:$PG_PORT/$DB_NAME" \
    -c 'select 1' >/dev/null || die "cannot log in as $DB_USER on $HOST:$PG_PORT"
  log "postgres ready: $("$PGBIN/psql" -X -qAt "postgres://$DB_USER:$DB_PASS@$HOST:$PG_PORT/$DB_NAME" -c 'show server_version') on $HOST:$PG_PORT (pid $pmpid)"
}

phase_pgbouncer() {
  local bin; bin="$(find_pgbouncer)" || die "pgbouncer not installed"
  PGBIN="${PGBIN:-$(find_pgbin)}"
  local ini="$PGB_DIR/pgbouncer.ini" pidfile="$PGB_DIR/pgbouncer.pid" logf="$LOCAL/pgbouncer.log"
  mkdir -p "$PGB_DIR"; chown postgres:postgres "$PGB_DIR"; chmod 0700 "$PGB_DIR"
  touch "$logf"; chown postgres:postgres "$logf"
  ensure_postgres_can_reach "$PGB_DIR"

  ( umask 077; printf '"%s" "%s"\n' "$DB_USER" "$DB_PASS" > "$PGB_DIR/userlist.txt" )
  cat > "$ini.tmp" <<EOF
; written by scripts/stack.sh up; edits are lost
[databases]
; any database (tests create their own) on the local cluster
* = host=$HOST port=$PG_PORT

[pgbouncer]
listen_addr = $HOST
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $PGB_DIR/userlist.txt
admin_users = $DB_USER
stats_users = $DB_USER
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
; PostgreSQL allows 200: keep pooled server connections of all test databases below that
max_user_connections = 150
server_idle_timeout = 60
# After PostgreSQL restarts, retry server logins within a second instead of the default 15 s.
server_login_retry = 1
ignore_startup_parameters = extra_float_digits,options
logfile = $logf
pidfile = $pidfile
EOF
  chown postgres:postgres "$PGB_DIR/userlist.txt" "$ini.tmp"
  local changed=0
  cmp -s "$ini.tmp" "$ini" || changed=1
  mv -f "$ini.tmp" "$ini"

  local pid; pid="$(read_pid "$pidfile")"
  if pid_matches "$pid" "$ini" && (( changed )); then
    log "pgbouncer: config changed, restarting (pid $pid)"
    stop_pid "$pid" "$ini" TERM 15
  fi
  pid="$(read_pid "$pidfile")"
  if pid_matches "$pid" "$ini"; then
    log "pgbouncer already running (pid $pid)"
    kill -HUP "$pid" 2>/dev/null || true   # reload userlist
  else
    [[ -f "$pidfile" ]] && { log "pgbouncer: removing stale pid file"; rm -f "$pidfile"; }
    require_ports_free pgbouncer "$PGB_PORT"
    log "starting pgbouncer on $HOST:$PGB_PORT"
    as_postgres "$bin" -d "$ini" < /dev/null >> "$logf" 2>&1 || { tail_log "$logf"; die "pgbouncer failed to start"; }
    wait_until 15 port_bound "$PGB_PORT" || { tail_log "$logf"; die "pgbouncer does not listen on $PGB_PORT"; }
    pid="$(read_pid "$pidfile")"
  fi
  echo "$pid" > "$LOCAL/pgbouncer.pid"

  # Verify: a query through the pooler, and CREATE DATABASE through it then a connection to the
  # new database through it (the wildcard entry), as the tests do.
  local url="postgres://$DB_USER:$DB_PASS@$HOST:$PGB_PORT"
  local probe="stack_probe_$$"
  pgb_select1() { PGCONNECT_TIMEOUT=5 "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 "$url/$DB_NAME" -c 'select 1' >/dev/null 2>&1; }
  # Right after PostgreSQL restarts, PgBouncer may still be waiting out a failed server login.
  wait_until 30 pgb_select1 ||
    { tail_log "$logf"; die "select 1 through pgbouncer failed"; }
  "$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 "$url/$DB_NAME" -c "CREATE DATABASE $probe" >/dev/null ||
    die "CREATE DATABASE through pgbouncer failed"
  local got
  got="$("$PGBIN/psql" -X -qAt -v ON_ERROR_STOP=1 "$url/$probe" -c 'select current_database()' 2>&1)" || true
  "$PGBIN/psql" -X -qAt "$url/pgbouncer" -c "KILL $probe" >/dev/null 2>&1 || true
  "$PGBIN/psql" -X -qAt -h "$(pg_socket_dir)" -p "$PG_PORT" -U postgres -d postgres \
    -c "DROP DATABASE IF EXISTS $probe WITH (FORCE)" >/dev/null || warn "could not drop $probe"
  [[ "$got" == "$probe" ]] || die "connecting to a new database through pgbouncer failed: $got"
  log "pgbouncer ready: $("$bin" --version 2>&1 | head -n1) on $HOST:$PGB_PORT (pid $pid); select 1 + CREATE DATABASE + connect via wildcard OK"
}

moto_ready() { curl -sf -o /dev/null --max-time 2 "http://$HOST:$MOTO_PORT/moto-api/"; }

MOTO_FRESH=0
phase_moto() {
  local pidfile="$LOCAL/moto.pid" pat="$VENV/bin/moto_server" pid
  pid="$(read_pid "$pidfile")"
  if pid_matches "$pid" "$pat"; then
    if wait_until 30 moto_ready; then
      log "moto already running (pid $pid)"
      return 0
    fi
    warn "moto pid $pid does not answer: restarting it"
    stop_pid "$pid" "$pat" TERM 10
  fi
  rm -f "$pidfile"
  require_ports_free moto "$MOTO_PORT"
  log "starting moto on $HOST:$MOTO_PORT"
  setsid "$VENV/bin/moto_server" -H "$HOST" -p "$MOTO_PORT" < /dev/null > "$LOCAL/moto.log" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$pidfile"
  local deadline=$(( $(date +%s) + 60 ))
  until moto_ready; do
    # Alive is enough here: until the forked shell has exec'd setsid, its command line is this
    # script's, and a busy machine (a build beside it) made that window long enough to be read.
    kill -0 "$pid" 2>/dev/null || { tail_log "$LOCAL/moto.log"; die "moto exited during start"; }
    (( $(date +%s) < deadline )) || { tail_log "$LOCAL/moto.log"; die "moto not ready after 60 s"; }
    sleep 0.2
  done
  MOTO_FRESH=1
  log "moto ready on $HOST:$MOTO_PORT (pid $pid)"
}

phase_resources() {
  local args=(--endpoint "http://$HOST:$MOTO_PORT" --region us-east-1 --bucket "$BUCKET" --queue-prefix "$QUEUE_PREFIX")
  # The delivery check puts a probe under uploads/ and consumes its event: do it only on a fresh
  # moto, before any dev runner can be polling the queue.
  # A dev runner already polling (scripts/dev-runner.sh) would take the probe's event: skip then.
  local runner; runner="$(read_pid "$LOCAL/dev-runner.pid")"
  if (( MOTO_FRESH )) && ! pid_matches "$runner" "docpipe dev"; then args+=(--verify); fi
  local got want
  got="$(AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
    "$VENV/bin/python" "$ROOT/scripts/resources.py" "${args[@]}" --format env 2> >(sed 's/^/    /' >&2))" ||
    die "scripts/resources.py failed"
  # `env` computes the URLs instead of asking moto: check that they are the real ones.
  want="$(cmd_env | grep -E '^export DOCPIPE_(BUCKET|EVENT_BUS|[A-Z]+_(QUEUE|DLQ)_URL)=' | sort)"
  got="$(sort <<< "$got")"
  [[ "$got" == "$want" ]] || die "resources.py and 'stack.sh env' disagree:"$'\n'"$got"$'\n'"vs"$'\n'"$want"
}

milvus_answers() {
  [[ "$(curl -sf --max-time 5 "http://$HOST:$MILVUS_PORT/v1/vector/collections")" == *'"code":200'* ]]
}
milvus_health() { curl -sf -o /dev/null --max-time 2 "http://$HOST:$MILVUS_HEALTH_PORT/healthz"; }
# A Milvus that answers /healthz and lists collections may still be half-alive: after a restart its
# proxy can keep a dead gRPC client to a data or query node ("empty grpc client: failed to connect").
# Only a real insert and a real search (which loads the collection) prove it serves.
milvus_rest() { curl -sf --max-time 20 -X POST "http://$HOST:$MILVUS_PORT/v1/vector/$1" -H 'content-type: application/json' -d "$2"; }
milvus_serves() {
  local c=docpipe_stack_probe out
  milvus_rest collections/drop "{\"collectionName\":\"$c\"}" >/dev/null 2>&1 || true
  out="$(milvus_rest collections/create "{\"collectionName\":\"$c\",\"dimension\":2}")" && [[ "$out" == *'"code":200'* ]] || return 1
  out="$(milvus_rest insert "{\"collectionName\":\"$c\",\"data\":[{\"vector\":[0.6,0.8]}]}")" && [[ "$out" == *'"code":200'* ]] || return 1
  out="$(milvus_rest search "{\"collectionName\":\"$c\",\"vector\":[0.6,0.8],\"limit\":1}")" && [[ "$out" == *'"code":200'* ]] || return 1
  milvus_rest collections/drop "{\"collectionName\":\"$c\"}" >/dev/null 2>&1 || true
}
MILVUS_WRAPPER_PAT="--data $MILVUS_DATA"
MILVUS_CORE_PAT="$MILVUS_DATA/bin/milvus run standalone"

# The venv's milvus-server, with one fix. Before it starts the server it test-binds every port
# without SO_REUSEADDR, so a port with TIME_WAIT sockets left (milvus's own health and gRPC
# traffic, for 60 s after a stop or crash) looks taken and it silently moves that component to
# the next port (9092, 19532, ...), while the server itself (Go, SO_REUSEADDR) could bind it
# fine. Here the test-bind uses SO_REUSEADDR like the server, and a port that is really taken (a
# listener) is an error instead of a silent move.
write_milvus_launcher() {
  cat > "$LOCAL/milvus-launch.py" <<'PY'
# written by scripts/stack.sh: milvus-server (pip package milvus==2.3.5) with strict port binding
import socket
import sys

import milvus


def try_bind_port(self, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        return sock
    except OSError:
        sock.close()
        return None


def resolve_port(self, port_start):
    sock = self.try_bind_port(port_start)
    if sock is None:
        sys.exit(f"milvus-launch: port {port_start} is taken by another process")
    return port_start, sock


milvus.MilvusServerConfig.try_bind_port = try_bind_port
milvus.MilvusServerConfig.resolve_port = resolve_port
sys.argv[0] = "milvus-server"
milvus.main()
PY
}

# Milvus's root coordinator listens on 53100, inside Linux's ephemeral range (32768-60999): any
# outgoing connection (a client retrying Milvus during an outage makes many) may take it as its
# source port, and the next start then finds it taken. Reserved ports are never handed out as
# source ports. Best effort: a container may not let us write the sysctl.
reserve_milvus_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports p have want
  [[ -w "$f" ]] || return 0
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range
  have="$(cat "$f")"; want="$have"
  for p in "${MILVUS_ALL_PORTS[@]}"; do
    (( p >= lo && p <= hi )) || continue
    [[ ",$have," == *",$p,"* ]] || want="${want:+$want,}$p"
  done
  [[ "$want" == "$have" ]] || { echo "$want" > "$f" 2>/dev/null && log "reserved Milvus's ports $want (no longer ephemeral source ports)"; } || true
}

# Settings beside the listen addresses. Growing segments (data not yet sealed and indexed, which
# is all of a small collection) are searched exactly rather than through Milvus 2.3's interim IVF
# index (nlist 128, nprobe 16): that index missed 20 % of the exact top 200 for queries mapped by
# e5-small's query adapter (dense recall@10 on the check questions 0.622 against 0.661 exact),
# and a sealed segment's HNSW index misses 1 % of them.
MILVUS_SETTINGS=(queryNode.segcore.interimIndex.enableIndex=false)

phase_milvus_start() {
  local pidfile="$LOCAL/milvus.pid" core_pidfile="$LOCAL/milvus-core.pid" pid core
  local settings_file="$LOCAL/milvus.settings"
  pid="$(read_pid "$pidfile")"; core="$(read_pid "$core_pidfile")"
  if pid_matches "$pid" "$MILVUS_WRAPPER_PAT" &&
     [[ "$(cat "$settings_file" 2>/dev/null)" != "${MILVUS_SETTINGS[*]}" ]]; then
    log "milvus: settings changed, restarting (pid $pid)"
    stop_milvus
    pid=""; core=""
  fi
  if pid_matches "$pid" "$MILVUS_WRAPPER_PAT"; then
    # Running, or still starting (an earlier up that failed later on): phase_milvus_wait adopts it.
    if pid_matches "$core" "$MILVUS_CORE_PAT"; then
      log "milvus already running (wrapper pid $pid, server pid $core)"
    else
      log "milvus wrapper already running (pid $pid): waiting for it below"
    fi
    return 0
  fi
  # A server whose wrapper is gone (killed with SIGTERM/SIGKILL) is stopped before a clean start.
  if pid_matches "$core" "$MILVUS_CORE_PAT"; then
    warn "milvus server pid $core runs without its wrapper: restarting it"
    stop_milvus
  fi
  rm -f "$pidfile" "$core_pidfile"
  reserve_milvus_ports
  require_ports_free milvus "${MILVUS_ALL_PORTS[@]}"
  local x=() c
  for c in rootCoord proxy queryCoord queryNode indexNode dataCoord dataNode; do
    x+=(--extra-config "$c.ip=$HOST")
  done
  for c in "${MILVUS_SETTINGS[@]}"; do
    x+=(--extra-config "$c")
  done
  printf '%s' "${MILVUS_SETTINGS[*]}" > "$settings_file"
  mkdir -p "$MILVUS_DATA"
  log "starting milvus (proxy $HOST:$MILVUS_PORT, health :$MILVUS_HEALTH_PORT)"
  write_milvus_launcher
  PYTHONUNBUFFERED=1 setsid "$VENV/bin/python" "$LOCAL/milvus-launch.py" --data "$MILVUS_DATA" \
    --proxy-port "${MILVUS_PORTS[proxy]}" --proxy-internal-port "${MILVUS_PORTS[proxy-internal]}" \
    --root-coord-port "${MILVUS_PORTS[root-coord]}" --query-coord-port "${MILVUS_PORTS[query-coord]}" \
    --query-node-port "${MILVUS_PORTS[query-node]}" --index-coord-port "${MILVUS_PORTS[index-coord]}" \
    --index-node-port "${MILVUS_PORTS[index-node]}" --data-coord-port "${MILVUS_PORTS[data-coord]}" \
    --data-node-port "${MILVUS_PORTS[data-node]}" --etcd-port "${MILVUS_PORTS[etcd]}" \
    "${x[@]}" < /dev/null > "$LOCAL/milvus.log" 2>&1 9>&- &
  echo $! > "$pidfile"
}

phase_milvus_wait() {
  local pidfile="$LOCAL/milvus.pid" core_pidfile="$LOCAL/milvus-core.pid" pid core="" deadline
  pid="$(read_pid "$pidfile")"
  deadline=$(( $(date +%s) + 240 ))
  until milvus_health; do
    kill -0 "$pid" 2>/dev/null ||   # alive is enough: see the moto start above
      { tail_log "$LOCAL/milvus.log"; tail_log "$MILVUS_DATA/logs/milvus-stderr.log"; die "milvus wrapper exited during start"; }
    (( $(date +%s) < deadline )) || { tail_log "$LOCAL/milvus.log"; die "milvus not healthy after 240 s"; }
    sleep 0.5
  done
  # The real server's pid: the wrapper prints "Process: N" once healthy; its only child otherwise.
  deadline=$(( $(date +%s) + 15 ))
  while :; do
    core="$(sed -n 's/^ *Process: *\([0-9][0-9]*\).*/\1/p' "$LOCAL/milvus.log" | tail -n1)"
    pid_matches "$core" "$MILVUS_CORE_PAT" && break
    core="$(ps -o pid= --ppid "$pid" 2>/dev/null | tr -d ' ' | head -n1)"
    pid_matches "$core" "$MILVUS_CORE_PAT" && break
    (( $(date +%s) < deadline )) || die "cannot find the milvus server process (wrapper pid $pid)"
    sleep 0.3
  done
  echo "$core" > "$core_pidfile"
  wait_until 30 port_bound "$MILVUS_PORT" || die "milvus healthy but $MILVUS_PORT not bound"
  # healthz can say OK while the coordinators still wait for a crashed run's etcd sessions to
  # expire: wait until the proxy answers a real request (RESTful v1, same port as gRPC).
  wait_until 120 milvus_answers ||
    { tail_log "$MILVUS_DATA/logs/milvus-stdout.log" 5; die "milvus healthy but /v1/vector/collections does not answer"; }
  local p
  for p in "$MILVUS_PORT" "$MILVUS_HEALTH_PORT"; do
    [[ "$(port_owner "$p")" == *"pid=$core,"* ]] || die "port $p is not served by milvus pid $core: $(port_owner "$p")"
  done
  if ! wait_until 90 milvus_serves; then
    [[ -z "${MILVUS_RESTARTED:-}" ]] || die "milvus answers but cannot insert and search, even after a restart"
    warn "milvus answers but cannot insert and search (half-alive): restarting it"
    MILVUS_RESTARTED=1
    stop_milvus
    phase_milvus_start
    phase_milvus_wait
    return
  fi
  log "milvus ready on $HOST:$MILVUS_PORT (wrapper pid $pid, server pid $core): a real insert and search answered"
}

phase_pdfium() {
  bash "$ROOT/scripts/fetch-pdfium.sh"
}

phase_ocr() {
  bash "$ROOT/scripts/fetch-ocr.sh"
}

# ───────────────────────────── stop ─────────────────────────────

stop_milvus() {
  local pidfile="$LOCAL/milvus.pid" core_pidfile="$LOCAL/milvus-core.pid" pid core
  pid="$(read_pid "$pidfile")"; core="$(read_pid "$core_pidfile")"
  # If up was interrupted before milvus-core.pid was written, the server is the wrapper's child.
  if ! pid_matches "$core" "$MILVUS_CORE_PAT" && pid_matches "$pid" "$MILVUS_WRAPPER_PAT"; then
    core="$(ps -o pid= --ppid "$pid" 2>/dev/null | tr -d ' ' | head -n1)"
  fi
  # SIGTERM lets the server shut its components down; then SIGINT makes the wrapper exit (a
  # SIGTERM would kill the wrapper and leave the server holding the ports).
  stop_pid "$core" "$MILVUS_CORE_PAT" TERM 30
  stop_pid "$pid" "$MILVUS_WRAPPER_PAT" INT 10
  rm -f "$pidfile" "$core_pidfile"
}

stop_moto() {
  stop_pid "$(read_pid "$LOCAL/moto.pid")" "$VENV/bin/moto_server" TERM 10
  rm -f "$LOCAL/moto.pid"
}

stop_pgbouncer() {
  local pid; pid="$(read_pid "$PGB_DIR/pgbouncer.pid")"
  [[ -n "$pid" ]] || pid="$(read_pid "$LOCAL/pgbouncer.pid")"
  stop_pid "$pid" "$PGB_DIR/pgbouncer.ini" TERM 15   # SIGTERM: immediate shutdown
  rm -f "$LOCAL/pgbouncer.pid" "$PGB_DIR/pgbouncer.pid"
}

stop_postgres() {
  local pid bin; pid="$(read_pid "$PGDATA/postmaster.pid")"
  [[ -n "$pid" ]] || pid="$(read_pid "$LOCAL/postgres.pid")"
  if pid_matches "$pid" "$PGDATA"; then
    bin="$(find_pgbin || true)"
    if [[ -n "$bin" ]] && as_postgres "$bin/pg_ctl" -D "$PGDATA" -m fast -w -t 60 stop < /dev/null > /dev/null 2>&1; then :
    else stop_pid "$pid" "$PGDATA" INT 30   # SIGINT = fast shutdown
    fi
  fi
  rm -f "$LOCAL/postgres.pid"
}

# ───────────────────────────── commands ─────────────────────────────

take_lock() {
  mkdir -p "$LOCAL"; chmod 0755 "$LOCAL"
  exec 9> "$LOCAL/.stack.lock"
  flock -w 900 9 || die "another stack.sh up/down holds $LOCAL/.stack.lock"
}

require_root() { [[ "$(id -u)" == 0 ]] || die "'$1' must run as root (it uses apt-get and runuser)"; }

cmd_up() {
  require_root up
  take_lock
  local t0; t0="$(now)"
  log "up: $ROOT"
  phase_begin packages;  phase_packages;        phase_end
  phase_begin venv;      phase_venv;            phase_end
  phase_begin milvus-start; phase_milvus_start; phase_end   # starts in the background; awaited below
  phase_begin pdfium;    phase_pdfium;          phase_end
  phase_begin ocr;       phase_ocr;             phase_end
  phase_begin e5;        bash "$ROOT/scripts/fetch-e5.sh"; phase_end
  phase_begin postgres;  phase_postgres;        phase_end
  phase_begin pgbouncer; phase_pgbouncer;       phase_end
  phase_begin moto;      phase_moto;            phase_end
  phase_begin resources; phase_resources;       phase_end
  phase_begin milvus-ready; phase_milvus_wait;  phase_end
  echo
  echo "docpipe local stack is up ($(elapsed "$t0")s total)"
  printf '  %s\n' "${PHASE_REPORT[@]}"
  write_times
  echo
  cmd_status || true
  echo
  echo "  eval \"\$(bash scripts/stack.sh env)\"    # DATABASE_URL, AWS_*, DOCPIPE_*, MILVUS_URL"
}

# DOCPIPE_TIMES=FILE: each phase as a line "<phase> <seconds>", for the demo's table of where its time
# went.
write_times() {
  [[ -n "${DOCPIPE_TIMES:-}" ]] || return 0
  local line
  for line in "${PHASE_REPORT[@]}"; do
    read -r name secs <<<"$line"
    echo "stack.$name ${secs%s}" >> "$DOCPIPE_TIMES"
  done
}

# What `cargo build` needs before it can start (the e5 engine's C source), so that scripts/up.sh can
# build while the rest installs and the services start.
cmd_prepare() {
  require_root prepare
  take_lock
  phase_begin packages;  phase_packages;        phase_end
  phase_begin venv;      phase_venv;            phase_end
  phase_begin e5;        bash "$ROOT/scripts/fetch-e5.sh"; phase_end
  write_times
}

cmd_down() {
  require_root down
  take_lock
  local t0; t0="$(now)"
  local svc t
  for svc in milvus moto pgbouncer postgres; do
    t="$(now)"
    "stop_$svc"
    log "stopped $svc ($(elapsed "$t")s)"
  done
  local ports=("$PG_PORT" "$PGB_PORT" "$MOTO_PORT" "${MILVUS_ALL_PORTS[@]}") p left=()
  if ! wait_until 30 ports_free "${ports[@]}"; then
    for p in "${ports[@]}"; do port_bound "$p" && left+=("$p:$(port_owner "$p")"); done
    die "ports still bound after down (not started by this stack?): ${left[*]}"
  fi
  log "down in $(elapsed "$t0")s; ports ${ports[*]} free"
}

cmd_env() {
  local q
  _e() { printf 'export %s=%q\n' "$1" "$2"; }
  _e DATABASE_URL "postgres://$DB_USER:$DB_PASS@$HOST:$PGB_PORT/$DB_NAME"
  _e DATABASE_DIRECT_URL "postgres://$DB_USER:$DB_PASS@$HOST:$PG_PORT/$DB_NAME"
  _e PGBOUNCER_ADMIN_URL "postgres://$DB_USER:$DB_PASS@$HOST:$PGB_PORT/pgbouncer"
  _e AWS_ENDPOINT_URL "http://$HOST:$MOTO_PORT"
  _e AWS_REGION us-east-1
  _e AWS_DEFAULT_REGION us-east-1
  _e AWS_ACCESS_KEY_ID test
  _e AWS_SECRET_ACCESS_KEY test
  _e DOCPIPE_BUCKET "$BUCKET"
  for q in STORE:store-events PARSE:parse INDEX:index; do
    _e "DOCPIPE_${q%%:*}_QUEUE_URL" "$(queue_url "$QUEUE_PREFIX${q#*:}")"
    _e "DOCPIPE_${q%%:*}_DLQ_URL" "$(queue_url "$QUEUE_PREFIX${q#*:}-dlq")"
  done
  _e DOCPIPE_EVENT_BUS "$EVENT_BUS"
  _e MILVUS_URL "http://$HOST:$MILVUS_PORT"
  _e DOCPIPE_API_URL "http://$HOST:8080"
  _e DOCPIPE_PDFIUM_LIB "$LOCAL/lib/libpdfium.so"
  _e DOCPIPE_OCR_DIR "$LOCAL/ocr"
  # The offline multilingual embedder is the local default (scripts/fetch-e5.sh puts it there).
  _e DOCPIPE_EMBEDDER e5-small
  _e DOCPIPE_E5_MODEL "$LOCAL/e5/e5-small-q4.bin"
  # Named after the model: vectors of another embedder must never share its collection.
  _e DOCPIPE_MILVUS_COLLECTION docpipe_chunks_e5_small
}

# status: one line per service; exit 1 if any is down.
cmd_status() {
  local down=0 pid core
  _line() { printf '  %-10s %-5s %-17s %s\n' "$@"; }
  _line SERVICE STATE ADDRESS DETAIL

  pid="$(read_pid "$PGDATA/postmaster.pid")"
  if pid_matches "$pid" "$PGDATA" && port_bound "$PG_PORT"; then _line postgres up "$HOST:$PG_PORT" "pid $pid"
  else _line postgres down "$HOST:$PG_PORT" ""; down=1; fi

  pid="$(read_pid "$PGB_DIR/pgbouncer.pid")"
  if pid_matches "$pid" "$PGB_DIR/pgbouncer.ini" && port_bound "$PGB_PORT"; then _line pgbouncer up "$HOST:$PGB_PORT" "pid $pid"
  else _line pgbouncer down "$HOST:$PGB_PORT" ""; down=1; fi

  pid="$(read_pid "$LOCAL/moto.pid")"
  if pid_matches "$pid" "$VENV/bin/moto_server" && moto_ready; then _line moto up "$HOST:$MOTO_PORT" "pid $pid"
  else _line moto down "$HOST:$MOTO_PORT" ""; down=1; fi

  pid="$(read_pid "$LOCAL/milvus.pid")"; core="$(read_pid "$LOCAL/milvus-core.pid")"
  if pid_matches "$pid" "$MILVUS_WRAPPER_PAT" && pid_matches "$core" "$MILVUS_CORE_PAT" && milvus_health; then
    _line milvus up "$HOST:$MILVUS_PORT" "pid $core (wrapper $pid), health :$MILVUS_HEALTH_PORT"
  else _line milvus down "$HOST:$MILVUS_PORT" ""; down=1; fi

  if [[ -f "$LOCAL/lib/libpdfium.so" ]]; then _line pdfium ok "-" "$LOCAL/lib/libpdfium.so"
  else _line pdfium miss "-" "run: bash scripts/fetch-pdfium.sh"; fi
  if [[ -f "$LOCAL/ocr/manifest.json" ]]; then _line ocr ok "-" "$LOCAL/ocr"
  else _line ocr miss "-" "run: bash scripts/fetch-ocr.sh"; fi
  return $down
}

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; }

# Fault injection (the fault tests use these): stop a service gracefully, kill it abruptly, or
# freeze and thaw it (SIGSTOP/SIGCONT: requests hang, state survives). `up` brings back what is down.
service_pid() {
  case "$1" in
    postgres)  read_pid "$PGDATA/postmaster.pid" ;;
    pgbouncer) local p; p="$(read_pid "$PGB_DIR/pgbouncer.pid")"; [[ -n "$p" ]] && echo "$p" || read_pid "$LOCAL/pgbouncer.pid" ;;
    moto)      read_pid "$LOCAL/moto.pid" ;;
    milvus)    read_pid "$LOCAL/milvus-core.pid" ;;
    *) die "unknown service '$1' (postgres, pgbouncer, moto, milvus)" ;;
  esac
}
cmd_fault() {
  local action="$1" svc="${2:-}" pid bin
  [[ -n "$svc" ]] || die "usage: stack.sh $action postgres|pgbouncer|moto|milvus"
  pid="$(service_pid "$svc")"
  case "$action" in
    stop) take_lock; "stop_$svc" ;;
    kill)
      if [[ "$svc" == postgres ]]; then
        bin="$(find_pgbin)"
        as_postgres "$bin/pg_ctl" -D "$PGDATA" -m immediate -w -t 30 stop < /dev/null > /dev/null 2>&1 || true
        wait_until 30 ports_free "$PG_PORT" || true
      elif [[ "$svc" == milvus ]]; then
        take_lock; stop_milvus   # Milvus must shut down its ports cleanly to come back
      else
        [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true
        [[ "$svc" == pgbouncer ]] && { wait_until 30 ports_free "$PGB_PORT" || true; }
      fi ;;
    pause)  [[ -n "$pid" ]] && kill -STOP "$pid" ;;
    resume) [[ -n "$pid" ]] && kill -CONT "$pid" ;;
  esac
  log "$action $svc${pid:+ (pid $pid)}"
}

case "${1:-}" in
  up)     cmd_up ;;
  prepare) cmd_prepare ;;
  stop|kill|pause|resume) cmd_fault "$1" "${2:-}" ;;
  down)   cmd_down ;;
  env)    cmd_env ;;
  status) cmd_status ;;
  restart) bash "$0" down && exec bash "$0" up ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
