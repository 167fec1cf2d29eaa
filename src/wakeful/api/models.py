"""``Body``: the base of every JSON request model of the face — unknown fields refused, and no string (or list
of strings) may hold U+0000, which PostgreSQL text cannot store (a ``400 invalid_request`` with the field,
never a driver error). JSON-valued fields (``metadata``, ``config``, ``limits``) are stored as JSON text, where
``\\u0000`` stays an escape, so they are not checked.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["Body", "check_text"]


def check_text(value: Any) -> Any:
    """Raise ``ValueError`` when ``value`` is a string, or a list of strings, holding U+0000."""
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("must not contain U+0000")
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str) and "\x00" in item:
                raise ValueError("must not contain U+0000")
    return value


class Body(BaseModel):
    """Base request model (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return check_text(value)
