"""The control plane's reference scenario through the command line alone (issue 20), against a live node on
loopback: acceptance v1; a person's feedback becomes an agent's proposal of v2 that the person approves; rA's
isolated result counts for v1, not for v2; the plane's validator produces the v2 evidence; the release stays gated
while independent work continues; a GPU job whose outcome is unknown is settled by a readback Loop; two agents
race for one item. Every line is a `wakeful …` command (remote mode, one key per actor); each step's refusals are
asserted."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.control_cli import Cli, built_once  # noqa: F401 (an autouse fixture)
from test_control_mcp_tools import node  # the control node with /mcp mounted

GUESTS = Path(__file__).parents[2] / "support" / "guests"
VALIDATOR = (GUESTS / "validator_mixed.c").read_text()
ISOLATED, MIXED = "suite:bench/isolated", "suite:bench/mixed"


class Actors:
    """`wakeful --server URL --key KEY … --json` for the person and each agent, run off the node's loop."""

    def __init__(self, cli: Cli, url: str, keys: dict[str, str]) -> None:
        self.cli, self.url, self.keys = cli, url, keys

    async def __call__(self, who: str, *argv: str, code: int = 0) -> Any:
        return await asyncio.to_thread(self.cli, "--server", self.url, "--key", self.keys[who], *argv, code=code)


def _write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


async def test_the_reference_scenario_through_the_cli(harness_runner: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "cli"))
    async with node(tmp_path) as (h, url):
        group = await h.create_group("g")
        a = await h.create_agent(group.id, "a")
        b = await h.create_agent(group.id, "b")
        session = await h.create_session(a.id, "inbox")
        keys = {"person": (await h.create_key("group", group_id=group.id))[1],
                "a": (await h.create_key("agent", group_id=group.id, agent_id=a.id))[1],
                "b": (await h.create_key("agent", group_id=group.id, agent_id=b.id))[1]}
        run = Actors(Cli(capsys), url, keys)
        await scenario(run, h, tmp_path, group.id, a.id, b.id, session.id)


