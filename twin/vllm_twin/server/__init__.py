"""The twin as an HTTP server: vLLM 0.33's OpenAI routes, probes and /metrics over the engine.

`build_app(engine, options)` wires a ready `Engine`; `start_server(app, host, port)` listens.
Modules: `driver` (real-time engine loop), `routes` (handlers), `openai` (bodies),
`vllm_metrics` / `http_metrics` (the /metrics families), `buckets` (histogram bounds).
"""
