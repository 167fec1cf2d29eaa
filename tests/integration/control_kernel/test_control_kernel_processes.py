"""Several real processes claim the same work items at once (control-plane.md §4.2, §10): on PostgreSQL (row
lock on the goal) and on SQLite (BEGIN IMMEDIATE), exactly one live hard claim per item, every loser gets
``claimed_by_other``, and the commit log stays gapless."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from support.control_kernel import make_kit

CHILD = r"""
import asyncio, json, os, sys, time
from wakeful.control import Actor, Control, ControlRefused
from wakeful.harness.store import Store

async def main(url, goal, group, agent, items_json, d, i):
    store = await Store.open(url)
    control = Control(store)
    open(os.path.join(d, f"ready-{i}"), "w").close()
    deadline = time.monotonic() + 180  # an orphan (the test process died) gives up and closes its connections
    while not os.path.exists(os.path.join(d, "go")):
        if time.monotonic() > deadline:
            await store.close()
            sys.exit(3)
        await asyncio.sleep(0.002)
    out = {}
    for item in json.loads(items_json):
        envelope = {"operation_id": f"p{i}-{item}", "goal_id": goal,
                    "command": {"type": "claim.acquire", "item": item, "key": f"proc-{i}"}}
        try:
            receipt = await control.submit(Actor("agent", agent, group), envelope)
            out[item] = ["won", receipt["claim"]["epoch"], receipt["seq"]]
        except ControlRefused as exc:
            out[item] = ["refused", exc.code, exc.details.get("holder")]
    await store.close()
    print(json.dumps(out))

asyncio.run(main(*sys.argv[1:7], int(sys.argv[7])))
"""

N_PROCS = 4
N_ITEMS = 4


def _reap(procs: list[subprocess.Popen[str]]) -> None:
    """SIGKILL and wait for the children still running (each holds PostgreSQL connections while alive)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)


async def test_processes_race_for_the_same_items(store, store_url: str, tmp_path: Path) -> None:
    kit = await make_kit(store, n_agents=N_PROCS, claim_mode="hard")
    items = [await kit.add(title=f"item {i}") for i in range(N_ITEMS)]
    procs: list[subprocess.Popen[str]] = []
    results = []
    try:
        for i, agent in enumerate(kit.agents):
            order = items[i:] + items[:i]  # every process starts on a different item, then meets the others
            procs.append(subprocess.Popen(
                [sys.executable, "-c", CHILD, store_url, kit.goal_id, kit.group_id, agent.id, json.dumps(order),
                 str(tmp_path), str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready-*"))) < N_PROCS:
            assert time.monotonic() < deadline, [p.poll() for p in procs]
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            time.sleep(0.01)
        (tmp_path / "go").touch()
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        _reap(procs)  # a failed start must not leave children polling for "go" with their connections open
    for item in items:
        outcomes = [r[item] for r in results]
        winners = [i for i, o in enumerate(outcomes) if o[0] == "won"]
        assert len(winners) == 1, (item, outcomes)
        winner = kit.agents[winners[0]].id
        assert outcomes[winners[0]][1] == 1  # the first and only grant: epoch 1
        for o in outcomes:
            if o[0] == "refused":
                assert o[1:] == ["claimed_by_other", winner], outcomes
        view = await kit.control.item(kit.goal_id, item)
        assert (view["claim"]["holder"], view["claim"]["epoch"], view["claim"]["status"]) == (winner, 1, "active")
    commits = await kit.control.commits(kit.goal_id, limit=200)
    assert [c["seq"] for c in commits] == list(range(1, len(commits) + 1))
    assert sum(c["command_type"] == "claim.acquire" for c in commits) == N_ITEMS


CHAOS_CHILD = r"""
import asyncio, os, sys, time
from wakeful.control import Actor, Control
from wakeful.harness.store import Store

async def main(url, goal, group, agent, item, d):
    store = await Store.open(url)
    control = Control(store)
    me = Actor("agent", agent, group)
    n = 0
    deadline = time.monotonic() + 180  # the test SIGKILLs it long before; an orphan stops by itself
    while time.monotonic() < deadline:
        rev = (await control.item(goal, item))["revision"]
        await control.submit(me, {"operation_id": f"chaos-{n}", "goal_id": goal, "expected": {"item_revision": rev},
                                  "command": {"type": "work.update", "item": item, "detail": f"step {n}"}})
        n += 1
        if n == 3:
            open(os.path.join(d, "ready"), "w").close()

asyncio.run(main(*sys.argv[1:7]))
"""


async def test_a_process_killed_mid_command_leaves_no_half_commit(store, store_url: str, tmp_path: Path) -> None:
    """Chaos: SIGKILL a process that commits as fast as it can; whatever it was doing is either fully in the log
    or not at all, and the goal keeps working."""
    import signal

    kit = await make_kit(store, n_agents=1)
    item = await kit.add(title="hammered")
    proc = subprocess.Popen([sys.executable, "-c", CHAOS_CHILD, store_url, kit.goal_id, kit.group_id,
                             kit.agents[0].id, item, str(tmp_path)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        _reap([proc])  # never leave the hammering child running after a failed wait
    commits = await kit.control.commits(kit.goal_id, limit=200)
    seqs = [c["seq"] for c in commits]
    assert seqs == list(range(1, len(seqs) + 1))
    updates = [c for c in commits if c["command_type"] == "work.update"]
    assert len(updates) >= 3
    assert [c["operation_id"] for c in updates] == [f"chaos-{n}" for n in range(len(updates))]
    view = await kit.control.item(kit.goal_id, item)
    assert view["revision"] == 1 + len(updates) and view["detail"] == f"step {len(updates) - 1}"
    assert (await kit.control.goal(kit.goal_id))["revision"] == seqs[-1]
    # the next operation id was not applied, or it would be in the log: its retry applies it now
    receipt = await kit.run(kit.agents[0], {"type": "work.update", "item": item, "detail": "after"},
                            op=f"chaos-{len(updates)}", expected={"item_revision": view["revision"]})
    assert "replayed" not in receipt and receipt["seq"] == seqs[-1] + 1
