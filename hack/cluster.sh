#!/usr/bin/env bash
# hack/cluster.sh — a real single-node Kubernetes on this machine, no Docker:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy (iptables), containerd + runc, the CNI bridge plugin, and
# kube-router's NetworkPolicy controller.
#
#   hack/cluster.sh build           build the binaries once into the cache, print their dir
#   hack/cluster.sh up [--fresh]    start the node (building first), print the admin kubeconfig;
#                                   --fresh forgets the state of earlier runs (etcd, images)
#   hack/cluster.sh down [--purge]  stop every process by PID and undo every host change;
#                                   --purge also deletes the node's state
#   hack/cluster.sh status          what runs; exit 0 up, 1 down and clean, 2 anything of
#                                   ours left (a process, bridge, chain, set, mount, cgroup,
#                                   sysctl or path) while down
#   hack/cluster.sh kubeconfig      print the admin kubeconfig's path
#   hack/cluster.sh load TAR...     import image tarballs (docker-load or OCI) into the node
#   hack/cluster.sh forward PORT    expose 127.0.0.1:PORT to Pods at NODE_IP:PORT (e.g.
#                                   PostgreSQL); prints NODE_IP:PORT
#
# A user's own cluster wins, the way DATABASE_URL does for hack/pgvector.sh:
# with KUBECONFIG set, `up` prints it and starts nothing, and `down` stops
# nothing. Needs root (it creates a bridge, iptables rules and cgroups).
#
# Built from Go modules (cached, never downloaded as binaries):
#   kube-apiserver, etcd                     hack/envtest.sh (module tools/)
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl
#                                            module tools/, key = its go.mod, go.sum, mains
#   containerd, ctr, containerd-shim-runc-v2 go install @CONTAINERD_VERSION
#   kube-router                              go install @KUBE_ROUTER_VERSION
#   the sandbox (pause) image                hack/node/pause + hack/image static
# From Debian (installed when missing): runc, containernetworking-plugins,
# iptables, ipset, conntrack, socat.
#
# Network: the node owns bridge engram0 (NODE_IP/24, the pod network) and the
# service range; the API server and kubelet listen on NODE_IP, everything
# else on 127.0.0.1 or unix sockets under the run dir. Guard chains drop
# traffic from Pods to anything off the node, traffic from outside to the
# pod and service ranges, and Pods' connections to the host other than the
# API server, the kubelet and the ports of `forward`.
#
# Dirs: ${ENGRAM_CACHE:-~/.cache/engram}/node holds the binaries and, in
# run/, the node's state, configs, logs and PID files. Paths the kubelet and
# containerd cannot be told to move (/var/lib/kubelet, /var/log/pods,
# /var/log/containers, /run/containerd, /run/netns, /var/lib/cni,
# /opt/cni, /etc/cni) are removed by down when up created them.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${ENGRAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/engram}"
NODE_HOME="$CACHE/node"
RUN="$NODE_HOME/run"

CONTAINERD_VERSION=v2.4.2
KUBE_ROUTER_VERSION=v2.1.0

BRIDGE=engram0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/24
KUBE_SVC_IP=10.96.0.1
NODE_NAME=engram-node
CGROUP=engram-node          # the kubelet's cgroupRoot, in every hierarchy
PAUSE_IMAGE=localhost/engram/pause:1
API_PORT=6443               # on NODE_IP
KUBELET_PORT=10250          # on NODE_IP
PROXY_HEALTHZ_PORT=10256    # on 127.0.0.1
PROXY_METRICS_PORT=10249    # on 127.0.0.1

# Fixed host paths the node may create (removed by down when it did).
HOST_PATHS=(/var/lib/kubelet /var/log/pods /var/log/containers /run/containerd /run/netns /var/lib/cni /opt/cni /etc/cni /usr/libexec/kubernetes)
# Every process of the node, in start order; down stops them in reverse.
PROCS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy kube-router)

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

need_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  die "the node needs root (a bridge, iptables rules, cgroups, mounts). Use your own cluster instead:
  export KUBECONFIG=/path/to/kubeconfig   (kind, k3d, a real one): the suites and the demo use it as it is"
}

# user_cluster: a KUBECONFIG of the user's own means no node here.
user_cluster() { [ -n "${KUBECONFIG:-}" ]; }

# ---------------------------------------------------------------- binaries

