"""issue 16 / benchmarks.md §2.2: a restarted node has all its Loops running again at once, whatever their number.

- Loading is batched (harness.md §4.3 for many Loops): a node's start runs the same statements for 4 Loops as for
  24, and the artifact they share is read and verified once per start, not once per Loop; every Loop runs at a new
  incarnation. The drain ends them the same way: its statements do not grow with the Loops either.
- PostgreSQL: a clean shutdown released its leases (§19.4); the node started again under its own id takes back, in
  its start, those no other node took — all of them in the first placement pass even when they span more stranded
  sweep pages than one tick reads — and never a lease another live node holds, nor more than its fair share.

Statements are counted on the test's own thread (the renewer thread's heartbeats are left out); the store clock is
injected and never advanced, so nothing here can wait for a lease to expire.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.harness_fixtures import TestClock, pg_url_with_schema
from support.loops_harness import DRIVER_C

from wakeful.harness import node as node_module
from wakeful.harness.config import Config, Limits
from wakeful.harness.embed import Harness
from wakeful.harness.placement import placer
from wakeful.harness.store import loops, schema
from wakeful.harness.store.core import Store
from wakeful.harness.store.ids import new_id

LIMITS = Limits(loops_per_group=1000, loops_per_agent=100)
A = schema.agent_lease


def _config(url: str, home: Path) -> Config:
    return Config(data_dir=home, store_url=url, limits=LIMITS, node_name="n")


async def _fleet(h: Harness, compile_c: Any, first: int, agents: int, per_agent: int) -> dict[str, str]:
    """``agents`` more agents (``first`` on) of the group ``g`` with ``per_agent`` active Loops each, all of one
    artifact: the first Loop of each agent through ``create_loop``, the rest as rows. {loop id: agent id}."""
    G = schema.agent_group
    async with h.store.tx(readonly=True) as tx:
        group_id = (await tx.execute(sa.select(G.c.id).where(G.c.name == "g"))).scalar()
    if group_id is None:
        group_id = (await h.create_group("g", limits={"loops_per_group": 1000, "loops_per_agent": 100})).id
    elf = compile_c(DRIVER_C, name="loop_driver.c")
    out: dict[str, str] = {}
    for i in range(first, first + agents):
        agent = await h.create_agent(group_id, f"a{i}")
        session = await h.create_session(agent.id, "inbox")
        art = str((await h.upload(agent.id, elf, path="/loops/driver.elf"))["artifact"])
        out[str((await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art))["id"])] = agent.id
        async with h.store.tx() as tx:
            for _ in range(per_agent - 1):
                row = await loops.insert_loop(
                    tx, group_id=group_id, agent_id=agent.id, session_id=session.id,
                    artifact_sha256=art.removeprefix("sha256:"), config={}, creator=f"agent:{agent.id}",
                    loop_id=new_id("lp", int(time.time() * 1000)),
                )
                out[row.id] = agent.id
    return out


async def _made(url: str, clock: TestClock, home: Path, compile_c: Any, first: int, agents: int) -> dict[str, str]:
    """The Loops of ``_fleet`` made by a node on ``home`` that is then stopped (drained: leases released)."""
    h = Harness(_config(url, home), clock=clock, sweeps=False)
    await h.start()
    try:
        return await _fleet(h, compile_c, first, agents, per_agent=2)
    finally:
        await h.stop()


@contextmanager
def _statements() -> Iterator[list[str]]:
    """Every SQL statement run on this thread inside the block (any engine: the Harness opens its store inside)."""
    seen: list[str] = []
    me = threading.get_ident()

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.get_ident() == me:
            seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", before)


@pytest.fixture
def artifact_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The digests the node read and verified (§8), one entry per read: the real ``read_verified``, counted."""
    reads: list[str] = []
    real = node_module.read_verified

    async def counted(store: Any, cache_dir: Path, group_id: str, sha256: str) -> bytes:
        reads.append(sha256)
        return await real(store, cache_dir, group_id, sha256)

    monkeypatch.setattr(node_module, "read_verified", counted)
    return reads


