"""vLLM 0.33's engine metrics (`vllm:*`), fed from the simulated engine.

Names, types and labels follow docs/vllm-0.33.md §3.2; observation points follow
docs/vllm-0.33-scheduler.md §6:
- gauges and counters mirror the engine's own figures after every engine advance (the engine
  already applies vLLM's counting rules, e.g. prompt tokens once at the first output);
- TTFT is observed at the first output, as vLLM does;
- the other per-request histograms are observed when a request finishes, from the engine's
  record, as vLLM's `record()` does at finish; ITL samples are observed then too (vLLM observes
  them at each output: the totals agree once the request is done);
- client-aborted requests appear in no latency histogram (the engine drops them).

Series the twin cannot produce for a text-only, single-engine server exist at 0, as they do on a
real server with those features idle (multimodal cache, external KV connector, sleep mode).
"""

from __future__ import annotations

from collections.abc import Mapping

from vllm_operator.sim.engine import (
    EngineStats,
    RequestEvent,
    RequestRecord,
    ResolvedConfig,
    SimRequest,
)
from vllm_twin.exposition import MetricFamily, Registry, request_token_buckets
from vllm_twin.server import buckets

ENGINE = "0"  # the DP rank; the twin runs a single engine
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHED_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
LABELS = ("model_name", "engine")


class VllmMetrics:
    """Declares the `vllm:*` families on a registry and keeps them in step with the engine."""

    def __init__(
        self,
        registry: Registry,
        model_name: str,
        max_model_len: int,
        cache_info: Mapping[str, str],
    ) -> None:
        self._me = (model_name, ENGINE)
        self._seen: dict[str, float] = {}  # engine counter name (and key) → value already added
        r = registry
        g = _Declarer(r, self._me)
        self.running = g.gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = g.gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        self.waiting_by_reason = g.gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of requests waiting to be processed, by reason.",
            "reason",
            WAITING_REASONS,
        )
        self.kv_usage = g.gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        sleep = g.gauge(
            "vllm:engine_sleep_state", "Engine sleep state.", "sleep_state", SLEEP_STATES
        )
        sleep.set(1.0, *self._me, "awake")  # the twin never sleeps
        info = r.gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            (*LABELS, *cache_info.keys()),
        )
        info.set(1.0, *self._me, *cache_info.values())
        self.preemptions = g.counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self.prompt_tokens = g.counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_by_source = g.counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            "source",
            PROMPT_SOURCES,
        )
        self.prompt_cached = g.counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens."
        )
        self.cached_by_source = g.counter(
            "vllm:prompt_tokens_cached_by_source",
            "Number of cached prompt tokens by source.",
            "source",
            CACHED_SOURCES,
        )
        self.generation_tokens = g.counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.success = g.counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            "finished_reason",
            FINISH_REASONS,
        )
        self.rejections = r.counter(
            "vllm:admission_rejections",
            "Number of requests rejected by admission control.",
            ("model_name", "reason"),
        )
        for reason in ADMISSION_REASONS:
            self.rejections.touch(model_name, reason)
        self.prefix_queries = g.counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self.prefix_hits = g.counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        g.counter(
            "vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector."
        )
        g.counter(
            "vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector."
        )
        g.counter(
            "vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of items."
        )
        g.counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of items.")
        self.ttft = g.histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            buckets.TIME_TO_FIRST_TOKEN,
        )
        self.itl = g.histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            buckets.INTER_TOKEN_LATENCY,
        )
        self.tpot = g.histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            buckets.INTER_TOKEN_LATENCY,
        )
        self.e2e = g.histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            buckets.REQUEST_LATENCY,
        )
        self.queue = g.histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            buckets.REQUEST_LATENCY,
        )
        self.inference = g.histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            buckets.REQUEST_LATENCY,
        )
        self.prefill = g.histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            buckets.REQUEST_LATENCY,
        )
        self.decode = g.histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            buckets.REQUEST_LATENCY,
        )
        self.num_preemptions = g.histogram(
            "vllm:request_num_preemptions",
            "Number of preemptions for each request.",
            buckets.REQUEST_NUM_PREEMPTIONS,
        )
        tokens = request_token_buckets(max_model_len)
        self.req_prompt = g.histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens
        )
        self.req_generation = g.histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens
        )
        self.iteration = g.histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            buckets.ITERATION_TOKENS,
        )
        self.max_generation = g.histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        )
        self.params_n = g.histogram(
            "vllm:request_params_n",
            "Histogram of the n request parameter.",
            buckets.REQUEST_PARAMS_N,
        )
        self.params_max_tokens = g.histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            tokens,
        )
        self.kv_computed = g.histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tokens,
        )

    def _advance(self, family: MetricFamily, key: str, total: float, *extra: str) -> None:
        # engine counters are cumulative; the registry's counters only take increments
        done = self._seen.get(key, 0.0)
        if total > done:
            family.inc(total - done, *extra)
            self._seen[key] = total

    def on_stats(self, stats: EngineStats) -> None:
        me = self._me
        self.running.set(stats.num_running, *me)
        self.waiting.set(stats.num_waiting, *me)
        for reason in WAITING_REASONS:
            self.waiting_by_reason.set(stats.waiting_by_reason.get(reason, 0), *me, reason)
        self.kv_usage.set(stats.kv_usage, *me)
        self._advance(self.preemptions, "preemptions", stats.preemptions, *me)
        self._advance(self.prompt_tokens, "prompt", stats.prompt_tokens, *me)
        self._advance(self.generation_tokens, "generation", stats.generation_tokens, *me)
        self._advance(self.prefix_queries, "prefix_queries", stats.prefix_cache_queries, *me)
        self._advance(self.prefix_hits, "prefix_hits", stats.prefix_cache_hits, *me)
        cached = stats.prefix_cache_hits
        self._advance(self.prompt_cached, "cached", cached, *me)
        self._advance(self.prompt_by_source, "src:hit", cached, *me, "local_cache_hit")
        # the twin's only cache is the GPU prefix cache
        self._advance(self.cached_by_source, "cached:device", cached, *me, "device")
        computed = max(0.0, stats.prompt_tokens - cached)
        self._advance(self.prompt_by_source, "src:compute", computed, *me, "local_compute")
        for reason, count in stats.request_success.items():
            self._advance(self.success, f"success:{reason}", count, *me, reason)
        for reason, count in stats.rejections.items():
            self._advance(self.rejections, f"rejected:{reason}", count, self._me[0], reason)
        for tokens in stats.iteration_tokens:
            self.iteration.observe(tokens, *me)

    def on_first_output(self, event: RequestEvent, request: SimRequest) -> None:
        # vLLM observes TTFT at the first output, so a scrape mid-decode already sees it
        self.ttft.observe(event.time - request.arrival, *self._me)

    def on_finished(self, record: RequestRecord, request: SimRequest) -> None:
        """One finished sequence (one choice of an n>1 request)."""
        me = self._me
        for gap in record.itls:
            self.itl.observe(gap, *me)
        self.tpot.observe(record.tpot, *me)
        self.e2e.observe(record.e2e, *me)
        self.queue.observe(record.queue_time, *me)
        self.inference.observe(record.inference_time, *me)
        self.prefill.observe(record.prefill_time, *me)
        self.decode.observe(record.decode_time, *me)
        self.num_preemptions.observe(record.preemptions, *me)
        self.req_prompt.observe(record.prompt_tokens, *me)
        self.req_generation.observe(record.output_tokens, *me)
        self.kv_computed.observe(record.prompt_tokens - record.cached_tokens, *me)
        self.params_max_tokens.observe(request.max_tokens, *me)

    def on_request_done(self, request: SimRequest, max_output_tokens: int) -> None:
        """Once per HTTP request, when its last choice finished (vLLM's parent request)."""
        self.params_n.observe(request.n, *self._me)
        self.max_generation.observe(max_output_tokens, *self._me)


