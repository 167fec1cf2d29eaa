"""Store-independent rules: capability lists (§9.1–9.2), config and checkpoint limits (§6), notify arguments
(§9.5) and the wake-budget arithmetic with an injected clock (§9.5 steps 3–4)."""

from __future__ import annotations

import pytest

from wakeful.harness.budget import LimitWatch, WakeWindow, judge_wake
from wakeful.harness.capabilities import (
    SELF_SCOPED,
    delegated_principal,
    runtime_capabilities,
    validate_capabilities,
)
from wakeful.harness.checkpoint import CheckpointTooLarge, checked_checkpoint, load_config, validate_config
from wakeful.harness.config import Limits
from wakeful.harness.errors import CapabilityNotAllowed, ConfigTooLarge, HostCallRefused, InvalidRequest
from wakeful.harness.wake_args import ack_event_id, log_text, notify_args, state_arg

LOOP = "lp_01jd0000000000000000000000"

# ---------------------------------------------------------------- §9.1 / §9.2 capabilities


@pytest.mark.parametrize("name", ["loop.create", "script.run", "session.post", "files.write", "unknown.tool"])
def test_capability_outside_allowlist_is_refused(name: str) -> None:
    with pytest.raises(CapabilityNotAllowed) as info:
        validate_capabilities([{"name": "agent.notify"}, {"name": name}], read_tools={"weather.get"})
    assert info.value.code == "capability_not_allowed"
    assert name in info.value.message


def test_write_tool_is_not_a_loop_capability() -> None:
    # only read tools are passed as read_tools; a write tool is just an unknown name here
    with pytest.raises(CapabilityNotAllowed):
        validate_capabilities([{"name": "tickets.close"}], read_tools={"weather.get"})


@pytest.mark.parametrize(
    "raw",
    [
        "agent.notify",
        [{"name": ""}],
        [{"name": 3}],
        [{"arguments": {}}],
        [{"name": "decide", "extra": 1}],
        [{"name": "decide", "arguments": [1, 2]}],
        [{"name": "decide", "arguments": {"x": float("nan")}}],
        [{"name": "decide", "arguments": {"x": "y" * 20000}}],
        [{"name": "decide"}] * 33,
        ["decide"],
    ],
)
def test_malformed_capability_lists_are_invalid_requests(raw: object) -> None:
    with pytest.raises(InvalidRequest) as info:
        validate_capabilities(raw, read_tools=())
    assert info.value.code == "invalid_request"


def test_given_list_is_complete_plus_self_scoped_builtins() -> None:
    stored = validate_capabilities(
        [{"name": "web.http_request", "arguments": {"url": "https://example.org/"}}, {"name": "weather.get"}],
        read_tools={"weather.get"},
    )
    loaded = runtime_capabilities(stored, read_tools={"weather.get"})
    names = [entry["name"] for entry in loaded]
    assert names == ["web.http_request", "weather.get", *SELF_SCOPED]
    assert loaded[0]["arguments"] == {"url": "https://example.org/"}
    assert "agent.notify" not in names and "decide" not in names


def test_omitted_list_means_every_allowlisted_name_unconstrained() -> None:
    assert validate_capabilities(None, read_tools=()) is None
    loaded = runtime_capabilities(None, read_tools={"weather.get"})
    assert {e["name"] for e in loaded} == {
        "agent.notify", "loop.state.put", "loop.state.get", "loop.ack", "loop.log", "decide",
        "web.http_request", "weather.get",
    }
    assert all("arguments" not in e for e in loaded)


def test_delegated_principal() -> None:
    assert delegated_principal(LOOP, "agent:agt_x") == f"schedule|loop:{LOOP}|agent:agt_x"


# ---------------------------------------------------------------- §6 config and checkpoint


def test_config_rules() -> None:
    assert validate_config(None, LOOP) == {}
    assert validate_config({"a": [1, 2]}, LOOP) == {"a": [1, 2]}
    for reserved in ("loop_id", "incarnation", "state"):
        with pytest.raises(InvalidRequest):
            validate_config({reserved: 1}, LOOP)
    with pytest.raises(InvalidRequest):
        validate_config([1], LOOP)
    with pytest.raises(ConfigTooLarge):
        validate_config({"blob": "x" * 16_400}, LOOP)
    # fits alone (16,384 bytes) but not with the injected keys
    blob = "x" * (16_384 - len('{"blob":""}'))
    assert len(f'{{"blob":"{blob}"}}') == 16_384
    with pytest.raises(ConfigTooLarge):
        validate_config({"blob": blob}, LOOP)


def test_config_nested_too_deep_with_injection_is_refused() -> None:
    deep: object = 1
    for _ in range(32):
        deep = [deep]
    with pytest.raises(ConfigTooLarge):
        validate_config({"d": deep}, LOOP)


def test_load_config_injects_three_keys() -> None:
    merged = load_config({"k": 1}, LOOP, 4, {"beats": 2})
    assert merged == {"k": 1, "loop_id": LOOP, "incarnation": 4, "state": {"beats": 2}}


