"""Open-loop load generator for local twins (`vllm-twin loadgen`).

Modules: `targets` (loopback-only URLs), `trace` (Azure trace replay, Poisson streams), `backoff`
(503 retry schedule), `client` (one timed request), `runner` (the open loop), `report` (figures).
"""
