"""decide against real HTTP providers on loopback (harness.md §16.4–16.5, §21): both protocols, every failure
rule, the 2 s budget without retries, not_configured, request limits before any exchange, admission."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from decide_provider_server import FakeProvider, serving, valid_raw

from wakeful.harness.decide import Decider, DecideSettings
from wakeful.harness.decide.providers import answer_schema
from wakeful.runtime import ManualClock

REQUEST: dict[str, Any] = {
    "state": {"subject": "Invoice overdue", "from": "billing@example.com"},
    "questions": {
        "urgent": {"type": "noul", "instructions": "Does this need action today?"},
        "topic": {"type": "choice", "instructions": "What is it about?",
                  "criteria": {"billing": "money", "outage": "service down", "other": "anything else"}},
        "severity": {"type": "score", "instructions": "How bad?", "criteria": ["none", "some", "severe"]},
    },
}


@pytest.fixture(params=["jev", "openai"])
def provider(request: pytest.FixtureRequest) -> Iterator[FakeProvider]:
    with serving(request.param) as fake:
        yield fake


def decider(fake: FakeProvider, clock: ManualClock | None = None, **settings: Any) -> Decider:
    # a roomy budget keeps these tests steady on a loaded machine; the 2 s default is tested on its own
    base: dict[str, Any] = {"provider": fake.kind, "endpoint": fake.url, "api_key": "sk-test", "model": "m-1",
                            "timeout_ms": 8000}
    clock = clock or ManualClock()
    return Decider(DecideSettings(**{**base, **settings}), monotonic_ns=clock.monotonic_ns)


async def ask(d: Decider, request: Any = None, group: str = "grp_1") -> dict[str, Any]:
    try:
        return await d.decide(group, REQUEST if request is None else request)
    finally:
        await d.aclose()


def code(result: dict[str, Any]) -> str:
    assert set(result) == {"error"}, result
    return str(result["error"]["code"])


async def test_answers_are_integer_encoded(harness_runner: Any, provider: FakeProvider) -> None:
    result = await ask(decider(provider))
    answers = result["answers"]
    assert answers["urgent"] == {"type": "noul", "probability_bp": 8300}
    assert answers["topic"] == {"type": "choice", "choice": "billing", "confidence_bp": 9000,
                                "probabilities_bp": {"billing": 7000, "outage": 1500, "other": 1500}}
    assert answers["severity"] == {"type": "score", "score_milli": 1000, "confidence_bp": 6000,
                                   "probabilities_bp": {"0": 2500, "1": 5000, "2": 2500}}
    assert result["model"] == ("fake-1" if provider.kind == "jev" else "m-1")
    assert len(provider.seen) == 1


async def test_jev_exchange_shape(harness_runner: Any) -> None:
    with serving("jev") as fake:
        await ask(decider(fake, model=None))
        (path, headers, body), = fake.seen
    assert path == "/v1/systemone" and headers["Authorization"] == "Bearer sk-test"
    assert body == {**REQUEST, "model": "jev-1.13.0"}  # §16.4 default model for jev


async def test_openai_exchange_shape(harness_runner: Any) -> None:
    with serving("openai") as fake:
        await ask(decider(fake))
        (path, headers, body), = fake.seen
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert body["temperature"] == 0 and body["model"] == "m-1"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert json.loads(body["messages"][1]["content"]) == REQUEST
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema == answer_schema(REQUEST)
    answers = schema["properties"]["answers"]
    assert answers["required"] == ["urgent", "topic", "severity"] and answers["additionalProperties"] is False
    topic = answers["properties"]["topic"]["properties"]
    assert topic["choice"]["enum"] == ["billing", "outage", "other"]
    assert topic["probabilities"]["required"] == ["billing", "outage", "other"]
    assert answers["properties"]["severity"]["properties"]["probabilities"]["required"] == ["0", "1", "2"]


def _without(raw: dict[str, Any], key: str) -> dict[str, Any]:
    del raw["answers"][key]
    return raw


def _mutate(path: tuple[str, ...], value: Any) -> Any:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        raw = valid_raw(request)
        node = raw["answers"]
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        return raw
    return answer


BAD_ANSWERS = {
    "missing answer": lambda r: _without(valid_raw(r), "topic"),
    "extra answer": _mutate(("extra",), {"noul": 0.5}),
    "unknown option": _mutate(("topic", "probabilities", "spam"), 0.0),
    "missing option": _mutate(("topic", "probabilities"), {"billing": 0.7, "outage": 0.3}),
    "sum 1.2": _mutate(("topic", "probabilities"), {"billing": 0.7, "outage": 0.3, "other": 0.2}),
    "negative": _mutate(("topic", "probabilities"), {"billing": 1.1, "outage": -0.1, "other": 0.0}),
    "choice not the maximum": _mutate(("topic", "choice"), "outage"),
    "choice not an option": _mutate(("topic", "choice"), "spam"),
    "NaN": _mutate(("urgent", "noul"), math.nan),
    "noul above 1": _mutate(("urgent", "noul"), 1.5),
    "confidence a string": _mutate(("topic", "confidence"), "high"),
    "score out of range": _mutate(("severity", "score"), 2.5),
    "score not the expectation": _mutate(("severity", "score"), 0.5),
    "score levels wrong": _mutate(("severity", "probabilities"), {"0": 0.5, "1": 0.5}),
    "not an object": lambda r: ["answers"],
    "blank model": lambda r: {**valid_raw(r), "model": "  "},
    "negative usage": lambda r: {**valid_raw(r), "usage": {"input_tokens": -1, "output_tokens": 0}},
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_bad_answers_fail_the_whole_call(harness_runner: Any, provider: FakeProvider, case: str) -> None:
    provider.answer = BAD_ANSWERS[case]
    result = await ask(decider(provider))
    assert code(result) == "invalid_response", (case, result)
    assert len(provider.seen) == 1


@pytest.mark.parametrize(("body", "status", "expected"), [
    (b"{not json", 200, "invalid_response"),
    (b"{" + b'"pad": "' + b"x" * 70_000 + b'"}', 200, "invalid_response"),  # 70 KiB: over the 64 KiB cap
    (b'{"error": "slow down"}', 429, "rate_limited"),
    (b'{"error": "boom"}', 500, "provider_error"),
    (b'{"error": "moved"}', 302, "provider_error"),  # no redirects
    (b'{"error": "nope"}', 401, "provider_error"),
])
async def test_status_and_body_failures(
    harness_runner: Any, provider: FakeProvider, body: bytes, status: int, expected: str,
) -> None:
    provider.body, provider.status = body, status
    assert code(await ask(decider(provider))) == expected
    assert len(provider.seen) == 1  # one request, never a retry


async def test_openai_content_that_is_not_json(harness_runner: Any) -> None:
    with serving("openai") as fake:
        fake.body = json.dumps({"model": "m", "choices": [{"message": {"content": "I think yes"}}]}).encode()
        assert code(await ask(decider(fake))) == "invalid_response"
        fake.body = json.dumps({"model": "m", "choices": [{"message": {"content": None, "refusal": "no"}}]}).encode()
        assert code(await ask(decider(fake))) == "invalid_response"
        fake.body = json.dumps({"choices": []}).encode()
        assert code(await ask(decider(fake))) == "invalid_response"


async def test_slow_provider_times_out_at_the_budget_without_retry(
    harness_runner: Any, provider: FakeProvider,
) -> None:
    import time

    provider.delay_s = 3.0
    start = time.monotonic()
    result = await ask(decider(provider, timeout_ms=DecideSettings().timeout_ms))  # the 2,000 ms default
    elapsed = time.monotonic() - start
    assert code(result) == "timeout"
    assert elapsed >= 1.9  # not before the 2 s budget (the answer "timeout" shows it ended before the 3 s reply)
    assert len(provider.seen) == 1


async def test_smaller_remaining_deadline_shrinks_the_budget(harness_runner: Any) -> None:
    with serving("jev") as fake:
        fake.delay_s = 1.0
        d = decider(fake)
        try:
            result = await d.decide("g", REQUEST, remaining_s=0.3)
        finally:
            await d.aclose()
        assert code(result) == "timeout" and len(fake.seen) == 1


async def test_connection_refused_is_unavailable(harness_runner: Any) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = Decider(DecideSettings(provider="jev", endpoint=f"http://127.0.0.1:{port}/x", api_key="k"),
                monotonic_ns=ManualClock().monotonic_ns)
    assert code(await ask(d)) == "unavailable"


@pytest.mark.parametrize("settings", [
    {},
    {"provider": "gemini", "endpoint": "http://127.0.0.1:1/v1", "model": "m"},
    {"provider": "openai", "endpoint": "http://127.0.0.1:1/v1"},  # model required
    {"provider": "openai", "endpoint": "http://u:p@127.0.0.1:1/v1", "model": "m"},
    {"provider": "openai", "endpoint": "http://127.0.0.1:1/v1?x=1", "model": "m"},
    {"provider": "openai", "endpoint": "ftp://127.0.0.1/v1", "model": "m"},
    {"provider": "openai", "endpoint": "http://127.0.0.1:1/v1", "model": "m" * 129},
    {"provider": "jev", "endpoint": "http://127.0.0.1:1/v1"},  # no key
    {"provider": "jev", "endpoint": "http://127.0.0.1:1/v1", "api_key_env": "WAKEFUL_TEST_UNSET_KEY"},
])
async def test_not_configured(harness_runner: Any, settings: dict[str, Any]) -> None:
    d = Decider(DecideSettings(**settings), monotonic_ns=ManualClock().monotonic_ns)
    assert code(await ask(d)) == "not_configured"


async def test_invalid_requests_never_reach_the_provider(harness_runner: Any, provider: FakeProvider) -> None:
    nine = {f"q{i}": {"type": "noul", "instructions": "x"} for i in range(9)}
    big = {"state": "s" * 12_300, "questions": {"a": {"type": "noul", "instructions": "x"}}}
    for bad in ({"state": "x", "questions": nine}, {"state": "x", "questions": {"bad key": REQUEST["questions"]["urgent"]}},
                big, {"state": "x"}, "nope"):
        assert code(await ask(decider(provider), bad)) == "invalid_request"
    assert provider.seen == []


async def test_api_key_env_is_preferred(harness_runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_DECIDE_KEY", "sk-from-env")
    with serving("jev") as fake:
        d = decider(fake, api_key="sk-file", api_key_env="WAKEFUL_TEST_DECIDE_KEY")
        assert "sk-file" not in repr(d.settings) and "sk-from-env" not in repr(d.provider)
        await ask(d)
        assert fake.seen[0][1]["Authorization"] == "Bearer sk-from-env"


async def test_group_admission_buckets(harness_runner: Any) -> None:
    clock = ManualClock()
    with serving("jev") as fake:
        d = decider(fake, clock)
        try:
            results = [await d.decide("g1", REQUEST) for _ in range(5)]
            assert [("error" in r) for r in results] == [False] * 4 + [True]  # 4 per second
            assert code(results[4]) == "rate_limited"
            assert "error" not in await d.decide("g2", REQUEST)  # another group has its own buckets
            per_second = []
            for _ in range(30):  # each second refills the 4/s bucket but only 1 token of the 60/min one
                clock.advance(ms=1000)
                admitted = 0
                for _ in range(5):
                    admitted += "error" not in await d.decide("g1", REQUEST)
                per_second.append(admitted)
            # 60 − 4 left after the burst, +1 a second, 4 taken a second: empty after 18 s, then 1 a second
            assert per_second[:18] == [4] * 18 and per_second[18] == 3 and per_second[19:] == [1] * 11
            assert 4 + sum(per_second) == 60 + 30
            assert len(fake.seen) == 4 + 1 + sum(per_second)
        finally:
            await d.aclose()


async def test_loop_caller_waits_for_a_token_while_its_deadline_allows(harness_runner: Any) -> None:
    clock = ManualClock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # the injected clock moves instead of the test waiting
        slept.append(seconds)
        clock.advance(ms=seconds * 1000)

    with serving("jev") as fake:
        d = decider(fake, clock)
        d.sleep = sleep
        try:
            for _ in range(4):
                assert "error" not in await d.decide("g", REQUEST)
            assert code(await d.decide("g", REQUEST, remaining_s=2.3, loop_caller=True)) == "rate_limited"
            assert "error" not in await d.decide("g", REQUEST, remaining_s=10, loop_caller=True)
            assert slept and 0.2 <= sum(slept) <= 0.26  # one token of the 4/s bucket
            assert code(await d.decide("g", REQUEST)) == "rate_limited"  # not a Loop caller: fails fast
        finally:
            await d.aclose()