k8s_version() { awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$ROOT/tools/go.mod"; }

k8s_bin_dir() {
  local key
  key=$(cat "$ROOT/tools/go.mod" "$ROOT/tools/go.sum" "$ROOT"/tools/{kubelet,kube-controller-manager,kube-scheduler,kube-proxy,kubectl}/main.go "$ROOT"/tools/internal/component/*.go | sha256sum | cut -c1-16)
  echo "$NODE_HOME/k8s/$(k8s_version)-$key"
}

CTRD_DIR="$NODE_HOME/containerd/$CONTAINERD_VERSION"
ROUTER_DIR="$NODE_HOME/kube-router/$KUBE_ROUTER_VERSION"

build_k8s() {
  local out tmp v ver
  out=$(k8s_bin_dir)
  [ -x "$out/kubectl" ] && return 0
  ver=$(k8s_version)
  log "building kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl $ver from Go modules into $out (once; ~18 min with an empty Go build cache on 2 cores)"
  tmp="$out.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  v=k8s.io/component-base/version
  # The flags of hack/envtest.sh, so the packages kube-apiserver shares
  # with these come from the Go build cache.
  (cd "$ROOT/tools" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X $v.gitVersion=$ver -X $v.gitMajor=1 -X $v.gitMinor=$(echo "$ver" | cut -d. -f2) -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z" \
    -o "$tmp/" ./kubelet ./kube-controller-manager ./kube-scheduler ./kube-proxy ./kubectl)
  rm -rf "$out" && mv "$tmp" "$out"
}

# go_install_into DIR LDFLAGS TAGS PKG@VERSION...: a module's own main
# packages, built with the versions its go.mod pins (checked against the
# Go checksum database), into DIR.
go_install_into() {
  local dir=$1 ldflags=$2 tags=$3
  shift 3
  local tmp="$dir.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -tags "$tags" -ldflags "$ldflags" "$@"
  rm -rf "$dir" && mv "$tmp" "$dir"
}

build_containerd() {
  [ -x "$CTRD_DIR/containerd-shim-runc-v2" ] && return 0
  log "building containerd $CONTAINERD_VERSION from Go modules into $CTRD_DIR (once)"
  local m=github.com/containerd/containerd/v2
  go_install_into "$CTRD_DIR" "-s -w -X $m/version.Version=$CONTAINERD_VERSION" "no_btrfs no_devmapper no_zfs" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/ctr@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

build_router() {
  [ -x "$ROUTER_DIR/kube-router" ] && return 0
  log "building kube-router $KUBE_ROUTER_VERSION from Go modules into $ROUTER_DIR (once)"
  local m=github.com/cloudnativelabs/kube-router/v2
  go_install_into "$ROUTER_DIR" "-s -w -X $m/pkg/version.Version=$KUBE_ROUTER_VERSION" "" "$m/cmd/kube-router@$KUBE_ROUTER_VERSION"
}

# pause_tar: the sandbox image, keyed by its source.
pause_tar() { echo "$NODE_HOME/images/pause-$(sha256sum "$ROOT/hack/node/pause/main.go" | cut -c1-16).tar"; }

build_pause() {
  local tar tmp
  tar=$(pause_tar)
  [ -f "$tar" ] && return 0
  log "building the sandbox image $PAUSE_IMAGE"
  mkdir -p "$(dirname "$tar")"
  tmp=$(mktemp -d)
  (cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$tmp/pause" ./hack/node/pause)
  (cd "$ROOT/hack/image" && go run . static --binary "$tmp/pause" --tag "$PAUSE_IMAGE" --user 65535:65535 --out "$tar.tmp")
  mv "$tar.tmp" "$tar"
  rm -rf "$tmp"
}

cmd_build() {
  mkdir -p "$NODE_HOME"
  exec 8>"$NODE_HOME/build.lock"
  flock 8
  ENVTEST=$("$ROOT/hack/envtest.sh")
  build_k8s
  build_containerd
  build_router
  build_pause
  k8s_bin_dir
}

# ---------------------------------------------------------------- host packages

DEBIAN_PKGS=(runc containernetworking-plugins iptables ipset conntrack socat)

host_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ipset >/dev/null || missing+=(ipset)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v socat >/dev/null || missing+=(socat)
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them (Debian packages: ${DEBIAN_PKGS[*]})"
  log "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# ---------------------------------------------------------------- processes

# A PID file holds "PID EXE": stop only kills a PID whose executable is
# still the one started, never a recycled PID.
pidfile() { echo "$RUN/pids/$1"; }

# alive PID: running and not a zombie (PID 1 of some sandboxes never reaps).
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

proc_pid() {
  local f pid exe
  f=$(pidfile "$1")
  [ -f "$f" ] || return 1
  read -r pid exe <"$f"
  alive "$pid" && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] && echo "$pid"
}

running() { proc_pid "$1" >/dev/null; }

# start NAME EXE ARGS...: a process of its own session, logging to logs/NAME.log.
start() {
  local name=$1 exe=$2
  shift 2
  if running "$name"; then return 0; fi
  # 8>&- 9>&-: the daemons must not hold the script's locks.
  setsid "$exe" "$@" </dev/null >>"$RUN/logs/$name.log" 2>&1 8>&- 9>&- &
  echo "$! $(readlink -f "$exe")" >"$(pidfile "$name")"
}

# stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 20).
stop() {
  local pid
  pid=$(proc_pid "$1") || { rm -f "$(pidfile "$1")"; return 0; }
  kill_pid "$pid" "${2:-20}"
  rm -f "$(pidfile "$1")"
}

kill_pid() {
  local pid=$1 secs=${2:-20} i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < secs * 10; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  log "PID $pid did not stop within ${secs}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
}

# pids_of EXE...: every live process running one of these executables, in
# one pass over /proc (a readlink per process would take minutes on a
# busy machine). A zombie has no exe link, so it is not listed.
pids_of() {
  local args=() e
  for e in "$@"; do
    [ ${#args[@]} -gt 0 ] && args+=(-o)
    args+=(-lname "$e")
  done
  [ ${#args[@]} -gt 0 ] || return 0
  find /proc -mindepth 2 -maxdepth 2 -name exe \( "${args[@]}" \) -printf '%h %l\n' 2>/dev/null | sed 's|^/proc/||' || true
}

# wait_for WHAT SECONDS CMD...: poll CMD every 0.5 s.
wait_for() {
  local secs=$2 i
  shift 2
  for ((i = 0; i < secs * 2; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

free_port() {
  local p
  for p in $(seq "$1" "$(($1 + 100))"); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  die "no free port on 127.0.0.1 in $1..$(($1 + 100))"
}

# ---------------------------------------------------------------- host state

# The host as up found it, so down can put it back and status can compare:
# sysctls, iptables rules of both backends and families, ipsets, which fixed
# paths existed. Taken once per up/down cycle (a failed up keeps the first).
SNAP="$RUN/host"

iptables_backends() {
  local b
  for b in iptables-nft iptables-legacy ip6tables-nft ip6tables-legacy; do
    command -v "$b-save" >/dev/null && echo "$b"
  done
  return 0
}

# rules_of BACKEND: its chains and rules as "TABLE LINE", without counters
# and without built-in chains that accept (using a table creates it, with
# no effect).
rules_of() {
  "$1-save" 2>/dev/null | awk '
    /^#/ {next}
    /^\*/ {table = substr($0, 2); n = 0; next}
    /^COMMIT/ {for (i = 0; i < n; i++) print table " " buf[i]; next}
    /^:/ {
      sub(/ \[[0-9]+:[0-9]+\]$/, "")
      if ($2 != "ACCEPT" || $1 !~ /^:(INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING)$/) buf[n++] = $0
      next
    }
    {buf[n++] = $0}'
}

# Counters and random values the kernel changes by itself.
VOLATILE_SYSCTLS='^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\.)|kernel\.(ns_last_pid|pty\.nr|random\.)|net\.netfilter\.nf_conntrack_count)'

sysctls() { sysctl -a 2>/dev/null | grep -Ev "$VOLATILE_SYSCTLS" | grep -Ev "\.($BRIDGE|veth[0-9a-f]+)\." || true; }

snapshot_host() {
  [ -f "$SNAP/complete" ] && return 0
  rm -rf "$SNAP" && mkdir -p "$SNAP"
  sysctls >"$SNAP/sysctl"
  local b p
  for b in $(iptables_backends); do rules_of "$b" >"$SNAP/$b"; done
  ipset list -n 2>/dev/null | sort >"$SNAP/ipset" || : >"$SNAP/ipset"
  for p in "${HOST_PATHS[@]}"; do [ -e "$p" ] && echo "$p"; done >"$SNAP/paths"
  ls /run/netns 2>/dev/null | sort >"$SNAP/netns" || : >"$SNAP/netns"
  touch "$SNAP/complete"
}

# ---------------------------------------------------------------- network

setup_network() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Forwarding on the bridge only (the host's global ip_forward stays as it
  # is): Pods reach Services on the same bridge through kube-proxy's DNAT.
  sysctl -qw "net.ipv4.conf.$BRIDGE.forwarding=1"
  # The service range stays on the bridge: with no route it would follow
  # the default route off the node before kube-proxy's DNAT.
  ip route replace "$SVC_CIDR" dev "$BRIDGE" src "$NODE_IP"
  guard_chains
}

# The guard chains: nothing of the node is routed off it or reachable from
# outside, and Pods reach only the host ports the node serves them.
guard_chains() {
  local t tbl c hook
  for t in raw:ENGRAM-NODE-PRE:PREROUTING mangle:ENGRAM-NODE-FWD:FORWARD mangle:ENGRAM-NODE-IN:INPUT; do
    IFS=: read -r tbl c hook <<<"$t"
    iptables -t "$tbl" -N "$c" 2>/dev/null || iptables -t "$tbl" -F "$c"
    iptables -t "$tbl" -C "$hook" -j "$c" 2>/dev/null || iptables -t "$tbl" -I "$hook" 1 -j "$c"
  done
  # From other interfaces, the pod and service ranges do not exist.
  iptables -t raw -A ENGRAM-NODE-PRE -i "$BRIDGE" -j RETURN
  iptables -t raw -A ENGRAM-NODE-PRE -i lo -j RETURN
  iptables -t raw -A ENGRAM-NODE-PRE -d "$POD_CIDR" -j DROP
  iptables -t raw -A ENGRAM-NODE-PRE -d "$SVC_CIDR" -j DROP
  # Pods talk to Pods only; nothing from elsewhere is forwarded to them.
  iptables -t mangle -A ENGRAM-NODE-FWD -s "$POD_CIDR" ! -d "$POD_CIDR" -j DROP
  iptables -t mangle -A ENGRAM-NODE-FWD -d "$POD_CIDR" ! -i "$BRIDGE" -j DROP
  # Pods reach the host's API server and kubelet (and forwards), nothing else.
  iptables -t mangle -A ENGRAM-NODE-IN -i "$BRIDGE" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
  iptables -t mangle -A ENGRAM-NODE-IN -i "$BRIDGE" -d "$NODE_IP" -p tcp -m multiport --dports "$API_PORT,$KUBELET_PORT" -j RETURN
  local port
  for port in $(forward_ports); do
    iptables -t mangle -A ENGRAM-NODE-IN -i "$BRIDGE" -d "$NODE_IP" -p tcp --dport "$port" -j RETURN
  done
  iptables -t mangle -A ENGRAM-NODE-IN -i "$BRIDGE" -j DROP
}

forward_ports() { ls "$RUN/pids" 2>/dev/null | sed -n 's/^forward-\([0-9]*\)$/\1/p'; }

# ---------------------------------------------------------------- PKI

# cert NAME CN [O] [EXT]: a key and a certificate signed by the node's CA.
cert() {
  local name=$1 cn=$2 o=${3:-} ext=${4:-extendedKeyUsage=clientAuth}
  local subj="/CN=$cn"
  [ -n "$o" ] && subj="/O=$o$subj"
  [ -f "$PKI/$name.crt" ] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext" >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# kubeconfig NAME: a kubeconfig with the client certificate NAME.
kubeconfig() {
  local name=$1
  cat >"$PKI/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: engram-node
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: engram-node
  context: {cluster: engram-node, user: $name}
current-context: engram-node
EOF
  chmod 600 "$PKI/$name.kubeconfig"
}

make_pki() {
  PKI="$RUN/pki"
  mkdir -p "$PKI" && chmod 700 "$PKI"
  if [ ! -f "$PKI/ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=engram-node-ca" -days 3650 -out "$PKI/ca.crt" 2>/dev/null
  fi
  [ -f "$PKI/sa.key" ] || openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  [ -f "$PKI/sa.pub" ] || openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  cert apiserver kube-apiserver "" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:$KUBE_SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  cert kubelet-server "$NODE_NAME" "" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin engram-node-admin system:masters
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert proxy system:kube-proxy
  cert kube-router engram-node:kube-router
  local k
  for k in admin kubelet controller-manager scheduler proxy kube-router; do kubeconfig "$k"; done
}

# ---------------------------------------------------------------- components

ETCD_PORT_FILE="$RUN/etcd.port"

start_etcd() {
  local port
  if [ ! -f "$ETCD_PORT_FILE" ] || ! running etcd; then
    port=$(free_port 23790)
    echo "$port" >"$ETCD_PORT_FILE"
  fi
  port=$(cat "$ETCD_PORT_FILE")
  start etcd "$ENVTEST/etcd" --name "$NODE_NAME" --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$((port + 1000))" --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1000))" \
    --initial-cluster "$NODE_NAME=http://127.0.0.1:$((port + 1000))" --listen-metrics-urls "" \
    --quota-backend-bytes 2147483648
}

# The audit log records every write of a ServiceAccount (the operator's
# among them): the node suite counts the operator's writes in it.
write_audit_policy() {
  cat >"$RUN/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  userGroups: ["system:serviceaccounts"]
- level: None
EOF
}

start_apiserver() {
  write_audit_policy
  start kube-apiserver "$ENVTEST/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$(cat "$ETCD_PORT_FILE")" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SVC_CIDR" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --allow-privileged=true --profiling=false \
    --audit-policy-file "$RUN/audit-policy.yaml" --audit-log-path "$RUN/logs/audit.log" --audit-log-maxsize 200 --audit-log-maxbackup 1
}

start_controller_manager() {
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --secure-port 0 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --allocate-node-cidrs --cluster-cidr "$POD_CIDR" --node-cidr-mask-size 24 --service-cluster-ip-range "$SVC_CIDR" \
    --flex-volume-plugin-dir "$RUN/flexvolume" --profiling=false
}

start_scheduler() {
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig "$PKI/scheduler.kubeconfig" --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
    --secure-port 0 --leader-elect=false --profiling=false
}

write_containerd_config() {
  mkdir -p "$RUN/containerd/tmp" "$RUN/cni/net.d"
  cat >"$RUN/containerd/config.toml" <<EOF
# written by hack/cluster.sh: everything under the run dir, nothing imported
version = 4
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
temp = "$RUN/containerd/tmp"
imports = []
# NRI would listen on /var/run/nri; opt would create /opt/containerd.
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.image-verifier.v1.bindir"]

[cgroup]
  path = ""

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = "$RUN/containerd/containerd.sock"
  [plugins."io.containerd.server.v1.ttrpc"]
    address = "$RUN/containerd/containerd.sock.ttrpc"
  [plugins."io.containerd.server.v1.debug"]
    address = ""
  [plugins."io.containerd.server.v1.metrics"]
    address = ""

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "$PAUSE_IMAGE"

  [plugins."io.containerd.cri.v1.runtime"]
    # The VM lacks CAP_SYS_RESOURCE: even root cannot lower oom_score_adj.
    restrict_oom_score_adj = true
    # cgroup v1 without hugetlb.
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$RUN/cni/net.d"
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
  # Pods on the node's bridge; the gateway is the bridge's address set by
  # setup_network (isGateway off: the plugin must not enable the host's
  # global ip_forward), no masquerade (nothing leaves the node).
  cat >"$RUN/cni/net.d/10-engram.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "engram",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$RUN/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "${NODE_IP%.*}.10", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0", "gw": "$NODE_IP"}]
      }
    }
  ]
}
EOF
}

