"""control-plane.md §9 with a real compiled Loop (tests/support/guests/loop_driver.c) on SQLite and PostgreSQL:
a monitor item backed by the Loop; its wakes commit one observation each (even when the handler runs twice),
structured wakes record evidence, a wake resumes a deferred item, and the Loop's state moves the monitor between
watching and runnable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.control_next_support import Ctl
from support.loops_harness import call, driver_loop, loop_row, send, until

from wakeful.control import projections
from wakeful.control.embed import Harness
from wakeful.control.loops import LoopBridge, evidence_of
from wakeful.harness.config import Config


async def notify(h: Harness, bridge: LoopBridge, loop_id: str, event_id: str, content: Any) -> None:
    await call(h, loop_id, event_id, "agent.notify", {"content": content, "dedup_key": event_id})
    await h.settle()
    await bridge.settle()


async def test_loop_backed_monitor(store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=store_url), clock=store_clock, sweeps=False)
    await h.start()
    bridge = h._bridge  # installed by wakeful.control.embed.Harness at start (no 60 s sweep: sweeps=False)
    assert isinstance(bridge, LoopBridge)
    try:
        await scenario(h, bridge, compile_c)
    finally:
        await h.stop()


async def scenario(h: Harness, bridge: LoopBridge, compile_c: Any) -> None:
    agent, session, loop_id = await driver_loop(h, compile_c)
    ctl = Ctl(h.store, (await loop_row(h, loop_id)).group_id, agent, submitter=h.control)
    person, me = ctl.person, ctl.agent_actor
    goal = (await ctl.submit(person, {"operation_id": "g", "command": {
        "type": "goal.create", "title": "deploy watch", "objective": "ship when green",
        "subjects": {"repo": "git:1"}}}))["goal_id"]
    g = ctl.on(goal)
    await g.cmd(person, "agent.register", agent_id=agent)
    await g.cmd(person, "acceptance.set", expected={"acceptance_revision": 0},
                document={"criteria": [{"id": "deploy_ok", "text": "the deploy is green", "subject": "repo"}]})
    monitor = await g.add(me, "monitor", "watch the deploy", loop_id=loop_id, target="https://ci.example/deploy",
                          priority=0)
    follow = await g.add(me, "advancement", "act on the deploy signal")
    await g.cmd(me, "work.defer", item=follow, resume_when=[f"loop_wake:{loop_id}"], expected={"item_revision": 1})

    # the Loop predates the bridge: the first sweep records its state once
    assert await bridge.sweep() == 1
    assert (await g.item(monitor))["watch_state"]["state"] == "active"
    assert await bridge.sweep() == 0

    # the watch is delegated: the agent sleeps until the Loop wakes it
    waiting = await ctl.next(goal)
    assert (waiting["decision"], waiting["wait_kind"]) == ("wait", "no_new_facts")
    assert waiting["wake_when"] == [f"loop_wake:{loop_id}"]

    # a plain wake: one observation, loop_wake evidence, the deferred item resumes
    await notify(h, bridge, loop_id, "e1", "deploy finished")
    item = await g.item(monitor)
    assert item["observations"] == 1 and item["last_observed_ms"] is not None
    evidence = await h.control.evidence(goal, item=monitor)
    assert [(e["kind"], e["verdict"], e["source"]) for e in evidence] == [("loop_wake", "observed", "loop")]
    assert (await g.item(follow))["status"] == "open"

    # the wake handler running again (at-least-once delivery) commits nothing new
    message = (await h.messages(session, kinds=("loop",)))[-1]
    assert await bridge.on_message(message.id) == 0
    assert (await g.item(monitor))["observations"] == 1
    assert await bridge.sweep() == 0  # the safety net finds nothing missing either

    # a structured wake records its evidence (source loop) and decides the criterion
    await notify(h, bridge, loop_id, "e2", {"evidence": {
        "verdict": "pass", "criterion_ids": ["deploy_ok"], "subject": "repo", "artifact_revision": "git:1",
        "summary": "deploy green"}})
    status = await projections.read(h.store, goal, "status")
    assert status["acceptance"]["criteria"][0]["status"] == "pass"
    assert status["acceptance"]["criteria"][0]["deciding_evidence"]["recorded_by"] == f"system:loop:{loop_id}"
    # an invalid evidence member is a plain observation
    await notify(h, bridge, loop_id, "e3", {"evidence": {"verdict": "great"}})
    # so is a well-formed member naming a criterion the contract does not have
    await notify(h, bridge, loop_id, "e3b", {"evidence": {"verdict": "fail", "criterion_ids": ["nope"],
                                                          "subject": "repo", "artifact_revision": "git:1"}})
    verdicts = [e["verdict"] for e in await h.control.evidence(goal, item=monitor)]
    assert verdicts == ["observed", "pass", "observed", "observed"]
    assert (await g.item(monitor))["observations"] == 4
    assert status["monitors"][0]["loop_id"] == loop_id

    # a wake while the goal is paused is not observed then; the sweep catches it up after the resume
    await g.cmd(person, "goal.pause")
    await notify(h, bridge, loop_id, "e4", "while paused")
    assert (await g.item(monitor))["observations"] == 4
    await g.cmd(person, "goal.resume")
    assert await bridge.sweep() == 1
    assert (await g.item(monitor))["observations"] == 5

    # a wake committed while no bridge listens (a node restarting) is caught up by the sweep at install
    await bridge.close()
    await notify(h, bridge, loop_id, "e5", "while the bridge was away")
    assert (await g.item(monitor))["observations"] == 5
    bridge.install(sweep_every_s=3600)

    async def caught_up() -> bool:
        return bool((await g.item(monitor))["observations"] == 6)

    await until(caught_up)

    # the Loop leaves active: the monitor becomes runnable; next hands it to the agent
    await g.cmd(person, "work.cancel", item=follow, expected={"item_revision": await g.revision(follow)})
    await h.pause_loop(loop_id)
    await h.settle()
    await bridge.settle()
    assert (await g.item(monitor))["watch_state"]["state"] == "paused"
    offered = await ctl.next(goal)
    assert (offered["decision"], offered["action"], offered["item"]["id"]) == ("deliver", "start", monitor)
    board = await projections.read(h.store, goal, "board")
    assert monitor in [c["id"] for c in board["columns"]["open"]["runnable"]]

    # an item deferred until the Loop runs again resumes when it does (loop_active:<loop>)
    again = await g.add(me, "advancement", "check the restarted watch", priority=4)
    await g.cmd(me, "work.defer", item=again, resume_when=[f"loop_active:{loop_id}"], expected={"item_revision": 1})

    # resumed: back to watching (the sweep records the new incarnation once it is loaded)
    await h.resume_loop(loop_id)
    await h.settle()
    await bridge.settle()
    assert (await g.item(again))["status"] == "open"
    # the resume itself is recorded at once, not swallowed as a replay of the first active:1 (issue 20 bug 3)
    assert (await g.item(monitor))["watch_state"]["state"] == "active"
    assert ((await ctl.next(goal)).get("item") or {}).get("id") != monitor  # watching again: not handed out
    await g.cmd(person, "work.cancel", item=again, expected={"item_revision": await g.revision(again)})
    await h.tick()
    await bridge.sweep()
    assert (await g.item(monitor))["watch_state"]["state"] == "active"
    watching = await ctl.next(goal)
    assert (watching["decision"], watching["wake_when"]) == ("wait", [f"loop_wake:{loop_id}"])

    # the Loop exits: watch_state says paused(exited) and the monitor is the agent's to decide again
    await send(h, loop_id, "e9", "exit", {"code": 0})

    async def exited() -> bool:
        await h.settle()
        await bridge.settle()
        watch = (await g.item(monitor))["watch_state"]
        return bool((watch["state"], watch["reason"]) == ("paused", "exited"))  # harness.md §4: paused(exited)

    await until(exited)
    assert (await ctl.next(goal))["item"]["id"] == monitor

    # deleted: the Loop row is gone (the harness signals no transition for it): next sees it at once, the
    # sweep records it in watch_state
    await h.delete_loop(loop_id)
    await h.settle()
    assert (await ctl.next(goal))["item"]["id"] == monitor
    assert await bridge.sweep() == 1
    assert (await g.item(monitor))["watch_state"]["state"] == "deleted"
    assert (await projections.read(h.store, goal, "status"))["monitors"][0]["loop_state"] == "deleted"


def test_structured_wake_parsing() -> None:
    good = {"evidence": {"verdict": "fail", "criterion_ids": ["a"], "subject": "repo", "artifact_revision": "r"}}
    assert evidence_of(json.dumps(good)) == good["evidence"]
    assert evidence_of(json.dumps({"evidence": {"verdict": "pass"}})) == {"verdict": "pass"}
    for bad in ("not json", "[1]", json.dumps({"evidence": "pass"}), json.dumps({"evidence": {"verdict": "ok"}}),
                json.dumps({"evidence": {"verdict": "pass", "criterion_ids": ["a"]}}),  # no subject: §2.7
                json.dumps({"evidence": {"verdict": "pass", "summary": 5}}),
                json.dumps({"evidence": {"verdict": "pass", "criterion_ids": "a"}})):
        assert evidence_of(bad) is None, bad


async def test_a_readback_loop_settles_an_unknown_effect(store_url: str, store_clock: Any, tmp_path: Path,
                                                         compile_c: Any) -> None:
    """Issue 20: the GPU job whose outcome is unknown is given a Loop; when the Loop learns the outcome it wakes
    with {"readback": …} and the bridge commits effect.readback as that Loop — no agent turn."""
    h = Harness(Config(data_dir=tmp_path, store_url=store_url), clock=store_clock, sweeps=False)
    await h.start()
    bridge = h._bridge
    assert isinstance(bridge, LoopBridge)
    try:
        agent, _session, loop_id = await driver_loop(h, compile_c)
        ctl = Ctl(h.store, (await loop_row(h, loop_id)).group_id, agent, submitter=h.control)
        person, me = ctl.person, ctl.agent_actor
        goal = (await ctl.submit(person, {"operation_id": "g", "command": {
            "type": "goal.create", "title": "train", "objective": "a model"}}))["goal_id"]
        g = ctl.on(goal)
        await g.cmd(person, "agent.register", agent_id=agent)
        await g.cmd(me, "effect.intend", request_key="gpu-7", kind="gpu.job", target="cluster", payload_digest="d")
        await g.cmd(me, "effect.settle", request_key="gpu-7", attempt=1, outcome="unknown")
        await g.cmd(me, "effect.watch", request_key="gpu-7", loop_id=loop_id)
        (watched,) = await h.control.effects(goal)
        assert watched["readback"]["loop_id"] == loop_id
        # a wake about another key, or a malformed readback, changes nothing
        await notify(h, bridge, loop_id, "r0", {"readback": {"request_key": "other", "attempt": 1,
                                                             "observed": "present"}})
        await notify(h, bridge, loop_id, "r1", {"readback": {"request_key": "gpu-7", "attempt": "one",
                                                             "observed": "present"}})
        assert (await h.control.effects(goal))[0]["state"] == "unknown"
        # the Loop found the job by its request key: succeeded, recorded as the Loop's readback
        await notify(h, bridge, loop_id, "r2", {"readback": {"request_key": "gpu-7", "attempt": 1,
                                                             "observed": "present", "external_ref": "job/991"}})
        (done,) = await h.control.effects(goal)
        assert (done["state"], done["outcome"]["external_ref"]) == ("succeeded", "job/991")
        assert (done["readback"]["by"], done["readback"]["loop_id"]) == (f"system:loop:{loop_id}", loop_id)
        message = (await h.messages(_session, kinds=("loop",)))[-1]
        assert await bridge.on_message(message.id) == 0  # at-least-once delivery: applied once
        assert await bridge.sweep() == 0
    finally:
        await h.stop()
