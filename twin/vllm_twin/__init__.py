"""The vLLM 0.33 twin around the operator's engine model (vllm_operator.sim).

Modules: `argv` (the `vllm serve` command line), `server` (the HTTP twin), `loadgen` (open-loop load
against loopback twins), `harness` (twins for the pods of a kwok cluster),
`observe` (a fleet's figures as the operator's MetricsSnapshot, for the benchmarks),
`exposition` (Prometheus text format) and `commands` (the `vllm-twin` sub-commands).
"""
