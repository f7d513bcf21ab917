#!/usr/bin/env bash
# `make demo`: the embedded default. Brings up the local control plane with its simulated GPU
# fleet and leaves it running; `e2e/cluster.sh down` stops it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
e2e/cluster.sh up >/dev/null
eval "$(e2e/cluster.sh env)"
echo
echo "Local control plane is up. GPU fleet:"
kubectl get nodes -L nvidia.com/gpu.product -L nvidia.com/gpu.count
echo
echo "Use it:   eval \"\$(e2e/cluster.sh env)\"; kubectl get nodes"
echo "Stop it:  e2e/cluster.sh down"
