"""Build operations (interfaces.md §2.2 "Builds, artifacts", §3.2): the SDK an agent writes against, a build to a
stored artifact, and a scripted test run of a built artifact before a Loop is created from it.

- ``sdk.get`` — ``{sdk_version, guide, header, limits}``: the guide lists this node's configured read tools and
  the limits are this node's (``loop.sdk``, and the guide resource of the MCP server, over any face).
- ``builds.create`` — the build report; a failed build is a normal answer (``state: failed``).
- ``builds.test`` — ``loop.test``: the artifact runs in a sandbox against scripted events and host answers
  (``wakeful.runtime.scripted``, as ``wakeful run``), in the node's process, at most two at once per node.

A person principal names the agent whose artifact path is used with ``agent_id``; an agent principal is itself.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wakeful.errors import BuildBusy, BuildUnavailable, BundleError, InvalidParams, WakefulError
from wakeful.harness.errors import (
    BundleRefused,
    CompilerUnavailable,
    HarnessBusy,
    InvalidRequest,
    NotFound,
    TestRefused,
)
from wakeful.harness.ops.table import operation
from wakeful.harness.principal import check_group
from wakeful.sdk.rules import AGENT_LIMITS

if TYPE_CHECKING:
    from wakeful.build.lines import LineTable
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = [
    "SPEC_LIMITS", "acting_agent", "agent_in_scope",
    "bundle_of", "create", "sdk", "sdk_view", "test",
]

DEFAULT_PATH = "/loops/main.elf"
SPEC_LIMITS = AGENT_LIMITS  # harness.md §20, one table (wakeful.sdk.rules); a node's own replace the first four
TEST_TIMEOUT_S = 5.0
MAX_TEST_TIMEOUT_S = 30.0
MAX_TEST_EVENTS = AGENT_LIMITS["pending_events"]  # harness.md §20 pending events
TEST_RUNS_PER_NODE = 2  # a test runs a guest in the node's process: at most two at once per harness
_runs: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def acting_agent(principal: Principal, agent_id: str | None) -> str:
    """The agent a request acts for: the agent principal's own, else the ``agent_id`` given."""
    if principal.agent_id is not None:
        if agent_id is not None and agent_id != principal.agent_id:
            raise NotFound(f"agent {agent_id[:40]} not found")
        return principal.agent_id
    if agent_id is None:
        raise InvalidRequest("a person principal must name agent_id (or send X-Wakeful-Agent)", field="agent_id")
    return agent_id


async def agent_in_scope(harness: Harness, principal: Principal, group_id: str, agent_id: str) -> None:
    """The agent is in ``group_id`` and visible to the principal, else ``agent_not_found``."""
    from wakeful.harness.errors import AgentNotFound
    from wakeful.harness.store import agents

    check_group(principal, group_id)
    async with harness.store.tx(readonly=True) as tx:
        found = await agents.find_agent(tx, agent_id) if 1 <= len(agent_id) <= 40 else None
    if found is None or found.group_id != group_id or not principal.sees_agent(found.id):
        raise AgentNotFound(f"agent {agent_id[:40]} not found")


# ---------------------------------------------------------------------- sdk.get


def sdk_view(harness: Harness | None = None) -> dict[str, Any]:
    """``{sdk_version, guide, header, limits}``: with a harness, its read tools in the guide and its limits."""
    from wakeful.sdk import SDK_ABI, guide_text, header_text

    limits = dict(SPEC_LIMITS)
    tools: list[tuple[str, str]] = []
    if harness is not None:
        lim = harness.config.limits
        limits.update(active_loops_per_agent=lim.loops_per_agent, pending_events=lim.pending_events,
                      wakes_per_10_min=lim.notify_per_window, ack_deadline_s=lim.ack_deadline_s)
        tools = harness.registry.guide_entries()
    return {"sdk_version": SDK_ABI, "guide": guide_text(tools), "header": header_text(), "limits": limits}


@operation("sdk.get")
async def sdk(harness: Harness, principal: Principal, *, group_id: str) -> dict[str, Any]:
    """The SDK as this node offers it: the guide (with the node's configured tools), header and limits."""
    check_group(principal, group_id)
    return sdk_view(harness)


# ---------------------------------------------------------------------- builds.create


def bundle_of(source: str | None, files: Mapping[str, str] | None, entry: str | None) -> dict[str, Any]:
    """``{source}`` → a one-file bundle ``main.c`` (plus ``files``); ``{files, entry}`` as build.md §3."""
    if source is not None:
        bundle = dict(files or {})
        bundle["main.c"] = source
        return {"sdk_version": 1, "entry": entry or "main.c", "files": bundle}
    if files is None or entry is None:
        raise InvalidRequest("a build is {source} or {files, entry}", field="source")
    return {"sdk_version": 1, "entry": entry, "files": dict(files)}