def test_checkpoint_limits() -> None:
    state, size = checked_checkpoint({"beats": 3}, {"interval_ms": 10}, LOOP, 1)
    assert state == {"beats": 3} and size == len('{"beats":3}')
    with pytest.raises(CheckpointTooLarge):
        checked_checkpoint("x" * 16_390, {}, LOOP, 1)
    # the state fits alone, but the merged load config would not
    with pytest.raises(CheckpointTooLarge):
        checked_checkpoint("x" * 10_000, {"pad": "y" * 8_000}, LOOP, 1)


# ---------------------------------------------------------------- §9.5 / §9.6 arguments


def test_notify_arguments() -> None:
    assert notify_args({"content": "hi", "dedup_key": "k1"}) == ("hi", "k1")
    assert notify_args({"text": "hi", "dedup_key": "k1"}) == ("hi", "k1")
    assert notify_args({"content": {"a": 1}, "dedup_key": "k"}) == ('{"a":1}', "k")
    notify_args({"content": "é" * 4096, "dedup_key": "k"})  # exactly 8192 bytes


@pytest.mark.parametrize(
    "args",
    [
        {"content": "", "dedup_key": "k"},
        {"content": "é" * 4097, "dedup_key": "k"},
        {"content": 5, "dedup_key": "k"},
        {"dedup_key": "k"},
        {"content": "x"},
        {"content": "x", "dedup_key": ""},
        {"content": "x", "dedup_key": "k" * 129},
        {"content": "x", "dedup_key": "a\nb"},
        {"content": "x", "dedup_key": "lifecycle:exited"},
        {"content": "\ud800", "dedup_key": "k"},
        ["content"],
    ],
)
def test_bad_notify_arguments(args: object) -> None:
    with pytest.raises(HostCallRefused) as info:
        notify_args(args)
    assert info.value.code == "invalid_arguments"


def test_state_ack_and_log_arguments() -> None:
    assert state_arg({"state": {"n": 1}}) == {"n": 1}
    assert state_arg({"n": 1}) == {"n": 1}  # Salix: the whole object is the state
    assert state_arg({"state": None}) is None
    assert ack_event_id({"event_id": "e1"}) == "e1"
    for bad in ({"event_id": ""}, {}, {"event_id": 3}, "e1"):
        with pytest.raises(HostCallRefused):
            ack_event_id(bad)
    cut = log_text({"message": "z" * 2000})
    assert len(cut) == 1024 and cut.endswith("…")
    assert log_text({"text": "hello"}) == "hello"


# ---------------------------------------------------------------- §9.5 wake budget arithmetic

MIN = 60_000
HOUR_NS = 3_600 * 10**9


def test_seventh_wake_in_ten_minutes_is_limited() -> None:
    limits = Limits()
    window = WakeWindow(None, 0, None)
    verdicts = []
    for i in range(7):
        verdict, window = judge_wake(window, 1_000 + i * MIN, 0, limits)
        verdicts.append(verdict)
    assert verdicts == ["admit"] * 6 + ["limited"]
    assert window.limited_since_ms == 1_000 + 6 * MIN
    # a new window after 10 minutes admits again
    verdict, _ = judge_wake(window, 1_000 + 10 * MIN, 0, limits)
    assert verdict == "admit"


def test_window_restarts_when_the_store_clock_goes_back() -> None:
    limits = Limits()
    window = WakeWindow(10 * MIN, 6, None)
    verdict, after = judge_wake(window, 5 * MIN, 0, limits)
    assert verdict == "admit" and after.start_ms == 5 * MIN and after.count == 1


def _hour_of_limiting(mono_factor: float) -> list[str]:
    """7 notifies every 10 minutes; the node's monotonic clock advances ``mono_factor`` times as fast."""
    limits = Limits()
    window, watch = WakeWindow(None, 0, None), LimitWatch()
    out: list[str] = []
    for minute in range(0, 80, 10):
        for i in range(7):
            now = minute * MIN + i * 1_000
            mono = int(now * 1_000_000 * mono_factor)
            verdict, window = judge_wake(window, now, watch.elapsed_ns("lp", mono), limits)
            watch.record("lp", window.limited_since_ms, mono)
            out.append(verdict)
    return out


def test_an_hour_of_limiting_exhausts_the_budget_when_both_clocks_agree() -> None:
    verdicts = _hour_of_limiting(1.0)
    first = verdicts.index("exhausted")
    assert first == 7 * 6 + 6  # the 7th wake of the window that starts at minute 60
    assert verdicts[:first].count("limited") == 6


def test_a_fast_store_clock_alone_does_not_exhaust() -> None:
    assert "exhausted" not in _hour_of_limiting(0.5)


def test_a_quiet_window_ends_the_limiting() -> None:
    limits = Limits()
    window = WakeWindow(0, 7, 0)  # a saturated window starting at 0
    _, window = judge_wake(window, 10 * MIN, HOUR_NS, limits)  # next window: admitted, still limited
    assert window.limited_since_ms == 0
    _, window = judge_wake(window, 20 * MIN, HOUR_NS, limits)  # previous window was not saturated
    assert window.limited_since_ms is None
