#!/usr/bin/env bash
# Build (or reuse) the local control plane's binaries from the pinned Go tools modules in tools/.
# Prints the bin directory on stdout; progress goes to stderr.
#
# The cache key covers every pinned version *and* the tools modules' go.sum files, so editing a pin
# builds a new directory. A build goes into a temporary directory that is renamed into place only
# when every binary built and answered --version: an interrupted build never looks complete.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S=v1.36.3 ETCD=v3.6.16 KWOK=v0.8.0 HELM=v4.3.1 PROMOP=v0.90.1
SUM=$(cat "$ROOT"/tools/*/go.sum | sha256sum | cut -c1-12)
KEY="k8s-$K8S-etcd-$ETCD-kwok-$KWOK-helm-$HELM-$SUM"
CACHE="${VLLMOP_CACHE:-$HOME/.cache/vllm-operator}"
BIN="$CACHE/toolchain/$KEY/bin"

log() { printf '[toolchain %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

if [ -f "$BIN/.complete" ]; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || die "step 'check go': no Go toolchain on PATH; install Go >= 1.26"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
STAGE=$(mktemp -d "$CACHE/toolchain/.build-XXXXXX" 2>/dev/null || { mkdir -p "$CACHE/toolchain"; mktemp -d "$CACHE/toolchain/.build-XXXXXX"; })
trap 'rm -rf "$STAGE"' EXIT
log "cold build into $STAGE (first time on this machine: ~20-35 min on 2 cores)"

# step NAME DIR CMD...: run CMD in tools/DIR, name the step and the module on failure.
step() {
  local name=$1 dir=$2; shift 2
  local t0=$SECONDS logf="$STAGE/$name.log"
  log "step '$name' started"
  if ! (cd "$ROOT/tools/$dir" && "$@") >"$logf" 2>&1; then
    local mod
    mod=$(grep -oE '([a-z0-9.-]+\.[a-z]{2,}/[^ :@]+)(@v[^ :]+)?' "$logf" | tail -1 || true)
    tail -20 "$logf" >&2
    die "step '$name' (tools/$dir) failed${mod:+; last module named: $mod}; full log above"
  fi
  log "step '$name' done in $((SECONDS - t0))s"
}

MINOR=${K8S#v1.}; MINOR=${MINOR%%.*}
KLDF="-s -w -X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1"
KLDF="$KLDF -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean"
KLDF="$KLDF -X k8s.io/client-go/pkg/version.gitVersion=$K8S"

step download-k8s k8s go mod download
step download-etcd etcd go mod download
step download-kwok kwok go mod download
step download-helm helm go mod download
step build-etcd etcd go build -trimpath -ldflags "-s -w" -o "$STAGE/etcd" go.etcd.io/etcd/server/v3
step build-kwok kwok go build -trimpath -ldflags "-s -w" -o "$STAGE/" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
step build-helm helm go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM" -o "$STAGE/helm" helm.sh/helm/v4/cmd/helm
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  step "build-$cmd" k8s go build -trimpath -ldflags "$KLDF" -o "$STAGE/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done

# Prometheus Operator CRDs (ServiceMonitor/PodMonitor/PrometheusRule) ship inside its Go module.
step download-promop k8s sh -c "go mod download -json github.com/prometheus-operator/prometheus-operator@$PROMOP > '$STAGE/promop.json'"
PDIR=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' "$STAGE/promop.json")
[ -d "$PDIR/example/prometheus-operator-crd" ] || die "step 'promop-crds': no example/prometheus-operator-crd in $PDIR"
mkdir -p "$STAGE/crds"
for c in servicemonitors podmonitors prometheusrules; do
  cp "$PDIR/example/prometheus-operator-crd/monitoring.coreos.com_$c.yaml" "$STAGE/crds/"
done
rm -f "$STAGE"/*.log "$STAGE/promop.json"

log "checking versions"
"$STAGE/kube-apiserver" --version >&2 || die "step 'verify': kube-apiserver --version"
"$STAGE/kubectl" version --client >&2 || die "step 'verify': kubectl"
"$STAGE/etcd" --version >&2 || die "step 'verify': etcd"
"$STAGE/kwokctl" --version >&2 || die "step 'verify': kwokctl"
"$STAGE/helm" version --short >&2 || die "step 'verify': helm"
touch "$STAGE/.complete"
mkdir -p "$(dirname "$BIN")"
rm -rf "$BIN"
mv "$STAGE" "$BIN"
trap - EXIT
log "toolchain ready in $BIN"
echo "$BIN"
