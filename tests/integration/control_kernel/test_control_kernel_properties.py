"""Hypothesis state machine over random command sequences from three agents and a person (control-plane.md §4.3,
§10 "kernel properties"), on SQLite and PostgreSQL. After every step it checks:

1. an item completed as done(completed) had, at that commit, applicable passing evidence for each criterion
   bound to it under the contract then current — judged by an independent model of §5 kept by this test;
2. a claim is never granted while another agent's claim on the item is live, epochs never repeat, and in hard
   mode no agent lifecycle command on a claimable item commits without that agent's live claim;
3. a command presenting a stale claim epoch never commits;
4. a replayed envelope returns the identical stored receipt and writes nothing;
5. commit seqs are gapless and equal the goal revision;
6. a done item never changes status again; an effect leaves ``unknown`` only through ``effect.readback``;
   a gate's cancel or defer, or any decision on a done target, leaves its targets untouched (§3.5).

Commands: items (some gated), blockers, gates resolved at once or late, contracts with bindings, subjects,
evidence, claims (acquire, renew, transfer, release, takeover after expiry, stale presentations), lifecycle
commands, effects and replays.

``test_a_broken_kernel_is_caught`` runs the same machine against a kernel whose acceptance rule is removed and
expects a failure, so the machine is shown able to fail.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from support.harness_fixtures import PG_URL, TestClock, _pg_schema, pg_url_with_schema, require_pg

from wakeful.control import Actor, Control, ControlRefused
from wakeful.control import schema as S
from wakeful.harness.store import Store, agents, groups

STATS = {"bound_completions": 0, "unmet_refusals": 0}  # how often the interesting paths were reached
LIFECYCLE = ("work.block", "work.defer", "work.reopen", "work.update", "work.complete", "work.supersede")
WORKLOADS = (None, {"kind": "suite", "ref": "bench/micro"}, {"kind": "suite", "ref": "bench/mixed"})
SCOPES = ((), ("src/a/**",), ("src/a/x.py",), ("docs/",))


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha(value: Any) -> str:
    return hashlib.sha256(_canon(value).encode()).hexdigest()


class KernelMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.clock = TestClock()
        # a RAM-backed directory when there is one: the machine commits thousands of times per test
        self.tmp = Path(tempfile.mkdtemp(prefix="wk-props-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        self.schema_name: str | None = None
        if self.backend == "postgresql":
            self.schema_name = "wk_" + secrets.token_hex(6)
            asyncio.run(_pg_schema("create", self.schema_name))
            url = pg_url_with_schema(self.schema_name)
        else:
            url = f"sqlite:///{self.tmp / 'props.db'}"
        self.store = self.runner.run(Store.open(url, clock=self.clock))
        self.control = Control(self.store, claim_ttl_s=600)
        self.ops = 0
        self.items: list[str] = []
        self.titles: dict[str, str] = {}
        self.subjects = {"code": "r1"}
        self.contract: dict[str, Any] | None = None
        self.evidence: list[dict[str, Any]] = []
        self.epochs: dict[str, list[tuple[str, int, str]]] = {}  # item -> grants (holder, epoch, key)
        self.done: dict[str, tuple[str, str]] = {}
        self.effects: dict[str, str] = {}
        self.applied: list[tuple[Actor, dict[str, Any], dict[str, Any]]] = []
        self.bound_completions = 0
        self.unmet_refusals = 0

    def teardown(self) -> None:
        self.runner.run(self.store.close())
        self.runner.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        STATS["bound_completions"] += self.bound_completions
        STATS["unmet_refusals"] += self.unmet_refusals
        if self.schema_name is not None:
            asyncio.run(_pg_schema("drop", self.schema_name))

    # ------------------------------------------------------------------ helpers

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    def submit(self, actor: Actor, command: dict[str, Any], expected: dict[str, Any] | None = None
               ) -> dict[str, Any] | ControlRefused:
        self.ops += 1
        envelope: dict[str, Any] = {"operation_id": f"op-{self.ops}", "goal_id": self.goal_id, "command": command}
        if expected:
            envelope["expected"] = expected
        try:
            receipt = self.run(self.control.submit(actor, envelope))
        except ControlRefused as exc:
            return exc
        self.applied.append((actor, envelope, receipt))
        return receipt  # type: ignore[no-any-return]

    def item_view(self, item: str) -> dict[str, Any]:
        return self.run(self.control.item(self.goal_id, item))  # type: ignore[no-any-return]

    def pick(self, index: int) -> str | None:
        return self.items[index % len(self.items)] if self.items else None

    def status(self, cid: str, completer: str) -> str:
        """The model's §5 status of criterion ``cid`` for a completion by ``completer``."""
        assert self.contract is not None
        crit = self.contract["criteria"][cid]
        for item, (cids, title) in self.contract["bindings"].items():
            if cid in cids and self.titles[item] != title:
                return "stale"
        for ev in reversed(self.evidence):
            if cid not in ev["cids"] or ev["verdict"] not in ("pass", "fail"):
                continue
            if self.subjects.get("code") != ev["rev"]:
                continue
            if ev["acc_rev"] != self.contract["rev"] and ev["digests"].get(cid) != self.contract["digests"][cid]:
                continue
            if crit.get("workload") is not None and ev["wl"] != _sha(crit["workload"]):
                continue
            if crit["independent"] and ev["by"] == completer:
                continue
            return str(ev["verdict"])
        return "missing"

    # ------------------------------------------------------------------ setup

    @initialize(mode=st.sampled_from(["soft", "hard"]))
    def setup(self, mode: str) -> None:
        async def make() -> tuple[str, list[str]]:
            async with self.store.tx() as tx:
                group = await groups.create_group(tx, name="g")
                made = [await agents.create_agent(tx, group_id=group.id, name=f"a{i}") for i in range(3)]
            return group.id, [a.id for a in made]

        group_id, ids = self.run(make())
        self.agents = [Actor("agent", a, group_id) for a in ids]
        self.person = Actor("person", "key_p", group_id)
        self.mode = mode
        receipt = self.run(self.control.submit(self.person, {"operation_id": "create", "command": {
            "type": "goal.create", "title": "g", "objective": "o", "claim_mode": mode,
            "subjects": dict(self.subjects)}}))
        self.goal_id = receipt["goal_id"]
        for a in self.agents:
            assert isinstance(self.submit(a, {"type": "agent.register", "agent_id": a.id}), dict)
        # two items bound to a first contract, so completions of bound items are reachable from the start
        self.add_item(3, (), 0)
        self.add_item(0, (), 1)
        self.set_acceptance([("c1", 1, False), ("c2", 0, True)], [(0, ("c1",)), (1, ("c1", "c2"))])

    # ------------------------------------------------------------------ rules

    @rule(who=st.integers(0, 3), scope=st.sampled_from(SCOPES), n=st.integers(0, 9), gated=st.booleans())
    def add_item(self, who: int, scope: tuple[str, ...], n: int, gated: bool = False) -> None:
        actor = self.person if who == 3 else self.agents[who]
        title = f"item {n}"
        body: dict[str, Any] = {"type": "work.add", "class": "advancement", "title": title, "write_scopes": list(scope)}
        if gated:
            body["required_scopes"] = ["production:goal:eu"]
        r = self.submit(actor, body)
        assert isinstance(r, dict), r
        item = next(c["id"] for c in r["changed"] if c["entity"] == "item")
        self.items.append(item)
        self.titles[item] = title

    @rule(crits=st.lists(st.tuples(st.sampled_from(["c1", "c2"]), st.integers(0, 2), st.booleans()),
                         min_size=1, max_size=2, unique_by=lambda t: t[0]),
          binds=st.lists(st.tuples(st.integers(0, 20), st.sampled_from([("c1",), ("c2",), ("c1", "c2")])),
                         max_size=3))
    def set_acceptance(self, crits: list[tuple[str, int, bool]], binds: list[tuple[int, tuple[str, ...]]]) -> None:
        criteria = []
        for cid, wl, independent in crits:
            c: dict[str, Any] = {"id": cid, "text": f"{cid} holds", "independent": independent}
            if WORKLOADS[wl] is not None:
                c["workload"] = WORKLOADS[wl]
            criteria.append(c)
        ids = {c["id"] for c in criteria}
        bindings: dict[str, list[str]] = {}
        for idx, cids in binds:
            item = self.pick(idx)
            usable = [c for c in cids if c in ids]
            if item is not None and usable and item not in getattr(self, "blockers", set()):
                bindings[item] = usable
        rev = 0 if self.contract is None else self.contract["rev"]
        r = self.submit(self.person, {"type": "acceptance.set", "document": {"criteria": criteria},
                                      "bindings": bindings}, {"acceptance_revision": rev})
        assert isinstance(r, dict), r
        self.contract = {"rev": rev + 1, "criteria": {c["id"]: c for c in criteria},
                         "digests": {c["id"]: _sha(c) for c in criteria},
                         "bindings": {i: (cids, self.titles[i]) for i, cids in bindings.items()}}

    @rule(rev=st.sampled_from(["r1", "r2", "r3"]), who=st.integers(0, 3))
    def set_subject(self, rev: str, who: int) -> None:
        actor = self.person if who == 3 else self.agents[who]
        r = self.submit(actor, {"type": "subject.set", "name": "code", "revision": rev})
        assert isinstance(r, dict), r
        self.subjects["code"] = rev

    @rule(who=st.integers(0, 3), cids=st.sampled_from([("c1",), ("c2",), ("c1", "c2")]),
          verdict=st.sampled_from(["pass", "pass", "fail", "inconclusive"]), rev=st.sampled_from(["r1", "r2", "r3"]),
          wl=st.integers(0, 2))
    def add_evidence(self, who: int, cids: tuple[str, ...], verdict: str, rev: str, wl: int) -> None:
        actor = self.person if who == 3 else self.agents[who]
        body: dict[str, Any] = {"type": "evidence.add", "criterion_ids": list(cids), "kind": "test",
                                "subject": "code", "artifact_revision": rev, "verdict": verdict}
        if WORKLOADS[wl] is not None:
            body["workload"] = WORKLOADS[wl]
        r = self.submit(actor, body)
        known = set(self.contract["criteria"]) if self.contract else set()
        if not set(cids) <= known:
            assert isinstance(r, ControlRefused) and r.code == "not_found", r
            return
        assert isinstance(r, dict), r
        self.evidence.append({
            "cids": list(cids), "rev": rev, "verdict": verdict, "by": actor.ref,
            "wl": None if WORKLOADS[wl] is None else _sha(WORKLOADS[wl]),
            "acc_rev": self.contract["rev"] if self.contract else 0,
            "digests": {c: self.contract["digests"][c] for c in cids} if self.contract else {}})

    @rule(who=st.integers(0, 2), idx=st.integers(0, 20), key=st.sampled_from(["k1", "k2"]),
          ttl=st.sampled_from([60, 600]))
    def acquire(self, who: int, idx: int, key: str, ttl: int) -> None:
        item = self.pick(idx)
        if item is None:
            return
        agent = self.agents[who]
        before = self.item_view(item)["claim"]
        now = self.clock.unix_ms()
        r = self.submit(agent, {"type": "claim.acquire", "item": item, "key": key, "ttl_s": ttl})
        if isinstance(r, ControlRefused):
            return
        claim = r["claim"]
        if before is not None and before["status"] == "active" and before["expires_ms"] > now:
            # invariant 2: never granted over another agent's live claim
            assert before["holder"] == agent.id, (before, claim)
            if before["key"] == key:
                assert claim["epoch"] == before["epoch"]
                return
        grants = self.epochs.setdefault(item, [])
        assert all(claim["epoch"] > e for _, e, _ in grants), (grants, claim)  # epochs never reused
        grants.append((agent.id, claim["epoch"], key))

    @rule(who=st.integers(0, 3), idx=st.integers(0, 20), op=st.sampled_from(LIFECYCLE),
          present=st.sampled_from(["current", "current", "stale", "wrong_key", "none"]), rev_ok=st.booleans(),
          cont=st.sampled_from([None, "no_followup", "successor"]))
    def lifecycle(self, who: int, idx: int, op: str, present: str, rev_ok: bool, cont: str | None) -> None:
        item = self.pick(idx)
        if item is None:
            return
        actor = self.person if who == 3 else self.agents[who]
        view = self.item_view(item)
        claim = view["claim"]
        now = self.clock.unix_ms()
        expected: dict[str, Any] = {"item_revision": view["revision"] if rev_ok else view["revision"] + 7}
        grants = self.epochs.get(item, [])
        if present == "current" and claim is not None:
            expected["claim"] = {"epoch": claim["epoch"], "key": claim["key"]}
        elif present == "stale" and grants and claim is not None and grants[0][1] < claim["epoch"]:
            expected["claim"] = {"epoch": grants[0][1], "key": grants[0][2]}
        elif present == "wrong_key" and claim is not None:
            expected["claim"] = {"epoch": claim["epoch"], "key": "not-the-key"}
        body: dict[str, Any] = {"type": op, "item": item}
        if op == "work.block":
            body["reason"] = "waiting"
        elif op == "work.defer":
            body["resume_when"] = [f"time:{now + 300_000}"]
        elif op == "work.update":
            body["title"] = self.titles[item] + "'"
        elif op == "work.supersede":
            body["replacement"] = {"class": "advancement", "title": "replacement"}
        elif op == "work.complete" and cont is not None:
            body["continuation"] = cont
            if cont == "successor":
                others = [i for i in self.items if i != item and i not in self.done]
                if others:
                    body["successors"] = others[:1]
        model_ok = None
        if op == "work.complete" and self.contract is not None and item in self.contract["bindings"]:
            cids = self.contract["bindings"][item][0]
            model_ok = all(self.status(c, actor.ref) == "pass" for c in cids)
        r = self.submit(actor, body, expected)
        if isinstance(r, ControlRefused):
            if r.code == "acceptance_unmet":
                assert model_ok is False, ("kernel refused what the model accepts", r.details)
                self.unmet_refusals += 1
            return
        presented = expected.get("claim")
        # invariant 3: a stale or foreign presented claim never commits
        if presented is not None:
            assert claim is not None and claim["status"] == "active" and claim["expires_ms"] > now
            assert (presented["epoch"], presented["key"]) == (claim["epoch"], claim["key"])
        # invariant 2: hard mode needs the acting agent's live claim
        if self.mode == "hard" and actor.kind == "agent":
            assert claim is not None and claim["holder"] == actor.id and claim["status"] == "active"
            assert claim["expires_ms"] > now and presented is not None
        assert view["status"] != "done", "a done item changed"
        if op == "work.update":
            self.titles[item] = body["title"]
        if op == "work.supersede":
            new = next(c["id"] for c in r["changed"] if c["entity"] == "item" and c["id"] != item)
            self.items.append(new)
            self.titles[new] = "replacement"
        if op == "work.complete":
            # invariant 1, judged by the model
            assert model_ok in (None, True), ("completed without applicable passing evidence", item)
            self.bound_completions += model_ok is True

    @rule(who=st.integers(0, 2), idx=st.integers(0, 20), recorder=st.integers(0, 3), good=st.booleans(),
          wl_ok=st.booleans())
    def work_through(self, who: int, idx: int, recorder: int, good: bool, wl_ok: bool) -> None:
        """The agent's happy path, with a twist: claim, record evidence for the bound criteria (current or old
        subject revision, matching workload or not, by itself or by another), then complete."""
        item = self.pick(idx)
        if item is None:
            return
        self.acquire(who, idx, "k1", 600)
        if self.contract is not None and item in self.contract["bindings"]:
            for cid in self.contract["bindings"][item][0]:
                crit = self.contract["criteria"].get(cid, {})
                wl = WORKLOADS.index(crit.get("workload"))
                self.add_evidence(recorder, (cid,), "pass", self.subjects["code"] if good else "r0",
                                  wl if wl_ok else (wl + 1) % 3)
        self.lifecycle(who, idx, "work.complete", "current", True, None)

    @rule(idx=st.integers(0, 20), op=st.sampled_from(["work.update", "work.complete", "work.block"]))
    def present_stale(self, idx: int, op: str) -> None:
        """Whoever held an older epoch of the item presents it (a session that lost its lease)."""
        item = self.pick(idx)
        grants = self.epochs.get(item, []) if item is not None else []
        if len(grants) < 2:
            return
        holder, epoch, key = grants[-2]
        who = next(i for i, a in enumerate(self.agents) if a.id == holder)
        before = self.item_view(str(item))["claim"]
        body: dict[str, Any] = {"type": op, "item": item}
        if op == "work.update":
            body["detail"] = "from an old session"
        elif op == "work.block":
            body["reason"] = "old"
        view = self.item_view(str(item))
        r = self.submit(self.agents[who], body, {"item_revision": view["revision"],
                                                 "claim": {"epoch": epoch, "key": key}})
        if before is not None and before["epoch"] != epoch:
            assert isinstance(r, ControlRefused), ("a stale claim epoch committed", epoch, before)  # invariant 3

    @rule(who=st.integers(0, 3), idx=st.integers(0, 20), op=st.sampled_from(["renew", "release", "transfer"]),
          to=st.integers(0, 2), stale=st.booleans())
    def claim_op(self, who: int, idx: int, op: str, to: int, stale: bool) -> None:
        item = self.pick(idx)
        if item is None:
            return
        actor = self.person if who == 3 else self.agents[who]
        claim = self.item_view(item)["claim"]
        grants = self.epochs.get(item, [])
        if claim is None:
            return
        epoch, key = (grants[0][1], grants[0][2]) if stale and grants else (claim["epoch"], claim["key"])
        body: dict[str, Any] = {"type": f"claim.{op}", "item": item}
        if op == "transfer":
            body.update(to=self.agents[to].id, key=f"t{self.ops}")
        r = self.submit(actor, body, {"claim": {"epoch": epoch, "key": key}})
        if isinstance(r, dict):
            assert epoch == claim["epoch"] and claim["status"] == "active", (claim, epoch)  # invariant 3
            if op == "transfer":
                grants.append((self.agents[to].id, r["claim"]["epoch"], body["key"]))
                assert r["claim"]["epoch"] == claim["epoch"] + 1

    @rule(aim=st.lists(st.integers(0, 20), min_size=1, max_size=2, unique=True),
          outcome=st.sampled_from(["approve", "approve", "reject", "cancel", "defer"]), later=st.booleans())
    def gate(self, aim: list[int], outcome: str, later: bool) -> None:
        """A person's gate over some items, resolved now or (late) after other steps changed its targets."""
        ids = sorted({t for t in (self.pick(i) for i in aim) if t is not None})
        if not ids:
            return
        r = self.submit(self.agents[0], {"type": "work.add", "class": "user_gate", "title": "ship?",
                                         "scope": "production:project:*", "targets": ids, "question": "EU?"})
        assert isinstance(r, dict), r
        gate = next(c["id"] for c in r["changed"] if c["entity"] == "item")
        self.gates = [*getattr(self, "gates", []), (gate, outcome)]
        if not later:
            self.resolve_gate(len(self.gates) - 1)

    @rule(index=st.integers(0, 20))
    def resolve_gate(self, index: int) -> None:
        gates = getattr(self, "gates", [])
        if not gates:
            return
        gate, outcome = gates[index % len(gates)]
        view = self.item_view(gate)
        before = {t: self.item_view(t) for t in view["targets"]}
        body: dict[str, Any] = {"type": "gate.resolve", "item": gate, "outcome": outcome}
        if outcome == "defer":
            body["resume_when"] = [f"time:{self.clock.unix_ms() + 600_000}"]
        r = self.submit(self.person, body, {"item_revision": view["revision"]})
        if isinstance(r, ControlRefused):
            assert view["status"] not in ("open",) or outcome == "defer", r
            return
        for t, old in before.items():
            new = self.item_view(t)
            if old["status"] == "done" or outcome in ("cancel", "defer"):  # §3.5: untouched
                assert {k: v for k, v in new.items() if k != "claim"} == {
                    k: v for k, v in old.items() if k != "claim"}, (outcome, old, new)

    @rule(blocks=st.lists(st.integers(0, 20), min_size=1, max_size=2, unique=True))
    def add_blocker(self, blocks: list[int]) -> None:
        ids = sorted({t for t in (self.pick(i) for i in blocks) if t is not None})
        if not ids:
            return
        r = self.submit(self.agents[1], {"type": "work.add", "class": "blocker", "title": "missing creds",
                                         "recovery": "ask ops", "blocks": ids})
        assert isinstance(r, dict), r
        blocker = next(c["id"] for c in r["changed"] if c["entity"] == "item" and c["revision"] == 1)
        self.items.append(blocker)
        self.titles[blocker] = "missing creds"
        self.blockers = {*getattr(self, "blockers", set()), blocker}

    @rule()
    def sweep(self) -> None:
        """The 60 s sweep: afterwards no deferred item has a fired time: condition, and each resume committed
        once under its ``resume:<item>:<revision>`` id."""
        self.run(self.control.tick())
        now = self.clock.unix_ms()
        for it in self.run(self.control.items(self.goal_id, status="deferred")):
            assert not any(c.startswith("time:") and int(c[5:]) <= now for c in it["resume_when"]), it
        commits = self.all_commits()
        resumes = [c["operation_id"] for c in commits if c["command_type"] == "work.resume"]
        assert len(resumes) == len(set(resumes)) and all(r.startswith("resume:") for r in resumes)

    @rule(s=st.integers(0, 900))
    def advance_clock(self, s: int) -> None:
        self.clock.advance(s=s)

    @rule(who=st.integers(0, 3), key=st.sampled_from(["e1", "e2"]), payload=st.sampled_from(["p1", "p2"]),
          step=st.sampled_from(["intend", "settle", "readback"]),
          outcome=st.sampled_from(["succeeded", "failed", "unknown", "present", "absent", "unreadable"]))
    def effect(self, who: int, key: str, payload: str, step: str, outcome: str) -> None:
        actor = self.person if who == 3 else self.agents[who]
        current = next((e for e in self.run(self.control.effects(self.goal_id)) if e["request_key"] == key), None)
        attempt = current["attempt"] if current else 1
        if step == "intend":
            body: dict[str, Any] = {"type": "effect.intend", "request_key": key, "kind": "k", "target": "t",
                                    "payload_digest": payload}
        elif step == "settle":
            body = {"type": "effect.settle", "request_key": key, "attempt": attempt,
                    "state": outcome if outcome in ("succeeded", "failed", "unknown") else "unknown"}
        else:
            body = {"type": "effect.readback", "request_key": key, "attempt": attempt,
                    "observed": outcome if outcome in ("present", "absent", "unreadable") else "unreadable"}
        r = self.submit(actor, body)
        if current is not None and current["state"] == "unknown" and step == "intend":
            assert isinstance(r, ControlRefused) and r.code in ("readback_required", "request_key_conflict",
                                                                "forbidden"), r

    @rule(index=st.integers(0, 200))
    def replay(self, index: int) -> None:
        if not self.applied:
            return
        actor, envelope, receipt = self.applied[index % len(self.applied)]
        count = self._commit_count()
        again = self.run(self.control.submit(actor, envelope))
        assert again.pop("replayed") is True
        assert _canon(again) == _canon(receipt)  # invariant 4
        assert self._commit_count() == count

    # ------------------------------------------------------------------ invariants after every step

    def all_commits(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.run(self.control.commits(self.goal_id, after_seq=len(out), limit=200))
            out.extend(page)
            if len(page) < 200:
                return out

    def _commit_count(self) -> int:
        async def count() -> int:
            async with self.store.tx(readonly=True) as tx:
                K = S.control_commit
                stmt = sa.select(sa.func.count()).select_from(K).where(K.c.goal_id == self.goal_id)
                return int((await tx.execute(stmt)).scalar_one())

        return self.run(count())  # type: ignore[no-any-return]

    @invariant()
    def commit_log_is_gapless(self) -> None:
        if not hasattr(self, "goal_id"):
            return
        commits = self.all_commits()
        seqs = [c["seq"] for c in commits]
        assert seqs == list(range(1, len(seqs) + 1))
        assert self.run(self.control.goal(self.goal_id))["revision"] == len(seqs)
        if commits:
            last = commits[-1]
            assert last["receipt"]["seq"] == last["seq"] == last["receipt"]["goal_revision"]

    @invariant()
    def done_items_and_effects_hold(self) -> None:
        if not hasattr(self, "goal_id"):
            return
        for it in self.run(self.control.items(self.goal_id)):
            if it["id"] in self.done:
                assert (it["status"], it["done_kind"]) == self.done[it["id"]], it
            elif it["status"] == "done":
                self.done[it["id"]] = (it["status"], it["done_kind"])
        last_type = self.applied[-1][1]["command"]["type"] if self.applied else None
        for e in self.run(self.control.effects(self.goal_id)):
            before = self.effects.get(e["request_key"])
            if before == "unknown" and e["state"] != "unknown":
                assert last_type == "effect.readback", (e, last_type)
            self.effects[e["request_key"]] = e["state"]


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, stateful_step_count=30, deadline=None,
                    suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.reuse, Phase.generate,
                                                                    Phase.shrink])


class PgKernelMachine(KernelMachine):
    backend = "postgresql"


def test_kernel_invariants_sqlite() -> None:
    STATS.update(bound_completions=0, unmet_refusals=0)
    run_state_machine_as_test(KernelMachine, settings=_settings(int(os.environ.get("WAKEFUL_PROPS_EXAMPLES", 20))))
    print("reached:", STATS)


def test_kernel_invariants_postgresql() -> None:
    require_pg()
    assert PG_URL
    run_state_machine_as_test(PgKernelMachine,
                              settings=_settings(int(os.environ.get("WAKEFUL_PROPS_EXAMPLES_PG", 8))))


def test_a_broken_kernel_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine fails against a kernel that completes bound items without checking their evidence."""
    from wakeful.control import cmd_work

    async def no_acceptance_rule(ctx: Any, item: Any) -> None:
        return None

    monkeypatch.setattr(cmd_work, "_acceptance_rule", no_acceptance_rule)
    quick = settings(max_examples=200, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck),
                     phases=[Phase.generate], database=None, derandomize=True)  # same search, same cost
    with pytest.raises(AssertionError, match="completed without applicable passing evidence"):
        run_state_machine_as_test(KernelMachine, settings=quick)
