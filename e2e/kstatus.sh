#!/usr/bin/env bash
# Build (or reuse) e2e/kstatus: sigs.k8s.io/cli-utils' kstatus as a filter (JSON objects in, one
# verdict per line out), so tests check a VLLMService's status with the library Flux's
# `wait: true` uses instead of with our reading of its rules. Prints the binary's path on stdout.
#
# Its own cache key (the module's go.sum), apart from the control plane's toolchain: adding or
# bumping this checker must not rebuild kube-apiserver. Cold: about a minute on 2 cores.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC="$ROOT/e2e/kstatus"
SUM=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-12)
DIR="${VLLMOP_CACHE:-$HOME/.cache/vllm-operator}/kstatus/$SUM"

if [ -x "$DIR/kstatus" ]; then
  echo "$DIR/kstatus"
  exit 0
fi
command -v go >/dev/null || { echo "kstatus.sh: no Go toolchain on PATH; install Go >= 1.26" >&2; exit 1; }
mkdir -p "$DIR"
printf '[kstatus %s] building sigs.k8s.io/cli-utils kstatus into %s\n' "$(date +%H:%M:%S)" "$DIR" >&2
tmp=$(mktemp "$DIR/.kstatus-XXXXXX")
trap 'rm -f "$tmp"' EXIT
(cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o "$tmp" .)
mv "$tmp" "$DIR/kstatus"  # renamed into place only once built: never half a binary
echo "$DIR/kstatus"
