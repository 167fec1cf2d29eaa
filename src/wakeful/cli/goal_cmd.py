"""`wakeful goal …` in local mode (interfaces.md §4.2): goals, acceptance, subjects, projections and the commit
log on the configured store, as the operator (person authority) or, with ``--agent``, as that agent.

``run_control`` (shared with ``work_cmd``) runs one command body on a ``GoalCli``: the control-plane operations
(``wakeful.control.ops``) on the store opened offline, or — remote mode (``--server``) — over the HTTP API, with
the same rendering; kernel refusals print as typed errors and exit 1, an unreachable store exits 3, a bad argument
or file exits 2.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from wakeful.cli.db_cmd import store_url
from wakeful.cli.output import EXIT_FAILED, CliExit, Out, Unavailable, UsageError, escape, out_for
from wakeful.errors import WakefulError

if TYPE_CHECKING:  # the control plane, the harness and SQLAlchemy load when a command runs, not at CLI start
    from wakeful.control import Control
    from wakeful.harness.ops import Backend

__all__ = ["GoalCli", "apps", "goal_app", "run_control"]

T = TypeVar("T")

goal_app = typer.Typer(help="Goals, acceptance contracts, subjects and projections (control-plane.md).",
                       no_args_is_help=True)
acceptance_app = typer.Typer(help="The goal's acceptance contract (person command).", no_args_is_help=True)
subject_app = typer.Typer(help="Subject revisions evidence is bound to.", no_args_is_help=True)
goal_app.add_typer(acceptance_app, name="acceptance")
goal_app.add_typer(subject_app, name="subject")

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
AgentOpt = Annotated[str | None, typer.Option("--agent", help="Act as this agent (default: the operator).")]
OpOpt = Annotated[str | None, typer.Option("--operation-id", help="Idempotency id (reuse it to retry safely).")]
GoalArg = Annotated[str, typer.Argument(help="Goal id (goal_…).")]


def apps() -> dict[str, typer.Typer]:
    """The command groups this module adds to `wakeful`."""
    return {"goal": goal_app}


# ---------------------------------------------------------------- one command, local or remote


class GoalCli:
    """One command's way to the control-plane operations (``wakeful.control.ops``): a ``Backend`` — the local
    store as the operator (or ``--agent``), or the server with the key — and the group goals are named in (locally
    ``None``: the operator names a goal by id alone and its group is the goal's; remotely the key's group)."""

    def __init__(self, backend: Backend, group: Callable[[], str | None], kernel: Control | None = None) -> None:
        self.backend, self._group, self.kernel = backend, group, kernel

    @property
    def group(self) -> str | None:
        return self._group()

    async def call(self, name: str, **arguments: Any) -> Any:
        """One operation in the named ``group_id``, else in this command's group."""
        if "group_id" not in arguments:
            arguments["group_id"] = self.group
        return await self.backend.call(name, **arguments)

    async def every(self, name: str, **arguments: Any) -> list[Any]:
        """Every item of a paged read, its pages followed to the end."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self.call(name, limit=200, cursor=cursor, **arguments)
            items.extend(page["items"])
            following = page.get("next_cursor")
            if not following or following == cursor:
                return items
            cursor = following
        return items

    async def submit(self, goal_id: str, command: dict[str, Any], *, operation_id: str | None = None,
                     expected: dict[str, Any] | None = None) -> dict[str, Any]:
        receipt: dict[str, Any] = await self.call("goals.submit", goal_id=goal_id, command=command,
                                                  operation_id=operation_id or new_operation_id(),
                                                  expected=expected or None)
        return receipt


MAX_PAGES = 1000


def new_operation_id() -> str:
    """Generated when ``--operation-id`` is omitted (then the call is not replayable)."""
    return f"cli:{secrets.token_hex(12)}"


def run_control(out: Out, agent: str | None, body: Callable[[GoalCli], Awaitable[T]]) -> T:
    """Run ``body`` on the configured store (as the operator, or as ``agent``), or in remote mode against the
    server's control-plane routes (``--server``; ``agent`` sent as ``X-Wakeful-Agent``): the same operations and
    the same rendering either way. Typed errors exit 1 (refused), 2 (usage) or 3 (unavailable)."""
    from wakeful.cli import remote

    if remote.server_url() is not None:
        return remote.call(out, lambda: _remote(agent, body))
    from wakeful.harness.errors import StoreUnavailable

    try:
        return asyncio.run(_local(agent, body))
    except StoreUnavailable as exc:
        out.fail(Unavailable(exc.message))
    except WakefulError as exc:
        out.fail(exc)


async def _local(agent: str | None, body: Callable[[GoalCli], Awaitable[T]]) -> T:
    from dataclasses import replace

    from wakeful.control import Harness
    from wakeful.harness.config import load_config
    from wakeful.harness.ops import OPERATOR, LocalBackend

    harness = Harness(load_config(), db_url=store_url())  # control.claim_ttl_s / intent_grace_s as the node's
    principal = OPERATOR if agent is None else replace(OPERATOR, agent_id=agent)  # the agent of any group
    async with harness.offline():
        return await body(GoalCli(LocalBackend(harness, principal), lambda: None, harness.control_if_running))


def _remote(agent: str | None, body: Callable[[GoalCli], Awaitable[T]]) -> T:
    from urllib.parse import unquote

    from wakeful.cli import remote
    from wakeful.harness.ops import HttpBackend, SyncCaller  # the routes alone (ops.routes): no control plane

    api = remote.connect(agent=agent)

    async def go() -> T:  # the key's group, as the server names it (HttpBackend encodes path segments)
        return await body(GoalCli(HttpBackend(SyncCaller(api)), lambda: unquote(api.group())))

    return asyncio.run(go())


def show(out: Out, value: Any, lines: Callable[[Any], list[str]] | None = None) -> None:
    """One JSON document with ``--json``; else readable lines."""
    if out.json:
        out.document(value)
        return
    for line in (lines or generic_lines)(value):
        out.text(escape(line))


def generic_lines(value: Any) -> list[str]:
    if isinstance(value, list):
        return [json.dumps(v, ensure_ascii=False, default=str) for v in value] or ["(none)"]
    if isinstance(value, dict):
        return [f"{k}: {json.dumps(v, ensure_ascii=False, default=str)}" for k, v in value.items()]
    return [str(value)]


def read_json_file(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{what} file {path}: {exc}") from None


def pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in values or []:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise UsageError(f"{what} must be NAME=VALUE, not {text!r}")
        out[name] = value
    return out


def receipt_lines(receipt: dict[str, Any]) -> list[str]:
    head = f"{receipt['command_type']} applied at seq {receipt['seq']} ({receipt['operation_id']})"
    if receipt.get("replayed"):
        head += " [replayed]"
    lines = [head] + [f"  {c['entity']} {c['id']} revision {c['revision']} {c['status'] or ''}".rstrip()
                      for c in receipt.get("changed", [])]
    claim = receipt.get("claim")
    if isinstance(claim, dict) and "epoch" in claim:  # what the holder presents next: --claim-epoch/--claim-key
        lines.append(f"  claim of {claim.get('holder')}: --claim-epoch {claim['epoch']} --claim-key {claim.get('key')}")
    return lines


# ---------------------------------------------------------------- wakeful goal …


@goal_app.command("create")
def goal_create(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("--group", help="Group id (grp_…).")],
    title: Annotated[str, typer.Option("--title", help="Title (≤ 200 characters).")],
    objective: Annotated[str, typer.Option("--objective", help="Objective (≤ 4000 characters).")] = "",
    claim_mode: Annotated[str | None, typer.Option("--claim-mode", help="soft (default) or hard.")] = None,
    subject: Annotated[list[str] | None, typer.Option("--subject", help="NAME=REVISION (repeatable).")] = None,
    units_per_day: Annotated[int | None, typer.Option("--units-per-day", help="Daily budget units.")] = None,
    agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Create a goal (an agent creator is registered on it)."""
    out = out_for(ctx, json_)
    command: dict[str, Any] = {"type": "goal.create", "title": title, "objective": objective}
    if claim_mode is not None:
        command["claim_mode"] = claim_mode
    if subject:
        command["subjects"] = pairs(subject, "--subject")
    if units_per_day is not None:
        command["budget"] = {"units_per_day": units_per_day}

    async def body(c: GoalCli) -> dict[str, Any]:
        fields = {k: v for k, v in command.items() if k != "type"}
        made: dict[str, Any] = await c.call("goals.create", group_id=group,
                                            operation_id=operation_id or new_operation_id(), **fields)
        return made

    show(out, run_control(out, agent, body), lambda v: [f"goal {v['goal']['id']}: {v['goal']['title']}",
                                                       *receipt_lines(v["receipt"])])