start_containerd() {
  write_containerd_config
  PATH="$CTRD_DIR:$PATH" start containerd "$CTRD_DIR/containerd" --config "$RUN/containerd/config.toml"
}

ctr() { "$CTRD_DIR/ctr" --address "$RUN/containerd/containerd.sock" "$@"; }

# cgroup_dirs: the node's cgroup in every mounted hierarchy.
cgroup_dirs() {
  awk '$3 ~ /^cgroup2?$/ {print $2}' /proc/mounts | while read -r m; do echo "$m/$CGROUP"; done
}

make_cgroups() {
  local d
  for d in $(cgroup_dirs); do
    mkdir -p "$d"
    # A new cpuset has no CPUs or memory nodes until given its parent's.
    if [ -f "$d/cpuset.cpus" ] && [ -z "$(cat "$d/cpuset.cpus")" ]; then
      cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
}

write_kubelet_config() {
  mkdir -p "$RUN/kubelet" "$RUN/pod-logs" "$RUN/volume-plugins"
  : >"$RUN/resolv.conf" # Pods get no resolver of the host's (there is no cluster DNS)
  cat >"$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzPort: 0
tlsCertFile: $PKI/kubelet-server.crt
tlsPrivateKeyFile: $PKI/kubelet-server.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$RUN/containerd/containerd.sock
# cgroup v1 host without systemd
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP
# false: the kubelet sets the kernel tunables it wants (recorded and restored by down)
protectKernelDefaults: false
resolvConf: $RUN/resolv.conf
podLogsDir: $RUN/pod-logs
volumePluginDir: $RUN/volume-plugins
clusterDomain: cluster.local
# Loaded images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute, not a share of the disk: 2% of a 250 GB host disk is 5 GB, and
# a developer's disk with less free taints the node (disk-pressure), so no
# Pod is scheduled and the suites time out with nothing on the node to say why.
evictionHard: {memory.available: 200Mi, nodefs.available: 1Gi, imagefs.available: 1Gi, nodefs.inodesFree: "2%"}
serializeImagePulls: false
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 5s
shutdownGracePeriod: 0s
EOF
}

