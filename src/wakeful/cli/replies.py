"""The scripted host of `wakeful run --host-replies FILE` (interfaces.md §4.2).

FILE maps a capability name to its replies, consumed in order per capability; the last one repeats. The shape and
the answering live in ``wakeful.runtime.scripted`` (shared with MCP ``loop.test``); here a bad FILE is a usage
error (exit code 2).
"""

from __future__ import annotations

from pathlib import Path

from wakeful.cli.output import UsageError
from wakeful.errors import InvalidParams
from wakeful.runtime import LOOP_BUILTINS, Reply, scripted

__all__ = ["LOOP_BUILTINS", "HostReplies", "Reply"]


class HostReplies(scripted.HostReplies):
    """``scripted.HostReplies`` read from a file, its problems raised as ``UsageError``."""

    @classmethod
    def load(cls, path: Path | None) -> HostReplies:
        """Read FILE; no FILE means every call is `not_scripted`. Raises ``UsageError`` for a bad FILE."""
        if path is None:
            return cls()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read host replies {path}: {exc}") from exc
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, *, source: str = "host replies") -> HostReplies:
        """Validate the FILE shape of interfaces.md §4.2."""
        try:
            return cls(scripted.HostReplies.parse(text, source=source).replies)
        except InvalidParams as exc:
            raise UsageError(exc.message) from exc
