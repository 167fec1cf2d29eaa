"""`wakeful work | gate | evidence | effect | next …` in local mode (interfaces.md §4.2): work items, a person's
gate decisions, evidence, effects and the ``next`` decision, on the configured store.

Commands act as the operator (person authority) or, with ``--agent``, as that agent. Every fence is the caller's
and is never read and copied by the CLI (issue 20): item commands take ``--expected-revision`` (required where the
kernel fences on it), and a claim is presented only with ``--claim-epoch`` and ``--claim-key`` (the values a
``work claim`` or ``next --claim`` printed).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import typer

from wakeful.cli.goal_cmd import (
    AgentOpt,
    GoalArg,
    GoalCli,
    JsonOpt,
    OpOpt,
    generic_lines,
    receipt_lines,
    run_control,
    show,
)
from wakeful.cli.output import UsageError, out_for

__all__ = ["apps", "effect_app", "evidence_app", "gate_app", "register_next", "work_app"]

work_app = typer.Typer(help="Work items: add, list, claim, complete, … (control-plane.md §2.4).", no_args_is_help=True)
gate_app = typer.Typer(help="A person's decision on a gate.", no_args_is_help=True)
evidence_app = typer.Typer(help="Evidence bound to revisions and criteria.", no_args_is_help=True)
effect_app = typer.Typer(help="External effects: intend, settle, read back.", no_args_is_help=True)

ItemArg = Annotated[str, typer.Argument(help="Work item id (w_…).")]
RevOpt = Annotated[int, typer.Option(
    "--expected-revision", help="The item revision your change is based on (required; see `work show`).")]
EpochOpt = Annotated[int | None, typer.Option("--claim-epoch", help="Epoch of the claim you hold (with --claim-key).")]
KeyOpt = Annotated[str | None, typer.Option("--claim-key", help="Key of the claim you hold (with --claim-epoch).")]
SpendOpt = Annotated[int | None, typer.Option(
    "--spend-units", min=1, help="Budget units this written-back work cost (recorded in the same commit).")]
ResumeOpt = Annotated[list[str] | None, typer.Option("--resume-when", help="Resume condition (repeatable).")]


def apps() -> dict[str, typer.Typer]:
    """The command groups this module adds to `wakeful`."""
    return {"work": work_app, "gate": gate_app, "evidence": evidence_app, "effect": effect_app}


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def fields_of(values: list[str] | None) -> dict[str, Any]:
    """``--field name=JSON`` pairs (a value that is not JSON is taken as a string)."""
    out: dict[str, Any] = {}
    for text in values or []:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise UsageError(f"--field must be NAME=VALUE, not {text!r}")
        out[name] = parse_value(value)
    return out


def fenced(revision: int | None, *, epoch: int | None = None, key: str | None = None) -> dict[str, Any]:
    """``expected`` exactly as given: the item revision and, when both parts are given, the presented claim."""
    if (epoch is None) != (key is None):
        raise UsageError("give both --claim-epoch and --claim-key, or neither")
    expected: dict[str, Any] = {} if revision is None else {"item_revision": revision}
    if epoch is not None:
        expected["claim"] = {"epoch": epoch, "key": key}
    return expected


def _run_item(ctx: typer.Context, json_: bool, agent: str | None, goal: str, item: str, command: dict[str, Any],
              revision: int | None, operation_id: str | None, *, epoch: int | None = None,
              key: str | None = None) -> None:
    out = out_for(ctx, json_)
    expected = fenced(revision, epoch=epoch, key=key)

    async def body(c: GoalCli) -> dict[str, Any]:
        return await c.submit(goal, {**command, "item": item}, operation_id=operation_id, expected=expected)

    show(out, run_control(out, agent, body), receipt_lines)


# ---------------------------------------------------------------- wakeful work …


@work_app.command("add")
def work_add(
    ctx: typer.Context, goal: GoalArg,
    cls: Annotated[Literal["advancement", "user_gate", "user_action", "monitor", "blocker"], typer.Option("--class", help="The item's class.")],
    title: Annotated[str, typer.Option("--title", help="Title (≤ 200 characters).")],
    detail: Annotated[str | None, typer.Option("--detail", help="Detail (≤ 8000 characters).")] = None,
    priority: Annotated[int | None, typer.Option("--priority", min=0, max=4, help="0 highest … 4.")] = None,
    field: Annotated[list[str] | None, typer.Option("--field", help="NAME=JSON class field (repeatable).")] = None,
    agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Add a work item (class fields with --field, e.g. --field loop_id=lp_… or --field 'targets=["w_…"]')."""
    out = out_for(ctx, json_)
    command: dict[str, Any] = {"type": "work.add", "class": cls, "title": title, **fields_of(field)}
    if detail is not None:
        command["detail"] = detail
    if priority is not None:
        command["priority"] = priority

    async def body(c: GoalCli) -> dict[str, Any]:
        receipt = await c.submit(goal, command, operation_id=operation_id)
        item_id = next(ch["id"] for ch in receipt["changed"] if ch["entity"] == "item")
        return {"item": await c.call("work.get", goal_id=goal, item_id=item_id), "receipt": receipt}

    show(out, run_control(out, agent, body), lambda v: [f"item {v['item']['id']}: {v['item']['title']}",
                                                       *receipt_lines(v["receipt"])])


