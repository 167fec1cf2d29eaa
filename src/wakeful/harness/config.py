"""Harness configuration: data directory, store URL and the limits of harness.md §20.

Only the parts of interfaces.md §7 the harness core needs; the faces extend it with their own sections.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["Config", "Limits", "default_data_dir"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """harness.md §20 (config keys ``limits.*``)."""

    loops_per_agent: int = 20
    loops_per_group: int = 100
    notify_per_window: int = 6
    notify_window_s: int = 600
    budget_pause_after_s: int = 3600
    reloads_per_hour: int = 3
    pending_events: int = 32
    ack_deadline_s: int = 900


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """interfaces.md §7: ``data_dir``, ``store.url``, ``runtime.max_objects`` and ``limits.*``."""

    data_dir: Path = field(default_factory=lambda: default_data_dir())
    store_url: str | None = None
    max_objects: int = 10_000
    limits: Limits = field(default_factory=Limits)

    @property
    def effective_store_url(self) -> str:
        """``store.url``, defaulting to the SQLite file in the data directory (§7)."""
        return self.store_url or f"sqlite:///{self.data_dir / 'wakeful.db'}"

    @property
    def artifact_dir(self) -> Path:
        """The verified ELF cache of harness.md §2.4."""
        return self.data_dir / "artifacts"

    def with_overrides(self, **changes: Any) -> Config:
        """A copy with the non-None keyword values replaced (command-line flags over file values)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# interfaces.md §7: $WAKEFUL_HOME, else $XDG_DATA_HOME/wakeful, else ~/.local/share/wakeful
def default_data_dir() -> Path:
    """Where the harness keeps its files when nothing else is configured."""
    home = os.environ.get("WAKEFUL_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg) / "wakeful"
    return Path.home() / ".local" / "share" / "wakeful"
