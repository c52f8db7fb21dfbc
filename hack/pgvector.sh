#!/usr/bin/env bash
# hack/pgvector.sh — a real PostgreSQL 17 + pgvector on 127.0.0.1 for tests and demos.
#
#   hack/pgvector.sh start    build (once) and start the server, print its URL
#   hack/pgvector.sh stop     stop the server this script started (nothing else)
#   hack/pgvector.sh status   say whether it runs; exit 0 when it does
#   hack/pgvector.sh url      print the URL (DATABASE_URL when set)
#   hack/pgvector.sh instance start|stop|kill|url NAME
#                             a second, throw-away server NAME from the same root
#                             for fault tests (test/faults): stop is a clean
#                             shutdown, kill a SIGKILL of its postmaster. It never
#                             touches the main server. Needs root (no DATABASE_URL
#                             equivalent: a fault test must own the server it kills).
#
# When DATABASE_URL is set it is used as is (any PostgreSQL with pgvector >= 0.7)
# and nothing is started or stopped. Otherwise, as root, a Debian trixie root with
# postgresql-17 and postgresql-17-pgvector is built once into the cache dir
# (debootstrap, ~35 s cold) and the server runs from it via chroot as user postgres.
#
# Durability: the server is durable by default (fsync, full_page_writes and
# synchronous_commit on): an acknowledged write survives a crash. Tests and
# benchmarks may ask for the unsafe fast settings with ENGRAM_PG_DURABILITY=fast
# (fsync, full_page_writes and synchronous_commit off: a crash loses the last
# writes and may corrupt the cluster). The mode applies to the whole server
# and is switched with a reload when a later start asks for the other one.
#
# Cache: ${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}/postgres
set -euo pipefail

CACHE="${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}"
PGHOME="$CACHE/postgres"
ROOTFS="$PGHOME/rootfs"
STATE="$PGHOME/state"          # port, password: written by start, read by url/stop
LOCK="$PGHOME/lock"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PGBIN=/usr/lib/postgresql/17/bin
DATADIR=/var/lib/engram/data   # inside the root
DBNAME=engram
PGROOT_SCRIPT=hack/pgvector.sh # its name in the files it writes, and:
PGROOT_LOG=pgvector            # in its messages

# log, die, alive, clear_stale_pid, port_free, take_lock, mount_proc,
# umount_proc, durability_conf (shared with hack/citus.sh), found next to
# this file even when it runs through a symlink.
# shellcheck source=hack/pgroot.sh
source "$(dirname "$(readlink -f "$0")")/pgroot.sh"

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    cat >&2 <<'EOF'
pgvector: error: no DATABASE_URL is set and this is not root, so no local
PostgreSQL can be built here (it needs debootstrap and chroot).

Do one of:
  * run as root (the script builds a Debian trixie root with postgresql-17 and
    postgresql-17-pgvector once, into ~/.cache/engram), or
  * start any PostgreSQL with pgvector >= 0.7 yourself and export its URL, e.g.
      docker run -d -p 127.0.0.1:5432:5432 -e POSTGRES_PASSWORD=pw pgvector/pgvector:pg17
      export DATABASE_URL=postgres://postgres:pw@127.0.0.1:5432/postgres?sslmode=disable
EOF
    exit 1
  fi
}

in_root() { chroot --userspec=postgres:postgres "$ROOTFS" "$@"; }

build_root() {
  [ -f "$ROOTFS/.engram-ready" ] && return 0
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  log "building a Debian trixie root with postgresql-17 + pgvector in $ROOTFS (once)"
  rm -rf "$ROOTFS"
  mkdir -p "$ROOTFS"
  debootstrap --variant=minbase trixie "$ROOTFS" "$MIRROR" >"$PGHOME/debootstrap.log" 2>&1 ||
    die "debootstrap failed, see $PGHOME/debootstrap.log"
  # Package scripts must not try to start services inside the root.
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
  chmod +x "$ROOTFS/usr/sbin/policy-rc.d"
  chroot "$ROOTFS" /bin/sh -c 'export DEBIAN_FRONTEND=noninteractive;
    apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-17 postgresql-17-pgvector' \
    >"$PGHOME/apt.log" 2>&1 || die "installing postgresql-17 in the root failed, see $PGHOME/apt.log"
  chroot "$ROOTFS" apt-get clean >/dev/null 2>&1 || true
  touch "$ROOTFS/.engram-ready"
}

