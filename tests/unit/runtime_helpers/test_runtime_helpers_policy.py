"""Capability policy (runtime-protocol.md §9.1) and the load parameter (§6.3)."""

from __future__ import annotations

import pytest

from wakeful.errors import InvalidParams
from wakeful.runtime.policy import Capability, CapabilityPolicy, parse_capabilities


def test_exact_name_byte_equality() -> None:
    policy = CapabilityPolicy([Capability("agent.notify")])
    assert policy.allows("agent.notify", None)
    for forged in ("agent.notif", "agent.notifyx", "Agent.notify", "agent.notify\x00", "agent.notify ",
                   "\x00agent.notify", "agent.nοtify"):
        assert not policy.allows(forged, {})


def test_unconstrained_and_empty_arguments_accept_anything() -> None:
    policy = parse_capabilities([{"name": "a"}, {"name": "b", "arguments": {}}])
    for params in (None, 1, [], {"x": 1}):
        assert policy.allows("a", params) and policy.allows("b", params)


def test_constraints_are_strict_top_level_and_allow_extra_keys() -> None:
    policy = parse_capabilities([{"name": "t", "arguments": {"n": 1, "o": {"k": [True]}}}])
    assert policy.allows("t", {"n": 1, "o": {"k": [True]}, "extra": 0})
    for params in ({"n": 1.0, "o": {"k": [True]}}, {"n": True, "o": {"k": [True]}},
                   {"n": 1, "o": {"k": [1]}}, {"n": 1}, {"o": {"k": [True]}}, [1], None, "n"):
        assert not policy.allows("t", params)


def test_entries_with_one_name_are_alternatives() -> None:
    policy = parse_capabilities([{"name": "t", "arguments": {"n": 1}}, {"name": "t", "arguments": {"n": "1"}}])
    assert policy.allows("t", {"n": 1}) and policy.allows("t", {"n": "1"})
    assert not policy.allows("t", {"n": 1.0})
    assert len(policy) == 2


@pytest.mark.parametrize(
    "raw",
    ["x", {"name": "a"}, [{"name": ""}], [{"name": "a" * 129}], [{"name": 1}], [{"name": "a", "extra": 1}],
     [{"arguments": {}}], [{"name": "a", "arguments": [1]}], [{"name": "a", "arguments": {"x": float("nan")}}],
     [{"name": "a", "arguments": {"x": "y" * 20000}}], [{"name": "a"}] * 1025, [{"name": "\ud800"}]],
)
def test_invalid_capabilities(raw: object) -> None:
    with pytest.raises(InvalidParams, match="invalid capabilities"):
        parse_capabilities(raw)


def test_limits_accepted() -> None:
    assert len(parse_capabilities([{"name": "é" * 64}] * 1024)) == 1024
    assert len(parse_capabilities(None)) == 0


def test_equal_entries_share_one_policy_object() -> None:
    # issue 16: thousands of Loops of one configuration load the same entries; each held its own index
    entries = [{"name": "agent.notify"}, {"name": "t", "arguments": {"n": 1, "o": {"k": [True]}}}]
    first = parse_capabilities(entries)
    again = parse_capabilities([dict(e) for e in entries])
    assert again is first
    assert parse_capabilities(None) is parse_capabilities([])


def test_policies_that_differ_are_not_shared() -> None:
    # the key is as strict as the match: 1, 1.0 and true are three constraints, and the order of keys is not one
    by_value = [parse_capabilities([{"name": "t", "arguments": {"n": v}}]) for v in (1, 1.0, True, "1")]
    assert len({id(p) for p in by_value}) == 4
    assert by_value[0].allows("t", {"n": 1}) and not by_value[1].allows("t", {"n": 1})
    assert parse_capabilities([{"name": "t", "arguments": {"a": 1, "b": 2}}]) is parse_capabilities(
        [{"name": "t", "arguments": {"b": 2, "a": 1}}])
    assert parse_capabilities([{"name": "a"}]) is not parse_capabilities([{"name": "b"}])
