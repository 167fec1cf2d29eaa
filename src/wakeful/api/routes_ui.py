"""The web dashboard (interfaces.md §6) under ``/ui/``: the login form and the one-time demo link, the session
the page's script reads its CSRF token from, and the static page shell, CSS and script shipped as package data.

A thin face: every page's data comes from the JSON API (``/v1/…``) with the session cookie standing for the key
(``api/auth.session_key``); nothing here reads the store except verifying the key (``ops.keys.known``, through the node's key cache).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from wakeful.api.auth import Principal, authenticate, same_origin
from wakeful.api.context import harness_of
from wakeful.api.errors import CsrfRequired, Unauthorized
from wakeful.api.ui_sessions import COOKIE, CSRF_HEADER, UiSessions
from wakeful.harness import ops

__all__ = ["ASSETS", "install_ui", "router", "sessions_of"]

ASSETS = Path(__file__).parent / "ui"
router = APIRouter(include_in_schema=False)
# no inline script or style anywhere: the page's own files only, nothing from elsewhere (works offline)
_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make browsers send Origin: null
    "cache-control": "no-store",
}


def install_ui(app: FastAPI, session_hours: int) -> None:
    """Mount the dashboard on ``app`` (``ui.enabled``); sessions last ``ui.session_hours``."""
    app.state.ui_sessions = UiSessions(session_hours)
    app.mount("/ui/static", StaticFiles(directory=ASSETS / "static"), name="ui-static")  # before the shell's path
    app.include_router(router)


def sessions_of(app: Any) -> UiSessions:
    """The app's dashboard sessions (``wakeful serve --demo`` issues its login code here)."""
    sessions: UiSessions = app.state.ui_sessions
    return sessions


def _page(name: str, status: int = 200) -> Response:
    return FileResponse(ASSETS / name, status_code=status, media_type="text/html", headers=_HEADERS)


def _see(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers=_HEADERS)


def _signed_in(request: Request, key: str, target: Response) -> Response:
    session = sessions_of(request.app).open(key)
    # interfaces.md §6: HttpOnly, SameSite=Strict, a server-side session of ui.session_hours
    target.set_cookie(COOKIE, session.id, max_age=int(sessions_of(request.app).session_s), path="/",
                      httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return target


@router.get("/")
@router.get("/ui")
async def ui_root() -> Response:
    """``/`` and ``/ui`` lead to the dashboard (a new user's first try after ``wakeful serve --demo``)."""
    return _see("/ui/")


@router.get("/ui/login")
async def login_page(request: Request, code: str | None = None) -> Response:
    """The login form; with ``?code=`` the demo's one-time link (10 minutes, once)."""
    if code is None:
        return _page("login.html")
    key = sessions_of(request.app).redeem(code)
    if key is None or not await ops.keys.known(harness_of(request), key):
        return _see("/ui/login?failed=code")
    # a page that moves on by itself: the cookie is then sent by a same-site navigation (SameSite=Strict)
    return _signed_in(request, key, _page("signed-in.html"))


@router.post("/ui/login")
async def login(request: Request) -> Response:
    """The login form's POST (``key=wk_…``, form-encoded): a session cookie and on to the overview."""
    if not same_origin(request):
        raise CsrfRequired("the login form must be posted from this dashboard")
    body = (await request.body()).decode("utf-8", "replace")
    key = (urllib.parse.parse_qs(body).get("key") or [""])[0].strip()
    if not key or not await ops.keys.known(harness_of(request), key):
        return _see("/ui/login?failed=key")
    return _signed_in(request, key, _see("/ui/"))


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    sessions = sessions_of(request.app)
    session = sessions.find(request.cookies.get(COOKIE))
    if session is not None:
        if not session.csrf_ok(request.headers.get(CSRF_HEADER)):
            raise CsrfRequired("signing out needs the session's X-Wakeful-CSRF header")
        sessions.close(session.id)
    out = Response(status_code=204)
    out.delete_cookie(COOKIE, path="/")
    return out


@router.get("/ui/session")
async def session_info(request: Request) -> JSONResponse:
    """The page's script reads who it is and its CSRF token here (never the key)."""
    session = sessions_of(request.app).find(request.cookies.get(COOKIE))
    if session is None:
        raise Unauthorized("not signed in to the dashboard")
    principal: Principal = await authenticate(request)
    return JSONResponse({"csrf": session.csrf, "expires_ms": int(session.expires_s * 1000),
                         "principal": {"role": principal.role, "kind": principal.kind, "key_id": principal.key_id,
                                       "group_id": principal.group_id, "agent_id": principal.agent_id}},
                        headers={"cache-control": "no-store"})


# interfaces.md §6 pages: one shell; the script draws the page the path names
@router.get("/ui/{page:path}")
async def shell(page: str) -> Response:
    return _page("index.html")
