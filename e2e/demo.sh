#!/usr/bin/env bash
# `make demo`: the embedded default. The local control plane with its simulated GPU fleet, the
# operator, the example VLLMServices, one vLLM twin per pod, and open-loop load on each service.
# Everything stays up (on 127.0.0.1) until `e2e/cluster.sh down`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
STATE="${VLLMOP_CLUSTER_DIR:-$ROOT/.cluster}"
DEMO="$STATE/demo"
PY="$ROOT/.venv/bin/python"
EXAMPLES=(three-layer-budgets autotune-recommend l4-small-model)
DURATION="${VLLMOP_DEMO_LOAD_SECONDS:-3600}"

log() { printf '[demo %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

e2e/cluster.sh up >/dev/null
eval "$(e2e/cluster.sh env)"
mkdir -p "$DEMO/pids" "$DEMO/twins"

# start NAME CMD...: a background process in its own session; `cluster.sh down` stops it.
start() {
  local name=$1; shift
  if [ -f "$DEMO/pids/$name.pid" ] && kill -0 "$(cat "$DEMO/pids/$name.pid")" 2>/dev/null; then
    log "$name already running"; return
  fi
  setsid "$@" >"$DEMO/$name.log" 2>&1 < /dev/null &
  echo $! >"$DEMO/pids/$name.pid"
}

kubectl apply --server-side -f crds/ >/dev/null
log "starting the operator (log: $DEMO/operator.log)"
VLLM_OPERATOR_PROMETHEUS_URL="$VLLMOP_PROMETHEUS_URL" VLLM_OPERATOR_METRICS_WINDOW=1m \
VLLM_OPERATOR_TUNING_INTERVAL_SECONDS=15 \
  start operator "$PY" -m vllm_operator.cli run --all-namespaces --liveness ""
log "starting the twin harness (log: $DEMO/harness.log)"
start harness "$PY" -m vllm_twin.cli harness --namespace llm --targets-dir "$VLLMOP_PROMETHEUS_TARGETS" \
  --state-file "$DEMO/services.json" --log-dir "$DEMO/twins"

kubectl create namespace llm --dry-run=client -o yaml | kubectl apply -f - >/dev/null
for ex in "${EXAMPLES[@]}"; do kubectl apply -f "examples/$ex.yaml" >/dev/null; done
log "waiting for the example VLLMServices to be Ready"
kubectl wait --for=condition=Ready vllmservice --all -n llm --timeout=180s >/dev/null

# The balancers appear once each service's twins answer /health.
url_of() {
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))["services"].get(sys.argv[2]) or {}; print(d.get("url") or "")' \
    "$DEMO/services.json" "$1" 2>/dev/null || true
}
for ex in "${EXAMPLES[@]}"; do
  name=$(sed -n 's/^  name: //p' "examples/$ex.yaml" | head -1)
  deadline=$((SECONDS + 120))
  until [ -n "$(url_of "llm/$name")" ]; do
    [ $SECONDS -lt $deadline ] || { log "no balancer for llm/$name; see $DEMO/harness.log"; exit 1; }
    sleep 1
  done
  log "load on llm/$name: Azure conversation trace for ${DURATION}s (log: $DEMO/load-$name.log)"
  start "load-$name" "$PY" -m vllm_twin.cli loadgen --target "$(url_of "llm/$name")" \
    --trace conv --rate-multiplier 1 --duration "${DURATION}s"
done

echo
kubectl get vllmservice -n llm
echo
echo "Prometheus:  $VLLMOP_PROMETHEUS_URL   (e.g. sum by (serving_vllmop_io_vllmservice) (rate(vllm:request_success_total[1m])))"
echo "Balancers:   $DEMO/services.json"
echo "Use it:      eval \"\$(e2e/cluster.sh env)\"; kubectl get vllmsvc -A -w"
echo "Stop it:     e2e/cluster.sh down"
