"""decide's exchange rules against real loopback providers (harness.md §16.4–16.5) not covered elsewhere: no proxy
from the environment, a compressed body is never inflated, and the OpenAI-compatible ``usage`` mapping."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from decide_provider_server import serving, valid_raw

from wakeful.harness.decide import Decider, DecideSettings
from wakeful.runtime import ManualClock

REQUEST: dict[str, Any] = {
    "state": "the nightly backup failed twice",
    "questions": {
        "urgent": {"type": "noul", "instructions": "Does someone need to act today?"},
        "kind": {"type": "choice", "instructions": "What failed?",
                 "criteria": {"backup": "the backup job", "disk": "the disk", "other": "something else"}},
    },
}


def decider(kind: str, url: str) -> Decider:
    settings = DecideSettings(provider=kind, endpoint=url, api_key="sk-test", model="m-1", timeout_ms=8000)
    return Decider(settings, monotonic_ns=ManualClock().monotonic_ns)


async def ask(d: Decider) -> dict[str, Any]:
    try:
        return await d.decide("grp_1", REQUEST)
    finally:
        await d.aclose()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", ["jev", "openai"])
async def test_environment_proxies_are_ignored(
    harness_runner: Any, monkeypatch: pytest.MonkeyPatch, kind: str,
) -> None:
    dead = f"http://127.0.0.1:{_dead_port()}"  # a proxy that would refuse every connection
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with serving(kind) as fake:
        result = await ask(decider(kind, fake.url))
        assert "error" not in result, result
        assert len(fake.seen) == 1  # the provider itself was reached, directly


@pytest.mark.parametrize("kind", ["jev", "openai"])
async def test_a_compressed_body_is_invalid_never_inflated(harness_runner: Any, kind: str) -> None:
    import gzip

    with serving(kind) as fake:
        fake.body = gzip.compress(json.dumps(valid_raw(REQUEST)).encode())
        fake.headers = {"Content-Encoding": "gzip"}
        result = await ask(decider(kind, fake.url))
        assert result["error"]["code"] == "invalid_response", result
        assert fake.seen[0][1].get("Accept-Encoding") == "identity"  # we asked for no encoding
        assert len(fake.seen) == 1


def _openai_reply(usage: Any) -> bytes:
    content = valid_raw(REQUEST)
    del content["model"], content["usage"]
    reply: dict[str, Any] = {"model": "m-1", "choices": [{"message": {"content": json.dumps(content)}}]}
    if usage is not None:
        reply["usage"] = usage
    return json.dumps(reply).encode()


@pytest.mark.parametrize(("usage", "ok"), [
    (None, True),
    ({"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40}, True),
    ({"prompt_tokens": 31}, True),  # a server that reports only part of the usage still answers
    ({"total_tokens": 40}, True),
    ({"prompt_tokens": -1, "completion_tokens": 9}, False),  # a count that is not ≥ 0 fails the call
    ({"prompt_tokens": 1.5, "completion_tokens": 9}, False),
])
async def test_openai_usage_maps_what_the_reply_gives(harness_runner: Any, usage: Any, ok: bool) -> None:
    with serving("openai") as fake:
        fake.body = _openai_reply(usage)
        result = await ask(decider("openai", fake.url))
    if ok:
        assert result["model"] == "m-1" and result["answers"]["urgent"] == {"type": "noul", "probability_bp": 8300}
    else:
        assert result["error"]["code"] == "invalid_response", result
