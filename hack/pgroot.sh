# shellcheck shell=bash
# hack/pgroot.sh — sourced (never run) by hack/pgvector.sh and hack/citus.sh:
# what both need to run PostgreSQL servers from a Debian root via chroot
# under a lock file, and the durability settings file they write.
#
# The sourcing script sets PGROOT_SCRIPT (its name in the files it writes,
# e.g. hack/pgvector.sh), PGROOT_LOG (the prefix of its messages, e.g.
# pgvector), ROOTFS (the root), STATE (its state dir) and LOCK (its lock
# file).

log() { printf '%s: %s\n' "$PGROOT_LOG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PGROOT_LOG" "$*" >&2; exit 1; }

# alive: the process exists and is not a zombie (a killed postmaster is
# re-parented to PID 1, which in some sandboxes never reaps it).
alive() {
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# clear_stale_pid removes the postmaster.pid of a postmaster that is dead or
# a zombie. PostgreSQL removes a stale file itself, but kill(pid, 0) succeeds
# on a zombie, so it would wait for a postmaster that cannot run any more.
clear_stale_pid() {
  [ -f "$1" ] || return 0
  alive "$(head -1 "$1")" || rm -f "$1"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# take_lock takes the script's lock on fd 9 and holds it until the script
# exits (the servers it starts get 9>&-, so they do not hold it). A lock
# that cannot be opened or taken ends the script: nothing runs unlocked.
take_lock() {
  exec 9>"$LOCK" || die "cannot open the lock file $LOCK"
  flock 9 || die "cannot take the lock $LOCK"
}

# stop_locked starts a stop: it returns 1 (nothing to stop, said so) when
# the variable named $1 holds a server's URL (nothing was started here) or
# nothing was ever started ($STATE), else it takes the lock and returns 0.
# Called as `stop_locked VAR || return 0`, where set -e does not hold:
# take_lock dies by itself when it cannot lock, so that is never taken for
# nothing to stop.
stop_locked() {
  if [ -n "${!1:-}" ]; then
    log "$1 is set: nothing was started here, nothing to stop"
    return 1
  fi
  [ -d "$STATE" ] || { log "not started"; return 1; }
  take_lock
}

# mount_proc mounts /proc in the root (postgres reads its own limits there).
mount_proc() { mountpoint -q "$ROOTFS/proc" || mount -t proc proc "$ROOTFS/proc"; }

umount_proc() {
  if mountpoint -q "$ROOTFS/proc"; then umount "$ROOTFS/proc" || umount -l "$ROOTFS/proc"; fi
}

# durability_conf writes the settings of mode $1 (durable|fast) into the
# file the postgresql.conf of data dir $2 (a path inside the root) includes
# last, so they win over anything above them (clusters made by earlier
# versions of hack/pgvector.sh had fast settings inline). It returns 1 when
# the file already held them (nothing to reload).
durability_conf() {
  local dir="$2"
  local conf="$ROOTFS$dir/postgresql.conf" inc="$ROOTFS$dir/engram-durability.conf" want
  grep -q "^include_if_exists = 'engram-durability.conf'" "$conf" ||
    printf "include_if_exists = 'engram-durability.conf'\n" >>"$conf"
  case "$1" in
    durable) want="# written by $PGROOT_SCRIPT: durable (the default)"$'\nfsync = on\nfull_page_writes = on\nsynchronous_commit = on' ;;
    fast) want="# written by $PGROOT_SCRIPT: ENGRAM_PG_DURABILITY=fast, for tests only: a crash loses acknowledged writes"$'\nfsync = off\nfull_page_writes = off\nsynchronous_commit = off' ;;
    *) die "ENGRAM_PG_DURABILITY must be durable or fast, not '$1'" ;;
  esac
  [ -f "$inc" ] && [ "$(cat "$inc")" = "$want" ] && return 1
  printf '%s\n' "$want" >"$inc"
  chroot "$ROOTFS" chown postgres:postgres "$dir/engram-durability.conf"
  return 0
}