start_kubelet() {
  write_kubelet_config
  make_cgroups
  start kubelet "$BIN/kubelet" --config "$RUN/kubelet.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
    --root-dir "$RUN/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
}

start_proxy() {
  cat >"$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $PKI/proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
nodePortAddresses: ["$NODE_IP/32"]
# Leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false, masqueradeAll: false}
EOF
  start kube-proxy "$BIN/kube-proxy" --config "$RUN/kube-proxy.yaml"
}

# kube-router enforces NetworkPolicies (iptables + ipset); its routing and
# service proxy stay off (the bridge and kube-proxy do those).
start_router() {
  kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "engram-node:kube-router"}
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, endpoints, nodes]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "engram-node:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "engram-node:kube-router"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "engram-node:kube-router"}
EOF
  start kube-router "$ROUTER_DIR/kube-router" --kubeconfig "$PKI/kube-router.kubeconfig" \
    --hostname-override "$NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
    --enable-cni=false --enable-ipv6=false --service-cluster-ip-range "$SVC_CIDR" --metrics-port 0 --health-port 0
}

kubectl() { "$BIN/kubectl" --kubeconfig "$PKI/admin.kubeconfig" "$@"; }

api_ready() { kubectl get --raw /readyz; }
node_ready() { [ "$(kubectl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
default_sa() { kubectl -n default get serviceaccount default; }

# ---------------------------------------------------------------- up

cmd_up() {
  local fresh=0
  [ "${1:-}" = --fresh ] && fresh=1
  if user_cluster; then
    log "KUBECONFIG is set: using that cluster as it is, starting nothing"
    echo "$KUBECONFIG"
    return 0
  fi
  need_root
  mkdir -p "$NODE_HOME"
  exec 9>"$NODE_HOME/lock"
  flock 9
  PKI="$RUN/pki"
  if [ -f "$RUN/up" ] && running kubelet && running kube-apiserver; then
    log "the node is up"
    echo "$PKI/admin.kubeconfig"
    return 0
  fi
  local t0=$SECONDS
  host_packages
  BIN=$(cmd_build 8>&- | tail -1)
  ENVTEST=$("$ROOT/hack/envtest.sh")
  if [ "$fresh" = 1 ]; then
    if [ -d "$RUN" ]; then down_all || log "starting afresh all the same"; fi
    rm -rf --one-file-system "$RUN"
  fi
  mkdir -p "$RUN/pids" "$RUN/logs"
  snapshot_host
  preflight
  # Any failing step from here on undoes what the earlier ones did.
  set -E
  trap 'up_failed $LINENO' ERR
  log "starting the node (logs in $RUN/logs)"
  setup_network
  make_pki
  start_etcd
  start_apiserver
  wait_for "the API server" 120 api_ready || fail_up kube-apiserver "the API server was not ready within 120s"
  start_controller_manager
  start_scheduler
  start_containerd
  wait_for containerd 60 ctr version || fail_up containerd "containerd did not start within 60s"
  ctr -n k8s.io images import "$(pause_tar)" >/dev/null 2>&1
  start_kubelet
  start_proxy
  wait_for "the Node object" 120 kubectl get node "$NODE_NAME" || fail_up kubelet "the kubelet did not register the node within 120s"
  # kube-router exits when the Node object does not exist yet.
  start_router
  wait_for "the Node to be Ready" 120 node_ready || fail_up kubelet "the node was not Ready within 120s"
  # Pods are refused until the controller manager made the default ServiceAccount.
  wait_for "the default ServiceAccount" 120 default_sa || fail_up kube-controller-manager "no default ServiceAccount within 120s"
  local name
  for name in "${PROCS[@]}"; do
    running "$name" || fail_up "$name" "$name exited"
  done
  trap - ERR
  touch "$RUN/up"
  log "node $NODE_NAME Ready in $((SECONDS - t0))s; export KUBECONFIG=$PKI/admin.kubeconfig"
  echo "$PKI/admin.kubeconfig"
}

preflight() {
  command -v openssl >/dev/null || die "openssl is missing"
  [ -d /sys/fs/cgroup ] || die "no /sys/fs/cgroup"
  local p
  for p in "$API_PORT" "$KUBELET_PORT" "$PROXY_HEALTHZ_PORT" "$PROXY_METRICS_PORT"; do
    if ss -Hltn "sport = :$p" | grep -q .; then
      running kube-apiserver || running kubelet || die "port $p is in use on this machine: $(ss -Hltnp "sport = :$p")"
    fi
  done
}

up_failed() {
  trap - ERR
  set +e
  log "up failed (hack/cluster.sh line $1): stopping what it started"
  down_all
  exit 1
}

# fail_up NAME MESSAGE: show the end of NAME's log, then stop what started.
fail_up() {
  trap - ERR
  log "$2; the end of $RUN/logs/$1.log:"
  tail -n 30 "$RUN/logs/$1.log" >&2 || true
  down_all
  die "$2 (the node is stopped again; logs in $RUN/logs)"
}

# ---------------------------------------------------------------- down

cmd_down() {
  local purge=0
  [ "${1:-}" = --purge ] && purge=1
  if user_cluster; then
    log "KUBECONFIG is set: that cluster is the user's own, nothing to stop"
    return 0
  fi
  need_root
  mkdir -p "$NODE_HOME"
  exec 9>"$NODE_HOME/lock"
  flock 9
  [ -d "$RUN" ] && down_all
  if [ "$purge" = 1 ]; then
    rm -rf --one-file-system "$RUN"
    log "state deleted ($RUN)"
  fi
}

down_all() {
  PKI="$RUN/pki"
  BIN=$(k8s_bin_dir)
  rm -f "$RUN/up"
  local t0=$SECONDS
  drain_workloads
  stop kube-router 10
  if [ -x "$ROUTER_DIR/kube-router" ]; then
    "$ROUTER_DIR/kube-router" --cleanup-config >>"$RUN/logs/kube-router.log" 2>&1 || true
  fi
  stop kube-proxy 10
  if [ -x "$BIN/kube-proxy" ]; then
    "$BIN/kube-proxy" --cleanup >>"$RUN/logs/kube-proxy.log" 2>&1 || true
  fi
  stop kubelet 20
  stop kube-scheduler 10
  stop kube-controller-manager 10
  remove_containers
  stop containerd 20
  stop_orphans
  stop kube-apiserver 20
  local f
  for f in $(forward_ports); do stop "forward-$f" 5; done
  stop etcd 20
  undo_host
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then
    # The next up keeps comparing with the host as the first up found it.
    log "node stopped in $((SECONDS - t0))s, but these are left:"
    echo "$left" | sed 's/^/  /' >&2
    return 1
  fi
  # Clean: the next up takes the host as it finds it then.
  rm -f "$SNAP/complete"
  log "node stopped in $((SECONDS - t0))s; nothing of it is left on this machine"
}

# drain_workloads stops the controllers that recreate Pods, deletes every
# Pod and waits until the runtime runs no container: the kubelet then has
# run CNI DEL and unmounted the Pods' volumes itself.
drain_workloads() {
  running kube-apiserver && running kubelet && running containerd || return 0
  stop kube-controller-manager 10
  kubectl delete pods --all --all-namespaces --wait=false >/dev/null 2>&1 || true
  if ! wait_for "the Pods to stop" 90 no_tasks; then
    log "containers still running after 90s: $(ctr -n k8s.io tasks ls -q 2>/dev/null | tr '\n' ' ')"
  fi
  # Sandboxes go with their Pods; give the kubelet a moment to stop them.
  wait_for "the sandboxes to stop" 30 no_sandbox_netns || true
}

no_tasks() { [ -z "$(ctr -n k8s.io tasks ls -q 2>/dev/null)" ]; }
no_sandbox_netns() { [ -z "$(new_netns)" ]; }

# new_netns: network namespaces of Pods that up did not find.
new_netns() { comm -13 "$SNAP/netns" <(ls /run/netns 2>/dev/null | sort) 2>/dev/null | grep '^cni-' || true; }

# remove_containers kills and deletes what the kubelet left in the runtime.
remove_containers() {
  running containerd || return 0
  local id
  for id in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  sleep 1
  for id in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr -n k8s.io containers ls -q 2>/dev/null); do
    ctr -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
  done
}

# stop_orphans stops the runtime's shims (by the PID of their executable)
# and any process still in the node's cgroups.
stop_orphans() {
  local pid d
  while read -r pid _; do kill_pid "$pid" 5; done < <(pids_of "$(readlink -f "$CTRD_DIR/containerd-shim-runc-v2")")
  for d in $(cgroup_dirs); do
    [ -d "$d" ] || continue
    find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done
  done
}

undo_host() {
  unmount_all
  # Host ends of veths whose Pod namespace outlived its Pod.
  local l
  for l in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$l" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  remove_chains
  remove_ipsets
  remove_cgroups
  restore_sysctls
  remove_paths
}

# unmount_all: what is left mounted under the run dir and the fixed paths.
unmount_all() {
  local m n
  for n in $(new_netns); do
    umount "/run/netns/$n" 2>/dev/null || umount -l "/run/netns/$n" 2>/dev/null || true
    rm -f "/run/netns/$n"
  done
  for m in $(our_mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

# our_mounts: mount points under the run dir or the node's fixed paths.
our_mounts() {
  local prefixes=("$RUN/") p
  for p in "${HOST_PATHS[@]}"; do
    grep -qx "$p" "$SNAP/paths" 2>/dev/null || prefixes+=("$p/")
  done
  awk '{print $2}' /proc/mounts | while read -r m; do
    m=$(printf '%b' "$m")
    for p in "${prefixes[@]}"; do
      case "$m/" in "$p"*) echo "$m"; break ;; esac
    done
  done
}

# remove_chains: the guard chains, kube-proxy's, the kubelet's, kube-router's
# and CNI's, wherever they are left, and any rule jumping to them.
OUR_CHAINS='^(ENGRAM-NODE-|KUBE-|CNI-)'

remove_chains() {
  local b t c
  for b in $(iptables_backends); do
    for t in raw mangle nat filter; do
      local chains
      chains=$("$b-save" -t "$t" 2>/dev/null | sed -n 's/^:\([^ ]*\) .*/\1/p' | grep -E "$OUR_CHAINS" || true)
      [ -n "$chains" ] || continue
      # Rules of built-in chains that jump to ours first.
      { "$b-save" -t "$t" 2>/dev/null | grep -E "^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (ENGRAM-NODE-|KUBE-|CNI-)" || true; } |
        while read -r rule; do
          # The saved rule is quoted for a shell (comments hold spaces).
          eval "\"\$b\" -t \"\$t\" ${rule/#-A/-D}" 2>/dev/null || true
        done
      for c in $chains; do "$b" -t "$t" -F "$c" 2>/dev/null || true; done
      for c in $chains; do "$b" -t "$t" -X "$c" 2>/dev/null || true; done
    done
  done
}

remove_ipsets() {
  command -v ipset >/dev/null || return 0
  local s
  for s in $(comm -13 "$SNAP/ipset" <(ipset list -n 2>/dev/null | sort) 2>/dev/null); do
    ipset destroy "$s" 2>/dev/null || true
  done
}

remove_cgroups() {
  local d
  for d in $(cgroup_dirs); do
    if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
  done
}

# sysctl_changes prints "KEY<TAB>NOW<TAB>BEFORE" for each key whose value
# differs from what up found (BEFORE empty: a key up did not see).
sysctl_changes() {
  [ -f "$SNAP/sysctl" ] || return 0
  comm -13 <(sort "$SNAP/sysctl") <(sysctls | sort) | while IFS= read -r l; do
    local k=${l%% = *}
    printf '%s\t%s\t%s\n' "$k" "${l#* = }" "$(awk -v k="$k = " 'index($0, k) == 1 {print substr($0, length(k) + 1); exit}' "$SNAP/sysctl")"
  done
}

# restore_sysctls writes back every value up found that differs now.
restore_sysctls() {
  local k now before
  while IFS=$'\t' read -r k now before; do
    [ -n "$before" ] || continue
    sysctl -qw "$k=$before" 2>/dev/null || log "could not restore $k = $before"
  done < <(sysctl_changes)
}

remove_paths() {
  local p
  for p in "${HOST_PATHS[@]}"; do
    [ -e "$p" ] || continue
    grep -qx "$p" "$SNAP/paths" 2>/dev/null && continue
    if grep -q " $p/" /proc/mounts; then
      log "not removing $p: something is still mounted under it"
      continue
    fi
    rm -rf --one-file-system "$p"
  done
  # The state the next up starts from: images and etcd stay, the rest goes.
  # --one-file-system: never through a mount that survived the unmounts.
  rm -rf --one-file-system "$RUN/kubelet" "$RUN/containerd/state" "$RUN/cni/ipam" "$RUN/pids"/* "$RUN/etcd.port"
}

# ---------------------------------------------------------------- status

cmd_status() {
  if user_cluster; then
    echo "KUBECONFIG=$KUBECONFIG (the user's own cluster)"
    return 0
  fi
  PKI="$RUN/pki"
  if [ -f "$RUN/up" ]; then
    local name bad=0
    for name in "${PROCS[@]}"; do
      if pid=$(proc_pid "$name"); then echo "$name running (pid $pid)"; else echo "$name NOT running"; bad=1; fi
    done
    [ "$bad" = 0 ] || return 2
    echo "audit-log $RUN/logs/audit.log"
    echo "kubeconfig $PKI/admin.kubeconfig"
    return 0
  fi
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then
    echo "down, but these are left:"
    echo "$left" | sed 's/^/  /'
    return 2
  fi
  echo "down; nothing of the node is left on this machine"
  return 1
}

# leftovers prints each trace of the node still on the host.
leftovers() {
  local name pid exe b p
  for name in "${PROCS[@]}"; do
    pid=$(proc_pid "$name") && echo "process $name (pid $pid)"
  done
  local exes=()
  for exe in "$CTRD_DIR/containerd-shim-runc-v2" "$CTRD_DIR/containerd" "$ROUTER_DIR/kube-router" "$NODE_HOME"/k8s/*/*; do
    [ -x "$exe" ] && exes+=("$(readlink -f "$exe")")
  done
  pids_of "${exes[@]}" | while read -r pid exe; do echo "process $(basename "$exe") (pid $pid)"; done
  for f in $(forward_ports); do pid=$(proc_pid "forward-$f") && echo "process forward-$f (pid $pid)"; done
  ip link show "$BRIDGE" >/dev/null 2>&1 && echo "bridge $BRIDGE"
  for b in $(iptables_backends); do
    if [ -f "$SNAP/$b" ]; then
      diff <(cat "$SNAP/$b") <(rules_of "$b") | sed -n "s/^> /$b: /p"
    else
      rules_of "$b" | grep -E "^[a-z]+ (:|-A .*-j )(ENGRAM-NODE-|KUBE-|CNI-)" | sed "s/^/$b: /" || true
    fi
  done
  [ -f "$SNAP/ipset" ] && comm -13 "$SNAP/ipset" <(ipset list -n 2>/dev/null | sort) | sed 's/^/ipset /'
  our_mounts | sed 's/^/mount /'
  [ -f "$SNAP/netns" ] && new_netns | sed 's|^|netns /run/netns/|'
  for p in $(cgroup_dirs); do [ -d "$p" ] && echo "cgroup $p"; done
  sysctl_changes | while IFS=$'\t' read -r k now before; do
    if [ -n "$before" ]; then echo "sysctl $k = $now (was $before)"; else echo "sysctl $k = $now (new)"; fi
  done
  for p in "${HOST_PATHS[@]}"; do
    [ -e "$p" ] && [ -f "$SNAP/paths" ] && ! grep -qx "$p" "$SNAP/paths" && echo "path $p"
  done
  return 0
}

# ---------------------------------------------------------------- images, forwards

cmd_load() {
  [ $# -gt 0 ] || die "usage: $0 load TARBALL..."
  user_cluster && die "KUBECONFIG is set: load images into your own cluster (kind load image-archive, k3d image import, a registry)"
  if [ ! -f "$RUN/up" ] || ! running containerd; then die "the node is not up (hack/cluster.sh up)"; fi
  local t
  for t in "$@"; do
    ctr -n k8s.io images import --platform linux/amd64 "$t" >&2
  done
}

cmd_forward() {
  local port=${1:-}
  [[ "$port" =~ ^[0-9]+$ ]] || die "usage: $0 forward PORT (a TCP port on 127.0.0.1)"
  user_cluster && die "KUBECONFIG is set: make the service reachable from your own cluster yourself"
  [ -f "$RUN/up" ] || die "the node is not up (hack/cluster.sh up)"
  exec 9>"$NODE_HOME/lock"
  flock 9
  if ! running "forward-$port"; then
    start "forward-$port" "$(command -v socat)" "TCP-LISTEN:$port,bind=$NODE_IP,fork,reuseaddr" "TCP:127.0.0.1:$port"
    wait_for "the forward" 10 bash -c "exec 3<>/dev/tcp/$NODE_IP/$port" || die "the forward of port $port did not listen"
    guard_chains
  fi
  echo "$NODE_IP:$port"
}

case "${1:-}" in
  build) shift; cmd_build ;;
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down "$@" ;;
  status) cmd_status ;;
  kubeconfig)
    if user_cluster; then echo "$KUBECONFIG"; else [ -f "$RUN/up" ] || die "the node is not up"; echo "$RUN/pki/admin.kubeconfig"; fi ;;
  load) shift; cmd_load "$@" ;;
  forward) shift; cmd_forward "$@" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
