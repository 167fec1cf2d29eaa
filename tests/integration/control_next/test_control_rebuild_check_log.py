"""``wakeful goal rebuild --check-log`` on SQLite and PostgreSQL (control-plane.md §8, issue 8 "a status
projection that can be rebuilt from the commit log"): after a real command sequence the projections rebuilt from
the commit log alone equal those of the tables (exit 0); a row changed behind the kernel's back (no commit) is
reported for its goal and projection kinds only (exit 1), and the served cache never hides it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import sqlalchemy as sa
from support.control_next_support import Ctl

from wakeful.cli.main import main
from wakeful.control import schema as S
from wakeful.harness.store import Store


async def _seed(url: str) -> dict[str, str]:
    store = await Store.open(url)
    try:
        ctl = await Ctl.open(store, name="log")
        person, agent = ctl.person, ctl.agent_actor
        goals = []
        for title in ("audited", "untouched"):
            goal = (await ctl.submit(person, {"operation_id": f"goal-{title}", "command": {
                "type": "goal.create", "title": title, "objective": "o", "subjects": {"repo": "git:a"}}}))["goal_id"]
            g = ctl.on(goal)
            await g.cmd(person, "agent.register", agent_id=ctl.agent)
            item = await g.add(person, "advancement", "measure")
            await g.add(agent, "advancement", "later", priority=3)
            await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 0},
                        document={"criteria": [{"id": "lat", "text": "p99", "subject": "repo"}]},
                        bindings={item: ["lat"]})
            claim = (await ctl.next(goal, claim=True))["claim"]["claim"]
            await g.cmd(agent, "evidence.add", item=item, criterion_ids=["lat"], kind="test", subject="repo",
                        artifact_revision="git:a", verdict="pass")
            await g.cmd(agent, "work.complete", item=item, expected={
                "item_revision": await g.revision(item), "claim": {"epoch": claim["epoch"], "key": claim["key"]}})
            goals.append(goal)
        return {"audited": goals[0], "untouched": goals[1], "item": item}
    finally:
        await store.close()


async def _tamper(url: str, goal_id: str, **values: Any) -> None:
    """Change the goal's open item in the table only — what a bug or a hand edit would do, with no commit."""
    store = await Store.open(url)
    try:
        W = S.work_item
        async with store.tx() as tx:
            await tx.execute(W.update().where(W.c.goal_id == goal_id, W.c.status == "open").values(**values))
    finally:
        await store.close()


def test_rebuild_check_log(store_url: str, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_DB_URL", store_url)

    def rebuild(*args: str, code: int) -> Any:
        capsys.readouterr()
        assert main(["goal", "rebuild", *args, "--check-log", "--json"]) == code
        return json.loads(capsys.readouterr().out)

    seeded = asyncio.run(_seed(store_url))
    clean = rebuild(code=0)
    assert clean == {"goals": 2, "projections": 4, "log_mismatches": []}

    asyncio.run(_tamper(store_url, seeded["audited"], title="renamed behind the log"))
    titled = rebuild(code=1)
    assert titled["log_mismatches"] == [{"goal_id": seeded["audited"], "kinds": ["board"]}]  # a title is a card's
    assert rebuild(seeded["untouched"], code=0)["log_mismatches"] == []

    asyncio.run(_tamper(store_url, seeded["audited"], status="blocked"))
    blocked = rebuild(seeded["audited"], code=1)
    assert blocked == {"goals": 1, "projections": 2,
                       "log_mismatches": [{"goal_id": seeded["audited"], "kinds": ["status", "board"]}]}
    # without --check-log the rebuild itself still succeeds (projections follow the tables)
    capsys.readouterr()
    assert main(["goal", "rebuild", seeded["audited"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"goals": 1, "projections": 2}
    assert main(["goal", "rebuild", "goal_0000000000000000000000000z", "--check-log", "--json"]) == 1


def test_log_mismatch_reads_under_the_commit_lock(store_url: str) -> None:
    """The check reads the tables and the log in one transaction holding the goal's lock, so a commit can never
    fall between them: concurrent commits during repeated checks never produce a false mismatch."""
    from wakeful.control import projections

    async def scenario() -> None:
        store = await Store.open(store_url)
        try:
            ctl = await Ctl.open(store, name="race")
            goal = (await ctl.submit(ctl.person, {"operation_id": "g", "command": {
                "type": "goal.create", "title": "t", "objective": "o"}}))["goal_id"]
            g = ctl.on(goal)
            stop = asyncio.Event()

            async def writer() -> int:
                n = 0
                while not stop.is_set() and n < 400:  # under the goal's 500 open items
                    await g.add(ctl.person, "advancement", f"w{n}")
                    n += 1
                return n

            task = asyncio.create_task(writer())
            checks = []
            for _ in range(15):
                checks.append(await projections.log_mismatches(store, goal))
                await asyncio.sleep(0)
            stop.set()
            written = await task
            assert checks == [[]] * 15 and written > 0
            async with store.tx(readonly=True) as tx:
                count = (await tx.execute(sa.select(sa.func.count()).select_from(S.work_item)
                                          .where(S.work_item.c.goal_id == goal))).scalar_one()
            assert count == written
        finally:
            await store.close()

    asyncio.run(scenario())