@operation("builds.create")
async def create(harness: Harness, principal: Principal, *, group_id: str, source: str | None = None,
                 files: Mapping[str, str] | None = None, entry: str | None = None, path: str = DEFAULT_PATH,
                 agent_id: str | None = None) -> dict[str, Any]:
    """Compile to a verified artifact stored under the agent's ``path``; a failed build is ``state: failed``."""
    from wakeful.harness.store import artifacts

    agent = acting_agent(principal, agent_id)
    await agent_in_scope(harness, principal, group_id, agent)
    path = artifacts.check_path(path)
    builder = harness.loops.builder
    if builder is None:
        raise CompilerUnavailable("builds are not enabled on this node")
    try:
        result = await builder.compile(bundle_of(source, files, entry))
    except BundleError as exc:
        raise BundleRefused(exc.message, rule=getattr(exc, "rule", None), path=getattr(exc, "path", None)) from None
    except BuildUnavailable as exc:
        raise CompilerUnavailable(exc.message) from None
    except BuildBusy as exc:
        raise HarnessBusy(exc.message, retry_after_s=1) from None
    if result.state != "succeeded" or result.elf is None:
        return {"state": "failed", "kind": "build_failed", "failure": result.failure, "error": result.error,
                "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated}
    stored = await harness.loops.upload(agent_id=agent, elf=result.elf, path=path, creator=principal.actor,
                                        origin="build", toolchain=result.toolchain, diagnostics=result.diagnostics,
                                        lines=result.lines)
    return {"state": "succeeded", "artifact": stored["artifact"], "path": path, "elf_bytes": len(result.elf),
            "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated,
            "sdk_version": 1, "toolchain": result.toolchain, "cached": result.cached,
            "report": result.report.to_json() if result.report is not None else None}


# ---------------------------------------------------------------------- builds.test (loop.test)


@operation("builds.test")
async def test(harness: Harness, principal: Principal, *, group_id: str, artifact: str = DEFAULT_PATH,
               config: Mapping[str, Any] | None = None, events: list[Any] | None = None,
               host_replies: Mapping[str, Any] | None = None, engine: str = "translate",
               timeout_s: float = TEST_TIMEOUT_S, agent_id: str | None = None) -> dict[str, Any]:
    """Run a built artifact against scripted events and host answers, exactly as ``wakeful run`` does:
    ``{artifact, state, exit_code, fault, stopped_by, host_calls, notifications, logs, states}``."""
    from wakeful.runtime.scripted import INJECTED_CONFIG, Recorder, parse_replies, run_scripted

    agent = acting_agent(principal, agent_id)
    await agent_in_scope(harness, principal, group_id, agent)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= MAX_TEST_TIMEOUT_S:
        raise InvalidRequest(f"timeout_s must be in (0, {MAX_TEST_TIMEOUT_S:g}]", field="timeout_s")
    if config is not None and not isinstance(config, Mapping):
        raise InvalidRequest("config must be an object", field="config")
    if engine not in ("translate", "interp"):
        raise InvalidRequest("engine must be translate or interp", field="engine")
    if events is not None and (not isinstance(events, list) or len(events) > MAX_TEST_EVENTS):
        raise InvalidRequest(f"events must be a list of at most {MAX_TEST_EVENTS}", field="events")
    scripted = [_event(i, e) for i, e in enumerate(events or [], start=1)]
    try:
        replies = parse_replies(host_replies or {}, source="host_replies")
    except InvalidParams as exc:
        raise InvalidRequest(exc.message, field="host_replies") from None
    ref, elf, lines = await _artifact_bytes(harness, group_id, agent, artifact)
    recorder = Recorder()
    async with _runs.setdefault(harness, asyncio.Semaphore(TEST_RUNS_PER_NODE)):
        try:
            final = await run_scripted(elf, config={**INJECTED_CONFIG, **(config or {})}, events=scripted,
                                       replies=replies, engine=engine, timeout_s=float(timeout_s),
                                       observer=recorder, lines=lines)
        except WakefulError as exc:  # a refused load or event: the runtime's typed reason
            rule = getattr(exc, "rule", None)
            raise TestRefused(exc.message, reason=exc.code,
                              **({"rule": rule} if isinstance(rule, str) else {})) from None
    return {"artifact": ref, **recorder.report(final)}


def _event(index: int, event: Any) -> tuple[str, Any]:
    topic = event.get("topic") if isinstance(event, dict) else None
    valid = isinstance(topic, str) and 1 <= len(topic.encode()) <= 128 and set(event) <= {"topic", "payload"}
    if not valid:
        raise InvalidRequest(f"events[{index - 1}] must be {{topic (1..128 bytes), payload?}}", field="events")
    return str(topic), event.get("payload")


async def _artifact_bytes(harness: Harness, group_id: str, agent_id: str,
                          ref: Any) -> tuple[str, bytes, LineTable | None]:
    """The artifact's reference, bytes and (for a build) line table, so faults name the source (issue 18)."""
    from wakeful.harness.source_lines import stored_table
    from wakeful.harness.store import artifacts

    async with harness.store.tx(readonly=True) as tx:
        found = await artifacts.resolve_artifact(tx, group_id=group_id, agent_id=agent_id, ref=ref)
        lines = await stored_table(tx, group_id, found.sha256)
    assert found.elf is not None
    return f"sha256:{found.sha256}", found.elf, lines
