#!/usr/bin/env bash
# hack/envtest.sh — build the real kube-apiserver and etcd for envtest from Go
# modules (module tools/), once, and print the directory to use as
# KUBEBUILDER_ASSETS.
#
# setup-envtest downloads prebuilt binaries; where that is impossible (no
# internet but the Go module proxy) this builds the same upstream code. The
# output dir is keyed by a hash of tools/, so a version bump rebuilds and an
# unchanged tree reuses the cache (~6.5 min on 2 cores with an empty Go build
# cache, instant warm).
#
# Cache: ${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}/envtest/<key>
set -euo pipefail

# Like DATABASE_URL for PostgreSQL: binaries the user already has (for
# example from `setup-envtest use -p path`) are used as they are.
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "envtest: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no kube-apiserver and etcd; unset it to build them here" >&2
  exit 1
fi

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="$ROOT/tools"
CACHE="${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}"

KEY=$(cat "$TOOLS/go.mod" "$TOOLS/go.sum" "$TOOLS"/*/main.go | sha256sum | cut -c1-16)
K8S_VERSION=$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$TOOLS/go.mod")
ETCD_VERSION=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2; exit}' "$TOOLS/go.mod")
OUT="$CACHE/envtest/$K8S_VERSION-$KEY"

if [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/etcd" ]; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE/envtest"
exec 9>"$CACHE/envtest/lock"
flock 9
if [ ! -x "$OUT/kube-apiserver" ] || [ ! -x "$OUT/etcd" ]; then
  echo "envtest: building kube-apiserver $K8S_VERSION and etcd $ETCD_VERSION from Go modules into $OUT (once, a few minutes)" >&2
  tmp="$OUT.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  v=k8s.io/component-base/version
  ldflags="-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
  # One invocation for both: the go command then links one while it still
  # compiles the other (etcd ignores the -X of a package it does not link).
  # CGO_ENABLED=0 -trimpath match the Makefile's GOBUILD, so the Kubernetes
  # packages the manager already compiled come from the build cache.
  (cd "$TOOLS" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" ./kube-apiserver ./etcd)
  rm -rf "$OUT"
  mv "$tmp" "$OUT"
fi
echo "$OUT"
