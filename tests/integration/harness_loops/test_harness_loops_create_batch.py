"""Concurrent creates share transactions (issue 16, benchmarks.md §2.2 creates ≥ 500/s), on SQLite and PostgreSQL,
in store and scheduler terms: the creates waiting while a batch commits are inserted by the next transaction
together, none is answered (and no row of it is visible) before the transaction holding its row committed, the
group and agent quotas still admit exactly their limit in arrival order, and the verifier's dry load of an
artifact runs once per digest instead of once per create."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.commit_gate import Gate
from support.ingress_harness import counting_statements, executed_statements, round_trips
from support.loops_harness import driver, started, tenant

from wakeful.harness.embed import Harness
from wakeful.harness.errors import AgentArchived, QuotaExceeded
from wakeful.harness.store import agents, loops, quota, schema
from wakeful.harness.tools import CREATE_KIND


async def _loop_rows(h: Harness) -> int:
    async with h.store.tx(readonly=True) as tx:
        return int((await tx.execute(sa.select(sa.func.count()).select_from(schema.loop))).scalar_one())


async def _lease(h: Harness, agent: str) -> None:
    """PostgreSQL: the node holds the agent's lease (else the first create claims it, and that claim's COMMIT is
    the one a gate holds)."""
    if h.node.placement is not None:
        assert await h.node.placement.claim(agent)


async def _held_batch(h: Harness, agent: str, session: str, art: str, n: int) -> tuple[Gate, Any, list[Any]]:
    """One create whose insert is held at its COMMIT, and ``n`` more queued behind it (not yet started)."""
    await _lease(h, agent)
    gate = Gate()
    h.store.before_commit.append(gate)

    def create(i: int) -> asyncio.Task[Any]:
        return asyncio.create_task(h.create_loop(agent_id=agent, session_id=session, artifact=art, name=f"c{i}"))

    first = create(0)
    await gate.entered.wait()
    rest = [create(i) for i in range(1, n + 1)]
    while h.node.lifecycle.collecting(CREATE_KIND) < n:
        await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
    return gate, first, rest


async def test_creates_waiting_on_a_commit_are_inserted_by_one_transaction_and_answered_after_it(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        commits = h.store.commits
        with counting_statements(h.store) as sql:
            gate, first, rest = await _held_batch(h, agent, session, art, 7)
            assert not first.done() and not any(t.done() for t in rest)  # nothing answered before its commit
            assert await _loop_rows(h) == 0  # the held row is not committed, the queued ones not written
            gate.release.set()
            made = [await first, *await asyncio.gather(*rest)]
        assert len({m["id"] for m in made}) == 8 and all(m["state"] == "active" for m in made)
        assert await _loop_rows(h) == 8
        inserts = [s for s in sql if s.lstrip().upper().startswith("INSERT INTO LOOP ")]
        assert len(inserts) == 2  # the held create alone, then the seven queued behind it in one statement
        if h.store.dialect == "sqlite":  # (PostgreSQL adds the placement's lease claim and reads)
            assert h.store.commits - commits < 8  # inserts and the loads' incarnation and attach steps, shared
        # §4.3 steps 1 and 4 of a created Loop are its insert's (the row written at incarnation 1 with this node and
        # the object loaded for it): no load updates a row
        updates = [s.upper() for s in sql if s.lstrip().upper().startswith("UPDATE LOOP ")]
        assert updates == [], updates
        assert all(m["incarnation"] == 1 for m in made)
        for m in made:  # each is loaded and running, as a create alone is
            assert h.node.resident(m["id"]) is not None
    finally:
        await h.stop()


async def test_a_batch_of_creates_admits_exactly_the_quota_in_arrival_order(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group = await h.create_group("g-quota", limits={"loops_per_group": 5, "loops_per_agent": 4})
        a1 = await h.create_agent(group.id, "a1")
        a2 = await h.create_agent(group.id, "a2")
        s1, s2 = await h.create_session(a1.id, "inbox"), await h.create_session(a2.id, "inbox")
        art = await driver(h, a1.id, compile_c)
        await _lease(h, a2.id)
        gate, first, rest = await _held_batch(h, a1.id, s1.id, art, 4)  # a1: 1 held + 4 queued (limit 4)
        more = [asyncio.create_task(h.create_loop(agent_id=a2.id, session_id=s2.id, artifact=art, name=f"b{i}"))
                for i in range(3)]  # a2 after them: the group's 5th and two over
        while h.node.lifecycle.collecting(CREATE_KIND) < 7:
            await asyncio.sleep(0.005)
        gate.release.set()
        results = await asyncio.gather(first, *rest, *more, return_exceptions=True)
        outcome = ["ok" if isinstance(r, dict) else str(r.details["scope"] if isinstance(r, QuotaExceeded) else r)
                   for r in results]
        # the queued creates reach the batch in the order their reads finish: count, per agent, in arrival order
        assert outcome[0] == "ok" and sorted(outcome[1:5]) == ["agent", "ok", "ok", "ok"], outcome
        assert sorted(outcome[5:]) == ["group", "group", "ok"], outcome
        assert len(await h.list_loops(group_id=group.id, state="active")) == 5
        await h.loops.archive_agent(a2.id)  # an archived agent's create is refused inside a batch too
        try:
            await h.create_loop(agent_id=a2.id, session_id=s2.id, artifact=art)
        except AgentArchived:
            pass
        else:
            raise AssertionError("an archived agent's create was admitted")
        assert len(await h.list_loops(group_id=group.id)) == 5  # the refusals wrote nothing
    finally:
        await h.stop()


async def test_a_created_loops_object_is_attached_by_its_insert_and_a_refused_create_leaves_none(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """§4.3 steps 2–4 of a create run around its insert: the object is loaded before it and the row is written with
    its ``object_id`` (no attach statement), started only after the commit; a create that is refused (quota) or not
    begun here unloads the object it loaded, so the runtime holds exactly the Loops that run."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group = await h.create_group("g-pre", limits={"loops_per_group": 3, "loops_per_agent": 3})
        agent = await h.create_agent(group.id, "a1")
        session = await h.create_session(agent.id, "inbox")
        art = await driver(h, agent.id, compile_c)
        inserted: list[dict[str, Any]] = []

        async def seen_at_commit(tx: Any) -> None:  # the rows as the insert's transaction wrote them
            rows = await tx.execute(sa.select(schema.loop.c.id, schema.loop.c.object_id))
            inserted.extend({"id": r.id, "object_id": r.object_id} for r in rows)

        with counting_statements(h.store) as sql:
            h.store.before_commit.append(seen_at_commit)
            made = await asyncio.gather(*[h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art,
                                                        name=f"p{i}") for i in range(5)], return_exceptions=True)
            h.store.before_commit.remove(seen_at_commit)
        ok = [m for m in made if isinstance(m, dict)]
        assert len(ok) == 3 and all(isinstance(m, QuotaExceeded) for m in made if m not in ok), made
        objects = {h.node.resident(m["id"]).object_id for m in ok}  # type: ignore[union-attr]
        committed = {r["id"]: r["object_id"] for r in inserted}
        assert {committed[m["id"]] for m in ok} == objects  # the insert wrote the object the Loop runs
        assert not [s for s in sql if s.lstrip().upper().startswith("UPDATE LOOP ")]
        assert h.node.runtime.stats_nowait(extensions=False)["objects"] == 3  # the refused creates' are gone
    finally:
        await h.stop()


