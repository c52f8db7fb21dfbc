#!/usr/bin/env bash
# hack/s3server.sh — build the S3-compatible test server (module
# tools/s3server: gofakes3 on a bolt file) once, and print the path of the
# binary. The export tests (internal/jobrun) start one per test on
# 127.0.0.1 with it; `make test` passes the path as ENGRAM_S3SERVER.
#
# A store the user already has is used instead: set ENGRAM_TEST_S3_ENDPOINT
# (with ENGRAM_TEST_S3_BUCKET, ENGRAM_TEST_S3_ACCESS_KEY_ID and
# ENGRAM_TEST_S3_SECRET_ACCESS_KEY); this script then builds nothing and
# prints nothing.
#
# Cache: ${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}/s3server/<key>
# (key = hash of the module's go.mod, go.sum and sources; ~20 s cold).
set -euo pipefail

if [ -n "${ENGRAM_TEST_S3_ENDPOINT:-}" ]; then
  echo "s3server: using ENGRAM_TEST_S3_ENDPOINT=$ENGRAM_TEST_S3_ENDPOINT" >&2
  exit 0
fi

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MOD="$ROOT/tools/s3server"
CACHE="${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}"
KEY=$(cat "$MOD/go.mod" "$MOD/go.sum" "$MOD"/*.go | sha256sum | cut -c1-16)
OUT="$CACHE/s3server/$KEY/s3server"

if [ ! -x "$OUT" ]; then
  mkdir -p "$CACHE/s3server"
  exec 9>"$CACHE/s3server/lock"
  flock 9
  if [ ! -x "$OUT" ]; then
    echo "s3server: building the S3-compatible test server into $OUT (once)" >&2
    mkdir -p "$(dirname "$OUT")"
    (cd "$MOD" && CGO_ENABLED=0 go build -trimpath -o "$OUT.tmp" .)
    mv "$OUT.tmp" "$OUT"
  fi
fi
echo "$OUT"
