"""The control-plane tools of interfaces.md §3.2 (``goal.*``, ``subject.set``, ``budget.spend``, ``work.*``,
``gate.ask``, ``evidence.add``, ``effect.*``): each calls the control-plane operations (``wakeful.control.ops``)
through ``ctx.backend``, in process or over the HTTP API alike.

Every tool acts as the connection's agent. Person-only commands (``acceptance.set``, ``gate.resolve``,
``agent.exclude``, ``work.cancel``, a person's ``goal.close``) are not offered (interfaces.md §3.1). Each tool
takes an optional ``operation_id``: reuse it when retrying after a lost reply. Without ``key``/``epoch`` a claim
command presents this agent's current claim on the item; ``work.claim`` defaults its key to
``mcp:<session>:<item>``.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import wakeful.control  # noqa: F401 - registers the control-plane operations this table calls
from wakeful.mcp.contracts import contract
from wakeful.mcp.table import McpContext, McpTool, ToolRefusal, ToolTable

__all__ = ["TOOL_NAMES", "register"]

S = {"type": "string", "minLength": 1}
ID = {"type": "string", "minLength": 1, "maxLength": 40}
GOAL = {**ID, "description": "the goal's id (goal_…)"}
ITEM = {**ID, "description": "the work item's id (w_…)"}
OP = {"type": "string", "minLength": 1, "maxLength": 160,
      "description": "idempotency id; reuse it when retrying after a lost reply"}
REV = {"type": "integer", "minimum": 0, "description": "the item revision you read (fencing)"}
STRINGS = {"type": "array", "items": {"type": "string"}}
ITEM_IDS = {"type": "array", "items": ID}
CONDITIONS = {"type": "array", "items": {"type": "string"},
              "description": "resume conditions: work_done:<item>, gate_resolved:<item>, loop_wake:<loop>, "
              "loop_active:<loop>, effect_settled:<request_key>, time:<unix_ms>"}
ITEM_FIELDS: dict[str, Any] = {
    "detail": {"type": "string", "description": "what the item is about, in full (≤ 4000)"},
    "priority": {"type": "integer", "minimum": 0, "maximum": 4, "description": "0 (first) … 4 (last)"},
    "bound_agent": {**ID, "description": "only this agent may claim the item"},
    "excluded_agents": {**ITEM_IDS, "description": "agents that may not claim the item"},
    "depends_on": {**ITEM_IDS, "description": "items that must be done before this one is runnable"},
    "write_scopes": {**STRINGS, "description": "path globs the item writes; overlapping claims conflict"},
    "required_scopes": {**STRINGS, "description": "scope tokens that need a person's approval"},
    "scope": {"type": "string", "description": "gate: the scope it decides, kind:granularity:key"},
    "targets": {**ITEM_IDS, "description": "gate: the items its decision applies to (1..16)"},
    "question": {"type": "string", "description": "gate: the concrete question for the person (≤ 2000)"},
    "options": {**STRINGS, "description": "gate: the answers offered (≤ 8)"},
    "recovery": {"type": "string", "description": "blocker: how the missing condition can be recovered"},
    "blocks": {**ITEM_IDS, "description": "blocker: the items it blocks (≤ 16)"},
    "loop_id": {**ID, "description": "monitor: the Loop that watches (lp_…)"},
    "target": {"type": "string", "description": "what the item acts on (≤ 500)"},
}
# interfaces.md §3.2: every parameter an agent may pass is described (the common ones by name)
PARAM_TEXT = {
    "title": "a short title (≤ 200)", "objective": "what the goal must achieve, for every agent on it",
    "claim_mode": "soft (claims are advisory) or hard (commands need the claim)",
    "subjects": "name → current revision (e.g. {\"repo\": \"git:<sha>\"}); evidence is bound to these",
    "status": "only items/goals with this status", "name": "the subject's name", "revision":
    "the subject's new revision (≤ 200, e.g. git:<sha>)", "units": "units spent", "reason": "why, in a sentence",
    "class": "the work item's class", "claim": "also claim a start item (default false)",
    "key": "your claim key (default: the key this session claimed with)", "epoch": "your claim's epoch",
    "ttl_s": "claim lease in seconds (default 1800)", "action": "what to do with the item",
    "continuation": "what follows: no_followup, successor (name successors) or goal",
    "successors": "item ids that continue this one", "summary": "what was done or found (≤ 2000)",
    "replacement": "an existing open item's id, or a new item {class, title, …}",
    "criterion_ids": "acceptance criteria this evidence is about", "kind": "what kind of evidence or effect",
    "subject": "the subject you examined", "artifact_revision": "the subject revision you examined",
    "workload": "what you ran: {kind: command|suite|loop|manual, ref}", "verdict": "the evidence's verdict",
    "details_url": "where the details are (a CI run, a review)",
    "request_key": "the effect's idempotency key (also passed to the external system)",
    "payload_digest": "SHA-256 of what will be sent", "attempt": "the effect attempt this is about",
    "outcome": "what happened", "detail": "details (≤ 2000)", "external_ref": "the external system's id for it",
    "observed": "what the external system shows", "target": "what the effect acts on (≤ 500)",
}
EDIT_FIELDS = ("title", "detail", "priority", "bound_agent", "excluded_agents", "depends_on", "write_scopes",
               "required_scopes", "question", "options", "recovery", "blocks", "target")


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    described = {name: spec if "description" in spec else {**spec, "description": PARAM_TEXT[name]}
                 for name, spec in properties.items()}
    return {"type": "object", "properties": {**described, "operation_id": OP}, "required": list(required),
            "additionalProperties": False}


# ---------------------------------------------------------------- the operations (wakeful.control.ops)


def _op_id(args: dict[str, Any]) -> str:
    return str(args.get("operation_id") or f"mcp:{secrets.token_hex(12)}")


async def _call(ctx: McpContext, name: str, **args: Any) -> Any:
    """One control-plane operation, in process or over the HTTP API alike."""
    return await ctx.backend.call(name, group_id=ctx.group_id, **args)


async def _all(ctx: McpContext, name: str, **args: Any) -> list[Any]:
    """Every item of a paged read (pages followed to the end)."""
    items: list[Any] = []
    cursor = None
    while True:
        found = await _call(ctx, name, limit=200, cursor=cursor, **args)
        items += found["items"]
        cursor = found.get("next_cursor")
        if not cursor:
            return items


async def _submit(ctx: McpContext, args: dict[str, Any], command: dict[str, Any],
                  expected: dict[str, Any] | None = None) -> dict[str, Any]:
    receipt: dict[str, Any] = await _call(ctx, "goals.submit", goal_id=str(args["goal_id"]), operation_id=_op_id(args),
                                          command=command, expected=expected or None)
    return receipt


async def _item(ctx: McpContext, goal_id: str, item_id: str) -> dict[str, Any]:
    found: dict[str, Any] = await _call(ctx, "work.get", goal_id=goal_id, item_id=item_id)
    return found


async def _expected(ctx: McpContext, args: dict[str, Any], *, revision: bool = True) -> dict[str, Any]:
    """``expected``: the caller's ``expected_revision``; the claim from ``epoch``/``key`` or this agent's current
    claim on the item (hard mode needs it; soft mode checks it when presented)."""
    expected: dict[str, Any] = {}
    if revision and "expected_revision" in args:
        expected["item_revision"] = args["expected_revision"]
    if "epoch" in args and "key" in args:
        expected["claim"] = {"epoch": args["epoch"], "key": args["key"]}
        return expected
    claim = (await _item(ctx, str(args["goal_id"]), str(args["item_id"]))).get("claim") or {}
    if claim.get("status") == "active" and claim.get("holder") == ctx.agent_id:
        expected["claim"] = {"epoch": args.get("epoch", claim["epoch"]), "key": args.get("key", claim["key"])}
    return expected


def _item_id(receipt: dict[str, Any]) -> str:
    return str(next(c["id"] for c in receipt["changed"] if c["entity"] == "item"))


# ---------------------------------------------------------------- goals


async def goal_create(args: dict[str, Any], ctx: McpContext) -> Any:
    fields: dict[str, Any] = {k: args[k] for k in ("title", "objective", "claim_mode", "subjects") if k in args}
    return await _call(ctx, "goals.create", operation_id=_op_id(args), **fields)


async def goal_list(args: dict[str, Any], ctx: McpContext) -> Any:
    return {"goals": await _all(ctx, "goals.list", status=args.get("status"))}


async def goal_join(args: dict[str, Any], ctx: McpContext) -> Any:
    return await _submit(ctx, args, {"type": "agent.register", "agent_id": ctx.agent_id})


async def subject_set(args: dict[str, Any], ctx: McpContext) -> Any:
    return await _submit(ctx, args, {"type": "subject.set", "name": args["name"], "revision": args["revision"]})


async def budget_spend(args: dict[str, Any], ctx: McpContext) -> Any:
    command = {"type": "budget.spend", "units": args["units"], "note": args["reason"]}
    if "item_id" in args:
        command["item"] = args["item_id"]
    return await _submit(ctx, args, command)


async def goal_status(args: dict[str, Any], ctx: McpContext) -> Any:
    return await _call(ctx, "goals.status", goal_id=str(args["goal_id"]))


async def goal_board(args: dict[str, Any], ctx: McpContext) -> Any:
    return await _call(ctx, "goals.board", goal_id=str(args["goal_id"]))


# ---------------------------------------------------------------- work


async def work_add(args: dict[str, Any], ctx: McpContext) -> Any:
    fields = {k: v for k, v in args.items() if k in ITEM_FIELDS or k == "title"}
    receipt = await _submit(ctx, args, {"type": "work.add", "class": args["class"], **fields})
    return {"item": await _item(ctx, str(args["goal_id"]), _item_id(receipt)), "receipt": receipt}


async def work_list(args: dict[str, Any], ctx: McpContext) -> Any:
    filters = {"status": args.get("status"), "class": args.get("class")}
    return {"items": await _all(ctx, "work.list", goal_id=str(args["goal_id"]), **filters)}


async def work_next(args: dict[str, Any], ctx: McpContext) -> Any:
    goal_id = args.get("goal_id")
    if args.get("claim", False):
        return await _call(ctx, "next.claim", agent_id=ctx.agent_id, goal_id=goal_id, claim=True)
    return await _call(ctx, "next.get", agent_id=ctx.agent_id, goal_id=goal_id)


async def work_claim(args: dict[str, Any], ctx: McpContext) -> Any:
    key = args.get("key") or f"mcp:{ctx.mcp_session or ctx.agent_id}:{args['item_id']}"
    command: dict[str, Any] = {"type": "claim.acquire", "item": args["item_id"], "key": key}
    if "ttl_s" in args:
        command["ttl_s"] = args["ttl_s"]
    return await _submit(ctx, args, command)


async def work_renew(args: dict[str, Any], ctx: McpContext) -> Any:
    expected = await _expected(ctx, args, revision=False)
    return await _submit(ctx, args, {"type": "claim.renew", "item": args["item_id"]}, expected)


async def work_release(args: dict[str, Any], ctx: McpContext) -> Any:
    expected = await _expected(ctx, args, revision=False)
    return await _submit(ctx, args, {"type": "claim.release", "item": args["item_id"]}, expected)


async def work_update(args: dict[str, Any], ctx: McpContext) -> Any:
    action = args["action"]
    command: dict[str, Any] = {"item": args["item_id"]}
    if action == "edit":
        command.update(type="work.update", **{k: args[k] for k in EDIT_FIELDS if k in args})
    elif action == "block":
        if "reason" not in args:
            raise ToolRefusal("invalid_request", "block needs a reason", field="reason")
        command.update(type="work.block", reason=args["reason"])
        if "resume_when" in args:
            command["resume_when"] = args["resume_when"]
    elif action == "defer":
        if "resume_when" not in args:
            raise ToolRefusal("invalid_request", "defer needs resume_when", field="resume_when")
        command.update(type="work.defer", resume_when=args["resume_when"])
        if "reason" in args:
            command["reason"] = args["reason"]
    else:
        command.update(type="work.reopen")
    return await _submit(ctx, args, command, await _expected(ctx, args))


async def work_complete(args: dict[str, Any], ctx: McpContext) -> Any:
    command: dict[str, Any] = {"type": "work.complete", "item": args["item_id"], "continuation": args["continuation"]}
    for name in ("successors", "summary", "spend"):
        if name in args:
            command[name] = args[name]
    return await _submit(ctx, args, command, await _expected(ctx, args))


async def work_supersede(args: dict[str, Any], ctx: McpContext) -> Any:
    replacement = args["replacement"]
    command: dict[str, Any] = {"type": "work.supersede", "item": args["item_id"]}
    if isinstance(replacement, str):
        command["replacement_id"] = replacement
    else:
        command["replacement"] = replacement
    if "reason" in args:
        command["reason"] = args["reason"]
    return await _submit(ctx, args, command, await _expected(ctx, args))


async def acceptance_propose(args: dict[str, Any], ctx: McpContext) -> Any:
    command: dict[str, Any] = {"type": "acceptance.propose"}
    command.update({k: args[k] for k in ("document", "bindings", "note") if k in args})
    return await _submit(ctx, args, command, {"acceptance_revision": args["expected_revision"]})


async def goal_propose(args: dict[str, Any], ctx: McpContext) -> Any:
    names = ("title", "objective", "claim_mode", "budget", "note")
    return await _submit(ctx, args, {"type": "goal.propose", **{k: args[k] for k in names if k in args}})


async def criterion_validate(args: dict[str, Any], ctx: McpContext) -> Any:
    return await _call(ctx, "goals.validate", goal_id=str(args["goal_id"]), criterion_id=str(args["criterion_id"]))


async def gate_ask(args: dict[str, Any], ctx: McpContext) -> Any:
    return await _submit(ctx, args, {"type": "gate.ask", "item": args["item_id"]})


async def evidence_add(args: dict[str, Any], ctx: McpContext) -> Any:
    command: dict[str, Any] = {"type": "evidence.add", "kind": args["kind"], "verdict": args["verdict"]}
    if "item_id" in args:
        command["item"] = args["item_id"]
    for name in ("criterion_ids", "subject", "artifact_revision", "workload", "summary", "details_url", "spend"):
        if name in args:
            command[name] = args[name]
    return await _submit(ctx, args, command)


def _effect(kind: str, names: tuple[str, ...]) -> Callable[[dict[str, Any], McpContext], Awaitable[Any]]:
    async def handler(args: dict[str, Any], ctx: McpContext) -> Any:
        command: dict[str, Any] = {"type": f"effect.{kind}", **{n: args[n] for n in names if n in args}}
        if "item_id" in args:
            command["item"] = args["item_id"]
        return await _submit(ctx, args, command)

    return handler


# ---------------------------------------------------------------- the table rows

_WORK_KINDS = ["advancement", "user_gate", "user_action", "monitor", "blocker"]
_STATUS = {"type": "string", "enum": ["open", "blocked", "deferred", "done"]}
SPEND = {"type": "object", "description": "what this written-back work cost: {units, note?}, recorded in the same "
         "commit", "properties": {"units": {"type": "integer", "minimum": 1}, "note": {"type": "string"}},
         "required": ["units"]}
_CLAIM = {"epoch": {"type": "integer", "minimum": 0}, "key": {"type": "string", "minLength": 1, "maxLength": 160}}

_TOOLS: list[tuple[str, str, dict[str, Any], Any]] = [
    ("goal.create", "Create a goal you will work on (you are registered on it). Returns {goal, receipt}.",
     _schema({"title": S, "objective": {"type": "string"}, "claim_mode": {"type": "string", "enum": ["soft", "hard"]},
              "subjects": {"type": "object"}}, ("title", "objective")), goal_create),
    ("goal.list", "The goals you are registered on, optionally by status (active, paused, closed).",
     _schema({"status": {"type": "string", "enum": ["active", "paused", "closed"]}}), goal_list),
    ("goal.join", "Register yourself on a goal of your group (agent.register). Returns the receipt.",
     _schema({"goal_id": GOAL}, ("goal_id",)), goal_join),
    ("subject.set", "Record a subject's new revision (e.g. after pushing a commit: name 'repo', revision "
     "'git:<sha>'); evidence about older revisions stops counting.",
     _schema({"goal_id": GOAL, "name": S, "revision": S}, ("goal_id", "name", "revision")), subject_set),
    ("budget.spend", "Record units spent on the goal's daily budget; over budget is refused (budget_exceeded).",
     _schema({"goal_id": GOAL, "units": {"type": "integer", "minimum": 1}, "reason": {"type": "string"},
              "item_id": {**ITEM, "description": "the item the units paid for: only once its work is written "
                          "back (its evidence or completion); or send spend with that command"}},
             ("goal_id", "units", "reason")), budget_spend),
    ("goal.status", "The goal's status summary: acceptance and criteria, item counts, what needs a person, "
     "claims, monitors, unsettled effects.", _schema({"goal_id": GOAL}, ("goal_id",)), goal_status),
    ("goal.board", "The goal's board: open (runnable, claimed, gated), blocked, deferred, done.",
     _schema({"goal_id": GOAL}, ("goal_id",)), goal_board),
    ("work.add", "Add a work item (class advancement, user_gate, user_action, monitor or blocker) with its class "
     "fields (a gate needs scope, targets and question; a blocker recovery; a monitor may name the loop_id that "
     "watches). Returns {item, receipt}.",
     _schema({"goal_id": GOAL, "class": {"type": "string", "enum": _WORK_KINDS}, "title": S, **ITEM_FIELDS},
             ("goal_id", "class", "title")), work_add),
    ("work.list", "The goal's work items, optionally by status and class.",
     _schema({"goal_id": GOAL, "status": _STATUS, "class": {"type": "string", "enum": _WORK_KINDS}}, ("goal_id",)),
     work_list),
    ("work.next", "What to do now: deliver (start, continue, readback_effect, revalidate), ask_person, wait (with "
     "wake_when: end your turn until one fires), replan or stop. claim: true also claims a start item.",
     _schema({"goal_id": GOAL, "claim": {"type": "boolean"}}), work_next),
    ("work.claim", "Claim an item (a lease with epoch and key; default key mcp:<session>:<item>, ttl 1800 s).",
     _schema({"goal_id": GOAL, "item_id": ITEM, "key": _CLAIM["key"],
              "ttl_s": {"type": "integer", "minimum": 60, "maximum": 86400}}, ("goal_id", "item_id")), work_claim),
    ("work.renew", "Renew your claim on an item (presents your current claim unless epoch and key are given).",
     _schema({"goal_id": GOAL, "item_id": ITEM, **_CLAIM}, ("goal_id", "item_id")), work_renew),
    ("work.release", "Release your claim on an item.",
     _schema({"goal_id": GOAL, "item_id": ITEM, **_CLAIM}, ("goal_id", "item_id")), work_release),
    ("work.update", "Change an item: action edit (fields), block (reason, resume_when?), defer (resume_when) or "
     "reopen. expected_revision is the item revision you read; a newer one is revision_conflict.",
     _schema({"goal_id": GOAL, "item_id": ITEM, "expected_revision": REV,
              "action": {"type": "string", "enum": ["edit", "block", "defer", "reopen"]}, "title": S,
              "reason": {"type": "string"}, "resume_when": CONDITIONS, **_CLAIM,
              **{k: v for k, v in ITEM_FIELDS.items() if k in EDIT_FIELDS}},
             ("goal_id", "item_id", "expected_revision", "action")), work_update),
    ("work.complete", "Complete an item: continuation no_followup, successor (with successors) or goal. Bound "
     "criteria need applicable passing evidence (acceptance_unmet lists them).",
     _schema({"goal_id": GOAL, "item_id": ITEM, "expected_revision": REV,
              "continuation": {"type": "string", "enum": ["no_followup", "successor", "goal"]},
              "successors": ITEM_IDS, "summary": {"type": "string"}, "spend": SPEND, **_CLAIM},
             ("goal_id", "item_id", "expected_revision", "continuation")), work_complete),
    ("work.supersede", "Replace an item: replacement is an existing open item id or a new item object "
     "({class, title, …}); both are linked in one commit.",
     _schema({"goal_id": GOAL, "item_id": ITEM, "expected_revision": REV,
              "replacement": {"oneOf": [{**ID, "description": "an existing open item's id"},
                                        {"type": "object", "required": ["class", "title"],
                                         "description": "a new item: {class, title, …class fields}"}]}, "reason": {"type": "string"}, **_CLAIM},
             ("goal_id", "item_id", "expected_revision", "replacement")), work_supersede),
    ("acceptance.propose", "Propose a new acceptance contract (you cannot set it): expected_revision is the "
     "acceptance revision you read. It waits on a gate a person approves; the approval applies exactly this "
     "document (refused if the acceptance moved on). Returns the receipt with proposal.gate_id and digest.",
     _schema({"goal_id": GOAL, "expected_revision": {"type": "integer", "minimum": 0,
                                                      "description": "the acceptance revision you revise"},
              "document": {"type": "object", "description": "{criteria: [{id, text, subject?, workload?, "
                           "independent?}]}"},
              "bindings": {"type": "object", "description": "item id -> [criterion ids]"},
              "note": {"type": "string", "description": "why, for the person who decides"}},
             ("goal_id", "expected_revision", "document")), acceptance_propose),
    ("goal.propose", "Propose a change to the goal's title, objective, claim_mode or budget (you cannot change "
     "it): a person's gate approval applies exactly it, refused if those fields changed meanwhile.",
     _schema({"goal_id": GOAL, "title": S, "objective": {"type": "string"},
              "claim_mode": {"type": "string", "enum": ["soft", "hard"]},
              "budget": {"type": "object", "description": "{units_per_day}"},
              "note": {"type": "string", "description": "why, for the person who decides"}}, ("goal_id",)),
     goal_propose),
    ("criterion.validate", "Ask the plane to run a criterion's validator (a script named by the acceptance "
     "contract) on the subject's current revision; it records validator evidence, or reuses the run already "
     "made for this revision. Returns {request_key, attempt, evidence, verdict, reused}.",
     _schema({"goal_id": GOAL, "criterion_id": {"type": "string", "description": "the criterion's id"}},
             ("goal_id", "criterion_id")), criterion_validate),
    ("gate.ask", "Record that you put a gate's question to a person (then wait for gate_resolved:<id>).",
     _schema({"goal_id": GOAL, "item_id": ITEM}, ("goal_id", "item_id")), gate_ask),
    ("evidence.add", "Record evidence (immutable): kind test/check/review/observation/manual, verdict pass/fail/"
     "inconclusive/observed; naming criterion_ids needs subject and artifact_revision (what you examined) and, "
     "if the criterion declares one, the workload {kind, ref} you ran.",
     _schema({"goal_id": GOAL, "item_id": ITEM, "criterion_ids": STRINGS,
              "kind": {"type": "string", "enum": ["test", "check", "review", "observation", "manual"]},
              "subject": S, "artifact_revision": S, "workload": {"type": "object"},
              "verdict": {"type": "string", "enum": ["pass", "fail", "inconclusive", "observed"]},
              "summary": {"type": "string"}, "details_url": {"type": "string"}, "spend": SPEND},
             ("goal_id", "kind", "verdict", "summary")), evidence_add),
    ("effect.intend", "Record an external effect BEFORE making it (request_key is the idempotency key to pass "
     "to the external system). An unknown outcome is never re-sent blindly: read it back first.",
     _schema({"goal_id": GOAL, "request_key": S, "kind": S, "target": {"type": "string"}, "payload_digest": S,
              "item_id": ITEM}, ("goal_id", "request_key", "kind", "target", "payload_digest")),
     _effect("intend", ("request_key", "kind", "target", "payload_digest"))),
    ("effect.settle", "Report what happened to an intended effect: succeeded, failed or unknown (e.g. the "
     "connection was lost after sending).",
     _schema({"goal_id": GOAL, "request_key": S, "attempt": {"type": "integer", "minimum": 1},
              "outcome": {"type": "string", "enum": ["succeeded", "failed", "unknown"]},
              "state": {"type": "string", "enum": ["succeeded", "failed", "unknown"],
                        "description": "older name of outcome"},
              "detail": {"type": "string"}, "external_ref": {"type": "string"}},
             ("goal_id", "request_key", "attempt")),
     _effect("settle", ("request_key", "attempt", "outcome", "state", "detail", "external_ref"))),
    ("effect.watch", "Give an unsettled effect a readback Loop (one of yours): when the Loop learns the outcome "
     "it wakes with {\"readback\": {request_key, attempt, observed, external_ref?}} and the plane records the "
     "readback itself, with no agent turn.",
     _schema({"goal_id": GOAL, "request_key": S, "loop_id": {"type": "string", "description": "the Loop (lp_…)"}},
             ("goal_id", "request_key", "loop_id")),
     _effect("watch", ("request_key", "loop_id"))),
    ("effect.readback", "Record what the external system shows for an effect: present (it happened), absent "
     "(it may be sent again as a new attempt) or unreadable (hold).",
     _schema({"goal_id": GOAL, "request_key": S, "attempt": {"type": "integer", "minimum": 1},
              "observed": {"type": "string", "enum": ["present", "absent", "unreadable"]},
              "detail": {"type": "string"}, "external_ref": {"type": "string"}},
             ("goal_id", "request_key", "attempt", "observed")),
     _effect("readback", ("request_key", "attempt", "observed", "detail", "external_ref"))),
]

TOOL_NAMES = [name for name, *_ in _TOOLS]


def register(table: ToolTable) -> None:
    """Add the control tools to an MCP server's table (docs/decisions-mcp.md)."""
    for name, description, schema, handler in _TOOLS:
        output_schema, annotations = contract(name)
        table.add(McpTool(name=name, description=description, input_schema=schema, handler=handler,
                          output_schema=output_schema, annotations=annotations))