async def _incarnations(store: Store) -> dict[str, int]:
    L = schema.loop
    async with store.tx(readonly=True) as tx:
        return {r.id: int(r.incarnation) for r in await tx.execute(sa.select(L.c.id, L.c.incarnation))}


async def _restart(url: str, clock: TestClock, home: Path, fleet: dict[str, str],
                   reads: list[str]) -> tuple[int, int]:
    """Start the node on ``home`` (its Loops were ended by the previous run's drain) and stop it again: (statements
    of the start, statements of the stop); asserts every Loop ran at the next incarnation, one artifact read."""
    probe = await Store.open(url, clock=clock, migrate=False)
    try:
        before = await _incarnations(probe)
        reads.clear()
        h = Harness(_config(url, home), clock=clock, sweeps=False)
        with _statements() as started:
            await h.start()
        try:
            assert {res.loop_id for res in h.node.residents()} == set(fleet)
            after = await _incarnations(probe)
            assert {i: after[i] for i in fleet} == {i: before[i] + 1 for i in fleet}
            assert len(reads) == 1, reads  # one artifact: read and verified once, not once per Loop
        finally:
            with _statements() as stopped:
                await h.stop()
    finally:
        await probe.close()
    return len(started), len(stopped)


async def test_a_start_loads_its_loops_in_statements_that_do_not_grow_with_them(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    artifact_reads: list[str],
) -> None:
    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 2)
    start_few, stop_few = await _restart(store_url, store_clock, home, fleet, artifact_reads)
    fleet |= await _made(store_url, store_clock, home, compile_c, 2, 10)
    start_many, stop_many = await _restart(store_url, store_clock, home, fleet, artifact_reads)
    assert start_many == start_few, f"start: {start_few} statements for 4 Loops, {start_many} for 24"
    assert stop_many == stop_few, f"stop: {stop_few} statements for 4 Loops, {stop_many} for 24"


async def _start_patched(url: str, clock: TestClock, home: Path, fleet: dict[str, str],
                         monkeypatch: pytest.MonkeyPatch, patches: list[tuple[Any, str, Any]]) -> None:
    """Start the node on ``home`` with ``patches`` (target, name, value) in place during its start only, check that
    every Loop of ``fleet`` is resident, and stop it."""
    h = Harness(_config(url, home), clock=clock, sweeps=False)
    for target, name, value in patches:
        monkeypatch.setattr(target, name, value)
    try:
        await h.start()
    finally:
        monkeypatch.undo()
    try:
        assert {res.loop_id for res in h.node.residents()} == set(fleet)
    finally:
        await h.stop()


