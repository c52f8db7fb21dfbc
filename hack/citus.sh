#!/usr/bin/env bash
# hack/citus.sh — a real Citus 13.2.2 cluster (a coordinator and two workers,
# PostgreSQL 17 + pgvector) on 127.0.0.1 for tests and demos.
#
#   hack/citus.sh start    build (once) and start the three nodes, register the
#                          workers, print the coordinator's admin URL
#   hack/citus.sh stop     stop the nodes this script started (by PID, nothing else)
#   hack/citus.sh status   say whether it runs; exit 0 when it does
#   hack/citus.sh url      print the coordinator's URL (CITUS_URL when set)
#   hack/citus.sh workers  print the workers' admin URLs, one a line (the
#                          isolation tests connect to a worker directly)
#
# When CITUS_URL is set it is used as is (a Citus >= 12 coordinator whose
# database has the citus and vector extensions and its workers registered)
# and nothing is built, started or stopped.
#
# Otherwise, as root: the Debian trixie root that hack/pgvector.sh builds is
# copied once (never changed: its server keeps running) into the cache dir,
# the build dependencies are installed into the copy, and Citus is built from
# ../shared/deps/citus-13.2.2.tar.gz (or CITUS_SOURCE=FILE; with neither, the
# upstream tag's tarball is downloaded). Its sha256 is checked in every case.
# The build takes ~3.5 min of make -j2 on an idle 2-core machine.
#
# Authentication: clients (tests, tenants) log in with passwords
# (scram-sha-256) over TCP. Citus opens its own connections from the
# coordinator to the workers as the role that runs the query, so the workers
# trust those: every node has a client certificate signed by a CA made here,
# and a worker maps any certificate of that CA to any role (cert auth, map
# citus). A tenant that connects to a worker directly has only its password.
#
# Durability: durable by default (fsync, full_page_writes, synchronous_commit
# on); ENGRAM_PG_DURABILITY=fast turns them off on every node (tests only).
#
# Cache: ${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}/citus
set -euo pipefail

CACHE="${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}"
HERE="$(dirname "$(readlink -f "$0")")"  # the script's own directory, through a symlink too
PGROOT="$CACHE/postgres/rootfs" # hack/pgvector.sh's root, copied, never changed
CHOME="$CACHE/citus"
ROOTFS="$CHOME/rootfs"
STATE="$CHOME/state"
LOCK="$CHOME/lock"
PGBIN=/usr/lib/postgresql/17/bin
BASE=/var/lib/engram-citus # inside the root: one data dir per node
NODES=(coordinator worker1 worker2)
DBNAME=engram
CITUS_VERSION=13.2.2
CITUS_SHA256=c8fc76dc8294636a52b1a0dd75a20d8b4a36937df6443e30ca84d8d0464a6bb9
CITUS_UPSTREAM="https://github.com/citusdata/citus/archive/refs/tags/v$CITUS_VERSION.tar.gz"
PGROOT_SCRIPT=hack/citus.sh PGROOT_LOG=citus

# log, die, alive, clear_stale_pid, port_free, take_lock, mount_proc,
# umount_proc, durability_conf (shared with hack/pgvector.sh).
# shellcheck source=hack/pgroot.sh
source "$HERE/pgroot.sh"

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    cat >&2 <<'EOF'
citus: error: no CITUS_URL is set and this is not root, so no local Citus
cluster can be built here (it needs chroot).

Do one of:
  * run as root (the script builds Citus once into a copy of hack/pgvector.sh's
    Debian root, in ~/.cache/engram/citus), or
  * start a Citus 13 coordinator with workers and pgvector yourself, create the
    citus and vector extensions in its database, register the workers, and
    export CITUS_URL=postgres://postgres:pw@127.0.0.1:5432/engram?sslmode=disable
EOF
    exit 1
  fi
}

# HOME=/var/lib/postgresql: the coordinator's libpq reads its client
# certificate from $HOME/.postgresql (with /root it fails to register nodes).
in_root() { chroot --userspec=postgres:postgres "$ROOTFS" env HOME=/var/lib/postgresql "$@"; }