async def scenario(run: Actors, h: Any, tmp: Path, group: str, a: str, b: str, session: str) -> None:
    goal = (await run("person", "goal", "create", "--group", group, "--title", "fast p99",
                      "--objective", "p99 < 5 ms", "--subject", "repo=git:rA"))["goal"]["id"]
    for agent in (a, b):
        await run("person", "goal", "register", goal, agent)
    add = ("work", "add", goal, "--class", "advancement", "--title")
    bench = (await run("a", *add, "isolated microbenchmark", "--priority", "0"))["item"]["id"]
    docs = (await run("b", *add, "document the knobs", "--priority", "3"))["item"]["id"]
    release = (await run("person", *add, "release", "--priority", "1", "--field",
                         'required_scopes=["production:action:release"]'))["item"]["id"]
    gate = (await run("person", "work", "add", goal, "--class", "user_gate", "--title", "release?", "--field",
                      "scope=production:goal:release", "--field", f'targets=["{release}"]', "--field",
                      "question=Release it?"))["item"]["id"]

    # acceptance v1 is a person's: an agent is refused; the fence is required
    v1 = _write(tmp / "v1.json", {"document": {"criteria": [
        {"id": "latency", "text": "p99 < 5 ms", "subject": "repo", "workload": {"kind": "suite",
                                                                               "ref": "bench/isolated"}}]},
        "bindings": {bench: ["latency"]}})
    assert (await run("a", "goal", "acceptance", "set", goal, v1, "--expected-revision", "0",
                      code=1))["error"] == "forbidden"
    await run("person", "goal", "acceptance", "set", goal, v1, "--expected-revision", "0")

    # rA's isolated result passes v1
    start = await run("a", "next", "--agent", a, "--goal", goal, "--claim")
    assert (start["action"], start["item"]["id"]) == ("start", bench)
    held = start["claim"]["claim"]
    fence = ["--claim-epoch", str(held["epoch"]), "--claim-key", held["key"]]
    await run("a", "evidence", "add", goal, "--kind", "test", "--verdict", "pass", "--item", bench, "--criterion",
              "latency", "--subject", "repo", "--artifact-revision", "git:rA", "--workload", ISOLATED, "--summary",
              "isolated p99 3.1 ms", "--agent", a)
    await run("a", "work", "complete", goal, bench, "--expected-revision", "1", *fence, "--agent", a)
    assert (await run("person", "goal", "status", goal))["acceptance"]["status"] == "accepted"

    # the person's feedback: mixed load is what matters. The agent proposes v2 (a validator decides it); the
    # person approves exactly the digest they read
    mixed = (await run("a", *add, "mixed-load measurement", "--priority", "0"))["item"]["id"]
    v2 = _write(tmp / "v2.json", {"document": {"criteria": [
        {"id": "latency", "text": "p99 < 5 ms under mixed load", "subject": "repo",
         "workload": {"kind": "suite", "ref": "bench/mixed"}, "evidence_from": "validator",
         "validator": {"source": VALIDATOR, "budget_s": 30}}]}, "bindings": {mixed: ["latency"]}})
    stale_base = await run("a", "goal", "acceptance", "propose", goal, v2, "--expected-revision", "0", "--agent", a,
                           code=1)
    assert stale_base["error"] == "revision_conflict"
    proposed = await run("a", "goal", "acceptance", "propose", goal, v2, "--expected-revision", "1", "--agent", a,
                         "--note", "the person asked for mixed load")
    proposal_gate, digest = proposed["proposal"]["gate_id"], proposed["proposal"]["digest"]
    needs = (await run("person", "goal", "status", goal))["needs_person"]
    assert any(n["id"] == proposal_gate and n["proposal"]["digest"] == digest for n in needs)
    rev = str((await run("person", "work", "show", goal, proposal_gate))["revision"])
    assert (await run("a", "gate", "resolve", goal, proposal_gate, "approve", "--expected-revision", rev,
                      code=1))["error"] == "forbidden"
    assert (await run("person", "gate", "resolve", goal, proposal_gate, "approve", "--expected-revision", rev,
                      "--digest", "0" * 64, code=1))["error"] == "proposal_stale"
    await run("person", "gate", "resolve", goal, proposal_gate, "approve", "--expected-revision", rev,
              "--digest", digest)
    assert (await run("person", "goal", "acceptance", "show", goal))["revision"] == 2

    # rA's evidence stays as history, stale under v2; an agent's own mixed-load pass does not count either
    (old,) = await run("person", "evidence", "list", goal, "--item", bench)
    assert old["applicability"] == {"latency": "stale_acceptance"}
    await run("a", "evidence", "add", goal, "--kind", "test", "--verdict", "pass", "--item", mixed, "--criterion",
              "latency", "--subject", "repo", "--artifact-revision", "git:rA", "--workload", MIXED, "--summary",
              "mixed p99 4.0 ms (mine)", "--agent", a)
    claimed = await run("a", "work", "claim", goal, mixed, "--agent", a, "--key", "run-mixed")
    mixed_fence = ["--claim-epoch", str(claimed["claim"]["epoch"]), "--claim-key", "run-mixed"]
    unmet = await run("a", "work", "complete", goal, mixed, "--expected-revision", "1", *mixed_fence, "--agent", a,
                      code=1)
    assert (unmet["error"], unmet["criteria"]) == ("acceptance_unmet", {"latency": "not_validator"})
    # the validator the plane runs produces the v2 evidence; asking again reuses the run
    ran = await run("a", "goal", "validate", goal, "latency", "--agent", a)
    assert (ran["verdict"], ran["reused"]) == ("pass", False)
    assert (await run("person", "goal", "validate", goal, "latency"))["reused"] is True
    await run("a", "work", "complete", goal, mixed, "--expected-revision", "1", *mixed_fence, "--agent", a)

    # the release is gated; independent work continues meanwhile (b gets the docs), and a asks the person
    for_a = await run("a", "next", "--agent", a, "--goal", goal)
    assert (for_a["item"]["id"], for_a["ask"]["gate_id"]) == (docs, gate)  # not the release: it is gated
    assert "gate.ask" in [s["command"]["type"] for s in for_a["steps"]]
    assert (await run("b", "next", "--agent", b, "--goal", goal))["item"]["id"] == docs
    await run("a", "gate", "ask", goal, gate, "--agent", a)
    gate_rev = str((await run("person", "work", "show", goal, gate))["revision"])
    await run("person", "gate", "resolve", goal, gate, "approve", "--expected-revision", gate_rev)

    # two agents race for the release: one claim wins, the other is refused
    won = await run("a", "work", "claim", goal, release, "--agent", a, "--key", "run-release")
    lost = await run("b", "work", "claim", goal, release, "--agent", b, "--key", "run-b", code=1)
    assert (won["claim"]["holder"], lost["error"]) == (a, "claimed_by_other")

    # the GPU job: its outcome is lost; a readback Loop settles it when the provider reports, with no agent turn
    await run("a", "effect", "intend", goal, "--request-key", "gpu-7", "--kind", "gpu.job", "--target", "cluster",
              "--payload-digest", "d7", "--item", release, "--agent", a)
    await run("a", "effect", "settle", goal, "--request-key", "gpu-7", "--attempt", "1", "unknown", "--agent", a)
    assert (await run("a", "next", "--agent", a, "--goal", goal))["action"] == "readback_effect"
    built = await run("a", "build", str(GUESTS / "readback_forwarder.c"), "-o", str(tmp / "rb.o"))
    loop = (await run("a", "loop", "create", "--agent", a, "--session", session, "--elf", str(tmp / "rb.o"),
                      "--name", "gpu-readback"))["id"]
    assert built["state"] == "succeeded"
    await run("a", "effect", "watch", goal, "--request-key", "gpu-7", "--loop", loop, "--agent", a)
    report = _write(tmp / "job.json", {"readback": {"request_key": "gpu-7", "attempt": 1, "observed": "present",
                                                    "external_ref": "job/991"}})
    await _until_running(h, loop)
    await run("person", "loop", "send", loop, "--topic", "job.finished", "--payload", report)
    deadline = time.monotonic() + 60
    while (effect := await _effect(run, goal, "gpu-7"))["state"] != "succeeded":
        assert time.monotonic() < deadline, effect
        await asyncio.sleep(0.2)
    assert (effect["readback"]["loop_id"], effect["outcome"]["external_ref"]) == (loop, "job/991")

    # the release completes with its fences; acceptance is met; an agent may close the goal now
    await run("a", "work", "complete", goal, release, "--expected-revision", "2", "--claim-epoch",
              str(won["claim"]["epoch"]), "--claim-key", "run-release", "--agent", a)
    b_claim = await run("b", "work", "claim", goal, docs, "--agent", b, "--key", "run-docs")
    await run("b", "work", "complete", goal, docs, "--expected-revision", "1", "--claim-epoch",
              str(b_claim["claim"]["epoch"]), "--claim-key", "run-docs", "--agent", b)
    done = await run("a", "next", "--agent", a, "--goal", goal)
    assert (done["decision"], done["closed_by"]) == ("stop", "agent")
    await run("a", "goal", "close", goal, "--agent", a)
    assert (await run("person", "goal", "show", goal))["goal"]["status"] == "closed"