async def test_a_start_parses_capabilities_and_makes_the_program_once_for_the_loops_of_one_artifact(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runtime's load of each object is the part of a start that grows with N: the capability list the Loops
    share is parsed (its entries decoded) once per batch and the program made (the ELF hashed for its key) once per
    artifact, not once per Loop — 4 and 24 Loops of one artifact cost the same parsing and program making."""
    import wakeful.vm
    from wakeful.runtime import policy

    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 2)
    counts = {"entries": 0, "programs": 0}
    real_entry, real_load = policy._parse_entry, wakeful.vm.load

    def entry(item: Any) -> Any:
        counts["entries"] += 1
        return real_entry(item)

    def program(data: bytes, **options: Any) -> Any:
        counts["programs"] += 1
        return real_load(data, **options)

    async def started() -> dict[str, int]:
        counts.update(entries=0, programs=0)
        await _start_patched(store_url, store_clock, home, fleet, monkeypatch,
                             [(policy, "_parse_entry", entry), (wakeful.vm, "load", program)])
        return dict(counts)

    few = await started()
    fleet |= await _made(store_url, store_clock, home, compile_c, 2, 10)
    many = await started()
    assert few["programs"] == 1 and few["entries"] > 0, few
    assert many == few, f"4 Loops: {few}, 24 Loops: {many}"


async def test_a_start_loads_the_objects_of_one_artifact_in_one_runtime_call_per_batch(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 16 (a restart at N = 10,000): the runtime loads a batch's objects of one artifact and one capability
    policy in one call (``Runtime.load_many``), binding the program's helpers once — 4 and 24 Loops cost the same
    runtime calls and helper lookups, and no single-object ``load``."""
    from wakeful.runtime import Runtime
    from wakeful.runtime.helpers import GuestContext

    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 2)
    counts = {"load": 0, "load_many": 0, "helpers": 0}
    real_load, real_many, real_helper = Runtime.load, Runtime.load_many, GuestContext.helper

    async def load(self: Runtime, *args: Any, **kwargs: Any) -> Any:
        counts["load"] += 1
        return await real_load(self, *args, **kwargs)

    async def load_many(self: Runtime, *args: Any, **kwargs: Any) -> Any:
        counts["load_many"] += 1
        return await real_many(self, *args, **kwargs)

    def helper(self: GuestContext, name: str) -> Any:
        counts["helpers"] += 1
        return real_helper(self, name)

    async def started() -> dict[str, int]:
        import wakeful.vm

        wakeful.vm.clear_caches()  # the program made afresh by this start: its first object binds the helpers
        counts.update(load=0, load_many=0, helpers=0)
        await _start_patched(store_url, store_clock, home, fleet, monkeypatch, [
            (Runtime, "load", load), (Runtime, "load_many", load_many), (GuestContext, "helper", helper)])
        return dict(counts)

    few = await started()
    fleet |= await _made(store_url, store_clock, home, compile_c, 2, 10)
    many = await started()
    assert few["load"] == 0 and few["load_many"] == 1 and few["helpers"] > 0, few
    assert many == few, f"4 Loops: {few}, 24 Loops: {many}"


async def test_a_start_of_many_loops_loads_them_without_the_collector(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 16 (a restart at N = 10,000: the collector's automatic runs were ~0.2 s of the load's ~1.1 s of CPU):
    a start whose Loops reach the hygiene's burst size loads them with the collector off (the one collection after
    the burst remains), and turns it back on when the load ends. The burst size is made 4 here."""
    import gc

    from wakeful.runtime import Runtime
    from wakeful.runtime import scheduler as scheduler_module

    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 3)
    seen: list[bool] = []
    real_many = Runtime.load_many

    async def load_many(self: Runtime, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return await real_many(self, *args, **kwargs)

    try:
        await _start_patched(store_url, store_clock, home, fleet, monkeypatch, [
            (Runtime, "load_many", load_many), (scheduler_module, "HYGIENE_LOADS", 4)])
        assert seen and not any(seen), seen  # previously: [True]
        assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


async def test_a_cluster_node_does_not_read_every_active_loop_before_it_holds_a_lease(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 16 (a restart at N = 10,000 on PostgreSQL): the node's open read the id and agent of every active Loop
    (10,000 rows) to keep those of agents it leased — none yet, its placement starts after it; the placement's
    adoption loads them. A SQLite node (no leases) reads them as before."""
    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 2)
    with _statements() as seen:  # (the stop reads no such list)
        await _start_patched(store_url, store_clock, home, fleet, monkeypatch, [])
    every = [s for s in seen if "ORDER BY loop.created_ms" in s and "loop.agent_id" in s]
    assert len(every) == (0 if store_url.startswith("postgresql") else 1), every  # previously 1 on both