@work_app.command("list")
def work_list(
    ctx: typer.Context, goal: GoalArg,
    status: Annotated[Literal["open", "blocked", "deferred", "done"] | None, typer.Option("--status", help="Only items in this status.")] = None,
    cls: Annotated[str | None, typer.Option("--class", help="Only this class.")] = None,
    json_: JsonOpt = False,
) -> None:
    """The goal's work items."""
    out = out_for(ctx, json_)
    items = run_control(out, None, lambda c: c.every("work.list", goal_id=goal, status=status, **{"class": cls}))
    show(out, items, lambda its: [f"{i['id']}  {i['class']}  {i['status']}  P{i['priority']}  r{i['revision']}  "
                                  f"{i['title']}" for i in its] or ["(no items)"])


@work_app.command("show")
def work_show(ctx: typer.Context, goal: GoalArg, item: ItemArg, json_: JsonOpt = False) -> None:
    """One item with its claim, evidence and effects."""
    out = out_for(ctx, json_)
    show(out, run_control(out, None, lambda c: c.call("work.get", goal_id=goal, item_id=item)), generic_lines)


@work_app.command("claim")
def work_claim(
    ctx: typer.Context, goal: GoalArg, item: ItemArg,
    agent: Annotated[str, typer.Option("--agent", help="The claiming agent.")],
    key: Annotated[str | None, typer.Option("--key", help="Execution idempotency key.")] = None,
    ttl_s: Annotated[int | None, typer.Option("--ttl-s", min=60, max=86_400, help="Lease length.")] = None,
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Acquire a claim on an item for an agent."""
    out = out_for(ctx, json_)
    command: dict[str, Any] = {"type": "claim.acquire", "item": item, "key": key or f"cli:{agent}:{item}"}
    if ttl_s is not None:
        command["ttl_s"] = ttl_s
    show(out, run_control(out, agent, lambda c: c.submit(goal, command, operation_id=operation_id)), receipt_lines)


@work_app.command("renew")
def work_renew(ctx: typer.Context, goal: GoalArg, item: ItemArg, agent: AgentOpt = None, epoch: EpochOpt = None,
               key: KeyOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Renew the agent's claim (present it with --claim-epoch and --claim-key)."""
    _run_item(ctx, json_, agent, goal, item, {"type": "claim.renew"}, None, operation_id, epoch=epoch, key=key)


@work_app.command("release")
def work_release(ctx: typer.Context, goal: GoalArg, item: ItemArg, agent: AgentOpt = None, epoch: EpochOpt = None,
                 key: KeyOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Release the item's claim (the holder, or a person)."""
    _run_item(ctx, json_, agent, goal, item, {"type": "claim.release"}, None, operation_id, epoch=epoch, key=key)


@work_app.command("transfer")
def work_transfer(
    ctx: typer.Context, goal: GoalArg, item: ItemArg,
    to: Annotated[str, typer.Option("--to", help="The agent that takes the claim over.")],
    new_key: Annotated[str, typer.Option("--new-key", help="The new holder's execution key.")],
    agent: AgentOpt = None, epoch: EpochOpt = None, key: KeyOpt = None, operation_id: OpOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Hand the item's claim to another agent (the holder presenting its claim, or a person)."""
    command = {"type": "claim.transfer", "to": to, "key": new_key}
    _run_item(ctx, json_, agent, goal, item, command, None, operation_id, epoch=epoch, key=key)


@work_app.command("update")
def work_update(
    ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
    title: Annotated[str | None, typer.Option("--title")] = None,
    detail: Annotated[str | None, typer.Option("--detail")] = None,
    priority: Annotated[int | None, typer.Option("--priority", min=0, max=4)] = None,
    field: Annotated[list[str] | None, typer.Option("--field", help="NAME=JSON (repeatable).")] = None,
    agent: AgentOpt = None, epoch: EpochOpt = None, key: KeyOpt = None, operation_id: OpOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Change an item's fields (a new semantic digest stales acceptance bindings)."""
    changes = {k: v for k, v in (("title", title), ("detail", detail), ("priority", priority)) if v is not None}
    command = {"type": "work.update", **changes, **fields_of(field)}
    _run_item(ctx, json_, agent, goal, item, command, expected_revision, operation_id, epoch=epoch, key=key)


@work_app.command("block")
def work_block(ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
               reason: Annotated[str, typer.Option("--reason", help="The missing condition.")],
               resume_when: ResumeOpt = None, agent: AgentOpt = None, epoch: EpochOpt = None,
               key: KeyOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Block an open item."""
    command: dict[str, Any] = {"type": "work.block", "reason": reason}
    if resume_when:
        command["resume_when"] = resume_when
    _run_item(ctx, json_, agent, goal, item, command, expected_revision, operation_id, epoch=epoch, key=key)


@work_app.command("defer")
def work_defer(ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
               resume_when: Annotated[list[str], typer.Option("--resume-when", help="Condition (repeatable).")],
               reason: Annotated[str | None, typer.Option("--reason")] = None, agent: AgentOpt = None,
               epoch: EpochOpt = None, key: KeyOpt = None, operation_id: OpOpt = None,
               json_: JsonOpt = False) -> None:
    """Defer an open item until a resume condition fires (its claim is released)."""
    command: dict[str, Any] = {"type": "work.defer", "resume_when": resume_when}
    if reason:
        command["reason"] = reason
    _run_item(ctx, json_, agent, goal, item, command, expected_revision, operation_id, epoch=epoch, key=key)


@work_app.command("reopen")
def work_reopen(ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
                agent: AgentOpt = None, epoch: EpochOpt = None, key: KeyOpt = None, operation_id: OpOpt = None,
                json_: JsonOpt = False) -> None:
    """Reopen a blocked or deferred item."""
    _run_item(ctx, json_, agent, goal, item, {"type": "work.reopen"}, expected_revision, operation_id,
              epoch=epoch, key=key)


@work_app.command("complete")
def work_complete(
    ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
    continuation: Annotated[str, typer.Option("--continuation", help="no_followup, successor or goal.")] = "no_followup",
    successor: Annotated[list[str] | None, typer.Option("--successor", help="Successor item (repeatable).")] = None,
    summary: Annotated[str | None, typer.Option("--summary")] = None,
    spend_units: SpendOpt = None,
    agent: AgentOpt = None, epoch: EpochOpt = None, key: KeyOpt = None,
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Complete an item (bound criteria need applicable passing evidence)."""
    command: dict[str, Any] = {"type": "work.complete", "continuation": continuation}
    if spend_units:
        command["spend"] = {"units": spend_units}
    if successor:
        command["successors"] = successor
    if summary:
        command["summary"] = summary
    _run_item(ctx, json_, agent, goal, item, command, expected_revision, operation_id, epoch=epoch, key=key)


@work_app.command("supersede")
def work_supersede(
    ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
    replacement_id: Annotated[str | None, typer.Option("--replacement-id", help="An existing open item.")] = None,
    replacement: Annotated[str | None, typer.Option("--replacement", help="A new item as a JSON object.")] = None,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    agent: AgentOpt = None, epoch: EpochOpt = None, key: KeyOpt = None, operation_id: OpOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Supersede an item by an existing or a new one, linked both ways."""
    if (replacement_id is None) == (replacement is None):
        raise UsageError("give exactly one of --replacement-id or --replacement")
    command: dict[str, Any] = {"type": "work.supersede"}
    if replacement_id is not None:
        command["replacement_id"] = replacement_id
    else:
        value = parse_value(replacement or "")
        if not isinstance(value, dict):
            raise UsageError("--replacement must be a JSON object")
        command["replacement"] = value
    if reason:
        command["reason"] = reason
    _run_item(ctx, json_, agent, goal, item, command, expected_revision, operation_id, epoch=epoch, key=key)


@work_app.command("cancel")
def work_cancel(ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
                reason: Annotated[str | None, typer.Option("--reason")] = None,
                operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Cancel an item (a person command: the operator)."""
    command: dict[str, Any] = {"type": "work.cancel"}
    if reason:
        command["reason"] = reason
    _run_item(ctx, json_, None, goal, item, command, expected_revision, operation_id)


# ---------------------------------------------------------------- wakeful gate ask | resolve


@gate_app.command("ask")
def gate_ask(ctx: typer.Context, goal: GoalArg, item: ItemArg,
             agent: Annotated[str, typer.Option("--agent", help="The agent asking the person.")],
             operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Ask a person to decide a gate (an agent command; `next` says when)."""
    _run_item(ctx, json_, agent, goal, item, {"type": "gate.ask"}, None, operation_id)  # asking is not fenced


@gate_app.command("resolve")
def gate_resolve(
    ctx: typer.Context, goal: GoalArg, item: ItemArg, expected_revision: RevOpt,
    outcome: Annotated[str, typer.Argument(help="approve, reject, cancel or defer.")],
    resume_when: ResumeOpt = None, note: Annotated[str | None, typer.Option("--note")] = None,
    digest: Annotated[str | None, typer.Option(
        "--digest", help="For a proposal: the digest you read (approving another one is refused).")] = None,
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """A person's decision on a gate (as the operator)."""
    command: dict[str, Any] = {"type": "gate.resolve", "outcome": outcome}
    if digest:
        command["digest"] = digest
    if resume_when:
        command["resume_when"] = resume_when
    if note:
        command["note"] = note
    _run_item(ctx, json_, None, goal, item, command, expected_revision, operation_id)


# ---------------------------------------------------------------- wakeful evidence …


@evidence_app.command("add")
def evidence_add(
    ctx: typer.Context, goal: GoalArg,
    kind: Annotated[Literal["test", "check", "review", "observation", "loop_wake", "manual"], typer.Option("--kind", help="The evidence's kind.")],
    verdict: Annotated[str, typer.Option("--verdict", help="pass, fail, inconclusive, observed.")],
    item: Annotated[str | None, typer.Option("--item", help="The work item it concerns.")] = None,
    criterion: Annotated[list[str] | None, typer.Option("--criterion", help="Criterion id (repeatable).")] = None,
    subject: Annotated[str | None, typer.Option("--subject")] = None,
    artifact_revision: Annotated[str | None, typer.Option("--artifact-revision")] = None,
    workload: Annotated[str | None, typer.Option("--workload", help="KIND:REF, e.g. suite:bench/mixed.")] = None,
    summary: Annotated[str | None, typer.Option("--summary")] = None,
    details_url: Annotated[str | None, typer.Option("--details-url")] = None,
    spend_units: SpendOpt = None,
    agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Record evidence (immutable)."""
    out = out_for(ctx, json_)
    command: dict[str, Any] = {"type": "evidence.add", "kind": kind, "verdict": verdict}
    if spend_units:
        command["spend"] = {"units": spend_units}
    optional = {"item": item, "criterion_ids": criterion, "subject": subject,
                "artifact_revision": artifact_revision, "summary": summary, "details_url": details_url}
    command.update({k: v for k, v in optional.items() if v})
    if workload:
        wk, sep, ref = workload.partition(":")
        if not sep:
            raise UsageError("--workload must be KIND:REF")
        command["workload"] = {"kind": wk, "ref": ref}
    show(out, run_control(out, agent, lambda c: c.submit(goal, command, operation_id=operation_id)), receipt_lines)


@evidence_app.command("list")
def evidence_list(ctx: typer.Context, goal: GoalArg,
                  item: Annotated[str | None, typer.Option("--item")] = None,
                  criterion: Annotated[str | None, typer.Option("--criterion")] = None,
                  json_: JsonOpt = False) -> None:
    """Evidence with its applicability now."""
    out = out_for(ctx, json_)
    rows = run_control(out, None, lambda c: c.every("goals.evidence", goal_id=goal, item=item, criterion=criterion))
    show(out, rows, lambda es: [f"{e['id']}  {e['verdict']}  {e['kind']}  {e.get('summary') or ''}" for e in es]
         or ["(no evidence)"])


# ---------------------------------------------------------------- wakeful effect …


@effect_app.command("intend")
def effect_intend(
    ctx: typer.Context, goal: GoalArg,
    request_key: Annotated[str, typer.Option("--request-key")],
    kind: Annotated[str, typer.Option("--kind", help="e.g. github.pr.create")],
    target: Annotated[str, typer.Option("--target")],
    payload_digest: Annotated[str, typer.Option("--payload-digest")],
    item: Annotated[str | None, typer.Option("--item")] = None,
    agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Record an intended external effect before making it."""
    out = out_for(ctx, json_)
    command: dict[str, Any] = {"type": "effect.intend", "request_key": request_key, "kind": kind, "target": target,
                               "payload_digest": payload_digest}
    if item:
        command["item"] = item
    show(out, run_control(out, agent, lambda c: c.submit(goal, command, operation_id=operation_id)), receipt_lines)


def _effect(ctx: typer.Context, goal: str, body: dict[str, Any], detail: str | None, external_ref: str | None,
            agent: str | None, operation_id: str | None, json_: bool) -> None:
    out = out_for(ctx, json_)
    body.update({k: v for k, v in (("detail", detail), ("external_ref", external_ref)) if v})
    show(out, run_control(out, agent, lambda c: c.submit(goal, body, operation_id=operation_id)), receipt_lines)


RequestKeyOpt = Annotated[str, typer.Option("--request-key")]
AttemptOpt = Annotated[int, typer.Option("--attempt", min=1)]
DetailOpt = Annotated[str | None, typer.Option("--detail")]
RefOpt = Annotated[str | None, typer.Option("--external-ref")]


@effect_app.command("settle")
def effect_settle(ctx: typer.Context, goal: GoalArg, request_key: RequestKeyOpt, attempt: AttemptOpt,
                  state: Annotated[str, typer.Argument(help="succeeded, failed or unknown.")],
                  detail: DetailOpt = None, external_ref: RefOpt = None, agent: AgentOpt = None,
                  operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Report what happened to an intended effect."""
    body = {"type": "effect.settle", "request_key": request_key, "attempt": attempt, "outcome": state}
    _effect(ctx, goal, body, detail, external_ref, agent, operation_id, json_)


@effect_app.command("readback")
def effect_readback(ctx: typer.Context, goal: GoalArg, request_key: RequestKeyOpt, attempt: AttemptOpt,
                    observed: Annotated[str, typer.Argument(help="present, absent or unreadable.")],
                    detail: DetailOpt = None, external_ref: RefOpt = None, agent: AgentOpt = None,
                    operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Record what the external system shows for an effect whose outcome is unknown."""
    body = {"type": "effect.readback", "request_key": request_key, "attempt": attempt, "observed": observed}
    _effect(ctx, goal, body, detail, external_ref, agent, operation_id, json_)


@effect_app.command("watch")
def effect_watch(ctx: typer.Context, goal: GoalArg, request_key: RequestKeyOpt,
                 loop: Annotated[str, typer.Option("--loop", help="The Loop that reads the effect back (lp_…).")],
                 agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Give an unsettled effect a readback Loop: its wake {"readback": {request_key, attempt, observed}} records
    what the external system shows, with no agent turn."""
    body = {"type": "effect.watch", "request_key": request_key, "loop_id": loop}
    _effect(ctx, goal, body, None, None, agent, operation_id, json_)


@effect_app.command("list")
def effect_list(ctx: typer.Context, goal: GoalArg, state: Annotated[str | None, typer.Option("--state")] = None,
                json_: JsonOpt = False) -> None:
    """The goal's effects."""
    out = out_for(ctx, json_)
    rows = run_control(out, None, lambda c: c.every("goals.effects", goal_id=goal, state=state))
    show(out, rows, lambda es: [f"{e['request_key']}  {e['state']}  attempt {e['attempt']}  {e['kind']}"
                                for e in es] or ["(no effects)"])


# ---------------------------------------------------------------- wakeful next


def decision_lines(d: dict[str, Any]) -> list[str]:
    head = d["decision"] + (f" ({d['action']})" if d.get("action") else "") + \
        (f" [{d['wait_kind']}]" if d.get("wait_kind") else "")
    lines = [head, f"goal: {d.get('goal_id')} at revision {d.get('goal_revision')}"]
    if d.get("item"):
        lines.append(f"item: {d['item']['id']} {d['item']['class']} {d['item']['title']}")
    if d.get("ask"):
        lines.append(f"ask a person: {d['ask']['question']} (gate {d['ask']['gate_id']})")
    if d.get("wake_when"):
        lines.append("wake when: " + ", ".join(d["wake_when"]))
    if d.get("elsewhere"):
        lines.append("elsewhere: " + ", ".join(f"{e['goal_id']}/{e['item_id']}" for e in d["elsewhere"]))
    lines.append("reasons: " + ", ".join(d.get("reasons", [])))
    if d.get("claim"):
        lines += receipt_lines(d["claim"])
    return lines


def register_next(app: typer.Typer) -> None:
    """``wakeful next`` is one command (its options in its --help), not a group (issue 19)."""
    app.command("next", epilog="\b\nExamples:\n  wakeful next --agent AGT\n  wakeful next --agent AGT --goal GOAL "
                "--claim --json")(next_command)


def next_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", help="The agent asking.")],
    goal: Annotated[str | None, typer.Option("--goal", help="Only this goal (default: all the agent's).")] = None,
    claim: Annotated[bool, typer.Option("--claim", help="Also claim a start item.")] = False,
    json_: JsonOpt = False,
) -> None:
    """What should this agent do now? The next decision: deliver, ask a person, wait, replan or stop
    (control-plane.md §7)."""
    out = out_for(ctx, json_)
    if claim:  # only the agent itself claims work: the command acts as it
        decision = run_control(out, agent, lambda c: c.call("next.claim", agent_id=agent, goal_id=goal, claim=True))
    else:
        decision = run_control(out, None, lambda c: c.call("next.get", agent_id=agent, goal_id=goal))
    show(out, decision, decision_lines)