async def _effect(run: Actors, goal: str, key: str) -> dict[str, Any]:
    return dict(next(e for e in await run("a", "effect", "list", goal) if e["request_key"] == key))


async def _until_running(h: Any, loop_id: str) -> None:
    deadline = time.monotonic() + 60
    while (await h.get_loop(loop_id))["state"] != "active" or not (await h.get_loop(loop_id)).get("runtime"):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)


async def test_the_reference_scenario_through_mcp(harness_runner: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The same scenario with every agent step an MCP tool call over /mcp (the person decides on the CLI: MCP
    offers no person-only tool)."""
    from support.mcp_flow import mcp_http, structured

    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "cli"))
    async with node(tmp_path) as (h, url):
        group = await h.create_group("g")
        a = await h.create_agent(group.id, "a")
        b = await h.create_agent(group.id, "b")
        sa_, sb = await h.create_session(a.id, "inbox"), await h.create_session(b.id, "inbox")
        person = Actors(Cli(capsys), url, {"person": (await h.create_key("group", group_id=group.id))[1]})
        akey = (await h.create_key("agent", group_id=group.id, agent_id=a.id))[1]
        bkey = (await h.create_key("agent", group_id=group.id, agent_id=b.id))[1]
        async with mcp_http(url + "/mcp", akey, sa_.id) as ca, mcp_http(url + "/mcp", bkey, sb.id) as cb:
            async def tool(client: Any, name: str, /, **args: Any) -> Any:
                return structured(await client.call_tool(name, args))

            async def refused(client: Any, name: str, /, **args: Any) -> Any:
                result = await client.call_tool(name, args)
                assert result.is_error, result.structured_content
                return result.structured_content

            goal = (await person("person", "goal", "create", "--group", group.id, "--title", "fast p99",
                                 "--objective", "p99 < 5 ms", "--subject", "repo=git:rA"))["goal"]["id"]
            await tool(ca, "goal.join", goal_id=goal)
            await tool(cb, "goal.join", goal_id=goal)

            def add(client: Any, title: str, priority: int, **fields: Any) -> Any:
                return tool(client, "work.add", goal_id=goal, **{"class": "advancement"}, title=title,
                            priority=priority, **fields)

            bench = (await add(ca, "isolated microbenchmark", 0))["item"]["id"]
            docs = (await add(cb, "document the knobs", 3))["item"]["id"]
            release = (await add(ca, "release", 1, required_scopes=["production:action:release"]))["item"]["id"]
            gate = (await tool(ca, "work.add", goal_id=goal, **{"class": "user_gate"}, title="release?",
                               scope="production:goal:release", targets=[release], question="Release it?"))[
                "item"]["id"]
            v1 = _write(tmp_path / "v1.json", {"document": {"criteria": [
                {"id": "latency", "text": "p99 < 5 ms", "subject": "repo",
                 "workload": {"kind": "suite", "ref": "bench/isolated"}}]}, "bindings": {bench: ["latency"]}})
            await person("person", "goal", "acceptance", "set", goal, v1, "--expected-revision", "0")

            start = await tool(ca, "work.next", goal_id=goal, claim=True)
            held = start["claim"]["claim"]
            await tool(ca, "evidence.add", goal_id=goal, item_id=bench, criterion_ids=["latency"], kind="test",
                       subject="repo", artifact_revision="git:rA", workload={"kind": "suite", "ref": "bench/isolated"},
                       verdict="pass", summary="isolated p99 3.1 ms")
            await tool(ca, "work.complete", goal_id=goal, item_id=bench, expected_revision=1,
                       continuation="no_followup", epoch=held["epoch"], key=held["key"])

            mixed = (await add(ca, "mixed-load measurement", 0))["item"]["id"]
            doc = {"criteria": [{"id": "latency", "text": "p99 < 5 ms under mixed load", "subject": "repo",
                                 "workload": {"kind": "suite", "ref": "bench/mixed"}, "evidence_from": "validator",
                                 "validator": {"source": VALIDATOR}}]}
            stale = await refused(ca, "acceptance.propose", goal_id=goal, expected_revision=0, document=doc,
                                  bindings={mixed: ["latency"]})
            assert stale["error"] == "revision_conflict"
            proposed = await tool(ca, "acceptance.propose", goal_id=goal, expected_revision=1, document=doc,
                                  bindings={mixed: ["latency"]}, note="mixed load is what matters")
            pgate = proposed["proposal"]["gate_id"]
            rev = str((await person("person", "work", "show", goal, pgate))["revision"])
            await person("person", "gate", "resolve", goal, pgate, "approve", "--expected-revision", rev, "--digest",
                         proposed["proposal"]["digest"])

            claim = await tool(ca, "work.claim", goal_id=goal, item_id=mixed, key="run-mixed")
            unmet = await refused(ca, "work.complete", goal_id=goal, item_id=mixed, expected_revision=1,
                                  continuation="no_followup", epoch=claim["claim"]["epoch"], key="run-mixed")
            assert unmet["error"] == "acceptance_unmet"
            ran = await tool(ca, "criterion.validate", goal_id=goal, criterion_id="latency")
            assert (ran["verdict"], ran["reused"]) == ("pass", False)
            await tool(ca, "work.complete", goal_id=goal, item_id=mixed, expected_revision=1,
                       continuation="no_followup", epoch=claim["claim"]["epoch"], key="run-mixed")

            for_b = await tool(cb, "work.next", goal_id=goal)
            assert for_b["item"]["id"] == docs  # independent work while the release is gated
            await tool(ca, "gate.ask", goal_id=goal, item_id=gate)
            rev = str((await person("person", "work", "show", goal, gate))["revision"])
            await person("person", "gate", "resolve", goal, gate, "approve", "--expected-revision", rev)

            won = await tool(ca, "work.claim", goal_id=goal, item_id=release, key="run-release")
            lost = await refused(cb, "work.claim", goal_id=goal, item_id=release, key="run-b")
            assert (won["claim"]["holder"], lost["error"]) == (a.id, "claimed_by_other")

            await tool(ca, "effect.intend", goal_id=goal, request_key="gpu-7", kind="gpu.job", target="cluster",
                       payload_digest="d7", item_id=release)
            await tool(ca, "effect.settle", goal_id=goal, request_key="gpu-7", attempt=1, outcome="unknown")
            built = await tool(ca, "loop.build", source=(GUESTS / "readback_forwarder.c").read_text(),
                               path="/loops/readback.elf")
            assert built["state"] == "succeeded", built
            loop = (await tool(ca, "loop.create", artifact="/loops/readback.elf", name="gpu-readback"))["id"]
            await tool(ca, "effect.watch", goal_id=goal, request_key="gpu-7", loop_id=loop)
            await _until_running(h, loop)
            await tool(ca, "loop.send", loop_id=loop, topic="job.finished", payload={"readback": {
                "request_key": "gpu-7", "attempt": 1, "observed": "present", "external_ref": "job/991"}})
            deadline = time.monotonic() + 60
            while next(e for e in await h.control.effects(goal) if e["request_key"] == "gpu-7")["state"] != \
                    "succeeded":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)

            await tool(ca, "work.complete", goal_id=goal, item_id=release, expected_revision=2,
                       continuation="no_followup", epoch=won["claim"]["epoch"], key="run-release")
            dclaim = await tool(cb, "work.claim", goal_id=goal, item_id=docs, key="run-docs")
            await tool(cb, "work.complete", goal_id=goal, item_id=docs, expected_revision=1,
                       continuation="no_followup", epoch=dclaim["claim"]["epoch"], key="run-docs")
            done = await tool(ca, "work.next", goal_id=goal)
            assert (done["decision"], done["reasons"], done["closed_by"]) == ("stop", ["goal_complete"], "agent")
            assert done["steps"][0]["mcp"] is None  # goal.close has no MCP tool: the step says so