async def test_on_postgresql_a_start_attaches_each_batch_in_a_statement_that_commits_by_itself(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 16 (a restart at N = 10,000 on PostgreSQL: BEGIN, the clock, the UPDATE and COMMIT were 4 round trips
    a batch on the load's chain): step 4 runs through ``Store.single`` there; SQLite keeps its transaction."""
    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 2)
    singles: list[int] = []
    real_single = Store.single

    async def single(self: Store, work: Any) -> Any:
        singles.append(1)
        return await real_single(self, work)

    await _start_patched(store_url, store_clock, home, fleet, monkeypatch, [(Store, "single", single)])
    assert len(singles) == (1 if store_url.startswith("postgresql") else 0), singles  # previously 0 on both


async def test_on_postgresql_the_next_two_batches_begin_while_a_batch_is_attached(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 16 (a restart at N = 10,000 on PostgreSQL): a start's batches are a pipeline there — when a batch's
    step 4 (attach) is done, the next two batches' Loops are already in the node's hands (locked, their step 1 on its
    way in the server; restart-3s3: with one batch ahead the chain waited for step 1). On SQLite (one writer) a batch
    is taken only after the one before has ended. Every Loop runs at the next incarnation either way."""
    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 4)  # 8 Loops: 4 batches of 2
    monkeypatch.setattr(loops, "BATCH", 2)
    h = Harness(_config(store_url, home), clock=store_clock, sweeps=False)
    in_hand: list[int] = []  # at each step 4: how many Loops of other batches the node holds locked
    loading: list[node_module.Node] = []
    real_attach, real_load_many = loops.attach_objects, node_module.Node.load_many

    async def load_many(self: node_module.Node, loop_ids: list[str]) -> int:
        loading.append(self)
        return await real_load_many(self, loop_ids)

    async def attach(tx: Any, objects: list[tuple[str, int, str]]) -> Any:
        attached = await real_attach(tx, objects)  # (its round trips: the node's other tasks have run meanwhile)
        mine = {loop_id for loop_id, _, _ in objects}
        in_hand.append(sum(1 for i in fleet if i not in mine and loading[-1].is_locked(i)))
        return attached

    monkeypatch.setattr(node_module.Node, "load_many", load_many)
    monkeypatch.setattr(loops, "attach_objects", attach)
    probe = await Store.open(store_url, clock=store_clock, migrate=False)
    try:
        before = await _incarnations(probe)
        await h.start()
        try:
            assert {res.loop_id for res in h.node.residents()} == set(fleet)
            assert not any(h.node.is_locked(i) for i in fleet)  # every batch's locks released
            after = await _incarnations(probe)
            assert {i: after[i] for i in fleet} == {i: before[i] + 1 for i in fleet}
        finally:
            await h.stop()
    finally:
        await probe.close()
    # The pipeline shows at the first batch's step 4: the next two batches are already in hand (0 on SQLite). Later
    # steps can differ under load — CI at e3eb075 saw [2, 0, 1, 0, 1, 0] with one batch ahead: after the first batch,
    # loads went one Loop at a time (a deferred batch retried by the ticks), which this test does not decide — so
    # only the first is exact ([4, 4, 2, 0] when nothing is deferred).
    if store_url.startswith("postgresql"):
        assert in_hand[0] == 4 and len(in_hand) >= 4, in_hand  # one ahead: [2, 2, 0, …]; none: [0, 0, 0, 0]
    else:
        assert in_hand == [0, 0, 0, 0], in_hand


async def _leases(store: Store) -> dict[str, tuple[str, int]]:
    async with store.tx(readonly=True) as tx:
        return {r.agent_id: (r.node_id, int(r.epoch)) for r in await tx.execute(sa.select(A))}


async def test_a_drained_node_takes_its_released_leases_back_in_its_first_pass(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = pg_url_with_schema(pg_schema)
    home = tmp_path / "node"
    fleet = await _made(url, store_clock, home, compile_c, 0, 3)  # made, then drained: every lease released
    probe = await Store.open(url, clock=store_clock, migrate=False)
    try:
        released = await _leases(probe)
        monkeypatch.setattr(placer, "SWEEP_PAGE", 2)  # the stranded sweep would see one agent a tick
        h = Harness(_config(url, home), clock=store_clock, sweeps=False)
        await h.start()  # the store clock never moves: nothing expires, no tick but start's first
        try:
            assert {res.loop_id for res in h.node.residents()} == set(fleet)
            assert await _leases(probe) == {a: (h.node.node_id, e + 1) for a, (_, e) in released.items()}
        finally:
            await h.stop()
    finally:
        await probe.close()


async def test_a_restarted_node_with_sweeps_runs_its_loops_before_its_start_returns(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    """PostgreSQL, sweeps on (``wakeful serve``): the Loops of the leases a restart takes back are resident when
    ``start`` returns — before the node serves — not loaded by the first tick in the background, where they
    raced the first requests (the harness bench's listings took most of a restart's CPU at N = 10,000)."""
    url = pg_url_with_schema(pg_schema)
    home = tmp_path / "node"
    fleet = await _made(url, store_clock, home, compile_c, 0, 3)  # made, then drained: every lease released
    h = Harness(_config(url, home), clock=store_clock, sweeps=True)
    await h.start()
    try:
        assert {res.loop_id for res in h.node.residents()} == set(fleet)  # no await between: no tick ran yet
    finally:
        await h.stop()


async def test_a_restart_never_takes_a_lease_another_live_node_took_nor_more_than_its_share(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    other = Harness(_config(url, tmp_path / "other"), clock=store_clock, sweeps=False)
    await other.start()  # a live node holding nothing; its own sweeps are left to the test
    probe = await Store.open(url, clock=store_clock, migrate=False)
    try:
        assert other.node.placement is not None
        await other.node.placement.listener.stop()  # the drain's "sweep now" would let it claim everything
        h = Harness(_config(url, tmp_path / "node"), clock=store_clock, sweeps=False)
        await h.start()
        try:
            fleet = await _fleet(h, compile_c, 0, 6, per_agent=1)
        finally:
            await h.stop()  # drained: six leases released under its id
        taken = sorted(set(fleet.values()))[0]
        assert await other.node.placement.claim(taken)  # the other node takes one of them meanwhile
        held = (await _leases(probe))[taken]
        h = Harness(_config(url, tmp_path / "node"), clock=store_clock, sweeps=False)
        await h.start()
        try:
            leases = await _leases(probe)
            assert leases[taken] == held  # untouched: the other node is alive and holds it
            mine = {a for a, (node_id, _) in leases.items() if node_id == h.node.node_id and a in
                    h.node.placement.book.snapshot()}  # type: ignore[union-attr]
            assert len(mine) == 4  # §19.3's limit: ceil(1.25 × 6 agents ÷ 2 live nodes)
            assert {res.loop_id for res in h.node.residents()} == {i for i, a in fleet.items() if a in mine}
        finally:
            await h.stop()
    finally:
        await probe.close()
        await other.stop()


async def test_a_page_of_loops_list_is_one_statement_with_its_pending_counts(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    """issue 16 (restart-3s3: the harness bench lists 10,000 Loops in pages of 200 while it waits for a restart): a
    page's rows and their pending counts come from one statement (base: a second read of the page's ids — one more
    round trip a page on PostgreSQL), the counts through the index, not a scan of every stored event."""
    from wakeful.harness.ops.loops import list_loops
    from wakeful.harness.principal import Principal

    h = Harness(_config(store_url, tmp_path / "node"), clock=store_clock, sweeps=False)
    await h.start()
    try:
        fleet = await _fleet(h, compile_c, 0, 2, per_agent=3)  # 6 Loops
        E, G = schema.loop_event, schema.agent_group
        first, second = sorted(fleet)[:2]
        async with h.store.tx() as tx:
            group_id = str((await tx.execute(sa.select(G.c.id))).scalar())
            for loop_id, event_id, status in ((first, "e1", "pending"), (first, "e2", "pending"),
                                              (first, "e3", "acked"), (second, "e4", "pending")):
                await tx.execute(E.insert().values(
                    loop_id=loop_id, event_id=event_id, group_id=group_id, topic="t", payload="{}",
                    payload_sha256="0" * 64, envelope_bytes=2, status=status, source="operator", received_ms=1))
        admin = Principal(role="admin", key_id="k", group_id=None, agent_id=None, operator=True)
        with _statements() as ran:
            out = await list_loops(h, admin, group_id=group_id, limit=200)
        reads = [sql for sql in ran if sql.lstrip().upper().startswith("SELECT")]
        assert len(reads) == 1, reads  # base: 2 (the page, then the counts of its ids)
        counts = {item["id"]: item["pending_count"] for item in out["items"]}
        assert counts == {i: {first: 2, second: 1}.get(i, 0) for i in fleet}
        sqlite = store_url.startswith("sqlite")
        async with h.store.tx(readonly=True) as tx:
            plan = " / ".join(str(r[-1]) for r in await tx.conn.exec_driver_sql(
                ("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + reads[0],
                ("pending", group_id, 201, 0) if sqlite else ("pending", group_id, 201)))
        assert "loop_event_pending" in plan, plan
        assert ("SCAN loop_event" if sqlite else "Seq Scan on loop_event") not in plan, plan
    finally:
        await h.stop()


async def test_a_page_of_loops_list_reads_its_rows_not_every_loop_of_the_group(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The harness bench lists every Loop page by page while it waits for them to run: each page decodes at
    most limit + 1 rows (its objects are made from them, not read again), so listing N Loops costs O(N), not O(N² / limit);
    the pages still cover every Loop once, in id order, with the filters applied."""
    from wakeful.harness.ops.loops import list_loops
    from wakeful.harness.principal import Principal

    h = Harness(_config(store_url, tmp_path / "node"), clock=store_clock, sweeps=False)
    await h.start()
    try:
        fleet = await _fleet(h, compile_c, 0, 3, per_agent=5)  # 15 Loops
        G = schema.agent_group
        async with h.store.tx(readonly=True) as tx:
            group_id = str((await tx.execute(sa.select(G.c.id))).scalar())
        decoded = 0
        real = loops._loop  # the decoding of one row into a Loop (loop_from_row, loops_from_rows)

        def counted(values: Any) -> Any:
            nonlocal decoded
            decoded += 1
            return real(values)

        monkeypatch.setattr(loops, "_loop", counted)
        admin = Principal(role="admin", key_id="k", group_id=None, agent_id=None, operator=True)
        seen: list[str] = []
        cursor: str | None = None
        while True:
            decoded = 0
            out = await list_loops(h, admin, group_id=group_id, limit=4, cursor=cursor, state="active")
            assert decoded <= 5, decoded  # limit + 1: one more than the page, to know whether another follows
            seen += [str(item["id"]) for item in out["items"]]
            cursor = out["next_cursor"]
            if cursor is None:
                break
        assert seen == sorted(fleet)
        one = sorted(set(fleet.values()))[0]
        out = await list_loops(h, admin, group_id=group_id, limit=200, agent_id=one)
        assert [item["id"] for item in out["items"]] == sorted(i for i, a in fleet.items() if a == one)
        assert (await list_loops(h, admin, group_id=group_id, limit=200, state="paused"))["items"] == []
    finally:
        await h.stop()


async def test_a_start_builds_no_status_for_the_loops_it_starts(
    harness_runner: Any, store_url: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 16 (a restart at N = 10,000, restart-fast): a node's start starts each Loop it loads without building
    the runtime's ``ObjectStatus`` for it (``Runtime.start_unreported``): none is read, and 10,000 of them were
    ~0.1 s of the start's CPU. Every Loop still runs at the next incarnation."""
    from wakeful.runtime import core as runtime_core

    home = tmp_path / "node"
    fleet = await _made(store_url, store_clock, home, compile_c, 0, 4)  # 8 Loops
    built: list[str] = []
    real_status = runtime_core.ObjectStatus

    class CountedStatus(real_status):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(str(kwargs.get("object_id")))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(runtime_core, "ObjectStatus", CountedStatus)
    h = Harness(_config(store_url, home), clock=store_clock, sweeps=False)
    probe = await Store.open(store_url, clock=store_clock, migrate=False)
    try:
        before = await _incarnations(probe)
        await h.start()
        try:
            assert {res.loop_id for res in h.node.residents()} == set(fleet)
            assert built == [], built  # previously one per Loop started (8)
            after = await _incarnations(probe)
            assert {i: after[i] for i in fleet} == {i: before[i] + 1 for i in fleet}
            states = {h.node.runtime.inspect_nowait(res.object_id)["state"] for res in h.node.residents()}
            assert states <= {"starting", "running"}, states  # started, as before
        finally:
            await h.stop()
    finally:
        await probe.close()