@goal_app.command("list")
def goal_list(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("--group", help="Group id.")],
    status: Annotated[Literal["active", "paused", "closed"] | None, typer.Option("--status", help="Only goals in this status.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only goals this agent is registered on.")] = None,
    json_: JsonOpt = False,
) -> None:
    """List the group's goals."""
    out = out_for(ctx, json_)
    # with --agent, as that agent: an agent sees the goals it is registered on
    goals = run_control(out, agent, lambda c: c.every("goals.list", group_id=group, status=status))
    show(out, goals, lambda gs: [f"{g['id']}  {g['status']}  rev {g['revision']}  {g['title']}" for g in gs]
         or ["(no goals)"])


@goal_app.command("show")
def goal_show(ctx: typer.Context, goal: GoalArg, json_: JsonOpt = False) -> None:
    """The goal and its status summary."""
    out = out_for(ctx, json_)

    show(out, run_control(out, None, lambda c: c.call("goals.get", goal_id=goal)),
         lambda v: [*generic_lines(v["goal"]), *status_lines(v["status"])])


def status_lines(s: dict[str, Any]) -> list[str]:
    acc = s["acceptance"]
    lines = [f"goal {s['goal']['id']} ({s['goal']['status']}, revision {s['goal']['revision']}): {s['goal']['title']}",
             f"acceptance r{acc['revision']}: {acc['status']}"]
    lines += [f"  {c['id']}: {c['status']}" for c in acc["criteria"]]
    for cls, counts in s["counts"].items():
        shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        if shown:
            lines.append(f"{cls}: {shown}")
    lines += [f"needs a person: {p['id']} {p['question'] or p['title']}" for p in s["needs_person"]]
    lines += [f"claim: {c['item_id']} held by {c['holder']} until {c['expires_ms']}" for c in s["claims"]]
    lines += [f"monitor {m['id']}: Loop {m['loop_id']} {m['loop_state']} ({m['observations']} observations)"
              for m in s["monitors"]]
    lines += [f"unsettled effect {e['request_key']}: {e['state']}" for e in s["unsettled_effects"]]
    return lines


