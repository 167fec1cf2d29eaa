"""The rules a Loop is written against, in one table: the built-in capabilities, the limits an agent needs while
writing a Loop (harness.md §20, as ``loop.sdk`` reports them), and the runtime's value and slice sizes.

The guide (``guide.md`` §15), the MCP ``loop.sdk`` answer, the scripted test host of ``wakeful run``, the
harness's checks and the runtime's defaults all read these names; ``tests/unit/project/test_project_rules.py``
fails when a copy drifts.
"""

from __future__ import annotations

__all__ = ["AGENT_LIMITS", "BUILTIN_CAPABILITIES", "SLICE_INSNS", "VALUE_BYTES"]

# harness.md §9.1: what every Loop may call without a grant of an embedder's or the configuration's tool
BUILTIN_CAPABILITIES: tuple[str, ...] = (
    "agent.notify",
    "loop.state.put",
    "loop.state.get",
    "loop.ack",
    "loop.log",
    "decide",
    "web.http_request",
)

VALUE_BYTES = 16_384
"""runtime-protocol.md §6.9 / sdk.md §4: an encoded JSON value, an event envelope, a text argument."""

SLICE_INSNS = 16_384
"""vm.md §7: instructions a guest runs per scheduler slice (the default of every runtime)."""

# harness.md §20 (the defaults; a node's configuration may lower or raise the per-agent ones)
AGENT_LIMITS: dict[str, int] = {
    "active_loops_per_agent": 20,
    "pending_events": 32,
    "event_envelope_bytes": VALUE_BYTES,
    "config_bytes": VALUE_BYTES,
    "checkpoint_bytes": VALUE_BYTES,
    "elf_bytes": 65_536,
    "wakes_per_10_min": 6,
    "wake_content_bytes": 8192,
    "dedup_key_bytes": 128,
    "ack_deadline_s": 900,
    "host_calls_in_flight": 4,
    "capabilities": 32,
    "ingress_per_loop_per_min": 60,
}
