"""Counting the calls of one module-level function in a test (a real function, wrapped: not a double)."""

from __future__ import annotations

from typing import Any

import pytest


def record_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Wrap ``module.name`` so each call's first argument is appended to the returned list; the call still runs."""
    calls: list[Any] = []
    real = getattr(module, name)

    def recorded(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return real(first, *args, **kwargs)

    monkeypatch.setattr(module, name, recorded)
    return calls