async def test_the_verifier_runs_once_per_artifact_digest_not_once_per_create(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        runtime = h.node.runtime
        verified: list[bytes] = []
        real = runtime.verify_nowait

        def counted(elf: bytes) -> Any:
            verified.append(elf)
            return real(elf)

        runtime.verify_nowait = counted  # type: ignore[method-assign]
        for i in range(4):
            await h.create_loop(agent_id=agent, session_id=session, artifact=art, name=f"v{i}")
        assert len(verified) == 1
    finally:
        await h.stop()


async def test_creates_arriving_while_a_create_reads_share_one_read_transaction(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """The agent, session and artifact reads of the creates made while one create reads are one read transaction
    of a statement each (not four statements and a transaction per create), and each is still refused alone."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        await h.create_loop(agent_id=agent, session_id=session, artifact=art)  # the digest verified once
        reads = h.loops._reads
        held, real = asyncio.Event(), reads.work

        async def gated(tx: Any, items: list[Any]) -> list[Any]:
            await held.wait()  # the first read waits here while the others queue
            return await real(tx, items)

        reads.work = gated
        before = reads.reads
        with counting_statements(h.store) as sql:
            first = asyncio.create_task(h.create_loop(agent_id=agent, session_id=session, artifact=art))
            while reads.reads == before:
                await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
            rest = [asyncio.create_task(h.create_loop(agent_id=agent, session_id=session, artifact=art, name=f"r{i}"))
                    for i in range(6)]
            bad = asyncio.create_task(h.create_loop(agent_id=agent, session_id="ses_nope", artifact=art))
            while reads.waiting() < 7:
                await asyncio.sleep(0.005)
            held.set()
            made = [await first, *await asyncio.gather(*rest)]
            refused = await asyncio.gather(bad, return_exceptions=True)
        assert reads.reads - before == 2  # the held one, then the seven queued behind it together
        assert len({m["id"] for m in made}) == 7 and all(m["state"] == "active" for m in made)
        assert [type(r).__name__ for r in refused] == ["InvalidRequest"]  # its session: refused alone
        agent_reads = [s for s in sql if "agent.metadata" in s and "FROM agent " in s]  # (not the batch's lock)
        assert len(agent_reads) == 2, agent_reads
    finally:
        await h.stop()


async def test_a_create_is_answered_from_the_rows_its_load_read(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """A create's answer is the row and pending count its load's replay read after the start (no read of its
    own), §4.3 step 1 is done by the insert's transaction (no statement of the load), and on PostgreSQL the
    placement knows the new Loop's agent from the create."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        await h.create_loop(agent_id=agent, session_id=session, artifact=art)  # the digest verified once
        with counting_statements(h.store) as sql:
            made = await h.create_loop(agent_id=agent, session_id=session, artifact=art, name="answered")
            await h.node.settle()
        # PostgreSQL: the node holds the agent's lease (the first create claimed it), so the create tells no other
        # node (no NOTIFY), and neither the placement's check before the load nor step 1 reads the row for its agent
        assert not [s for s in sql if "pg_notify" in s]
        counts = [s for s in sql if "count(" in s.lower() and "loop_event" in s]
        assert counts == []  # no pending count of its own: the replay's rows were counted
        by_id = [s for s in sql if s.lstrip().upper().startswith("SELECT") and "FROM loop \n" in s
                 and ("loop.id = " in s or "loop.id IN " in s)]
        batch_form = ("loop.id IN ", "loop.id = ANY (")  # (PostgreSQL: a key list is one array parameter)
        assert len(by_id) == 1 and any(f in by_id[0] for f in batch_form), by_id  # the replay's read of the row
        steps = [s for s in sql if s.lstrip().upper().startswith("UPDATE LOOP ")]
        assert steps == [], steps  # steps 1 and 4 (attach) were the insert's
        assert made["name"] == "answered" and made["state"] == "active" and made["incarnation"] == 1
        assert made["pending_count"] == 0 and made["runtime"] == "resident", made
        assert made == await h.get_loop(made["id"])  # the answer is what a read sees
    finally:
        await h.stop()


async def test_creates_of_an_agent_nobody_holds_claim_it_once_and_signal_no_other_node(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """PostgreSQL (§19): concurrent creates of an agent whose lease nobody holds yet — the first create claims it
    before its insert and adopts the agent once, so every insert begins its Loop here (§4.3 step 1 in the insert:
    no load's step-1 update); the creates tell no other node (each transition is reported after its load here),
    and no load reads the row of a Loop created here to learn its agent."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        if h.store.dialect != "postgresql":
            pytest.skip("leases and signals are PostgreSQL's")
        group, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        other = await h.create_agent(group, "fresh")
        inbox = await h.create_session(other.id, "inbox")
        with counting_statements(h.store) as sql:
            made = await asyncio.gather(*[h.create_loop(agent_id=other.id, session_id=inbox.id, artifact=art,
                                                        name=f"f{i}") for i in range(8)])
            await h.node.settle()
        assert all(h.node.resident(m["id"]) is not None for m in made)
        assert not [s for s in sql if "pg_notify" in s]
        claims = [s for s in sql if s.lstrip().upper().startswith("INSERT INTO AGENT_LEASE")]
        adoptions = [s for s in sql if "loop.agent_id IN" in s and "count(" not in s]  # the adoption's list
        assert len(claims) == 1 and len(adoptions) == 1, (claims, adoptions)
        step1 = [s for s in sql if s.lstrip().upper().startswith("UPDATE LOOP ") and "(loop.incarnation +" in s]
        assert step1 == [], step1  # (claimed by the first load instead, the Loops inserted before it took step 1)
        assert all(m["incarnation"] == 1 for m in made)
        by_id = [s for s in sql if s.lstrip().upper().startswith("SELECT") and "FROM loop \n" in s
                 and "loop.id = " in s and "loop.id = ANY (" not in s]
        assert by_id == []  # no placement read of a row (the replays read theirs together: ``loop.id = ANY``)
    finally:
        await h.stop()


async def test_batches_of_similar_sizes_run_one_statement_text(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path,
) -> None:
    """The IN lists of a batch's reads are padded to a power of two, so batches of 5 to 8 creates run the same
    statement texts (PostgreSQL prepares a statement per text and pooled connection) and answer the same rows."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group = await h.create_group("g-pad")
        made = [await h.create_agent(group.id, f"p{i}") for i in range(8)]
        ids = [a.id for a in made]
        with counting_statements(h.store) as sql:
            async with h.store.tx(readonly=True) as tx:
                found = [await agents.find_agents(tx, ids[:n]) for n in (5, 6, 7, 8)]
                owners = [await loops.session_owners(tx, ids[:n]) for n in (5, 8)]
        assert [sorted(f) for f in found] == [sorted(ids[:n]) for n in (5, 6, 7, 8)]
        assert owners == [{}, {}]
        texts = {s for s in sql if "FROM agent" in s}
        assert len(texts) == 1 and len({s for s in sql if "FROM session" in s}) == 1
    finally:
        await h.stop()


async def test_postgresql_runs_a_batchs_key_lists_as_one_array_parameter(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path,
) -> None:
    """PostgreSQL: the key lists of a create batch's statements are one array parameter (``= ANY``), not an IN list
    SQLAlchemy renders into the statement at every execution — one text for any batch size, and the same rows."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        if h.store.dialect != "postgresql":
            pytest.skip("arrays are PostgreSQL's (SQLite pads its IN lists)")
        group = await h.create_group("g-any")
        made = [await h.create_agent(group.id, f"p{i}") for i in range(20)]
        ids = [a.id for a in made]
        sizes = (1, 2, 3, 9, 20)
        with counting_statements(h.store) as sql:
            async with h.store.tx() as tx:
                found = [await agents.find_agents(tx, ids[:n]) for n in sizes]
                by_agent = [await quota.count_active_by_agent(tx, ids[:n]) for n in sizes]
                owners = [await loops.session_owners(tx, ids[:n]) for n in sizes]
                rows = [await loops.find_loops(tx, ids[:n]) for n in sizes]
        assert [sorted(f) for f in found] == [sorted(ids[:n]) for n in sizes]
        assert by_agent == [{}] * len(sizes) and owners == [{}] * len(sizes) and rows == [{}] * len(sizes)
        for table in ("FROM agent", "FROM session", "FROM loop \nWHERE loop.id", "GROUP BY loop.agent_id"):
            texts = {s for s in sql if table in s}
            assert len(texts) == 1 and "= ANY (" in next(iter(texts)), (table, texts)
    finally:
        await h.stop()


async def test_postgresql_runs_a_create_batchs_statements_built_once(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """PostgreSQL (issue 16): the statements of a create's read and insert batch with key lists or the quota's
    counts are built once — a second create runs the very statement objects of the first (SQLAlchemy derived the
    cache key of each new object by walking it) — and the quotas still count right."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        if h.store.dialect != "postgresql":
            pytest.skip("SQLite pads its IN lists into the statement (built per batch)")
        group = await h.create_group("g-once", limits={"loops_per_group": 3, "loops_per_agent": 2})
        agent = await h.create_agent(group.id, "o1")
        session = await h.create_session(agent.id, "inbox")
        art = await driver(h, agent.id, compile_c)
        await _lease(h, agent.id)

        def keyed(ran: list[Any]) -> list[Any]:
            texts = [(s, str(s.compile(dialect=h.store.engine.dialect))) for s in ran
                     if isinstance(s, (sa.Select, sa.TextClause))]
            return [s for s, text in texts if "ANY (" in text or "count(" in text or "agent_group.limits" in text]

        built = []
        for i in range(2):
            with executed_statements(h.store) as ran:
                await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art, name=f"o{i}")
            built.append(keyed(ran))
        # the agents (read, then locked), sessions (read, owners), the group's limits and kept count (one statement,
        # migration 6), the agents' count and the lease
        assert len(built[0]) >= 7 and len(built[0]) == len(built[1]), built
        assert all(a is b for a, b in zip(*built)), [str(a)[:90] for a, b in zip(*built) if a is not b]
        with pytest.raises(QuotaExceeded):  # the built-once counts count: the agent's third is refused
            await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art, name="o2")
    finally:
        await h.stop()


async def test_the_replays_of_loads_waiting_meanwhile_share_one_read(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """§4.3 step 5's replay reads of the Loops loaded while one replay reads are one read transaction (their
    pending events and, for the creates' answers, their rows), each Loop still given only its own events."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        await h.create_loop(agent_id=agent, session_id=session, artifact=art)  # the digest verified once
        reads = h.node._pending_reads
        held, real = asyncio.Event(), reads.work

        async def gated(tx: Any, items: list[Any]) -> list[Any]:
            await held.wait()
            return await real(tx, items)

        reads.work = gated
        before = reads.reads
        first = asyncio.create_task(h.create_loop(agent_id=agent, session_id=session, artifact=art, name="held"))
        while reads.reads == before:
            await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
        rest = [asyncio.create_task(h.create_loop(agent_id=agent, session_id=session, artifact=art, name=f"q{i}"))
                for i in range(5)]
        while reads.waiting() < 5:
            await asyncio.sleep(0.005)
        held.set()
        made = [await first, *await asyncio.gather(*rest)]
        assert reads.reads - before == 2
        assert [m["name"] for m in made] == ["held", "q0", "q1", "q2", "q3", "q4"]  # each its own row
        assert all(m["incarnation"] == 1 and m["runtime"] == "resident" and m["pending_count"] == 0 for m in made)
    finally:
        await h.stop()


async def test_a_created_loop_is_loaded_at_the_incarnation_its_insert_began_whatever_sweeps_run_meanwhile(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """The insert writes the Loop at incarnation 1 for this node (§4.3 step 1 in the create's transaction); from
    before the insert until its load is done the create holds the Loop, so a reconcile or an adoption that finds
    the committed row meanwhile leaves it to the create instead of beginning another incarnation."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        await h.create_loop(agent_id=agent, session_id=session, artifact=art)  # the agent's lease, the digest
        node = h.node
        held, go = asyncio.Event(), asyncio.Event()
        real = node._start_created

        async def slow(row: Any, seen: Any) -> Any:
            held.set()
            await go.wait()
            return await real(row, seen)

        node._start_created = slow  # type: ignore[method-assign]
        create = asyncio.create_task(h.create_loop(agent_id=agent, session_id=session, artifact=art, name="held"))
        await held.wait()  # the row is committed, the create's load has not run
        async with h.store.tx(readonly=True) as tx:
            row = (await tx.execute(sa.select(schema.loop).where(schema.loop.c.name == "held"))).one()
        assert (row.incarnation, row.node_id) == (1, node.node_id) and row.object_id is not None
        assert await node.load_many([row.id]) == 0  # the adoption path leaves it to the create
        sweep = asyncio.create_task(node.try_load(row.id, if_absent=True))  # the reconcile waits for the create
        go.set()
        made = await create
        await sweep
        assert made["incarnation"] == 1 and made["runtime"] == "resident", made
        assert (await h.get_loop(row.id))["incarnation"] == 1
    finally:
        await h.stop()


async def test_a_create_waiting_on_its_commit_holds_the_runtimes_load_burst(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vm.md §7 hygiene (issue 16, creates at N = 10,000): a create burst whose creates all wait on a lifecycle
    commit is not quiet — each such pause had ended the burst with a collection of the whole heap, once per 1,000
    creates. Here the burst is one load (the create's preload): 100 ms of the scheduler clock pass while the create's
    insert is held at its COMMIT and no collection runs; once the create is done, the quiet ends the burst."""
    import gc

    from wakeful.runtime import scheduler as sched

    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        runtime = h.node.runtime.scheduler
        monkeypatch.setattr(sched, "HYGIENE_LOADS", 1)
        freezes = runtime.gc_freezes
        gate, first, _ = await _held_batch(h, agent, session, art, 0)
        assert runtime.hygiene_held
        store_clock.advance(ms=200)  # the burst's quiet period, twice over, while the commit is held
        for _ in range(40):  # the hygiene's timer runs meanwhile (a real 100 ms; scheduler state, no timing)
            await asyncio.sleep(0.005)
        assert runtime.gc_freezes == freezes  # the wait on the commit did not end the burst
        gate.release.set()
        made = await first
        assert h.node.resident(made["id"]) is not None
        assert not runtime.hygiene_held
        store_clock.advance(ms=200)
        while runtime.gc_freezes == freezes:  # the burst's one collection, after the create
            await asyncio.sleep(0.005)
    finally:
        gc.unfreeze()
        await h.stop()


async def test_postgresql_locks_a_batchs_agents_and_counts_their_loops_in_one_round_trip(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """PostgreSQL (issue 16): inside a create batch's group lock the agents' rows are locked and their active Loops
    counted by one statement (base: two round trips), so the critical section that serialises a group's creates
    is a round trip shorter — and the agent quota still counts: the agent's third create is refused."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        if h.store.dialect != "postgresql":
            pytest.skip("round trips to PostgreSQL")
        group = await h.create_group("g-rt", limits={"loops_per_group": 5, "loops_per_agent": 2})
        agent = await h.create_agent(group.id, "r1")
        session = await h.create_session(agent.id, "inbox")
        art = await driver(h, agent.id, compile_c)
        await _lease(h, agent.id)
        await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art, name="r0")
        with round_trips(h.store) as sent:
            await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art, name="r1")
        texts = [" ".join(s.split()) for s in sent]
        lock = next(i for i, s in enumerate(texts) if "pg_advisory_xact_lock" in s)
        insert = next(i for i, s in enumerate(texts) if s.startswith("INSERT INTO loop "))
        # (the BEGIN asyncpg sends before the lock statement is logged after it)
        inside = [s for s in texts[lock + 1:insert] if not s.startswith("BEGIN")]
        # the agents locked and counted, the group's limits and kept count, the sessions' owners, the lease
        assert len(inside) == 4, inside
        assert not [s for s in inside if "count(" in s and "FOR UPDATE" not in s and "agent_group" not in s], inside
        with pytest.raises(QuotaExceeded) as refused:
            await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art, name="r2")
        assert refused.value.details == {"scope": "agent", "limit": 2}
    finally:
        await h.stop()
