"""Dashboard sessions and one-time codes (interfaces.md §6) on an injected clock: 8 h sessions, 10-minute codes
redeemable once, CSRF comparison, bounded memory."""

from __future__ import annotations

import pytest

from wakeful.api import ui_sessions
from wakeful.api.ui_sessions import CODE_TTL_S, UiSessions


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_a_session_lasts_its_hours_and_then_is_gone() -> None:
    clock = Clock()
    sessions = UiSessions(8, clock)
    s = sessions.open("wk_a_b")
    assert sessions.find(s.id) == s and s.key == "wk_a_b" and s.id != s.csrf
    clock.t += 8 * 3600 - 1
    assert sessions.find(s.id) is not None
    clock.t += 1
    assert sessions.find(s.id) is None
    assert sessions.find(None) is None and sessions.find("") is None and sessions.find("x" * 101) is None


def test_csrf_token_must_match_exactly() -> None:
    s = UiSessions(1).open("k")
    assert s.csrf_ok(s.csrf)
    assert not s.csrf_ok(None) and not s.csrf_ok("") and not s.csrf_ok(s.csrf + "x") and not s.csrf_ok(s.csrf[:-1])


def test_a_code_is_redeemed_once_within_ten_minutes() -> None:
    clock = Clock()
    sessions = UiSessions(8, clock)
    code = sessions.issue_code("wk_admin")
    assert sessions.redeem(code) == "wk_admin"
    assert sessions.redeem(code) is None  # single use
    late = sessions.issue_code("wk_admin")
    clock.t += CODE_TTL_S
    assert sessions.redeem(late) is None
    assert sessions.redeem("") is None and sessions.redeem("nope") is None


def test_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui_sessions, "MAX_SESSIONS", 3)
    monkeypatch.setattr(ui_sessions, "MAX_CODES", 2)
    sessions = UiSessions(1)
    opened = [sessions.open(f"k{i}") for i in range(5)]
    assert [sessions.find(s.id) is not None for s in opened] == [False, False, True, True, True]
    codes = [sessions.issue_code(f"k{i}") for i in range(3)]
    assert [sessions.redeem(c) for c in codes] == [None, "k1", "k2"]
