"""The agent's Loop tools as a Python API: loop.sdk, loop.build, loop.create, loop.list, loop.get,
loop.pause, loop.resume, loop.delete, and agent archive/unarchive (harness.md §4.2 rows 1, 3, 10–13, 15).

Each state change is one transaction that re-reads what it checks; the node then loads or unloads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.build.lines import LineTable
from wakeful.errors import InvalidObject
from wakeful.harness import lifecycle as lc
from wakeful.harness import notices
from wakeful.harness.capabilities import validate_capabilities
from wakeful.harness.checkpoint import validate_config
from wakeful.harness.errors import (
    AgentArchived,
    AgentNotFound,
    AlreadyActive,
    ArtifactInvalid,
    HarnessError,
    InvalidArtifact,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
)
from wakeful.harness.integrity import ArtifactProblem, read_verified
from wakeful.harness.node import CREATE_KEY, Seen
from wakeful.harness.source_lines import keep_table
from wakeful.harness.store import agents, artifacts, loops, quota, schema, sessions
from wakeful.harness.store.agents import Agent
from wakeful.harness.store.artifacts import Artifact
from wakeful.harness.store.core import Tx
from wakeful.harness.store.groups import check_name
from wakeful.harness.store.ids import new_id, shown
from wakeful.harness.store.loops import Loop
from wakeful.harness.store.reads import SharedRead
from wakeful.harness.store.sessions import Session
from wakeful.harness.views import loop_view, runtime_view

if TYPE_CHECKING:
    from wakeful.harness.node import Node

__all__ = ["LoopTools", "bundle_of"]

L, E = schema.loop, schema.loop_event
# a Loop row's pending events (``LoopTools.page``: a column of the page's statement)
_PENDING_OF_ROW = (sa.select(sa.func.count()).where(E.c.loop_id == L.c.id, E.c.status == "pending")
                   .scalar_subquery().label("pending_n"))
MAX_NAME = 80  # §2.5
DEFAULT_PATH = "/loops/main.elf"  # §8
CREATE_KIND = CREATE_KEY + "loop.create"  # the batch units of creates run first in a lifecycle batch


@dataclass(frozen=True, slots=True)
class _Lookup:
    """What one create reads: its agent, its session and its artifact reference."""

    agent_id: str
    session_id: str
    artifact: str


@dataclass(frozen=True, slots=True)
class _Found:
    agent: Agent | None
    session: Session | None
    art: Artifact | HarnessError


class LoopTools:
    """The Loop operations of one node (the MCP server and HTTP API expose the same ones)."""

    def __init__(self, node: Node, *, builder: Any = None, adopt: bool = True) -> None:
        self.node = node
        self.store = node.store
        self.builder = builder
        self._verified: set[str] = set()  # artifact digests the verifier accepted on this node (_verify_once)
        self._reads: SharedRead[_Lookup, _Found] = SharedRead(self.store, self._read_many)  # creates' reads
        # False for the CLI's local mode: rows are written and the running node adopts them (interfaces.md §4.1)
        self.adopt = adopt

    # ------------------------------------------------------------------ loop.sdk / loop.build

    def sdk(self) -> dict[str, str]:
        """``loop.sdk``: the programming guide and the header (sdk.md)."""
        from wakeful.sdk import guide_text, header_text

        return {"guide": guide_text(self.node.tools.guide_entries()), "header": header_text()}

    # §8: compile, store the ELF as an artifact of the group, name it under the agent's path
    async def build(self, *, agent_id: str, request: Mapping[str, Any], path: str = DEFAULT_PATH,
                    creator: str = "operator") -> dict[str, Any]:
        """``loop.build``: ``request`` is ``{source, files?, entry?}`` (as the HTTP API and MCP take it) or a
        build.md §3 bundle. A compile or verifier failure is a result ``{state: "failed", …}``, not an error."""
        if self.builder is None:
            raise HarnessError("builds are not enabled on this node")
        path = artifacts.check_path(path)
        result = await self.builder.compile(bundle_of(request))
        if result.state != "succeeded" or result.elf is None:
            return {"state": "failed", "kind": "build_failed", "failure": result.failure, "error": result.error,
                    "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated}
        return await self.upload(agent_id=agent_id, elf=result.elf, path=path, creator=creator,
                                 origin="build", toolchain=result.toolchain, diagnostics=result.diagnostics,
                                 lines=result.lines)

    async def upload(self, *, agent_id: str, elf: bytes, path: str = DEFAULT_PATH, creator: str = "operator",
                     origin: str = "upload", toolchain: str | None = None, diagnostics: str = "",
                     lines: LineTable | None = None) -> dict[str, Any]:
        """Store a prebuilt ELF after the same validation as a build (§8); a build's ``lines`` go beside it."""
        agent_id = _id(agent_id, "agent_id")
        elf = artifacts.check_elf(elf)
        path = artifacts.check_path(path)
        self._verify(elf, InvalidArtifact)
        async with self.store.tx() as tx:
            agent = await agents.get_agent(tx, agent_id)
            art = await artifacts.put_artifact(tx, group_id=agent.group_id, elf=elf, origin=origin,
                                               toolchain=toolchain, created_by=creator)
            await keep_table(tx, agent.group_id, art.sha256, lines)
            await artifacts.set_path(tx, agent_id=agent_id, group_id=agent.group_id, path=path, sha256=art.sha256)
        return {"state": "succeeded", "sha256": art.sha256, "size": len(elf), "path": path,
                "artifact": f"sha256:{art.sha256}", "diagnostics": diagnostics}

    # ------------------------------------------------------------------ loop.create (row 1)

    async def create(
        self, *, agent_id: str, session_id: str, artifact: str, config: object = None,
        capabilities: object = None, name: str | None = None, creator: str | None = None,
    ) -> dict[str, Any]:
        view, _ = await self.create_full(agent_id=agent_id, session_id=session_id, artifact=artifact,
                                         config=config, capabilities=capabilities, name=name, creator=creator)
        return view

    async def create_full(
        self, *, agent_id: str, session_id: str, artifact: str, config: object = None,
        capabilities: object = None, name: str | None = None, creator: str | None = None,
        check: Callable[[Agent | None, Session | None], None] | None = None,
    ) -> tuple[dict[str, Any], Loop]:
        """``create``, answering the view and the row read with it (the HTTP object needs both: one read).
        ``check(agent, session)``: the caller's scope checks over the rows (None: not found) of the read that
        resolves the artifact, run first (an operation's 404s come before the request's 400s, as when it read on
        its own)."""
        agent_id, session_id = _id(agent_id, "agent_id"), _id(session_id, "session_id")
        resolved = None if check is None else await self._resolve(agent_id, session_id, artifact, check)
        loop_id = new_id("lp", self.node.clock.unix_ms())
        name = _name(name, loop_id)
        check_name(name)
        config_value = validate_config(config, loop_id)
        caps = validate_capabilities(capabilities, self.node.tools.loop_tool_names())
        creator = creator or f"agent:{agent_id}"
        agent, art = resolved or await self._resolve(agent_id, session_id, artifact, None)
        if isinstance(art, HarnessError):
            raise art  # the artifact's refusal, after the request's own checks (as before)
        if art.sha256 not in self._verified:  # the read left the bytes out: the dry load needs them once
            async with self.store.tx(readonly=True) as tx:
                with_bytes = await artifacts.get_artifact(tx, art.group_id, art.sha256)
            self._verify_once(art.sha256, None if with_bytes is None else with_bytes.elf)
        path = None if artifact.startswith("sha256:") else artifact
        if self.adopt and self.node.placement is not None:  # a free agent's lease is claimed before its insert
            await self.node.placement.claim_for_create(agent_id)
        new = _NewLoop(loop_id, agent_id, agent.group_id, session_id, name, art.sha256, path, config_value, caps,
                       creator)
        if not self.adopt:
            await self.node.lifecycle.submit_batch(CREATE_KIND, new, self._insert_many)
            if self.node.placement is not None:
                self.node.placement.learn(loop_id, agent_id)
            self.node.transitioned(loop_id)
            await self.ring(loop_id)
            return await self.get_full(loop_id)
        # issue 16: the answer is the row and pending count the load's replay read after the start (what the
        # read below would see), unless this call did not load the Loop here
        seen = Seen()
        async with self.node.creating(loop_id) as created:  # the node's sweeps leave the new Loop to this load
            # issue 16: §4.3 steps 2–3 before the insert, which attaches the object when it begins the Loop here
            preloaded = await self.node.preload(loop_id=loop_id, group_id=agent.group_id, sha256=art.sha256,
                                                config=config_value, capabilities=caps)
            new = dataclasses.replace(new, object_id=preloaded)
            try:
                # issue 16: one unit of the lifecycle group commit with the creates waiting meanwhile; answered
                # (and the Loop loaded) only after the transaction holding its row committed
                begun: Loop | None = await self.node.lifecycle.submit_batch(CREATE_KIND, new, self._insert_many)
            except BaseException:
                if preloaded is not None:
                    await self.node.runtime.unload(preloaded)
                raise
            if preloaded is not None and (begun is None or begun.object_id != preloaded):
                await self.node.runtime.unload(preloaded)  # inserted for a load of its own (not begun here)
            if self.node.placement is not None:
                self.node.placement.learn(loop_id, agent_id)
            try:
                await created.load(seen=seen, begun=begun)
            finally:
                # reported after the load (issue 16): on PostgreSQL the placement then tells no other node about a
                # Loop loaded here (its load told the lease holder when another node holds the agent)
                self.node.transitioned(loop_id)
        if seen.row is None:
            return await self.get_full(loop_id)
        return self._view(seen.row, seen.pending), seen.row

    async def _resolve(self, agent_id: str, session_id: str, artifact: str,
                       check: Callable[[Agent | None, Session | None], None] | None,
                       ) -> tuple[Agent, Artifact | HarnessError]:
        """The create's read — the agent, the session and the artifact (or its refusal, raised by the caller;
        without its bytes) — shared with the creates reading meanwhile (issue 16: one read transaction for a
        burst of creates, not one each); then the caller's checks, then the agent's existence."""
        found = await self._reads.submit(_Lookup(agent_id, session_id, artifact))
        if check is not None:
            check(found.agent, found.session)
        if found.agent is None:
            raise AgentNotFound(f"agent {shown(agent_id)} not found", id=shown(agent_id))
        return found.agent, found.art

    @staticmethod
    async def _read_many(tx: Tx, items: list[_Lookup]) -> list[_Found]:
        """The reads of a batch of creates: a statement each for their agents, sessions and artifacts."""
        agent_rows = await agents.find_agents(tx, [i.agent_id for i in items])
        session_rows = await sessions.find_sessions(tx, [i.session_id for i in items])
        refs = [(agent_rows[i.agent_id].group_id, i.agent_id, i.artifact) for i in items if i.agent_id in agent_rows]
        arts = iter(await artifacts.resolve_artifacts(tx, refs))
        return [_Found(agent_rows.get(i.agent_id), session_rows.get(i.session_id),
                       next(arts) if i.agent_id in agent_rows else AgentNotFound("no agent"))
                for i in items]

    def _verify_once(self, sha256: str, elf: bytes | None) -> None:
        """§8's dry load, once per artifact digest and node: the bytes of a digest never change (the store
        checks the hash), so the verdict does not either; a rejection is not kept and is raised each time."""
        if sha256 in self._verified:
            return
        self._verify(artifacts.check_elf(elf), InvalidArtifact)
        self._verified.add(sha256)

    async def _insert_many(self, tx: Tx, items: list[_NewLoop]) -> list[HarnessError | Loop | None]:
        """The Loops of a batch of creates, each admitted exactly as alone (§15: counted under the group quota
        locks, in arrival order, in this transaction) with a fixed number of statements per batch; a refused
        create writes nothing and gets its own error."""
        groups = sorted({n.group_id for n in items})
        for group_id in groups:  # the store's lock order: group locks (in id order) before rows
            await quota.lock_group_quota(tx, group_id)
        status, agent_active = await quota.lock_agents_and_count(tx, [n.agent_id for n in items])
        defaults = quota.QuotaLimits(self.node.config.limits.loops_per_agent, self.node.config.limits.loops_per_group)
        limits: dict[str, quota.QuotaLimits | HarnessError] = {}
        group_active: dict[str, int] = {}
        for group_id in groups:
            try:
                limits[group_id], group_active[group_id] = await quota.limits_and_active(tx, group_id, defaults)
            except HarnessError as exc:
                limits[group_id] = exc
        owners = await loops.session_owners(tx, [n.session_id for n in items])
        begun = await self._begins(tx, items)
        now = await tx.now_ms()
        answers: list[HarnessError | Loop | None] = []
        rows: list[dict[str, Any]] = []
        for n in items:
            try:
                self._admit_one(n, status, limits, agent_active, group_active, owners)
            except HarnessError as exc:
                answers.append(exc)
                continue
            agent_active[n.agent_id] = agent_active.get(n.agent_id, 0) + 1
            group_active[n.group_id] += 1
            mine = n.agent_id in begun
            values = loops.new_loop_values(
                loop_id=n.loop_id, group_id=n.group_id, agent_id=n.agent_id, session_id=n.session_id, name=n.name,
                artifact_sha256=n.sha256, artifact_path=n.path, config=n.config, capabilities=n.caps,
                creator=n.creator, now=now, incarnation=1 if mine else 0, node_id=self.node.node_id if mine else None,
                object_id=n.object_id if mine else None)
            rows.append(values)
            answers.append(loops.loop_of_values(values) if mine else None)
        await loops.insert_created(tx, rows)
        return answers

    # issue 16 (creates/s): §4.3 step 1 of a new Loop this node will load is done by the transaction that inserts
    # it — the row is written at incarnation 1 with this node (the ``created`` transition stays at incarnation 0,
    # as when step 1 followed in a transaction of its own) — so a create's load starts at step 2, one commit and
    # one conditional update fewer per create. Step 1's requirements hold in this transaction: the Loop is active,
    # and on PostgreSQL this node holds the agent's lease at the epoch it believes (the lease rows read FOR SHARE,
    # after the group lock and the agent rows). Loops of agents it does not hold are inserted at incarnation 0
    # and loaded as before (the placement claims the lease or tells its holder).
    async def _begins(self, tx: Tx, items: list[_NewLoop]) -> set[str]:
        """The agents of ``items`` whose new Loops this node begins in the insert's transaction."""
        if not self.adopt:
            return set()  # the local command line runs no runtime: the running node adopts the rows
        placement = self.node.placement
        if placement is None:
            return {n.agent_id for n in items}
        return await placement.agents_held(tx, [n.agent_id for n in items])

    @staticmethod
    def _admit_one(n: _NewLoop, status: dict[str, str], limits: dict[str, quota.QuotaLimits | HarnessError],
                   agent_active: dict[str, int], group_active: dict[str, int], owners: dict[str, str]) -> None:
        """One create's checks in the order a create alone makes them (agent, archive, quota, session)."""
        if n.agent_id not in status:
            raise AgentNotFound(f"agent {shown(n.agent_id)} not found", id=shown(n.agent_id))
        if status[n.agent_id] != "active":
            raise AgentArchived(f"agent {n.agent_id} is archived")
        limit = limits[n.group_id]
        if isinstance(limit, HarnessError):
            raise limit
        if agent_active.get(n.agent_id, 0) >= limit.loops_per_agent:
            raise QuotaExceeded("agent", limit.loops_per_agent)
        if group_active[n.group_id] >= limit.loops_per_group:
            raise QuotaExceeded("group", limit.loops_per_group)
        if owners.get(n.session_id) != n.agent_id:
            raise InvalidRequest(f"session {n.session_id} does not belong to agent {n.agent_id}", field="session_id")

    async def _load(self, loop_id: str) -> None:
        # the change is committed: a load that cannot reach the store is retried by the next tick. Every caller
        # made the Loop active from not active (create, resume, unarchive), so an object of it here was loaded after
        # the commit (the placement adopting the agent it just claimed, concurrently) and is kept, not reloaded
        if self.adopt:
            await self.node.try_load(loop_id, if_absent=True)
        else:
            await self.ring(loop_id)

    async def ring(self, loop_id: str) -> bool:
        """Without a runtime here (the local command line): ask the nodes on a PostgreSQL store to adopt the Loop
        now — ``NOTIFY wakeful_loops`` with the Loop (its agent's lease holder loads it) and ``*`` (a node sweeps
        for agents nobody holds) — instead of at their next reconcile. False on SQLite (no signal reaches the
        node: its reconcile adopts it) or when the store refused; the row is committed either way."""
        if self.store.dialect != "postgresql":
            return False
        from wakeful.harness.errors import StoreUnavailable
        from wakeful.harness.placement import signals

        sender = f"cli-{self.node.node_id}"[:40]
        try:
            await signals.notify(self.store, signals.LOOPS, f"{loop_id} {sender}")
            await signals.notify(self.store, signals.LOOPS, f"* {sender}")
        except StoreUnavailable:
            return False
        return True

    def _verify(self, elf: bytes, error: type[HarnessError]) -> None:
        """§8: the runtime's loader and verifier must accept the bytes in a dry load."""
        try:
            self.node.runtime.verify_nowait(elf)
        except InvalidObject as exc:
            raise error(f"the verifier rejected the artifact: {exc.message}", rule=exc.rule) from None

    # ------------------------------------------------------------------ loop.get / loop.list

    async def get(self, loop_id: str, *, agent_id: str | None = None) -> dict[str, Any]:
        return (await self.get_full(loop_id, agent_id=agent_id))[0]

    async def get_full(self, loop_id: str, *, agent_id: str | None = None) -> tuple[dict[str, Any], Loop]:
        """``get`` and the row it was made from (one read)."""
        async with self.store.tx(readonly=True) as tx:
            row = await self._row(tx, loop_id, agent_id, lock=False)
            return self._view(row, await lc.pending_count(tx, loop_id)), row

    async def page(self, *, group_id: str, limit: int, after: str | None = None, agent_id: str | None = None,
                   state: str | None = None, pause_reason: str | None = None) -> list[tuple[dict[str, Any], Loop]]:
        """Up to ``limit`` views of the group's Loops in id order after the id ``after``, filtered in the query,
        each with the row it was made from: issue 16 — a page reads its rows and their pending counts only, not
        every Loop of the group, so listing N Loops page by page costs O(N), not O(N² / limit) (the harness bench
        lists them all while it waits), and the Loop objects of the page are made from these rows, not read again."""
        for field, value in (("agent_id", agent_id), ("group_id", group_id), ("state", state),
                             ("pause_reason", pause_reason), ("cursor", after)):
            if isinstance(value, str) and "\x00" in value:  # no text column holds it: refused before any query
                raise InvalidRequest(f"{field} must not contain U+0000", field=field)
        # issue 16 (restart-3s3): the rows and their pending counts in one statement (a count per row through the
        # index loop_event_pending), not a second read of the page's ids — one round trip a page on PostgreSQL, not
        # two, and no IN list of 200 ids rendered per page
        stmt = loops.page_query(group_id=group_id, limit=limit, after=after, agent_id=agent_id, state=state,
                                pause_reason=pause_reason).add_columns(_PENDING_OF_ROW)
        async with self.store.tx(readonly=True) as tx:
            result = list(await tx.execute(stmt))
        rows = loops.loops_from_rows(result)
        return [(self._view(row, int(r.pending_n)), row) for row, r in zip(rows, result, strict=True)]

    async def list(self, *, agent_id: str | None = None, group_id: str | None = None,
                   state: str | None = None) -> list[dict[str, Any]]:
        for field, value in (("agent_id", agent_id), ("group_id", group_id), ("state", state)):
            if isinstance(value, str) and "\x00" in value:  # no text column holds it: refused before any query
                raise InvalidRequest(f"{field} must not contain U+0000", field=field)
        counts = sa.select(E.c.loop_id, sa.func.count().label("n")).where(E.c.status == "pending").group_by(E.c.loop_id)
        async with self.store.tx(readonly=True) as tx:
            rows = await loops.list_loops(tx, agent_id=agent_id, group_id=group_id, state=state)
            pending = {r.loop_id: int(r.n) for r in await tx.execute(counts)}
        return [self._view(row, pending.get(row.id, 0)) for row in rows]

    def _view(self, row: Loop, pending: int) -> dict[str, Any]:
        node = self.node
        res = node.resident(row.id)
        resident = res is not None and res.incarnation == row.incarnation
        runtime = runtime_view(row, node.node_id, resident, node.waiting_for_capacity(row.id))
        return loop_view(row, pending_count=pending, runtime=runtime)

    async def _row(self, tx: Tx, loop_id: str, agent_id: str | None, *, lock: bool = True) -> Loop:
        row = await loops.find_loop(tx, _id(loop_id, "loop_id"), for_update=lock)
        if row is None or (agent_id is not None and row.agent_id != agent_id):
            raise NotFound(f"Loop {loop_id} does not exist")  # never 403 outside the caller's scope
        return row

    # ------------------------------------------------------------------ loop.pause (row 3)

    async def pause(self, loop_id: str, *, agent_id: str | None = None, actor: str = "operator") -> dict[str, Any]:
        async with self.store.tx() as tx:
            row = await self._row(tx, loop_id, agent_id)
            moved = row.state == lc.ACTIVE  # pausing a Loop that is not active is an idempotent no-op
            if moved:
                await lc.move(tx, row, lc.PAUSED, "manual", actor=actor, object_id=None)
                await _clear_deadlines(tx, loop_id)
        if moved:
            self.node.transitioned(loop_id)
        await self.node.end_incarnation(loop_id)
        return await self.get(loop_id)

    # ------------------------------------------------------------------ loop.resume (row 13)

    async def resume(self, loop_id: str, *, agent_id: str | None = None, actor: str = "operator") -> dict[str, Any]:
        async with self.store.tx(readonly=True) as tx:
            row = await self._row(tx, loop_id, agent_id, lock=False)
        if row.state == lc.PAUSED and row.pause_reason == "fault":
            await self._reverify(row)
        async with self.store.tx() as tx:
            await quota.lock_group_quota(tx, row.group_id)
            row = await self._row(tx, loop_id, agent_id)
            await self._activate(tx, row, actor)
        self.node.transitioned(loop_id)
        self.node.watch.forget(loop_id)
        await self._load(loop_id)
        return await self.get(loop_id)

    async def _activate(self, tx: Tx, row: Loop, actor: str) -> None:
        if row.state == lc.ACTIVE:
            raise AlreadyActive(f"Loop {row.id} is already active")
        agent = await agents.get_agent(tx, row.agent_id, for_update=True)
        if agent.status != "active":
            raise AgentArchived(f"agent {row.agent_id} is archived")
        await lc.admit(tx, row.group_id, row.agent_id, self.node.config.limits)
        await lc.move(tx, row, lc.ACTIVE, None, actor=actor, failure=None, **_fresh_budgets())
        await _clear_deadlines(tx, row.id)

    # row 13 guard: for paused(fault) the artifact must re-verify (else artifact_invalid, stays paused)
    async def _reverify(self, row: Loop) -> None:
        try:
            elf = await read_verified(self.store, self.node.config.artifact_dir, row.group_id, row.artifact_sha256)
        except ArtifactProblem as problem:
            raise ArtifactInvalid(f"the artifact still fails: {problem}", failure=problem.failure) from None
        self._verify(elf, ArtifactInvalid)

    # ------------------------------------------------------------------ loop.delete (row 15)

    async def delete(self, loop_id: str, *, agent_id: str | None = None, actor: str = "operator") -> dict[str, Any]:
        async with self.store.tx() as tx:
            try:
                await self._row(tx, loop_id, agent_id)
            except NotFound:
                return {"loop_id": loop_id, "deleted": False}  # delete of a deleted Loop succeeds
            await loops.delete_loop(tx, loop_id)
        await self.node.end_incarnation(loop_id)
        self.node.watch.forget(loop_id)
        return {"loop_id": loop_id, "deleted": True}

    # ------------------------------------------------------------------ agent archive (rows 10–12)

    async def archive_agent(self, agent_id: str, *, actor: str = "operator") -> dict[str, Any]:
        agent_id = _id(agent_id, "agent_id")
        async with self.store.tx() as tx:
            await agents.set_status(tx, agent_id, "archived")
            rows = await _loops_of(tx, agent_id, lc.ACTIVE, None)
            for row in rows:
                await lc.move(tx, row, lc.PAUSED, "archive", actor=actor, object_id=None)
        for row in rows:
            self.node.transitioned(row.id)
            await self.node.end_incarnation(row.id)
        return {"agent_id": agent_id, "status": "archived", "paused": [row.id for row in rows]}

    async def unarchive_agent(self, agent_id: str, *, actor: str = "operator") -> dict[str, Any]:
        admitted: list[str] = []
        held: list[str] = []
        told: list[str | None] = []
        agent_id = _id(agent_id, "agent_id")
        async with self.store.tx(readonly=True) as tx:
            group_id = (await agents.get_agent(tx, agent_id)).group_id
        async with self.store.tx() as tx:
            await quota.lock_group_quota(tx, group_id)
            await agents.set_status(tx, agent_id, "active")
            for row in await _loops_of(tx, agent_id, lc.PAUSED, "archive"):  # oldest first
                try:
                    await lc.admit(tx, group_id, agent_id, self.node.config.limits)
                except QuotaExceeded as refused:
                    await lc.move(tx, row, lc.PAUSED, "quota", actor=actor, detail=refused.message)
                    notice = notices.quota(row.name, row.id, refused.scope, refused.limit)
                    told.append(await lc.write_notice(tx, row, "quota", notice))
                    held.append(row.id)
                    continue
                await lc.move(tx, row, lc.ACTIVE, None, actor=actor, **_fresh_budgets())
                await _clear_deadlines(tx, row.id)
                admitted.append(row.id)
        for loop_id in admitted + held:
            self.node.transitioned(loop_id)
        for message_id in told:
            self.node.announce(message_id)
        for loop_id in admitted:
            await self._load(loop_id)
        return {"agent_id": agent_id, "status": "active", "resumed": admitted, "quota": held}