@goal_app.command("status")
def goal_status(ctx: typer.Context, goal: GoalArg, json_: JsonOpt = False) -> None:
    """The status projection (control-plane.md §8)."""
    out = out_for(ctx, json_)
    show(out, run_control(out, None, lambda c: c.call("goals.status", goal_id=goal)), status_lines)


def board_lines(b: dict[str, Any]) -> list[str]:
    lines = []
    columns = {**{f"open/{k}": v for k, v in b["columns"]["open"].items()},
               **{k: v for k, v in b["columns"].items() if k != "open"}}
    for name, cards in columns.items():
        lines.append(f"{name} ({len(cards)})")
        lines += [f"  {c['id']} P{c['priority']} {c['class']} {c['title']}"
                  + (f" [{c['holder']}]" if c["holder"] else "") for c in cards]
    return lines


@goal_app.command("board")
def goal_board(ctx: typer.Context, goal: GoalArg, json_: JsonOpt = False) -> None:
    """The board projection (control-plane.md §8)."""
    out = out_for(ctx, json_)
    show(out, run_control(out, None, lambda c: c.call("goals.board", goal_id=goal)), board_lines)


def _goal_command(kind: str, doc: str) -> None:
    @goal_app.command(kind, help=doc)
    def command(ctx: typer.Context, goal: GoalArg,
                reason: Annotated[str | None, typer.Option("--reason", help="Why.")] = None,
                agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
        body: dict[str, Any] = {"type": f"goal.{kind}"}
        if reason:
            body["reason"] = reason
        _submit_as(ctx, json_, agent, goal, body, operation_id)


def _submit_as(ctx: typer.Context, json_: bool, agent: str | None, goal: str, body: dict[str, Any],
               operation_id: str | None, expected: dict[str, Any] | None = None) -> None:
    out = out_for(ctx, json_)
    show(out, run_control(out, agent, lambda c: c.submit(goal, body, operation_id=operation_id, expected=expected)),
         receipt_lines)


@goal_app.command("update")
def goal_update(
    ctx: typer.Context, goal: GoalArg,
    title: Annotated[str | None, typer.Option("--title")] = None,
    objective: Annotated[str | None, typer.Option("--objective")] = None,
    claim_mode: Annotated[str | None, typer.Option("--claim-mode", help="soft or hard.")] = None,
    budget: Annotated[int | None, typer.Option("--budget-units-per-day", min=1)] = None,
    expected_revision: Annotated[int | None, typer.Option(
        "--expected-revision", help="Fence on this goal revision.")] = None,
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Change the goal's title, objective, claim mode or daily budget (a person command: the operator)."""
    body = {"type": "goal.update", **_goal_changes(title, objective, claim_mode, budget)}
    expected = None if expected_revision is None else {"goal_revision": expected_revision}
    _submit_as(ctx, json_, None, goal, body, operation_id, expected)


@goal_app.command("propose")
def goal_propose(
    ctx: typer.Context, goal: GoalArg,
    agent: Annotated[str, typer.Option("--agent", help="The proposing agent.")],
    title: Annotated[str | None, typer.Option("--title")] = None,
    objective: Annotated[str | None, typer.Option("--objective")] = None,
    claim_mode: Annotated[str | None, typer.Option("--claim-mode", help="soft or hard.")] = None,
    budget: Annotated[int | None, typer.Option("--budget-units-per-day", min=1)] = None,
    note: Annotated[str | None, typer.Option("--note", help="Why, for the person who decides.")] = None,
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Propose a change to the goal (an agent command): a person's gate approval applies exactly it."""
    body = {"type": "goal.propose", **_goal_changes(title, objective, claim_mode, budget)}
    if note is not None:
        body["note"] = note
    _submit_as(ctx, json_, agent, goal, body, operation_id)


def _goal_changes(title: str | None, objective: str | None, claim_mode: str | None,
                  budget: int | None) -> dict[str, Any]:
    """The members of goal.update / goal.propose that the options gave."""
    changes: dict[str, Any] = {k: v for k, v in (("title", title), ("objective", objective),
                                                 ("claim_mode", claim_mode)) if v is not None}
    if budget is not None:
        changes["budget"] = {"units_per_day": budget}
    return changes


@goal_app.command("validate")
def goal_validate(ctx: typer.Context, goal: GoalArg,
                  criterion: Annotated[str, typer.Argument(help="The criterion whose validator runs.")],
                  agent: AgentOpt = None, json_: JsonOpt = False) -> None:
    """Run a criterion's validator on the node (remote mode: --server) and record its evidence."""
    from wakeful.cli import remote

    if remote.server_url() is None:
        raise UsageError("validators run in a node's script sandbox: give --server URL (and --key)")
    out = out_for(ctx, json_)
    found = run_control(out, agent, lambda c: c.call("goals.validate", goal_id=goal, criterion_id=criterion))
    show(out, found, lambda v: [f"{criterion}: {v['verdict']} (attempt {v['attempt']}"
                                f"{', reused' if v['reused'] else ''}) evidence {v['evidence']}"])


AgentIdArg = Annotated[str, typer.Argument(help="Agent id (ag_…).")]


@goal_app.command("register")
def goal_register(ctx: typer.Context, goal: GoalArg, agent_id: AgentIdArg, agent: AgentOpt = None,
                  operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Register an agent on the goal (the operator, or the agent itself with --agent)."""
    _submit_as(ctx, json_, agent, goal, {"type": "agent.register", "agent_id": agent_id}, operation_id)


@goal_app.command("exclude")
def goal_exclude(ctx: typer.Context, goal: GoalArg, agent_id: AgentIdArg,
                 reason: Annotated[str | None, typer.Option("--reason")] = None,
                 operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Exclude an agent from the goal (a person command: the operator)."""
    body: dict[str, Any] = {"type": "agent.exclude", "agent_id": agent_id}
    if reason:
        body["reason"] = reason
    _submit_as(ctx, json_, None, goal, body, operation_id)


@goal_app.command("spend")
def goal_spend(ctx: typer.Context, goal: GoalArg,
               units: Annotated[int, typer.Option("--units", min=1, help="Budget units the work cost.")],
               agent: Annotated[str, typer.Option("--agent", help="The spending agent.")],
               note: Annotated[str | None, typer.Option("--note")] = None,
               item: Annotated[str | None, typer.Option(
                   "--item", help="The item paid for (only once its work is written back).")] = None,
               operation_id: OpOpt = None, json_: JsonOpt = False) -> None:
    """Record budget spent on the goal (an agent command)."""
    body: dict[str, Any] = {"type": "budget.spend", "units": units}
    if note:
        body["note"] = note
    if item:
        body["item"] = item
    _submit_as(ctx, json_, agent, goal, body, operation_id)


_goal_command("pause", "Pause the goal (person).")
_goal_command("resume", "Resume a paused goal (person).")
_goal_command("close", "Close the goal (refused while work or effects are open).")


@goal_app.command("commits")
def goal_commits(
    ctx: typer.Context, goal: GoalArg,
    after_seq: Annotated[int, typer.Option("--after-seq", min=0, help="Only commits after this seq.")] = 0,
    limit: Annotated[int, typer.Option("--limit", min=1, max=200, help="At most this many.")] = 50,
    json_: JsonOpt = False,
) -> None:
    """The goal's commit log."""
    out = out_for(ctx, json_)
    async def body(c: GoalCli) -> list[dict[str, Any]]:
        page = await c.call("goals.commits", goal_id=goal, after_seq=after_seq, limit=limit)
        return list(page["items"])

    commits = run_control(out, None, body)
    show(out, commits, lambda cs: [f"{c['seq']}  {c['command_type']}  {c['operation_id']}" for c in cs]
         or ["(no commits)"])


@goal_app.command("rebuild")
def goal_rebuild(ctx: typer.Context,
                 goal: Annotated[str | None, typer.Argument(help="Only this goal (default: all).")] = None,
                 check_log: Annotated[bool, typer.Option(
                     "--check-log", help="Also rebuild from the commit log alone and compare (exit 1 on a "
                     "difference).")] = False,
                 json_: JsonOpt = False) -> None:
    """Drop the projection cache and recompute it (nothing is lost: projections are pure)."""
    out = out_for(ctx, json_)
    async def body(c: GoalCli) -> dict[str, Any]:
        if c.kernel is None:  # the projection cache is the node's own: no route (interfaces.md §2.2)
            from wakeful.cli.remote import refuse_local

            refuse_local("wakeful goal rebuild")
        assert c.kernel is not None
        return await c.kernel.rebuild(goal, check_log=check_log)

    done = run_control(out, None, body)

    def lines(d: dict[str, Any]) -> list[str]:
        text = [f"rebuilt {d['projections']} projections of {d['goals']} goals"]
        if "log_mismatches" in d:
            text += [f"commit log disagrees: {m['goal_id']} ({', '.join(m['kinds'])})" for m in d["log_mismatches"]]
            text += [] if d["log_mismatches"] else ["the commit log gives the same projections"]
        return text

    show(out, done, lines)
    if done.get("log_mismatches"):
        raise CliExit(EXIT_FAILED)


@acceptance_app.command("set")
def acceptance_set(
    ctx: typer.Context, goal: GoalArg,
    file: Annotated[Path, typer.Argument(help="JSON: {document, bindings?} or a bare document.")],
    expected_revision: Annotated[int, typer.Option(
        "--expected-revision", help="The acceptance revision you revised (0 for the first contract).")],
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Set a new acceptance revision (a person command: the operator)."""
    command = {"type": "acceptance.set", **_contract_file(file)}
    _submit_as(ctx, json_, None, goal, command, operation_id, {"acceptance_revision": expected_revision})


@acceptance_app.command("propose")
def acceptance_propose(
    ctx: typer.Context, goal: GoalArg,
    file: Annotated[Path, typer.Argument(help="JSON: {document, bindings?} or a bare document.")],
    expected_revision: Annotated[int, typer.Option(
        "--expected-revision", help="The acceptance revision your proposal revises.")],
    agent: Annotated[str, typer.Option("--agent", help="The proposing agent.")],
    note: Annotated[str | None, typer.Option("--note", help="Why, for the person who decides.")] = None,
    operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Propose an acceptance revision (an agent command): a person's gate approval applies exactly it."""
    command = {"type": "acceptance.propose", **_contract_file(file)}
    if note:
        command["note"] = note
    _submit_as(ctx, json_, agent, goal, command, operation_id, {"acceptance_revision": expected_revision})


def _contract_file(file: Path) -> dict[str, Any]:
    data = read_json_file(file, "acceptance")
    if not isinstance(data, dict):
        raise UsageError("the acceptance file must hold a JSON object")
    out: dict[str, Any] = {"document": data.get("document", data)}
    if "bindings" in data and "document" in data:
        out["bindings"] = data["bindings"]
    return out


@acceptance_app.command("show")
def acceptance_show(
    ctx: typer.Context, goal: GoalArg,
    revision: Annotated[int | None, typer.Option("--revision", min=0, help="Default: the current one.")] = None,
    json_: JsonOpt = False,
) -> None:
    """The contract with criterion statuses."""
    out = out_for(ctx, json_)
    show(out, run_control(out, None, lambda c: c.call("goals.acceptance", goal_id=goal, revision=revision)))


@subject_app.command("set")
def subject_set(
    ctx: typer.Context, goal: GoalArg,
    name: Annotated[str, typer.Argument(help="Subject name.")],
    revision: Annotated[str, typer.Argument(help="Its current revision (e.g. git:3f2a…).")],
    agent: AgentOpt = None, operation_id: OpOpt = None, json_: JsonOpt = False,
) -> None:
    """Record a subject's current revision (evidence of older revisions stops counting)."""
    out = out_for(ctx, json_)
    command = {"type": "subject.set", "name": name, "revision": revision}
    show(out, run_control(out, agent, lambda c: c.submit(goal, command, operation_id=operation_id)),
         receipt_lines)
