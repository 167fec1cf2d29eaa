"""Each rule in one table (issue 15): ``wakeful.sdk.rules`` holds the built-in capabilities and the limits an agent
writes a Loop against; the harness's checks, the runtime's defaults, the scripted test host and the guide agree
with it, so a copy that drifts fails here."""

from __future__ import annotations

import re

from wakeful.harness import capabilities, checkpoint, dispatch, eventbody, wake_args
from wakeful.harness.config import Limits
from wakeful.runtime import LOOP_BUILTINS, RuntimeOptions
from wakeful.runtime.core import MAX_ENVELOPE_BYTES
from wakeful.sdk import guide_text
from wakeful.sdk.rules import AGENT_LIMITS, BUILTIN_CAPABILITIES, SLICE_INSNS, VALUE_BYTES


def _guide_section(number: int) -> str:
    text = guide_text()
    start = text.index(f"\n## {number}. ")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_the_builtin_capabilities_are_one_list() -> None:
    assert frozenset(BUILTIN_CAPABILITIES) == capabilities.BUILTINS
    assert tuple(LOOP_BUILTINS) == BUILTIN_CAPABILITIES
    guide = guide_text()
    missing = [name for name in BUILTIN_CAPABILITIES if f"`{name}`" not in guide]
    assert not missing, f"the guide does not name the builtin capabilities {missing}"


def test_the_harness_checks_and_defaults_read_the_table() -> None:
    lim = Limits()
    assert lim.loops_per_agent == AGENT_LIMITS["active_loops_per_agent"]
    assert lim.pending_events == AGENT_LIMITS["pending_events"]
    assert lim.notify_per_window == AGENT_LIMITS["wakes_per_10_min"] and lim.notify_window_s == 600
    assert lim.ack_deadline_s == AGENT_LIMITS["ack_deadline_s"]
    assert lim.ingress_per_loop_per_min == AGENT_LIMITS["ingress_per_loop_per_min"]
    assert AGENT_LIMITS["capabilities"] == capabilities.MAX_ENTRIES
    assert AGENT_LIMITS["wake_content_bytes"] == wake_args.MAX_CONTENT_BYTES
    assert AGENT_LIMITS["dedup_key_bytes"] == wake_args.MAX_DEDUP_KEY_BYTES
    assert AGENT_LIMITS["host_calls_in_flight"] == dispatch.MAX_IN_FLIGHT
    assert AGENT_LIMITS["config_bytes"] == checkpoint.MAX_CONFIG_BYTES
    assert AGENT_LIMITS["checkpoint_bytes"] == checkpoint.MAX_CHECKPOINT_BYTES
    assert eventbody.MAX_ENVELOPE_BYTES == AGENT_LIMITS["event_envelope_bytes"] == MAX_ENVELOPE_BYTES == VALUE_BYTES
    assert RuntimeOptions().slice_insns == SLICE_INSNS
    from wakeful.harness.ops import builds

    assert builds.SPEC_LIMITS is AGENT_LIMITS  # what loop.sdk answers as "limits" on every face


def _number(value: int) -> str:
    return f"{value:,}"


def test_the_guide_limits_table_states_the_table() -> None:
    limits = _guide_section(15)
    rows = {line.split("|")[1].strip(): line for line in limits.splitlines() if line.startswith("| ")}

    def row(prefix: str) -> str:
        found = [text for name, text in rows.items() if name.startswith(prefix)]
        assert found, f"no row {prefix!r} in guide §15"
        return found[0]

    a = AGENT_LIMITS
    assert f"{a['pending_events']} / {a['ack_deadline_s'] // 60} minutes" in row("pending events per Loop")
    assert f"{_number(a['event_envelope_bytes'])} bytes" in row("event envelope")
    assert f"{a['config_bytes'] // 1024} KiB each" in row("config / checkpoint")
    assert f"{a['wakes_per_10_min']} per 10 minutes" in row("wakes")
    assert f"content {a['wake_content_bytes'] // 1024} KiB; key {a['dedup_key_bytes']} bytes" in row("wakes")
    assert f"| {a['host_calls_in_flight']} |" in row("host calls in flight")
    assert f"{a['elf_bytes'] // 1024} KiB" in row("ELF object")


def test_the_drift_check_can_fail() -> None:
    """The guide check reads numbers, not the words around them: a changed limit would be caught."""
    limits = _guide_section(15)
    assert re.search(r"\b32 / 15 minutes\b", limits)
    assert "33 / 15 minutes" not in limits