# interfaces.md §2.2 builds: {source} is a one-file bundle main.c (plus optional files); a bundle passes as is
def bundle_of(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """The build.md §3 bundle of a ``loop.build`` request."""
    if not isinstance(request, Mapping) or "source" not in request:
        return request
    unknown = sorted(set(request) - {"source", "files", "entry"})
    if unknown:
        raise InvalidRequest(f"a build is {{source, files?, entry?}} or a bundle; unknown key {unknown[0][:64]!r}",
                             field="source")
    source, files = request["source"], request.get("files") or {}
    if not isinstance(source, str) or not isinstance(files, Mapping):
        raise InvalidRequest("source must be C text and files an object of path → text", field="source")
    return {"sdk_version": 1, "entry": request.get("entry") or "main.c", "files": {**files, "main.c": source}}


@dataclass(frozen=True, slots=True)
class _NewLoop:
    """One create waiting for its batch (``LoopTools._insert_many``)."""

    loop_id: str
    agent_id: str
    group_id: str
    session_id: str
    name: str
    sha256: str
    path: str | None
    config: dict[str, Any]
    caps: Any
    creator: str
    object_id: str | None = None  # the object loaded for it (``Node.preload``): attached by its insert when begun


# ids are strings of at most 40 characters (schema.Id); anything else never reaches a query
def _id(value: object, field: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 40:
        raise InvalidRequest(f"{field} must be an id string", field=field)
    return value


def _name(name: str | None, loop_id: str) -> str:
    if name is None:
        return "loop-" + loop_id[-6:]
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
        raise InvalidRequest(f"name must be 1..{MAX_NAME} characters", field="name")
    return name


# row 13: reload window reset, wake window reset, wake-since-activation cleared
def _fresh_budgets() -> dict[str, Any]:
    return {
        "reload_count": 0, "reload_window_start_ms": None, "notify_window_start_ms": None,
        "notify_window_count": 0, "notify_limited_since_ms": None, "notified_since_activation": False,
        "object_id": None,
    }


# §12: resume and pause clear every pending deadline (15 new minutes from the next delivery)
async def _clear_deadlines(tx: Tx, loop_id: str) -> None:
    await tx.execute(sa.update(E).where(E.c.loop_id == loop_id, E.c.status == "pending").values(
        first_delivered_ms=None, deadline_ms=None))


async def _loops_of(tx: Tx, agent_id: str, state: str, reason: str | None) -> list[Loop]:
    stmt = sa.select(L.c.id).where(L.c.agent_id == agent_id, L.c.state == state).order_by(L.c.created_ms, L.c.id)
    if reason is not None:
        stmt = stmt.where(L.c.pause_reason == reason)
    ids = [r.id for r in await tx.execute(tx.for_update(stmt))]
    return [await loops.get_loop(tx, loop_id) for loop_id in ids]

