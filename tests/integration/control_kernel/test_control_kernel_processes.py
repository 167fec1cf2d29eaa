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
import asyncio, json, os, sys
from wakeful.control import Actor, Control, ControlRefused
from wakeful.harness.store import Store

async def main(url, goal, group, agent, items_json, d, i):
    store = await Store.open(url)
    control = Control(store)
    open(os.path.join(d, f"ready-{i}"), "w").close()
    while not os.path.exists(os.path.join(d, "go")):
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


async def test_processes_race_for_the_same_items(store, store_url: str, tmp_path: Path) -> None:
    kit = await make_kit(store, n_agents=N_PROCS, claim_mode="hard")
    items = [await kit.add(title=f"item {i}") for i in range(N_ITEMS)]
    procs = []
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
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
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
