"""The OpenAPI document of the face (interfaces.md §2, issue 19): FastAPI's document, post-processed so that it
says what the app really does.

- **operationId** = ``<area>_<action>``: ``<area>`` is the router module's name (``routes_loops`` → ``loops``),
  ``<action>`` the route function's name with the area's noun taken out (``create_loop`` → ``loops_create``,
  ``list_events`` → ``loops_list_events``). Renaming a route function renames its operation; ids are unique
  (checked here and by a test).
- **security**: the bearer scheme on every operation except those of ``NO_KEY`` (interfaces.md §2.2 auth "none").
- **statuses**: every status a route can answer, each with the ``Error`` body, derived from the one code→status
  table (``api/errors.STATUS``) and what the route is: any route 400/503; with a key 401/403; with a path
  parameter 404; with a body 413/415; plus the codes a route is known to refuse with (``REFUSALS``).
- no FastAPI 422 anywhere (the app answers ``400 invalid_request``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from wakeful.api.errors import status_for
from wakeful.api.schemas import COMPONENTS, success_schema

__all__ = ["NO_KEY", "REFUSALS", "build_openapi", "operation_id", "statuses_of"]

# interfaces.md §2.2 auth "none": the liveness probe and the webhook intake by its secret URL
NO_KEY = frozenset({"/healthz", "/v1/loop-webhooks/{secret}"})

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "stable code (interfaces.md §2.1)"},
        "message": {"type": "string"},
        "field": {"type": "string", "description": "the dotted request field at fault, when there is one"},
        "retry_after_s": {"type": "integer", "description": "also sent as Retry-After"},
        "request_id": {"type": "string"},
    },
    "additionalProperties": True,
}

# codes every operation of a kind can answer (their statuses come from the one table)
_ANY = ("invalid_request", "unavailable")
_KEYED = ("unauthorized", "forbidden")
_PATH = ("not_found",)
_BODY = ("payload_too_large", "json_required")

_CREATES = ("conflict", "quota_exceeded")
_LOOP_STATE = ("loop_not_active", "already_active")
_CONTROL_WRITE = ("revision_conflict", "illegal_transition", "claimed_by_other", "operation_id_conflict",
                  "budget_exceeded")
# the codes a route refuses with beyond its kind's, by operationId (harness.md §2, interfaces.md §2.2); the
# fuzz test (tests/integration/api/test_api_fuzz.py, status_code_conformance) finds a status missing here
REFUSALS: dict[str, tuple[str, ...]] = {
    "admin_create_group": _CREATES,
    "admin_create_key": _CREATES,
    "agents_create": _CREATES,
    "agents_archive": ("conflict",),
    "agents_unarchive": ("conflict",),
    "agents_create_session": ("agent_archived", *_CREATES),
    "agents_delete_session": ("session_in_use",),
    "agents_mark_handled": ("conflict",),
    "artifacts_build": ("agent_archived", "quota_exceeded", "busy", "compiler_unavailable"),
    "artifacts_upload": ("agent_archived", "quota_exceeded", "artifact_invalid"),
    "loops_create": ("agent_archived", "artifact_invalid", "session_in_use", *_CREATES, "busy"),
    "loops_pause": _LOOP_STATE,
    "loops_resume": _LOOP_STATE,
    "loops_webhook": ("loop_not_active",),
    "loops_set_webhook_verifier": ("loop_not_active",),
    "loops_retry_pending": _LOOP_STATE,
    "loops_discard_pending": _LOOP_STATE,
    "scripts_run": ("busy", "compiler_unavailable"),
    "decide": ("conflict", "rate_limited"),
    "control_create_goal": _CONTROL_WRITE,
    "control_submit_command": _CONTROL_WRITE,
    "control_validate_criterion": _CONTROL_WRITE,
    "control_next_claim": _CONTROL_WRITE,
}


def _area(route: APIRoute) -> str:
    module = getattr(route.endpoint, "__module__", "") or ""
    name = module.rsplit(".", 1)[-1]
    return name.removeprefix("routes_")


def operation_id(route: APIRoute) -> str:
    """``<area>_<action>`` (module docstring)."""
    area = _area(route)
    noun = area.removesuffix("s")
    words = [w for w in route.name.split("_") if w not in (area, noun)]
    return "_".join([area, *words]) if words else area


def _has_body(route: APIRoute) -> bool:
    return route.body_field is not None or bool((route.methods or set()) & {"POST", "PUT", "PATCH"})


def statuses_of(route: APIRoute, path: str, op_id: str) -> dict[int, list[str]]:
    """Status → the codes that give it, for one route."""
    codes = list(_ANY)
    if path not in NO_KEY:
        codes += _KEYED
    if "{" in path:
        codes += _PATH
    if _has_body(route):
        codes += _BODY
    codes += REFUSALS.get(op_id, ())
    out: dict[int, list[str]] = {}
    for code in codes:
        out.setdefault(status_for(code), [])
        if code not in out[status_for(code)]:
            out[status_for(code)].append(code)
    return out


def _bare(schema: dict[str, Any]) -> bool:
    """FastAPI's schema of a ``dict[str, Any]`` answer: an object that names no field."""
    return not any(key in schema for key in ("properties", "$ref", "anyOf", "items"))


def _error_response(codes: list[str]) -> dict[str, Any]:
    return {"description": "refused: " + ", ".join(f"`{c}`" for c in codes),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _routes(app: FastAPI) -> dict[tuple[str, str], APIRoute]:
    out: dict[tuple[str, str], APIRoute] = {}
    for context in iter_route_contexts(app.routes):  # FastAPI >= 0.16x wraps included routers
        route = context.original_route
        if isinstance(route, APIRoute) and route.include_in_schema:
            for method in route.methods or ():
                out[(route.path_format, method.lower())] = route
    return out


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The document (module docstring); raises ``ValueError`` on a duplicate operationId (a naming bug)."""
    doc = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
    bearer = {"type": "http", "scheme": "bearer", "description": "wk_<key_id>_<secret> (harness.md §2.1)"}
    components = doc.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = bearer
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    schemas.update(COMPONENTS)
    for schema_name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(schema_name, None)
    routes = _routes(app)
    seen: dict[str, str] = {}
    for path, item in doc.get("paths", {}).items():
        for method, operation in item.items():
            route = routes.get((path, method))
            if route is None:
                continue
            _describe(operation, route, path, f"{method.upper()} {path}", seen)
    return doc


def _describe(operation: dict[str, Any], route: APIRoute, path: str, where: str, seen: dict[str, str]) -> None:
    op_id = operation_id(route)
    if op_id in seen:
        raise ValueError(f"operationId {op_id!r} of {where} is also {seen[op_id]}")
    seen[op_id] = where
    operation["operationId"] = op_id
    if path in NO_KEY:
        operation.pop("security", None)
    else:  # "Try it out" in /docs sends the key typed into "Authorize"
        operation["security"] = [{"bearer": []}]
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    for status, answer in responses.items():
        content = answer.get("content", {}).get("application/json")
        if status.startswith("2") and content is not None and _bare(content.get("schema") or {}):
            content["schema"] = success_schema(op_id)  # documentation only: the answer is not filtered
    for status, codes in sorted(statuses_of(route, path, op_id).items()):
        responses.setdefault(str(status), _error_response(codes))