# citus_source prints a path (outside the root) of the checked tarball.
citus_source() {
  local src="${CITUS_SOURCE:-}"
  if [ -z "$src" ] && [ -f "$HERE/../../shared/deps/citus-$CITUS_VERSION.tar.gz" ]; then
    src="$HERE/../../shared/deps/citus-$CITUS_VERSION.tar.gz"
  fi
  if [ -z "$src" ]; then
    src="$CHOME/citus-$CITUS_VERSION.tar.gz"
    if [ ! -f "$src" ]; then
      log "downloading Citus $CITUS_VERSION from $CITUS_UPSTREAM"
      curl -fsSL -o "$src.part" "$CITUS_UPSTREAM" || die "download failed; set CITUS_SOURCE=FILE (citus-$CITUS_VERSION.tar.gz)"
      mv "$src.part" "$src"
    fi
  fi
  [ -f "$src" ] || die "CITUS_SOURCE $src is not a file"
  local sum
  sum=$(sha256sum "$src" | cut -d' ' -f1)
  [ "$sum" = "$CITUS_SHA256" ] || die "$src has sha256 $sum, want $CITUS_SHA256 (Citus $CITUS_VERSION)"
  echo "$src"
}

# build_root copies hack/pgvector.sh's root (without its data and /proc),
# installs the build dependencies into the copy and builds Citus there once.
build_root() {
  [ -f "$ROOTFS/.engram-citus-ready" ] && return 0
  local src
  src=$(citus_source)
  if [ ! -f "$ROOTFS/.engram-copied" ]; then
    if [ ! -f "$PGROOT/.engram-ready" ]; then
      log "building hack/pgvector.sh's root first (its server is stopped again if it was not running)"
      local was=0
      "$HERE/pgvector.sh" status >/dev/null 2>&1 && was=1
      DATABASE_URL= "$HERE/pgvector.sh" start >/dev/null
      [ "$was" = 1 ] || DATABASE_URL= "$HERE/pgvector.sh" stop >/dev/null
    fi
    log "copying the Debian root of hack/pgvector.sh into $ROOTFS (once)"
    rm -rf "$ROOTFS"
    mkdir -p "$ROOTFS"
    tar -C "$PGROOT" --one-file-system --exclude=./proc --exclude=./var/lib/engram -cf - . | tar -C "$ROOTFS" -xf -
    mkdir -p "$ROOTFS/proc"
    touch "$ROOTFS/.engram-copied"
  fi
  log "installing Citus's build dependencies into the copy"
  chroot "$ROOTFS" /bin/sh -c 'export DEBIAN_FRONTEND=noninteractive;
    apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-17 postgresql-17-pgvector \
      postgresql-server-dev-17 libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev \
      libicu-dev autoconf flex bison make gcc openssl ca-certificates' \
    >"$CHOME/apt.log" 2>&1 || die "installing the build dependencies failed, see $CHOME/apt.log"
  chroot "$ROOTFS" apt-get clean >/dev/null 2>&1 || true
  log "building Citus $CITUS_VERSION (make -j2, ~3.5 min on an idle 2-core machine; log: $CHOME/build.log)"
  # An interrupted build goes on where it stopped (make is incremental).
  # with_llvm=no: no LLVM bitcode for JIT inlining, which would double the
  # build for nothing a test measures.
  local tree="/usr/src/citus-$CITUS_VERSION"
  if [ ! -f "$ROOTFS$tree/.engram-extracted" ]; then
    rm -rf "$ROOTFS$tree"
    mkdir -p "$ROOTFS/usr/src"
    tar -C "$ROOTFS/usr/src" -xzf "$src"
    touch "$ROOTFS$tree/.engram-extracted"
  fi
  chroot "$ROOTFS" /bin/sh -c "cd $tree && { [ -f config.status ] || ./configure PG_CONFIG=$PGBIN/pg_config; } &&
    make -j2 with_llvm=no && make install with_llvm=no" \
    >"$CHOME/build.log" 2>&1 || die "building Citus failed, see $CHOME/build.log"
  touch "$ROOTFS/.engram-citus-ready"
  log "Citus $CITUS_VERSION installed in the root"
}