init_cluster() {
  [ -f "$ROOTFS$DATADIR/PG_VERSION" ] && return 0
  log "initdb"
  mkdir -p "$ROOTFS$DATADIR" "$ROOTFS/run/postgresql"
  chroot "$ROOTFS" chown -R postgres:postgres /var/lib/engram /run/postgresql
  chmod 700 "$ROOTFS$DATADIR"
  local pw
  pw=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
  printf '%s\n' "$pw" >"$ROOTFS/tmp/engram-pw"
  chroot "$ROOTFS" chown postgres:postgres /tmp/engram-pw
  in_root "$PGBIN/initdb" -D "$DATADIR" -U postgres --pwfile=/tmp/engram-pw \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$PGHOME/initdb.log" 2>&1 ||
    die "initdb failed, see $PGHOME/initdb.log"
  rm -f "$ROOTFS/tmp/engram-pw"
  printf '%s\n' "$pw" >"$PGHOME/password"
  chmod 600 "$PGHOME/password"
  cat >>"$ROOTFS$DATADIR/postgresql.conf" <<'EOF'
# engram test server: loopback only, sized for a 2-core dev machine
listen_addresses = '127.0.0.1'
unix_socket_directories = '/run/postgresql'
max_connections = 300
shared_buffers = 512MB
work_mem = 16MB
maintenance_work_mem = 256MB
dynamic_shared_memory_type = mmap
log_min_messages = warning
EOF
}

running() {
  [ -f "$ROOTFS$DATADIR/postmaster.pid" ] || return 1
  local pid
  pid=$(head -1 "$ROOTFS$DATADIR/postmaster.pid")
  alive "$pid"
}

# pick_port [AVOID...] prints a free port, never one of AVOID (ports a start
# just failed to bind).
pick_port() {
  local p
  if [ -f "$STATE/port" ]; then
    p=$(cat "$STATE/port")
    [[ " $* " == *" $p "* ]] || ! port_free "$p" || { echo "$p"; return; }
  fi
  pick_instance_port "$@"
}

# pick_instance_port [AVOID...] is pick_port for a throw-away instance: never
# the main server's port, even while that server is down.
pick_instance_port() {
  local p
  for p in $(seq 54329 54429); do
    [[ " $* " == *" $p "* ]] && continue
    grep -qx "$p" "$STATE/port" 2>/dev/null && continue
    # A port another instance recorded is its own even while it is down:
    # the fault suite restarts its instance on the same port.
    grep -qx "$p" "$STATE"/instance-*.port 2>/dev/null && continue
    port_free "$p" && { echo "$p"; return; }
  done
  die "no free port in 54329..54429 on 127.0.0.1"
}

# start_on_a_port DIR LOG PORTFILE PICKER starts the server of data dir DIR (paths
# inside the root) on the port written in PORTFILE. A port nobody answers on
# can still be bound: 54329..54429 lies in Linux's ephemeral port range, so
# any outgoing connection on this machine (hundreds during make test) may
# hold it as its local port, and postgres then fails with "could not bind".
# That failure alone is retried, on another port from PICKER, up to five
# times.
start_on_a_port() {
  local dir="$1" logf="$2" portfile="$3" picker="$4" port before tried=""
  for _ in 1 2 3 4 5; do
    port=$(cat "$portfile")
    before=$(stat -c %s "$ROOTFS$logf" 2>/dev/null || echo 0)
    in_root "$PGBIN/pg_ctl" -D "$dir" -l "$logf" -w -t 60 -o "-p $port" start >/dev/null 9>&- && return 0
    tail -c +"$((before + 1))" "$ROOTFS$logf" 2>/dev/null | grep -q "could not bind" || return 1
    tried="$tried $port"
    log "port $port is bound by another socket (an outgoing connection's local port); trying another"
    "$picker" $tried >"$portfile"
  done
  return 1
}

local_url() {
  printf 'postgres://postgres:%s@127.0.0.1:%s/%s?sslmode=disable\n' \
    "$(cat "$PGHOME/password")" "$(cat "$STATE/port")" "$DBNAME"
}

psql_root() { in_root "$PGBIN/psql" -h /run/postgresql -p "$(cat "$STATE/port")" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }

say_durability() {
  if [ "$1" = fast ]; then
    log "durability: FAST (fsync, full_page_writes, synchronous_commit off) as ENGRAM_PG_DURABILITY=fast asks: for tests only, a crash loses acknowledged writes"
  else
    log "durability: durable (fsync, full_page_writes, synchronous_commit on)"
  fi
}

