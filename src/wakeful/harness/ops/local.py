"""The operator's one-shot operations on the node's machine, without a running node: run a script, ask the
decision model, call a configured capability (``wakeful script run``, ``wakeful decide``, ``wakeful capability
test``). Each builds the few harness parts it needs from the configuration and closes them again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from wakeful.harness.config import Config
    from wakeful.harness.decide import DecideSettings
    from wakeful.harness.web_policy import WebSettings

__all__ = ["blocked_reason", "decide", "run_script", "script_sdk", "test_capability"]


async def run_script(config: Config, store_url: str, agent_id: str, request: dict[str, Any],
                     env: dict[str, str]) -> dict[str, Any]:
    """One script run as ``agent_id`` on the store at ``store_url`` (its outcome, also a failed one)."""
    from wakeful.build import Builder
    from wakeful.harness.node import Node
    from wakeful.harness.registry import ToolRegistry
    from wakeful.harness.scripts import ScriptRunner
    from wakeful.harness.scripts_tools import ScriptTools
    from wakeful.harness.store import Store, agents
    from wakeful.harness.tools import LoopTools

    store = await Store.open(store_url)
    builder = Builder(config.build.options(config.data_dir))  # build.* (interfaces.md §7)
    try:
        node = Node(store, config)  # not opened: no runtime, no adoption; Loop views and the decider only

        class _Host:  # what ScriptTools reads of a harness
            registry = ToolRegistry()
            loops = LoopTools(node, adopt=False)

        _Host.node = node  # type: ignore[attr-defined]
        runner = ScriptRunner(builder=builder, call_tool=ScriptTools(cast(Any, _Host())).call, limits=config.scripts)
        await runner.open()
        try:
            async with store.tx(readonly=True) as tx:
                agent = await agents.get_agent(tx, agent_id)
            return dict(await runner.run(agent_id=agent.id, group_id=agent.group_id, request=request, env=env))
        finally:
            await runner.close()
            await node.dispatch.decider.aclose()
    finally:
        builder.close()
        await store.close()


async def decide(settings: DecideSettings, group_id: str, request: dict[str, Any]) -> dict[str, Any]:
    """What a guest of ``group_id`` would receive for ``request`` from the decision model ``settings`` name."""
    from wakeful.harness.decide import Decider

    decider = Decider(settings, monotonic_ns=time.monotonic_ns)
    try:
        return await decider.decide(group_id, request)
    finally:
        await decider.aclose()


async def test_capability(config: Config, name: str, args: Any) -> dict[str, Any] | None:
    """The configured HTTP capability ``name`` called once as the operator: its result, ``None`` when no
    capability of that name is configured; a refusal raises ``HostCallRefused``."""
    from wakeful.harness.capability_http import HttpCapability
    from wakeful.harness.registry import ToolContext

    spec = next((s for s in config.capabilities if s.name == name), None)
    if spec is None:
        return None
    ctx = ToolContext(principal="operator", loop_id=None, agent_id=None, session_id=None, group_id=None,
                      incarnation=None, deadline_unix_ms=None)
    call = HttpCapability(spec, config.web, monotonic_ns=time.monotonic_ns)
    return dict(await call(args, ctx))


def blocked_reason(address: Any, settings: WebSettings) -> str | None:
    """Why ``web.http_request`` may not reach ``address`` under ``settings`` (None: allowed; harness.md §17.3)."""
    from wakeful.harness.web_policy import blocked_reason as reason

    return reason(address, settings)


def script_sdk() -> dict[str, Any]:
    """The script SDK of harness.md §18 with the default limits, for a face that has no node at hand."""
    from wakeful.harness.config import ScriptLimits
    from wakeful.harness.scripts import ScriptRunner

    class _Nothing:
        async def compile(self, request: Any) -> Any:
            raise RuntimeError("no builds here")

    async def _no_tool(*_: Any) -> Any:
        raise RuntimeError("no tools here")

    return dict(ScriptRunner(builder=_Nothing(), call_tool=_no_tool, limits=ScriptLimits()).sdk())