# pick_port prints a free port for node $1: the one it had, else the first
# free one of 54439..54539 that no other node of this cluster has taken.
# Ports a start just failed to bind (AVOID...) are never picked again.
pick_port() {
  local node="$1" p
  shift
  if [ -f "$STATE/port-$node" ]; then
    p=$(cat "$STATE/port-$node")
    [[ " $* " == *" $p "* ]] || ! port_free "$p" || { echo "$p"; return; }
  fi
  for p in $(seq 54439 54539); do
    [[ " $* " == *" $p "* ]] && continue
    grep -qx "$p" "$STATE"/port-* 2>/dev/null && continue
    port_free "$p" && { echo "$p"; return; }
  done
  die "no free port in 54439..54539 on 127.0.0.1"
}

node_dir() { echo "$BASE/$1"; }

node_running() {
  local pidfile="$ROOTFS$(node_dir "$1")/postmaster.pid"
  [ -f "$pidfile" ] && alive "$(head -1 "$pidfile")"
}

# make_certs writes a CA, a server certificate per node and the one client
# certificate (CN citus-node) the nodes present to each other.
make_certs() {
  local ca="$ROOTFS$BASE/ca"
  [ -f "$ca/ca.crt" ] && return 0
  mkdir -p "$ca" "$ROOTFS/var/lib/postgresql/.postgresql"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=engram-citus-test-ca" \
    -keyout "$ca/ca.key" -out "$ca/ca.crt" >/dev/null 2>&1 || die "openssl: making the CA failed"
  sign() { # sign CN OUTPREFIX
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$2.key" -out "$2.csr" >/dev/null 2>&1 &&
      openssl x509 -req -in "$2.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial -days 3650 \
        -out "$2.crt" >/dev/null 2>&1 || die "openssl: signing $1 failed"
    rm -f "$2.csr"
  }
  sign 127.0.0.1 "$ca/server"
  sign citus-node "$ROOTFS/var/lib/postgresql/.postgresql/postgresql"
  cp "$ca/ca.crt" "$ROOTFS/var/lib/postgresql/.postgresql/root.crt"
  chmod 600 "$ca"/*.key "$ROOTFS"/var/lib/postgresql/.postgresql/postgresql.key
  chroot "$ROOTFS" chown -R postgres:postgres "$BASE/ca" /var/lib/postgresql/.postgresql
}

# init_node runs initdb for node $1 and writes its configuration once.
init_node() {
  local node="$1" dir
  dir=$(node_dir "$node")
  [ -f "$ROOTFS$dir/PG_VERSION" ] && return 0
  log "initdb $node"
  mkdir -p "$ROOTFS$dir" "$ROOTFS/run/postgresql"
  chroot "$ROOTFS" chown -R postgres:postgres "$BASE" /run/postgresql
  chmod 700 "$ROOTFS$dir"
  cp "$CHOME/password" "$ROOTFS/tmp/engram-citus-pw"
  chroot "$ROOTFS" chown postgres:postgres /tmp/engram-citus-pw
  in_root "$PGBIN/initdb" -D "$dir" -U postgres --pwfile=/tmp/engram-citus-pw \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$CHOME/initdb-$node.log" 2>&1 ||
    die "initdb of $node failed, see $CHOME/initdb-$node.log"
  rm -f "$ROOTFS/tmp/engram-citus-pw"
  for f in server.crt server.key; do cp "$ROOTFS$BASE/ca/$f" "$ROOTFS$dir/$f"; done
  cp "$ROOTFS$BASE/ca/ca.crt" "$ROOTFS$dir/ca.crt"
  chmod 600 "$ROOTFS$dir/server.key"
  chroot "$ROOTFS" chown postgres:postgres "$dir/server.crt" "$dir/server.key" "$dir/ca.crt"
  cat >>"$ROOTFS$dir/postgresql.conf" <<EOF2
# engram citus test node ($node, hack/citus.sh): loopback only
listen_addresses = '127.0.0.1'
unix_socket_directories = '/run/postgresql'
shared_preload_libraries = 'citus'
max_connections = 400
shared_buffers = 256MB
work_mem = 16MB
maintenance_work_mem = 128MB
dynamic_shared_memory_type = mmap
# schema moves copy with logical replication; every test database runs a
# Citus maintenance daemon (a background worker) on every node
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_worker_processes = 256
max_logical_replication_workers = 32
citus.max_background_task_executors_per_node = 4
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
log_min_messages = warning
EOF2
  # Nodes trust each other's certificate for any role (Citus connects as the
  # role that runs the query); everyone else logs in with a password.
  cat >"$ROOTFS$dir/pg_hba.conf" <<'EOF2'
# written by hack/citus.sh
local   all  all                 trust
hostssl all  all  127.0.0.1/32   cert map=citus
host    all  all  127.0.0.1/32   scram-sha-256
EOF2
  # PostgreSQL 16+: "all" maps the certificate's CN to any role.
  printf '# written by hack/citus.sh\ncitus  citus-node  all\n' >"$ROOTFS$dir/pg_ident.conf"
}

psql_node() { # psql_node NODE DB ARGS...
  local node="$1" db="$2"
  shift 2
  in_root env PGOPTIONS='-c client_min_messages=warning' \
    "$PGBIN/psql" -h /run/postgresql -p "$(cat "$STATE/port-$node")" -U postgres -d "$db" -v ON_ERROR_STOP=1 -qAt "$@"
}

url_of() { # url_of NODE
  printf 'postgres://postgres:%s@127.0.0.1:%s/%s?sslmode=disable\n' \
    "$(cat "$CHOME/password")" "$(cat "$STATE/port-$1")" "$DBNAME"
}

start_node() {
  local node="$1" dir
  dir=$(node_dir "$node")
  local pidfile="$ROOTFS$dir/postmaster.pid"
  clear_stale_pid "$pidfile"
  local port before tried=""
  port=$(pick_port "$node")
  # A port nobody answers on can still be bound: 54439..54539 lies in Linux's
  # ephemeral range, so an outgoing connection may hold it as its local port
  # and postgres fails with "could not bind". That failure alone is retried
  # on another port, up to five times.
  for _ in 1 2 3 4 5; do
    echo "$port" >"$STATE/port-$node"
    before=$(stat -c %s "$ROOTFS$dir.log" 2>/dev/null || echo 0)
    in_root "$PGBIN/pg_ctl" -D "$dir" -l "$dir.log" -w -t 120 -o "-p $port" start >/dev/null 9>&- && break
    tail -c +"$((before + 1))" "$ROOTFS$dir.log" 2>/dev/null | grep -q "could not bind" ||
      die "$node did not start, see $ROOTFS$dir.log"
    tried="$tried $port"
    log "port $port of $node is bound by another socket; trying another"
    rm -f "$STATE/port-$node"
    port=$(pick_port "$node" $tried)
  done
  alive "$(head -1 "$pidfile" 2>/dev/null)" || die "$node did not start, see $ROOTFS$dir.log"
  head -1 "$pidfile" >"$STATE/pid-$node"
}

# setup_database creates the engram database with the extensions on every
# node and registers the coordinator and the workers (idempotent).
setup_database() {
  local node
  for node in "${NODES[@]}"; do
    psql_node "$node" postgres -c "SELECT 1 FROM pg_database WHERE datname='$DBNAME'" | grep -q 1 ||
      psql_node "$node" postgres -c "CREATE DATABASE $DBNAME" >/dev/null
    psql_node "$node" "$DBNAME" -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null
  done
  psql_node coordinator "$DBNAME" -c "SELECT citus_set_coordinator_host('127.0.0.1', $(cat "$STATE/port-coordinator"))" >/dev/null
  for node in worker1 worker2; do
    psql_node coordinator "$DBNAME" -c "SELECT citus_add_node('127.0.0.1', $(cat "$STATE/port-$node"))" >/dev/null
  done
  psql_node coordinator "$DBNAME" -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null
}

cmd_start() {
  if [ -n "${CITUS_URL:-}" ]; then
    echo "$CITUS_URL"
    return 0
  fi
  need_root
  local mode="${ENGRAM_PG_DURABILITY:-durable}" node
  mkdir -p "$CHOME" "$STATE"
  take_lock
  build_root
  [ -f "$CHOME/password" ] || {
    head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24 >"$CHOME/password"
    chmod 600 "$CHOME/password"
  }
  make_certs
  mount_proc
  mkdir -p "$ROOTFS/run/postgresql"
  chroot "$ROOTFS" chown postgres:postgres /run/postgresql
  local started=0
  for node in "${NODES[@]}"; do
    init_node "$node"
    local changed=0
    durability_conf "$mode" "$(node_dir "$node")" && changed=1
    if node_running "$node"; then
      [ "$changed" = 1 ] && in_root "$PGBIN/pg_ctl" -D "$(node_dir "$node")" reload >/dev/null 9>&-
    else
      start_node "$node"
      started=1
    fi
  done
  echo "$mode" >"$STATE/durability"
  if [ "$started" = 1 ] || [ ! -f "$STATE/registered" ]; then
    # A node that restarted on another port is registered again.
    setup_database
    touch "$STATE/registered"
  fi
  if [ "$mode" = fast ]; then
    log "durability: FAST (fsync, full_page_writes, synchronous_commit off) as ENGRAM_PG_DURABILITY=fast asks: for tests only"
  else
    log "durability: durable (fsync, full_page_writes, synchronous_commit on)"
  fi
  log "Citus $(psql_node coordinator "$DBNAME" -c "SELECT extversion FROM pg_extension WHERE extname='citus'") coordinator on 127.0.0.1:$(cat "$STATE/port-coordinator"), workers on 127.0.0.1:$(cat "$STATE/port-worker1") and :$(cat "$STATE/port-worker2")"
  url_of coordinator
}

cmd_stop() {
  stop_locked CITUS_URL || return 0
  local node pid
  for node in "${NODES[@]}"; do
    pid=$(cat "$STATE/pid-$node" 2>/dev/null || true)
    # By PID: only the postmaster this script started, if it still runs.
    if [ -n "$pid" ] && alive "$pid" && [ "$(head -1 "$ROOTFS$(node_dir "$node")/postmaster.pid" 2>/dev/null)" = "$pid" ]; then
      kill -INT "$pid" # fast shutdown
      local i
      for i in $(seq 1 600); do alive "$pid" || break; sleep 0.1; done
      alive "$pid" && die "$node (pid $pid) did not stop within 60 s"
      log "stopped $node"
    fi
    rm -f "$STATE/pid-$node"
  done
  rm -f "$STATE/registered"
  umount_proc
}

cmd_status() {
  if [ -n "${CITUS_URL:-}" ]; then
    echo "external (CITUS_URL)"
    return 0
  fi
  local node ok=0
  for node in "${NODES[@]}"; do
    if [ -d "$ROOTFS" ] && node_running "$node"; then
      echo "$node: running on 127.0.0.1:$(cat "$STATE/port-$node")"
    else
      echo "$node: stopped"
      ok=1
    fi
  done
  return $ok
}

cmd_url() {
  if [ -n "${CITUS_URL:-}" ]; then
    echo "$CITUS_URL"
    return 0
  fi
  node_running coordinator || die "not running: run 'hack/citus.sh start' first"
  url_of coordinator
}

cmd_workers() {
  if [ -n "${CITUS_URL:-}" ]; then
    die "CITUS_URL is set: the workers are those of its pg_dist_node"
  fi
  node_running worker1 && node_running worker2 || die "not running: run 'hack/citus.sh start' first"
  url_of worker1
  url_of worker2
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) cmd_url ;;
  workers) cmd_workers ;;
  build)
    need_root
    mkdir -p "$CHOME" "$STATE"
    take_lock
    build_root
    ;;
  *) echo "usage: $0 start|stop|status|url|workers|build" >&2; exit 2 ;;
esac