cmd_start() {
  if [ -n "${DATABASE_URL:-}" ]; then
    echo "$DATABASE_URL"
    return 0
  fi
  need_root
  local mode="${ENGRAM_PG_DURABILITY:-durable}"
  # Fast path without the lock: already running in the asked mode.
  if [ -f "$STATE/port" ] && [ -f "$PGHOME/password" ] && running &&
    [ "$(cat "$STATE/durability" 2>/dev/null)" = "$mode" ]; then
    say_durability "$mode"
    local_url
    return 0
  fi
  mkdir -p "$PGHOME" "$STATE"
  take_lock
  build_root
  init_cluster
  # /proc lets postgres read its own limits; /dev/shm is not needed (mmap DSM).
  mount_proc
  local changed=0
  durability_conf "$mode" "$DATADIR" && changed=1
  echo "$mode" >"$STATE/durability"
  say_durability "$mode"
  if running; then
    if [ "$changed" = 1 ]; then
      in_root "$PGBIN/pg_ctl" -D "$DATADIR" reload >/dev/null 9>&-
      log "reloaded the running server with the new durability settings"
    fi
    local_url
    return 0
  fi
  clear_stale_pid "$ROOTFS$DATADIR/postmaster.pid"
  local port
  port=$(pick_port)
  echo "$port" >"$STATE/port"
  mkdir -p "$ROOTFS/run/postgresql"
  chroot "$ROOTFS" chown postgres:postgres /run/postgresql
  start_on_a_port "$DATADIR" /var/lib/engram/server.log "$STATE/port" pick_port ||
    die "postgres did not start, see $ROOTFS/var/lib/engram/server.log"
  port=$(cat "$STATE/port")
  touch "$STATE/started-by-us"
  psql_root -d postgres -c "SELECT 1 FROM pg_database WHERE datname='$DBNAME'" | grep -q 1 ||
    psql_root -d postgres -c "CREATE DATABASE $DBNAME"
  psql_root -d "$DBNAME" -c "CREATE EXTENSION IF NOT EXISTS vector"
  log "PostgreSQL $(psql_root -d "$DBNAME" -c 'SHOW server_version') with pgvector $(psql_root -d "$DBNAME" -c "SELECT extversion FROM pg_extension WHERE extname='vector'") on 127.0.0.1:$port"
  local_url
}

