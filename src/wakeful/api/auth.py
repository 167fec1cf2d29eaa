"""Authentication and scope for the HTTP face: ``Authorization: Bearer wk_<key_id>_<secret>`` (or the dashboard's
session cookie) turned into a principal by ``wakeful.harness.ops.keys.authenticate`` — the key cache (harness.md
§2.1, ≤ 5 s) and the acting-agent lookup live there, shared with ``/mcp`` — and the principals of interfaces.md §1.

An **agent** principal is an ``agent`` key, or a ``group``/``admin`` key with ``X-Wakeful-Agent: agt_…``; a
**person** principal is a ``group``/``admin`` key without that header. Resources outside a key's scope are
``404 not_found`` (never 403); a key lacking the role for a route in its scope is ``403 forbidden``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from wakeful.api.context import harness_of
from wakeful.api.errors import CsrfRequired, Forbidden
from wakeful.api.ui_sessions import COOKIE, CSRF_HEADER, UiSessions
from wakeful.harness import ops
from wakeful.harness.errors import NotFound
from wakeful.harness.principal import Principal
from wakeful.harness.principal import check_agent as check_agent

__all__ = [
    "AdminPrincipal",
    "AnyPrincipal",
    "GroupPrincipal",
    "MemberPrincipal",
    "Principal",
    "authenticate",
    "check_agent",
    "require_admin",
    "require_group",
    "require_member",
]

AGENT_HEADER = "x-wakeful-agent"


def bearer_text(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def session_key(request: Request) -> str | None:
    """The key behind the dashboard's session cookie (interfaces.md §6), or None without a live session.

    A state-changing request with the cookie must carry the session's CSRF token header and, when the browser
    sends ``Origin``, come from this origin — else ``403 csrf_required`` (docs/decisions-ui.md)."""
    sessions: UiSessions | None = getattr(request.app.state, "ui_sessions", None)
    if sessions is None:
        return None
    session = sessions.find(request.cookies.get(COOKIE))
    if session is None:
        return None
    if request.method not in SAFE_METHODS:
        if not session.csrf_ok(request.headers.get(CSRF_HEADER)) or not same_origin(request):
            raise CsrfRequired("a dashboard request that changes state needs the session's X-Wakeful-CSRF header")
    return session.key


def same_origin(request: Request) -> bool:
    """``Origin`` absent (not a browser, or an old one), or naming exactly the host this request was sent to."""
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.headers.get('host', '')}"


async def authenticate(request: Request) -> Principal:
    """``401 unauthorized`` for a missing, malformed, unknown or revoked key (bearer first, then the dashboard's
    session cookie, which stands for the key it was opened with); the rest is ``ops.keys.authenticate``."""
    token = bearer_text(request) or session_key(request)
    return await ops.keys.authenticate(harness_of(request), token, request.headers.get(AGENT_HEADER))


AnyPrincipal = Annotated[Principal, Depends(authenticate)]


# issue 16: the route-level checks are coroutines although they wait for nothing — FastAPI runs a plain function
# dependency in anyio's worker threads, a thread hop on every request (and the first request of a restarted node
# imported anyio's backend and started the pool, on the way to the bench's first listing)
async def require_admin(principal: AnyPrincipal) -> Principal:
    """Admin keys only (a group/agent key gets 403)."""
    if principal.role != "admin":
        raise Forbidden("this route needs an admin key")
    return principal


async def require_member(group_id: str, principal: AnyPrincipal) -> Principal:
    """Any key whose scope covers ``group_id`` (route-level "agent" auth; resources are checked by the route)."""
    return _member(group_id, principal)


async def require_group(group_id: str, principal: AnyPrincipal) -> Principal:
    """A group or admin key of this group ("group" auth); an agent key in the group gets 403."""
    principal = _member(group_id, principal)
    if principal.role == "agent":
        raise Forbidden("this route needs a group or admin key")
    return principal


def _member(group_id: str, principal: Principal) -> Principal:
    if not principal.covers_group(group_id):
        raise NotFound(f"group {group_id[:40]} not found")
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]
MemberPrincipal = Annotated[Principal, Depends(require_member)]
GroupPrincipal = Annotated[Principal, Depends(require_group)]


