"""A completions request with a batch of prompts, served by the twin as vLLM 0.33 serves it.

vLLM's serving layer makes each prompt an engine request of its own (`<id>-<i>`), numbers the
choices prompt by prompt (n each), sums usage over the prompts, and admits each prompt again as
it adds it: a prompt refused after others went in fails the whole request, as a 503 answer, or,
on a stream already started, as an error event before `[DONE]`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.component.test_twin_http import BUSY, ME, MODEL, read_sse, sample, scrape, twin


def test_a_batch_answers_every_prompt_in_order_with_usage_summed() -> None:
    async def main() -> None:
        async with twin() as (s, base):
            body = {"prompt": ["a b", "c d e"], "max_tokens": 3, "n": 2}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 200
                answer = await r.json()
            text = await scrape(s, base)
        assert [c["index"] for c in answer["choices"]] == [0, 1, 2, 3]
        assert all(len(c["text"].split()) == 3 for c in answer["choices"])
        assert answer["usage"] == {
            "prompt_tokens": 5,
            "total_tokens": 17,
            "completion_tokens": 12,
            "prompt_tokens_details": None,
        }
        # each prompt is an engine request of its own, with n children, counted as vLLM does
        assert sample(text, f'vllm:request_success_total{{{ME},finished_reason="length"}}') == 4
        assert sample(text, f"vllm:request_prompt_tokens_count{{{ME}}}") == 4
        assert sample(text, f"vllm:num_requests_running{{{ME}}}") == 0

    asyncio.run(main())


def test_a_streamed_batch_carries_every_choice_then_usage() -> None:
    async def main() -> None:
        async with twin() as (s, base):
            body = {
                "prompt": [[1, 2, 3], [4]],
                "max_tokens": 4,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 200
                chunks = await read_sse(r)
        assert chunks[-1] == "[DONE]"
        usage = chunks[-2]["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (4, 8)
        words: dict[int, int] = {}
        finished: dict[int, Any] = {}
        for chunk in chunks[:-2]:
            (choice,) = chunk["choices"]
            words[choice["index"]] = words.get(choice["index"], 0) + len(choice["text"].split())
            if choice["finish_reason"] is not None:
                finished[choice["index"]] = choice["finish_reason"]
        assert words == {0: 4, 1: 4} and finished == {0: "length", 1: "length"}

    asyncio.run(main())


def test_a_batch_past_the_queue_limit_fails_whole_and_leaves_nothing_running() -> None:
    async def main() -> None:
        # room for one request: the first prompt is admitted (the preflight check and its own),
        # the second is refused as it is added
        async with twin("--max-num-queued-reqs", "1") as (s, base):
            body = {"prompt": ["a", "b"], "max_tokens": 50}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 503
                assert (await r.json())["error"]["message"] == BUSY
            async with s.post(f"{base}/v1/completions", json={**body, "stream": True}) as r:
                assert r.status == 200  # vLLM's stream had started when the second was refused
                chunks = await read_sse(r)
            assert chunks[-1] == "[DONE]" and len(chunks) == 2
            assert chunks[0]["error"]["code"] == 503
            assert chunks[0]["error"]["message"] == BUSY
            # the admitted prompts were aborted: a single request is admitted again
            async with s.post(f"{base}/v1/completions", json={"prompt": "a", "max_tokens": 2}) as r:
                assert r.status == 200
            text = await scrape(s, base)
        reason = 'reason="max_num_queued_reqs"'
        assert (
            sample(text, f'vllm:admission_rejections_total{{model_name="{MODEL}",{reason}}}') == 2
        )
        assert sample(text, f"vllm:num_requests_running{{{ME}}}") == 0

    asyncio.run(main())


def test_a_batch_with_a_prompt_past_the_context_is_refused_before_any_runs() -> None:
    async def main() -> None:
        async with twin("--max-model-len", "8") as (s, base):
            body = {"prompt": ["a", "w " * 9], "max_tokens": 2}
            async with s.post(f"{base}/v1/completions", json=body) as r:
                assert r.status == 400
                error = (await r.json())["error"]
            text = await scrape(s, base)
        assert error["param"] == "input_tokens"
        assert "your prompt contains at least 9 input tokens" in error["message"]
        assert sample(text, f"vllm:request_prompt_tokens_count{{{ME}}}") == 0

    asyncio.run(main())


def test_continuous_usage_stats_put_running_usage_on_every_chunk() -> None:
    async def main() -> None:
        async with twin() as (s, base):
            options = {"include_usage": True, "continuous_usage_stats": True}
            body = {"prompt": ["a b", "c"], "max_tokens": 3, "stream": True}
            async with s.post(
                f"{base}/v1/completions", json={**body, "stream_options": options}
            ) as r:
                chunks = await read_sse(r)
            chat = {
                "messages": [{"role": "user", "content": "x y z"}],
                "max_tokens": 2,
                "stream": True,
                "stream_options": options,
            }
            async with s.post(f"{base}/v1/chat/completions", json=chat) as r:
                chat_chunks = await read_sse(r)
            # continuous_usage_stats without include_usage: no usage at all, as in vLLM
            lone = {**body, "stream_options": {"continuous_usage_stats": True}}
            async with s.post(f"{base}/v1/completions", json=lone) as r:
                plain = await read_sse(r)
        prompt_of = {0: 2, 1: 1}
        so_far: dict[int, int] = {0: 0, 1: 0}
        for chunk in chunks[:-2]:
            (choice,) = chunk["choices"]
            i = choice["index"]
            so_far[i] += len(choice["text"].split())
            assert chunk["usage"] == {
                "prompt_tokens": prompt_of[i],
                "total_tokens": prompt_of[i] + so_far[i],
                "completion_tokens": so_far[i],
            }
        assert chunks[-2]["usage"]["completion_tokens"] == 6
        assert chat_chunks[0]["usage"] == {
            "prompt_tokens": 3,
            "total_tokens": 3,
            "completion_tokens": 0,
            "completion_tokens_details": None,
        }
        assert chat_chunks[-2]["usage"]["completion_tokens"] == 2
        assert all("usage" not in c for c in plain[:-1])

    asyncio.run(main())


BODY_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5),
    st.sampled_from([0.0, 0.5, 2.5, -1.0, 1e-6, "x", "", [], {}, ["a", ""], [[]], [[1, 2]]]),
    st.lists(st.sampled_from(["a b", "c", ""]), min_size=1, max_size=3),
)
BODY_FIELDS = ("prompt", "max_tokens", "n", "temperature", "top_p", "top_k", "min_tokens", "stop",
               "stream", "echo", "presence_penalty", "logit_bias", "stream_options")  # fmt: skip


@settings(max_examples=3, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.dictionaries(st.sampled_from(BODY_FIELDS), BODY_VALUES, max_size=4),
        ),
        min_size=25,
        max_size=25,
    )
)
def test_any_body_gets_a_served_answer_or_vllms_error_shape(
    bodies: list[tuple[bool, dict[str, Any]]],
) -> None:
    """Over HTTP, whatever the body: 200, or 400/503 in vLLM's error JSON (or an error event on
    a started stream), never a 500, and nothing left running in the engine."""

    async def main() -> None:
        async with twin("--max-model-len", "64", "--max-num-queued-reqs", "3") as (s, base):
            for chat, fields in bodies:
                first = (
                    {"messages": [{"role": "user", "content": "a"}]} if chat else {"prompt": "a"}
                )
                route = "chat/completions" if chat else "completions"
                async with s.post(f"{base}/v1/{route}", json={**first, **fields}) as r:
                    assert r.status in (200, 400, 503), (r.status, fields)
                    if r.status != 200:
                        error = (await r.json())["error"]
                        assert set(error) == {"message", "type", "param", "code"}
                        assert error["code"] == r.status and "\n" not in error["message"]
                    elif r.content_type == "text/event-stream":
                        events = await read_sse(r)
                        assert events[-1] == "[DONE]"
                    else:
                        assert (await r.json())["choices"]
            text = await scrape(s, base)
        assert sample(text, f"vllm:num_requests_running{{{ME}}}") == 0
        assert sample(text, f"vllm:num_requests_waiting{{{ME}}}") == 0

    asyncio.run(main())
