"""``next`` as an interaction contract (issue 20; docs/decisions-control-next.md "Steps and cadence").

Every decision carries ``steps`` — the exact commands that carry it out, spelled for each face (a CLI line, an
MCP tool call with arguments, an HTTP request) — and a ``cadence``: when to call ``next`` again, or what will wake
the agent. The spelling comes from one table (``FACES``) that a test checks against the real CLI, MCP tool table
and HTTP routes, so a drift in any face fails the suite. Values only the agent can choose (a verdict, what a
readback observed) are ``<name>`` placeholders listed in the step's ``fill`` with their allowed values.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FACES", "POLL_S", "attach", "cadence_of", "steps_of"]

POLL_S = 300  # the cadence hint for conditions nobody pushes to the agent (a gate, a peer's item)
VERDICTS = ["pass", "fail", "inconclusive", "observed"]
KINDS = ["test", "check", "review", "observation", "manual"]
OBSERVED = ["present", "absent", "unreadable"]


@dataclass(frozen=True)
class Face:
    """How one kernel command is spelled: CLI words and options, the MCP tool and its argument names."""

    cli: tuple[str, ...]  # `wakeful` subcommand words, then the goal id
    cli_args: Callable[[Mapping[str, Any]], list[str]]
    mcp_tool: str | None
    mcp_args: Callable[[Mapping[str, Any]], dict[str, Any]]


def _opt(name: str, value: Any) -> list[str]:
    return [] if value is None else [name, str(value)]


def _claim_cli(s: Mapping[str, Any]) -> list[str]:
    claim = s.get("claim") or {}
    return [*_opt("--claim-epoch", claim.get("epoch")), *_opt("--claim-key", claim.get("key"))]


def _claim_mcp(s: Mapping[str, Any]) -> dict[str, Any]:
    claim = s.get("claim") or {}
    return {k: claim[k] for k in ("epoch", "key") if k in claim}


def _evidence_cli(s: Mapping[str, Any]) -> list[str]:
    out = ["--kind", s["kind"], "--verdict", s["verdict"], *_opt("--item", s.get("item")),
           "--summary", s["summary"]]
    for cid in s.get("criterion_ids") or []:
        out += ["--criterion", cid]
    return out + [*_opt("--subject", s.get("subject")), *_opt("--artifact-revision", s.get("artifact_revision"))]


def _evidence_mcp(s: Mapping[str, Any]) -> dict[str, Any]:
    names = ("kind", "verdict", "summary", "criterion_ids", "subject", "artifact_revision")
    out = {k: s[k] for k in names if s.get(k) is not None}
    return {**out, "item_id": s["item"]} if s.get("item") else out


FACES: dict[str, Face] = {
    "claim.acquire": Face(("work", "claim"), lambda s: [s["item"], "--key", s["key"]], "work.claim",
                          lambda s: {"item_id": s["item"], "key": s["key"]}),
    "claim.renew": Face(("work", "renew"), lambda s: [s["item"], *_claim_cli(s)], "work.renew",
                        lambda s: {"item_id": s["item"], **_claim_mcp(s)}),
    "work.complete": Face(
        ("work", "complete"),
        lambda s: [s["item"], "--expected-revision", str(s["revision"]), "--continuation", "no_followup",
                   *_claim_cli(s)],
        "work.complete",
        lambda s: {"item_id": s["item"], "expected_revision": s["revision"], "continuation": "no_followup",
                   **_claim_mcp(s)}),
    "evidence.add": Face(("evidence", "add"), _evidence_cli, "evidence.add", _evidence_mcp),
    "effect.readback": Face(
        ("effect", "readback"),
        lambda s: ["--request-key", s["request_key"], "--attempt", str(s["attempt"]), s["observed"]],
        "effect.readback",
        lambda s: {"request_key": s["request_key"], "attempt": s["attempt"], "observed": s["observed"]}),
    "gate.ask": Face(("gate", "ask"), lambda s: [s["item"]], "gate.ask", lambda s: {"item_id": s["item"]}),
    "agent.register": Face(("goal", "register"), lambda s: [s["agent_id"]], "goal.join", lambda s: {}),
    "goal.close": Face(("goal", "close"), lambda s: [], None, lambda s: {}),
}

# the members of the kernel command each step sends (the rest of a step's dict only steers the faces)
_COMMAND_MEMBERS = {
    "claim.acquire": ("item", "key"), "claim.renew": ("item",), "work.complete": ("item",),
    "evidence.add": ("item", "kind", "verdict", "summary", "criterion_ids", "subject", "artifact_revision"),
    "effect.readback": ("request_key", "attempt", "observed"), "gate.ask": ("item",),
    "agent.register": ("agent_id",), "goal.close": (),
}


def _render(group_id: str, goal_id: str, agent_id: str, step: dict[str, Any]) -> dict[str, Any]:
    """One abstract step → ``{intent, command, cli, mcp, http, fill}``."""
    kind, face = step["type"], FACES[step["type"]]
    command = {"type": kind, **{k: step[k] for k in _COMMAND_MEMBERS[kind] if step.get(k) is not None}}
    if kind == "work.complete":
        command["continuation"] = "no_followup"
    expected: dict[str, Any] = {}
    if "revision" in step:
        expected["item_revision"] = step["revision"]
    if step.get("claim"):
        expected["claim"] = {"epoch": step["claim"]["epoch"], "key": step["claim"]["key"]}
    argv = ["wakeful", *face.cli, goal_id, *face.cli_args(step), "--agent", agent_id]
    body: dict[str, Any] = {"command": command, **({"expected": expected} if expected else {})}
    return {
        "intent": step["intent"], "command": command, "expected": expected or None,
        "cli": shlex.join(argv),
        "mcp": None if face.mcp_tool is None else {"tool": face.mcp_tool,
                                                   "arguments": {"goal_id": goal_id, **face.mcp_args(step)}},
        "http": {"method": "POST", "path": f"/v1/agent-groups/{group_id}/goals/{goal_id}/commands", "body": body},
        "fill": step.get("fill") or {},
    }


def _work_steps(d: Mapping[str, Any], agent_id: str) -> list[dict[str, Any]]:
    """start / continue: claim (unless held), record evidence, complete with the fences."""
    item, held = d["item"], d.get("held_claim")
    claim = held or ((d.get("claim") or {}).get("claim"))
    steps: list[dict[str, Any]] = []
    if claim is None:
        key = f"run:{agent_id}:{item['id']}"
        steps.append({"type": "claim.acquire", "item": item["id"], "key": key,
                      "intent": "claim the item (keep the epoch and key the receipt prints)"})
    elif held is not None:
        steps.append({"type": "claim.renew", "item": item["id"], "claim": claim,
                      "intent": "renew your claim if the work runs past its expiry"})
    steps.append({"type": "evidence.add", "item": item["id"], "kind": "<kind>", "verdict": "<verdict>",
                  "summary": "<summary>", "intent": "record what you checked (name criterion ids, subject and "
                  "artifact revision when it decides a criterion)", "fill": {"kind": KINDS, "verdict": VERDICTS}})
    steps.append({"type": "work.complete", "item": item["id"], "revision": item["revision"],
                  "claim": claim or {"epoch": "<epoch>", "key": f"run:{agent_id}:{item['id']}"},
                  "intent": "complete the item once the work is written back",
                  "fill": {} if claim else {"epoch": "the epoch the claim receipt printed"}})
    if d.get("ask"):
        steps.append({"type": "gate.ask", "item": d["ask"]["gate_id"],
                      "intent": f"put the gate's question to a person: {d['ask']['question']}"})
    return steps


def _decision_steps(d: Mapping[str, Any], agent_id: str) -> list[dict[str, Any]]:
    action, reasons = d.get("action"), d.get("reasons") or []
    if action in ("start", "continue"):
        return _work_steps(d, agent_id)
    if action == "readback_effect":
        e = d["effect"]
        return [{"type": "effect.readback", "request_key": e["request_key"], "attempt": e["attempt"],
                 "observed": "<observed>", "fill": {"observed": OBSERVED},
                 "intent": "look the effect up in the external system by its request key, then record it"}]
    if action == "revalidate":
        item = d.get("item") or {}
        return [{"type": "evidence.add", "item": item.get("id"), "kind": "<kind>", "verdict": "<verdict>",
                 "summary": "<summary>", "criterion_ids": d.get("criterion_ids"), "subject": "<subject>",
                 "artifact_revision": "<artifact_revision>", "fill": {"kind": KINDS, "verdict": VERDICTS},
                 "intent": "re-check the stale criteria on the subject's current revision (goal status shows it)"}]
    if d["decision"] == "ask_person" and d.get("ask"):
        return [{"type": "gate.ask", "item": d["ask"]["gate_id"],
                 "intent": f"put the gate's question to a person: {d['ask']['question']}"}]
    if "not_registered" in reasons:
        return [{"type": "agent.register", "agent_id": agent_id, "intent": "register on the goal"}]
    if "goal_complete" in reasons and d.get("closed_by") == "agent":
        return [{"type": "goal.close", "intent": "close the goal: acceptance is met and nothing is open"}]
    return []


def steps_of(d: Mapping[str, Any], *, agent_id: str, group_id: str) -> list[dict[str, Any]]:
    """The rendered steps of decision ``d`` (empty for a wait, and for a stop that needs nobody)."""
    goal_id = d.get("goal_id")
    if not goal_id:
        return []
    return [_render(group_id, str(goal_id), agent_id, s) for s in _decision_steps(d, agent_id)]


def _woken_by(condition: str) -> str:
    kind, _, ref = condition.partition(":")
    return {"loop_wake": f"Loop {ref} notifies your session", "gate_resolved": f"a person resolves gate {ref}",
            "work_done": f"item {ref} is done", "effect_settled": f"effect {ref} is settled",
            "loop_active": f"Loop {ref} runs again", "time": f"the clock reaches {ref} (unix ms)"}.get(
        kind, condition)


def cadence_of(d: Mapping[str, Any], *, now_ms: int) -> dict[str, Any]:
    """When to call ``next`` again: right after the steps, at a time, or when a wake arrives (with a poll hint
    for the conditions nothing pushes to the agent)."""
    decision, wakes = d["decision"], list(d.get("wake_when") or [])
    if decision in ("deliver", "replan") or (decision == "stop" and "not_registered" in d.get("reasons", [])):
        return {"call_next": "after_steps"}
    if decision == "stop" and d.get("resume_at"):
        return {"call_next": "at", "at_ms": d["resume_at"], "after_s": max(0, (d["resume_at"] - now_ms) // 1000)}
    if decision == "stop":
        return {"call_next": "never" if "goal_complete" in d.get("reasons", []) else "when_told"}
    times = [int(w.split(":", 1)[1]) for w in wakes if w.startswith("time:") and w[5:].isdigit()]
    pushed = all(w.startswith("loop_wake:") for w in wakes) and bool(wakes)
    after = min([POLL_S, *((t - now_ms) // 1000 for t in times)])
    body: dict[str, Any] = {"call_next": "on_wake", "wake_when": wakes, "woken_by": [_woken_by(w) for w in wakes]}
    if not pushed:  # a gate or a peer's item does not message the agent: look again
        body["after_s"] = max(1, after)
    return body


def next_call(d: Mapping[str, Any], *, agent_id: str, group_id: str) -> dict[str, Any]:
    """``next`` itself, spelled for each face."""
    goal_id = d.get("goal_id")
    argv = ["wakeful", "next", "--agent", agent_id, *(["--goal", str(goal_id)] if goal_id else [])]
    query = f"?goal_id={goal_id}" if goal_id else ""
    return {"cli": shlex.join(argv), "mcp": {"tool": "work.next", "arguments": {"goal_id": goal_id} if goal_id
                                            else {}},
            "http": {"method": "GET", "path": f"/v1/agent-groups/{group_id}/next{query}"}}


def attach(d: dict[str, Any], *, agent_id: str, group_id: str, now_ms: int) -> dict[str, Any]:
    """Add ``steps``, ``cadence`` and ``next_call`` to a decision (in place; returned for chaining)."""
    d["steps"] = steps_of(d, agent_id=agent_id, group_id=group_id)
    d["cadence"] = cadence_of(d, now_ms=now_ms)
    d["next_call"] = next_call(d, agent_id=agent_id, group_id=group_id)
    return d