def cache_config_labels(resolved: ResolvedConfig) -> dict[str, str]:
    """`vllm:cache_config_info` labels: CacheConfig fields, as vLLM's str() renders them."""
    return {
        "block_size": str(resolved.block_size),
        "cache_dtype": resolved.kv_cache_dtype,
        "enable_prefix_caching": str(resolved.enable_prefix_caching),
        "gpu_memory_utilization": str(resolved.gpu_memory_utilization),
        "num_gpu_blocks": str(resolved.num_gpu_blocks),
        "kv_cache_size_tokens": str(resolved.kv_cache_size_tokens),
        "kv_cache_max_concurrency": str(round(resolved.kv_cache_max_concurrency, 2)),
    }


class _Declarer:
    """Declares per-engine families (labels model_name, engine [+ one extra]) with zero series."""

    def __init__(self, registry: Registry, me: tuple[str, str]) -> None:
        self._r = registry
        self._me = me

    def _zeros(self, family: MetricFamily, values: tuple[str, ...]) -> MetricFamily:
        if not values:
            family.touch(*self._me)
        for value in values:
            family.touch(*self._me, value)
        return family

    def gauge(
        self, name: str, help: str, extra: str | None = None, values: tuple[str, ...] = ()
    ) -> MetricFamily:
        labels = (*LABELS, extra) if extra else LABELS
        return self._zeros(self._r.gauge(name, help, labels), values)

    def counter(
        self, name: str, help: str, extra: str | None = None, values: tuple[str, ...] = ()
    ) -> MetricFamily:
        labels = (*LABELS, extra) if extra else LABELS
        return self._zeros(self._r.counter(name, help, labels), values)

    def histogram(
        self, name: str, help: str, bounds: tuple[float, ...] | list[float]
    ) -> MetricFamily:
        return self._zeros(self._r.histogram(name, help, LABELS, bounds), ())
