"""Dashboard sessions (interfaces.md §6 "Login"): server-side sessions named by an ``HttpOnly``, ``SameSite=Strict``
cookie, each holding the API key it was opened with and a CSRF token, and one-time login codes for the demo link.

Kept in this node's memory only: a restart (or another node) asks the person to sign in again. The key is verified
through the node's key cache on every request, so a revoked key ends its sessions within the cache's 5 s.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["COOKIE", "CSRF_HEADER", "CODE_TTL_S", "UiSession", "UiSessions"]

COOKIE = "wakeful_ui"
CSRF_HEADER = "x-wakeful-csrf"
CODE_TTL_S = 600  # interfaces.md §6: the demo's login link is valid 10 minutes, once
MAX_SESSIONS = 10_000  # the oldest session is dropped beyond this (memory stays bounded)
MAX_CODES = 100


@dataclass(frozen=True, slots=True)
class UiSession:
    id: str
    key: str  # the API key text; never sent back to the browser
    csrf: str
    expires_s: float

    def csrf_ok(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())


class UiSessions:
    """Open, find and close sessions; issue and redeem one-time login codes."""

    def __init__(self, session_hours: int = 8, clock: Callable[[], float] = time.time) -> None:
        self.session_s = session_hours * 3600
        self._now = clock
        self._sessions: OrderedDict[str, UiSession] = OrderedDict()
        self._codes: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def open(self, key: str) -> UiSession:
        session = UiSession(secrets.token_urlsafe(32), key, secrets.token_urlsafe(32), self._now() + self.session_s)
        self._sessions[session.id] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def find(self, session_id: str | None) -> UiSession | None:
        if not session_id or len(session_id) > 100:
            return None
        session = self._sessions.get(session_id)
        if session is not None and session.expires_s <= self._now():
            del self._sessions[session_id]
            return None
        return session

    def close(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def issue_code(self, key: str) -> str:
        """A login code for ``/ui/login?code=…``: valid ``CODE_TTL_S`` seconds, redeemable once."""
        code = secrets.token_urlsafe(24)
        self._codes[code] = (key, self._now() + CODE_TTL_S)
        while len(self._codes) > MAX_CODES:
            self._codes.popitem(last=False)
        return code

    def redeem(self, code: str) -> str | None:
        """The key behind a code, consuming the code; None for an unknown, used or expired code."""
        found = self._codes.pop(code, None) if 0 < len(code) <= 100 else None
        if found is None or found[1] <= self._now():
            return None
        return found[0]
