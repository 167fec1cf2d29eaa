"""The harness node of the Python embedding API — a node inside the embedder's own process (``wakeful.Harness``
extends it with ``h.control`` and ``h.serve_http`` in ``wakeful.embed``, above the layers it reaches).

interfaces.md §5: open a store, run the runtime in-process, administer tenants, drive Loops, register wake
handlers per agent and extra tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from wakeful.harness.config import Config, load_config
from wakeful.harness.instruments import Instrument
from wakeful.harness.intake import Intake
from wakeful.harness.node import Node
from wakeful.harness.placement.identity import NodeIdentity
from wakeful.harness.ratelimit import Limiter
from wakeful.harness.registry import Tool, ToolRegistry
from wakeful.harness.store import agents, groups, sessions
from wakeful.harness.store.core import Store
from wakeful.harness.store.engine import session_timeouts
from wakeful.harness.store.keycache import FLUSH_EVERY_S, KeyCache
from wakeful.harness.store.sessions import Message
from wakeful.harness.tasks import cancel_and_wait
from wakeful.harness.tools import LoopTools
from wakeful.runtime import Clock
from wakeful.runtime.scheduler import one_malloc_arena

__all__ = ["Harness", "WakeMessage"]

log = logging.getLogger("wakeful.harness")
T = TypeVar("T")

WakeMessage = Message  # interfaces.md §5: id, kind, session, agent, Loop id and name, incarnation, content, times
WakeHandler = Callable[[WakeMessage], Any]
BACKOFF_START_S, BACKOFF_MAX_S = 1.0, 60.0  # interfaces.md §5: 1 s doubling to 60 s
LOG_FLUSH_S = 2.0  # harness.md §2.7: guest log lines are flushed in batches every 2 s


class Harness:
    """A node like ``wakeful serve`` without the HTTP server. Nothing starts until ``async with`` / ``start``."""

    def __init__(
        self, config: Config | None = None, *, db_url: str | None = None, data_dir: str | Path | None = None,
        clock: Clock | None = None, sweeps: bool = True, tick_s: float | None = None, limiter: Limiter | None = None,
    ) -> None:
        base = config or load_config()
        self.config = base.with_overrides(
            store_url=db_url, data_dir=None if data_dir is None else Path(data_dir),
        )
        self.clock = clock
        self.sweeps = sweeps
        self.tick_s = float(self.config.placement.tick_s) if tick_s is None else tick_s  # placement.tick_s (§19.3)
        # placement.reconcile_s (§11, §19.3): the reconcile runs on every n-th sweep tick; a tick_s passed here
        # (tests) shortens the reconcile period to it too, so a forced period drives all periodic work
        reconcile_s = float(self.config.placement.reconcile_s)
        self.reconcile_s = reconcile_s if tick_s is None else min(reconcile_s, tick_s)
        self._ticks = 0  # sweep ticks so far; the reconcile runs on ticks 0, n, 2n, …
        self._solo: Any = None  # SQLite: the one node's row (harness/placement/solo.py)
        self._identity: NodeIdentity | None = None  # the data directory's node id, held while running
        self.registry = ToolRegistry()
        self._register_configured()
        self._handlers: list[tuple[str | None, tuple[str, ...], WakeHandler]] = []
        self._store: Store | None = None
        self._keys: KeyCache | None = None
        self._node: Node | None = None
        self._tools: LoopTools | None = None
        self._intake: Intake | None = None
        self.limiter = limiter  # harness.md §14: None → in-process buckets; a cluster passes a shared Limiter
        self._scripts: Any = None  # harness/scripts.py ScriptRunner, made at start
        self._decide_provider: Any = None  # interfaces.md §5 set_decide_provider (installed at start)
        self._builder: Any = None
        self._sweeps: list[asyncio.Task[None]] = []
        self._wake_tasks: set[asyncio.Task[None]] = set()
        self._store_work: set[asyncio.Future[Any]] = set()

    # docs/decisions-config.md "Configured capabilities": [capabilities."<name>"] are tools like register_tool's
    def _register_configured(self) -> None:
        from wakeful.harness.capability_http import configured_tools

        monotonic = self.clock.monotonic_ns if self.clock is not None else time.monotonic_ns
        configured_tools(self.config, monotonic, self.registry)

    # ------------------------------------------------------------------ start and stop

    async def __aenter__(self) -> Harness:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Store (with migrations), runtime, adoption of active Loops, sweeps."""
        one_malloc_arena()  # before the store's threads exist (issue 16: their arenas held the burst's garbage)
        url = self.config.effective_store_url
        self.config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # interfaces.md §7: mode 0700
        placement = self.config.placement  # issue 16: sessions that cannot hold locks past the lease window
        self._store = await Store.open(url, clock=self.clock, node_lock=url.startswith("sqlite"),
                                       timeouts=session_timeouts(placement.lease_ttl_s, placement.renew_s))
        self._keys = KeyCache(self._store)  # harness.md §2.1, for the faces (flushed by a sweep and at stop)
        try:
            # issue 16: the data directory's node id, so a restart reclaims this node's own leases at once
            self._identity = NodeIdentity.take(self.config.data_dir)
            self._node = Node(self._store, self.config, clock=self.clock, tools=self.registry,
                              node_id=self._identity.node_id)
            self._node.add_instrument(_Wakes(self))  # first: wake handlers see a message before other observers
            self._tools = LoopTools(self._node, builder=_LazyBuilder(self))
            self._intake = Intake(self._node, limiter=self.limiter or _shared_limiter(self._store))
            self._node.dispatch.decider.install(self._decide_provider)
            shared = self.limiter or _shared_limiter(self._store)
            if shared is not None:  # harness.md §14 cluster: the decide and web buckets in the shared rows too
                self._node.dispatch.decider.shared = shared.take
                self._node.dispatch.web_shared = shared.take
            if self._store.dialect == "postgresql":  # harness.md §19: one node of a cluster
                from wakeful.harness.placement import Placement

                self._node.placement = Placement(self._node, wall=self.clock)
                self._node.placement.wants_messages = lambda: bool(self._handlers)
            await self._node.open()
            if self._node.placement is not None:  # register, renew, listen; claim and adopt stranded agents
                await self._node.placement.start(sweeps=self.sweeps)
            else:  # harness.md §19 on SQLite: one node, its row and heartbeat, no leases
                from wakeful.harness.placement.solo import SoloNode

                self._solo = SoloNode(self._node)
                await self._solo.start()
        except BaseException:
            await self._store.close()
            self._release_identity()
            raise
        await self._open_scripts()
        if self._node.placement is None:  # a cluster node offers an agent's messages when it claims the agent
            await self._offer_unhandled()
        if self.sweeps:
            loop = asyncio.get_running_loop()
            self._sweeps = [loop.create_task(self._every(self.tick_s, self._sweep_tick)),
                            loop.create_task(self._every(LOG_FLUSH_S, self.node.flush_logs)),
                            loop.create_task(self._every(FLUSH_EVERY_S, self.keys.flush))]
            if self._solo is not None:
                beat = float(self.config.placement.heartbeat_s)
                self._sweeps.append(loop.create_task(self._every(beat, self._solo.heartbeat)))

    @contextlib.asynccontextmanager
    async def offline(self) -> AsyncIterator[Harness]:
        """The harness on its store with nothing running — no runtime, no adoption, no sweeps, no node lock: the
        command line's local mode, whose rows a node running on the store acts on (interfaces.md §4.1). Its
        operations (``wakeful.harness.ops``) work; a Loop created or retried here is loaded by that node."""
        if self._store is not None:
            raise RuntimeError("the harness is already started")
        self._store = await Store.open(self.config.effective_store_url, clock=self.clock)
        try:
            self._keys = KeyCache(self._store)
            self._node = Node(self._store, self.config, clock=self.clock, tools=self.registry)
            self._node.pending.adopt = False
            self._tools = LoopTools(self._node, builder=_LazyBuilder(self), adopt=False)
            self._intake = Intake(self._node, limiter=self.limiter)
            yield self
        finally:
            store, self._store = self._store, None
            self._node = self._tools = self._intake = self._keys = None
            if self._builder is not None:
                self._builder.close()
                self._builder = None
            await store.close()

    async def stop(self) -> None:
        """Drain (harness.md §19.4, single node): end every incarnation, close the store."""
        await cancel_and_wait(self._sweeps)
        self._sweeps = []
        for task in list(self._wake_tasks):
            task.cancel()
        if self._wake_tasks:
            await asyncio.gather(*list(self._wake_tasks), return_exceptions=True)
        if self._store_work:  # let their transactions end before the store closes
            await asyncio.gather(*list(self._store_work), return_exceptions=True)
        if self._scripts is not None:
            await self._scripts.close()
            self._scripts = None
        if self._node is not None and self._node.placement is not None:
            await self._node.placement.drain()  # §19.4: end incarnations, release leases, node gone
        if self._solo is not None:
            await self._solo.stop()
            self._solo = None
        if self._node is not None:
            await self._node.close()
            await self._node.dispatch.decider.aclose()
        if self._builder is not None:
            self._builder.close()
        if self._keys is not None:  # the last batch of key uses (last_used_ms, harness.md §2.1)
            try:
                await self._keys.flush()
            except Exception:  # the store still closes
                log.exception("the last key-use flush failed")
        if self._store is not None:
            await self._store.close()
        self._release_identity()
        self._node = self._store = self._tools = self._intake = self._keys = None

    def _release_identity(self) -> None:
        if self._identity is not None:
            self._identity.release()
            self._identity = None

    @property
    def signals_nodes(self) -> bool:
        """Whether a change written here reaches the nodes on the store at once (PostgreSQL's ``NOTIFY``); on
        SQLite a node sees it at its next reconcile."""
        return self.store.dialect == "postgresql"

    async def group_of(self, *, loop_id: str | None = None, agent_id: str | None = None) -> str | None:
        """The group of a Loop (or else of an agent), which the operator names without its group; ``None`` when
        there is no such Loop or agent (the operation then answers its own ``not_found``)."""
        from wakeful.harness.store import loops
        from wakeful.harness.store.ids import lookup_text

        async with self.store.tx(readonly=True) as tx:
            if loop_id is not None:
                row = await loops.find_loop(tx, loop_id) if lookup_text(loop_id) and len(loop_id) <= 40 else None
                return None if row is None else row.group_id
            found = await agents.find_agent(tx, agent_id) if agent_id and len(agent_id) <= 40 else None
            return None if found is None else found.group_id

    async def group_ids(self) -> list[str]:
        """Every group's id, oldest first."""
        async with self.store.tx(readonly=True) as tx:
            return [g.id for g in await groups.list_groups(tx)]

    async def run(self) -> None:
        """Start and run until cancelled."""
        async with self:
            await asyncio.Event().wait()

    async def tick(self) -> None:
        """One placement/reconcile tick now (tests drive time with an injected clock)."""
        if self.node.placement is not None:
            await self.node.placement.tick()
        await self.node.tick()
        await self.settle()

    async def settle(self) -> None:
        """Let reports, post-commit work and wake handlers spawned so far finish."""
        await self.node.settle()
        while self._wake_tasks:
            await asyncio.gather(*list(self._wake_tasks), return_exceptions=True)

    async def _sweep_tick(self) -> None:
        """One periodic node tick; the reconcile only when ``reconcile_s`` worth of ticks went by."""
        every = max(1, round(self.reconcile_s / self.tick_s)) if self.tick_s > 0 else 1
        due = self._ticks % every == 0
        self._ticks += 1
        await self.node.tick(reconcile=due)

    @staticmethod
    async def _every(seconds: float, work: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await work()
            except Exception:
                log.exception("harness sweep failed")

    @property
    def started(self) -> bool:
        """Whether the harness is started (its store open): the faces answer ``unavailable`` until it is."""
        return self._store is not None

    @property
    def node(self) -> Node:
        """The running ``Node`` (residents, dispatch, tools); ``RuntimeError`` before ``start``."""
        return self._once_started(self._node)

    @staticmethod
    def _once_started(part: T | None) -> T:
        """``part`` of the started harness; ``RuntimeError`` before ``start`` (or after ``stop``)."""
        if part is None:
            raise RuntimeError("the harness is not started")
        return part


    @property
    def control_if_running(self) -> Any:
        """The control plane when this harness runs one (``wakeful.Harness`` once started), else None."""
        return None

    @property
    def keys(self) -> KeyCache:
        """The node's API key cache (harness.md §2.1), shared by the HTTP API and ``/mcp``."""
        return self._once_started(self._keys)

    @property
    def store(self) -> Store:
        """The open ``Store``; ``RuntimeError`` before ``start``."""
        return self._once_started(self._store)

    @property
    def intake(self) -> Intake:
        """Event intake (harness.md §10): buckets, webhook resolution, strict bodies, admission."""
        return self._once_started(self._intake)

    @property
    def loops(self) -> LoopTools:
        """The node's ``LoopTools`` (the Loop operations the faces share); ``RuntimeError`` before ``start``."""
        return self._once_started(self._tools)

    # ------------------------------------------------------------------ administration (operator)

    async def create_group(self, name: str, *, limits: dict[str, Any] | None = None) -> groups.Group:
        """A new group (tenant) with optional limit overrides (harness.md §2.1, §15)."""
        async with self.store.tx() as tx:
            return await groups.create_group(tx, name=name, limits=limits)

    async def create_agent(self, group_id: str, name: str, *, metadata: dict[str, Any] | None = None) -> agents.Agent:
        """A new agent in ``group_id`` (harness.md §2.2)."""
        async with self.store.tx() as tx:
            return await agents.create_agent(tx, group_id=group_id, name=name, metadata=metadata)

    async def create_session(self, agent_id: str, title: str = "") -> sessions.Session:
        """A new session of the agent; Loops created in it send their wakes there (harness.md §2.3)."""
        async with self.store.tx() as tx:
            return await sessions.create_session(tx, agent_id=agent_id, title=title)

    async def create_key(self, role: str, *, group_id: str | None = None, agent_id: str | None = None,
                         label: str | None = None) -> tuple[groups.ApiKey, str]:
        """A new API key (``role`` admin, group or agent; harness.md §2.1): the row and the secret, shown once."""
        async with self.store.tx() as tx:
            return await groups.create_key(tx, role=role, group_id=group_id, agent_id=agent_id, label=label)

    async def messages(self, session_id: str, *, kinds: Sequence[str] | None = None) -> list[Message]:
        """The session's messages, oldest first (``kinds``: e.g. ``("loop", "lifecycle")``)."""
        async with self.store.tx(readonly=True) as tx:
            return await sessions.list_messages(tx, session_id=session_id, kinds=kinds, limit=10_000)

    # ------------------------------------------------------------------ Loop operations

    async def build(self, agent_id: str, request: Mapping[str, Any], *, path: str = "/loops/main.elf") -> Any:
        """``loop.build``: compile ``{"source": "<C text>", "files"?: {...}, "entry"?: ...}`` (as the HTTP API
        and MCP take it) or a build.md §3 bundle, and name the artifact ``path`` for the agent.

        Returns ``{state: "succeeded", artifact: "sha256:…", path, size, diagnostics}``, or for a compile or
        verifier failure ``{state: "failed", kind: "build_failed", failure, error, diagnostics}`` — a failed
        build is a result, not an exception. A malformed bundle raises ``BundleError``."""
        return await self.loops.build(agent_id=agent_id, request=request, path=path)

    async def upload(self, agent_id: str, elf: bytes, *, path: str = "/loops/main.elf") -> Any:
        """Store a prebuilt ELF after the verifier's dry load (harness.md §8); ``InvalidArtifact`` if refused."""
        return await self.loops.upload(agent_id=agent_id, elf=elf, path=path)

    async def create_loop(
        self, *, agent_id: str, session_id: str, artifact: str, config: Mapping[str, Any] | None = None,
        capabilities: Sequence[Mapping[str, Any]] | None = None, name: str | None = None,
        creator: str | None = None,
    ) -> dict[str, Any]:
        """``loop.create`` (harness.md §4.2 row 1): a new active Loop, loaded on this node when it can be.

        - ``agent_id``, ``session_id``: the owner and the session its wakes go to.
        - ``artifact``: ``sha256:<hex>`` or an artifact path of the agent (``/loops/main.elf``).
        - ``config``: a JSON object the guest reads at start (≤ 16 KiB; ``state`` is reserved).
        - ``capabilities``: up to 32 ``{name, arguments?}``; omitted = every allowlisted capability (the builtins,
          read tools of ``register_tool`` and read-only ``[capabilities]`` of the configuration) unconstrained;
          ``arguments`` are exact-argument constraints (harness.md §9.2).
        - ``name``: 1..80 characters (default ``loop-<id suffix>``); ``creator``: the principal recorded
          (default ``agent:<agent_id>``), which tool calls see in the delegated principal.

        Returns the Loop view. Raises ``QuotaExceeded``, ``CapabilityNotAllowed``, ``InvalidRequest``, …"""
        return await self.loops.create(agent_id=agent_id, session_id=session_id, artifact=artifact, config=config,
                                       capabilities=capabilities, name=name, creator=creator)

    async def get_loop(self, loop_id: str) -> dict[str, Any]:
        """The Loop view (state, reason, incarnation, runtime, pending count); ``NotFound`` if absent."""
        return await self.loops.get(loop_id)

    async def list_loops(self, *, agent_id: str | None = None, group_id: str | None = None,
                         state: str | None = None) -> list[dict[str, Any]]:
        """Loop views, filtered by agent, group and state (``active``, ``paused``, ``failed``, ``exited``)."""
        return await self.loops.list(agent_id=agent_id, group_id=group_id, state=state)

    async def pause_loop(self, loop_id: str) -> dict[str, Any]:
        """Pause (``paused(manual)``, row 3); pausing a Loop that is not active changes nothing."""
        return await self.loops.pause(loop_id)

    async def resume_loop(self, loop_id: str) -> dict[str, Any]:
        """Resume (row 13): active again with fresh budgets; ``AlreadyActive``, ``QuotaExceeded``, …"""
        return await self.loops.resume(loop_id)

    async def delete_loop(self, loop_id: str) -> dict[str, Any]:
        """Delete (row 15): ``{loop_id, deleted}``; deleting a deleted Loop answers ``deleted: false``."""
        return await self.loops.delete(loop_id)

    async def logs(self, loop_id: str, *, limit: int = 200, after_seq: int | None = None) -> list[dict[str, Any]]:
        """The Loop's stored log lines, oldest first (harness.md §2.7): ``{seq, at_ms, incarnation, source,
        text}``; the newest ``limit`` (1..1000), or with ``after_seq`` only later lines. ``NotFound`` if absent."""
        from wakeful.harness.errors import InvalidRequest
        from wakeful.harness.store import loops

        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be an integer in 1..1000", field="limit")
        if after_seq is not None and (isinstance(after_seq, bool) or not isinstance(after_seq, int)):
            raise InvalidRequest("after_seq must be an integer", field="after_seq")
        await self.loops.get(loop_id)  # NotFound for an unknown Loop
        await self.node.flush_logs()
        async with self.store.tx(readonly=True) as tx:
            lines = await loops.list_logs(tx, loop_id, limit=limit, after_seq=after_seq)
        return [{"seq": ln.seq, "at_ms": ln.at_ms, "incarnation": ln.incarnation, "source": ln.source,
                 "text": ln.text} for ln in lines]

    async def webhook(self, loop_id: str, action: str, *, agent_id: str | None = None) -> dict[str, Any]:
        """``loop.webhook`` enable / rotate / revoke (harness.md §13); ``agent_id=None`` acts as the operator."""
        from wakeful.harness.webhooks import webhook

        return await webhook(self.store, loop_id, action, agent_id=agent_id,
                             public_base_url=self.config.public_base_url)

    async def events(self, loop_id: str, action: str = "list", *, event_ids: Sequence[str] | None = None,
                     include_payloads: bool = False, status: str | None = None, agent_id: str | None = None,
                     **page: Any) -> dict[str, Any]:
        """``loop.events`` list / retry / discard (harness.md §12); ``page`` takes ``limit`` and ``cursor``."""
        return await self.node.pending.events(loop_id, action, event_ids=event_ids, include_payloads=include_payloads,
                                              status=status, agent_id=agent_id, **page)

    async def send_event(self, loop_id: str, topic: str, payload: Any = None, event_id: str | None = None, *,
                         agent_id: str | None = None, source: str = "operator") -> dict[str, Any]:
        """``loop.send`` / ``wakeful loop send`` (harness.md §10.5): admit one event like the intake routes."""
        return await self.intake.send(loop_id, topic, payload, event_id, agent_id=agent_id, source=source)

    async def archive_agent(self, agent_id: str) -> dict[str, Any]:
        """Archive the agent: its active Loops pause with reason ``archive`` (rows 10–11)."""
        return await self.loops.archive_agent(agent_id)

    async def unarchive_agent(self, agent_id: str) -> dict[str, Any]:
        """Unarchive: Loops paused by the archive resume, within quota (row 12)."""
        return await self.loops.unarchive_agent(agent_id)

    # ------------------------------------------------------------------ decide (harness.md §16)

    def set_decide_provider(self, provider: Callable[[dict[str, Any], float], Awaitable[Any]] | None) -> None:
        """Use ``provider(request, deadline_s)`` instead of the configured HTTP provider (None: back to it);
        its raw answers are validated, converted and limited exactly like an HTTP provider's."""
        self._decide_provider = provider
        if self._node is not None:
            self._node.dispatch.decider.install(provider)

    async def decide(self, group_id: str, request: Any) -> dict[str, Any]:
        """One decision for the group: ``{model, answers}`` or ``{error: {code, …}}`` (never raises for a
        bad request or a provider failure; the group's buckets apply, without waiting)."""
        return await self.node.dispatch.decider.decide(group_id, request)

    async def http_request(self, request: Any) -> dict[str, Any]:
        """``web.http_request`` (harness.md §17) outside a Loop (scripts' ``tool.call``): the same egress
        policy and limits, answered as data; the per-Loop bucket does not apply."""
        return await self.node.dispatch.web.request(request)

    # ------------------------------------------------------------------ scripts (harness.md §18)

    async def _open_scripts(self) -> None:
        from wakeful.harness.scripts import ScriptRunner
        from wakeful.harness.scripts_tools import ScriptTools

        self._scripts = ScriptRunner(builder=_LazyBuilder(self), call_tool=ScriptTools(self).call,
                                     limits=self.config.scripts, clock=self.clock)
        await self._scripts.open()

    @property
    def scripts(self) -> Any:
        """The node's ``ScriptRunner`` (harness/scripts.py)."""
        return self._once_started(self._scripts)

    def script_sdk(self) -> dict[str, Any]:
        """``script.sdk``: the script guide, ``wakeful.h`` and the script limits."""
        return dict(self.scripts.sdk())

    async def run_script(self, agent_id: str, source: str | Mapping[str, Any], env: Any = None) -> dict[str, Any]:
        """``script.run`` as ``agent:<agent_id>``: ``source`` is C text or ``{source}`` / ``{files, entry}``."""
        from wakeful.harness.errors import InvalidRequest

        if not isinstance(agent_id, str) or not 1 <= len(agent_id) <= 40:
            raise InvalidRequest("agent_id must be an id string", field="agent_id")
        async with self.store.tx(readonly=True) as tx:
            agent = await agents.get_agent(tx, agent_id)
        return dict(await self.scripts.run(agent_id=agent_id, group_id=agent.group_id, request=source, env=env))

    # ------------------------------------------------------------------ tools and wake handlers

    def register_tool(self, name: str, fn: Callable[..., Any], *, description: str, input_model: Any = None,
                      safety: str = "read", timeout_s: float = 10) -> None:
        """Register a tool (interfaces.md §5) before ``start``; the same set on every node of a cluster.

        ``fn(args, ctx)`` is called with the call's JSON arguments (validated by ``input_model``, a pydantic
        model, when given: a failure is ``invalid_arguments``) and a ``ToolContext`` ``ctx`` carrying
        ``principal`` (for a Loop the delegated ``schedule|loop:<loop_id>|<creator>``), ``loop_id``, ``agent_id``,
        ``session_id``, ``group_id``, ``incarnation`` and ``deadline_unix_ms``. It may be sync or async and
        returns a JSON-serialisable value (≤ 16,128 bytes encoded, else ``result_too_large``). Raising
        ``HostCallRefused(code, message)`` answers that §9.4 reason code; any other exception is ``tool_failed``;
        an async ``fn`` running past ``timeout_s`` is ``deadline_exceeded``. The guest sees both as
        ``SF_HOST_ERROR``.

        ``name`` matches ``^[a-z][a-z0-9_.-]{0,127}$`` and is not a builtin; ``description`` is shown to agents
        in the ``loop.sdk`` guide. Only ``safety="read"`` tools are offered to Loops; ``"write"`` tools only to
        scripts. Capabilities declared in the configuration file are registered the same way."""
        self.registry.register(Tool(name, fn, description, safety, timeout_s, input_model))

    def on_wake(self, handler: WakeHandler | None = None, *, agent_id: str | None = None,
                kinds: Sequence[str] = ("loop", "lifecycle")) -> Any:
        """Register a wake handler for one agent (or every agent); usable as a decorator."""
        def register(fn: WakeHandler) -> WakeHandler:
            self._handlers.append((agent_id, tuple(kinds), fn))
            return fn

        return register if handler is None else register(handler)

    def _on_message(self, message_id: str) -> None:
        if self._handlers:
            task = asyncio.get_running_loop().create_task(self._deliver_wake(message_id))
            self._wake_tasks.add(task)
            task.add_done_callback(self._wake_tasks.discard)

    # interfaces.md §5: after commit; returning marks it handled; raising → offered again with backoff
    async def _deliver_wake(self, message_id: str) -> None:
        delay = BACKOFF_START_S
        while True:
            message = await self._store_step(self._read_message(message_id))
            if message is None or message.handled_ms is not None:
                return
            try:
                for agent_id, kinds, handler in self._handlers:
                    if agent_id in (None, message.agent_id) and message.kind in kinds:
                        result = handler(message)
                        if inspect.isawaitable(result):
                            await result
            except Exception:
                log.exception("wake handler failed for %s; retrying in %.0f s", message_id, delay)
                await asyncio.sleep(delay)
                delay = min(BACKOFF_MAX_S, delay * 2)
                continue
            await self._store_step(self._mark_handled(message_id))
            return

    async def _read_message(self, message_id: str) -> Message | None:
        async with self.store.tx(readonly=True) as tx:
            return await sessions.get_message(tx, message_id)

    async def _mark_handled(self, message_id: str) -> None:
        async with self.store.tx() as tx:
            await sessions.mark_handled(tx, message_id, handled_by=self.node.node_id)

    async def _store_step(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a transaction in its own task: cancelling a wake handler at stop never cuts it."""
        task = asyncio.ensure_future(work)
        self._store_work.add(task)
        task.add_done_callback(self._store_work.discard)
        return await asyncio.shield(task)

    async def _offer_unhandled(self, agent_id: str | None = None) -> None:
        if not self._handlers:
            return
        async with self.store.tx(readonly=True) as tx:
            pending = await sessions.list_messages(tx, agent_id=agent_id, kinds=("loop", "lifecycle"),
                                                   unhandled=True, limit=10_000)
        for message in pending:
            self._on_message(message.id)

    # harness.md §19.2, interfaces.md §5: wake handlers run on the node holding the agent's lease
    def _offer_claimed(self, agent_id: str) -> None:
        if self._handlers:
            task = asyncio.get_running_loop().create_task(self._store_step(self._offer_unhandled(agent_id)))
            self._wake_tasks.add(task)
            task.add_done_callback(self._wake_tasks.discard)


class _Wakes(Instrument):
    """The Harness's instrument on its node: committed messages go to the wake handlers (interfaces.md §5); a
    claimed agent's unhandled messages are offered on the node that now holds its lease (harness.md §19.2)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    def message(self, message_id: str) -> None:
        self.harness._on_message(message_id)

    def claimed(self, agent_id: str) -> None:
        self.harness._offer_claimed(agent_id)


def _shared_limiter(store: Store) -> Limiter | None:
    """harness.md §14: on PostgreSQL the intake buckets live in ``rate_bucket`` rows shared by every node."""
    if store.dialect != "postgresql":
        return None
    from wakeful.harness.placement import PgLimiter

    return PgLimiter(store)


class _LazyBuilder:
    """Creates the ``wakeful.build.Builder`` on the first ``loop.build`` (so a harness without builds
    never starts the build helper)."""

    def __init__(self, harness: Harness) -> None:
        self._harness = harness

    async def compile(self, request: Mapping[str, Any]) -> Any:
        if self._harness._builder is None:
            from wakeful.build import Builder

            config = self._harness.config  # build.* (interfaces.md §7; build.md §2, §5, §8)
            self._harness._builder = Builder(config.build.options(config.data_dir))
        return await self._harness._builder.compile(request)
