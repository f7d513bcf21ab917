"""The twin checks vLLM's API key as vLLM does: /v1 needs the Bearer key, probes and metrics not."""

from __future__ import annotations

import asyncio

from tests.component.test_twin_http import twin
from vllm_twin.argv import parse_vllm_argv
from vllm_twin.server.auth import resolve_api_keys

MODEL = "Qwen/Qwen2.5-7B-Instruct"
BODY = {"model": MODEL, "prompt": "hi", "max_tokens": 2}


def test_the_key_from_vllm_api_key_guards_v1_only() -> None:
    async def main() -> None:
        async with twin(env={"VLLM_API_KEY": "s3cret"}) as (s, base):
            for headers, status in [
                ({}, 401),
                ({"Authorization": "Bearer wrong"}, 401),
                ({"Authorization": "Basic s3cret"}, 401),
                ({"Authorization": "Bearer s3cret"}, 200),
                ({"Authorization": "bearer s3cret"}, 200),
            ]:
                async with s.post(f"{base}/v1/completions", json=BODY, headers=headers) as r:
                    assert r.status == status, headers
                    if status == 401:
                        assert await r.json() == {"error": "Unauthorized"}
            async with s.get(f"{base}/v1/models") as r:
                assert r.status == 401
            for path in ("/health", "/metrics", "/version"):
                async with s.get(f"{base}{path}") as r:
                    assert r.status == 200, path

    asyncio.run(main())


def test_api_key_flags_win_over_the_environment_and_empty_keys_do_not_count() -> None:
    args = parse_vllm_argv([MODEL, "--api-key", "a", "b"], {"VLLM_API_KEY": "env"})
    assert args.api_keys == ("a", "b")
    assert parse_vllm_argv([MODEL], {"VLLM_API_KEY": "env"}).api_keys == ("env",)
    assert parse_vllm_argv([MODEL], {}).api_keys == ()
    assert resolve_api_keys(None, {"VLLM_API_KEY": ""}) == ()


def test_without_a_key_nothing_is_guarded() -> None:
    async def main() -> None:
        async with twin() as (s, base), s.post(f"{base}/v1/completions", json=BODY) as r:
            assert r.status == 200

    asyncio.run(main())