cmd_stop() {
  stop_locked DATABASE_URL || return 0
  if [ -f "$STATE/started-by-us" ] && running; then
    in_root "$PGBIN/pg_ctl" -D "$DATADIR" -m fast -w -t 60 stop >/dev/null
    log "stopped"
  else
    log "not running"
  fi
  rm -f "$STATE/started-by-us"
  # Fault-test instances a test did not get to stop.
  local d
  for d in "$ROOTFS"/var/lib/engram/instances/*/; do
    [ -f "$d/postmaster.pid" ] || continue
    in_root "$PGBIN/pg_ctl" -D "${d#"$ROOTFS"}" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
  done
  umount_proc
}

cmd_status() {
  if [ -n "${DATABASE_URL:-}" ]; then
    echo "external (DATABASE_URL)"
    return 0
  fi
  if [ -d "$ROOTFS" ] && running; then
    echo "running on 127.0.0.1:$(cat "$STATE/port")"
  else
    echo "stopped"
    return 1
  fi
}

cmd_url() {
  if [ -n "${DATABASE_URL:-}" ]; then
    echo "$DATABASE_URL"
    return 0
  fi
  running || die "not running: run 'hack/pgvector.sh start' first"
  local_url
}

# A throw-away instance for fault tests: its own data dir and port and the
# password of the main server. Durable by default like the main server; the
# fault suite starts it with ENGRAM_PG_DURABILITY=fast, so synchronous_commit
# is OFF as its server default and a test proves that Engram's sessions ask
# for synchronous commit themselves (fsync off is harmless there: the tests
# kill PostgreSQL, never the machine, so the OS page cache survives).
inst_dir() { echo "/var/lib/engram/instances/$1"; }

inst_running() {
  local pidfile="$ROOTFS$(inst_dir "$1")/postmaster.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(head -1 "$pidfile")
  alive "$pid"
}

# wait_old_backends waits (30 s at most) until no process works in data dir
# $1 any more. After a kill -9 of the postmaster its backends exit on their
# own, each when it next checks for the postmaster (an idle one at once, a
# busy one after its statement); until the last is gone the shared memory
# is still attached and a new postmaster refuses to start ("pre-existing
# shared memory block ... is still in use"). Backends chdir to the data dir.
wait_old_backends() {
  local dir i p left
  dir=$(readlink -f "$1")
  for i in $(seq 1 300); do
    left=0
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/cwd" 2>/dev/null)" = "$dir" ] && alive "${p#/proc/}" && { left=1; break; }
    done
    [ "$left" -eq 0 ] && return 0
    sleep 0.1
  done
  log "processes of the previous server still work in $dir after 30 s; starting anyway"
}

inst_url() {
  printf 'postgres://postgres:%s@127.0.0.1:%s/postgres?sslmode=disable\n' \
    "$(cat "$PGHOME/password")" "$(cat "$STATE/instance-$1.port")"
}

cmd_instance() {
  local action="${1:-}" name="${2:-}"
  [[ "$name" =~ ^[a-z0-9-]+$ ]] || die "usage: $0 instance start|stop|kill|url NAME (NAME: [a-z0-9-]+)"
  need_root
  local dir
  dir=$(inst_dir "$name")
  mkdir -p "$PGHOME" "$STATE"
  take_lock
  case "$action" in
    start)
      build_root
      init_cluster # for the password file
      mount_proc
      if [ ! -f "$ROOTFS$dir/PG_VERSION" ]; then
        mkdir -p "$ROOTFS$(dirname "$dir")"
        chroot "$ROOTFS" chown postgres:postgres "$(dirname "$dir")"
        cp "$PGHOME/password" "$ROOTFS/tmp/engram-pw-$name"
        chroot "$ROOTFS" chown postgres:postgres "/tmp/engram-pw-$name"
        in_root "$PGBIN/initdb" -D "$dir" -U postgres --pwfile="/tmp/engram-pw-$name" \
          --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$PGHOME/initdb-$name.log" 2>&1 ||
          die "initdb of instance $name failed, see $PGHOME/initdb-$name.log"
        rm -f "$ROOTFS/tmp/engram-pw-$name"
        cat >>"$ROOTFS$dir/postgresql.conf" <<'EOF2'
# engram fault-test instance (hack/pgvector.sh instance): loopback only
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 100
shared_buffers = 128MB
dynamic_shared_memory_type = mmap
log_min_messages = warning
EOF2
      fi
      # Durable unless the test asks for the fast settings, as for the main
      # server (the fault suite does: see test/faults).
      durability_conf "${ENGRAM_PG_DURABILITY:-durable}" "$dir" || true
      if ! inst_running "$name"; then
        clear_stale_pid "$ROOTFS$dir/postmaster.pid"
        wait_old_backends "$ROOTFS$dir"
        local port=""
        # The port it had, so a restarted instance answers at the same URL;
        # else a free one no other instance has recorded (pick_port).
        if [ -f "$STATE/instance-$name.port" ] && port_free "$(cat "$STATE/instance-$name.port")"; then
          port=$(cat "$STATE/instance-$name.port")
        else
          rm -f "$STATE/instance-$name.port"
          port=$(pick_instance_port)
        fi
        echo "$port" >"$STATE/instance-$name.port"
        start_on_a_port "$dir" "$dir.log" "$STATE/instance-$name.port" pick_instance_port ||
          die "instance $name did not start, see $ROOTFS$dir.log"
        port=$(cat "$STATE/instance-$name.port")
        PGPASSWORD="$(cat "$PGHOME/password")" in_root "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres \
          -qAt -v ON_ERROR_STOP=1 -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null
      fi
      inst_url "$name"
      ;;
    stop)
      if inst_running "$name"; then
        in_root "$PGBIN/pg_ctl" -D "$dir" -m fast -w -t 60 stop >/dev/null
      fi
      ;;
    kill)
      inst_running "$name" || die "instance $name is not running"
      kill -9 "$(head -1 "$ROOTFS$dir/postmaster.pid")"
      ;;
    url)
      inst_running "$name" || die "instance $name is not running"
      inst_url "$name"
      ;;
    *) die "usage: $0 instance start|stop|kill|url NAME" ;;
  esac
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) cmd_url ;;
  instance) shift; cmd_instance "$@" ;;
  *) echo "usage: $0 start|stop|status|url|instance" >&2; exit 2 ;;
esac
