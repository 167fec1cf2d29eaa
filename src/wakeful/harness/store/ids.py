"""Ids of durable rows: a type prefix plus a ULID in lowercase Crockford base32 (harness.md §1).

Also the fixed-length API key id (``key_`` + 12 base32 chars, §2.1). Ids are never reused.
"""

from __future__ import annotations

import secrets
import time

__all__ = ["PREFIXES", "is_id", "lookup_text", "new_id", "new_key_id", "shown"]

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase
_ALPHABET_SET = frozenset(_ALPHABET)
PREFIXES = ("grp", "key", "agt", "ses", "msg", "lp", "node")


def _b32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


_last = [-1, 0]  # [ms, random part] of the previous ULID made by this process


# harness.md §1: a ULID = 48-bit millisecond time + 80 random bits, 26 base32 chars; ids made in the same
# millisecond increase (monotonic ULID), so they sort in creation order
def ulid(now_ms: int | None = None) -> str:
    ms = (int(time.time() * 1000) if now_ms is None else now_ms) & ((1 << 48) - 1)
    rand = _last[1] + 1 if ms == _last[0] and _last[1] + 1 < (1 << 80) else secrets.randbits(79)
    _last[0], _last[1] = ms, rand
    return _b32(ms, 10) + _b32(rand, 16)


def new_id(prefix: str, now_ms: int | None = None) -> str:
    """``<prefix>_<ulid>``, e.g. ``lp_01jd…``."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{ulid(now_ms)}"


# harness.md §2.1: key_ + 12 base32 chars (fixed length, so key text splits by position)
def new_key_id() -> str:
    return "key_" + _b32(secrets.randbits(60), 12)


def is_id(value: object, prefix: str) -> bool:
    """Whether ``value`` looks like an id of this type (cheap check before a lookup)."""
    if not isinstance(value, str) or not value.startswith(prefix + "_"):
        return False
    body = value[len(prefix) + 1 :]
    want = 12 if prefix == "key" else 26
    return len(body) == want and _ALPHABET_SET.issuperset(body)  # (one C call, not a generator per char)


def lookup_text(value: object, *, limit: int = 400) -> str | None:
    """``value`` when it can name a row (a string of at most ``limit`` chars), else None: hostile ids of other
    types or sizes, or holding U+0000 (no text column can store it), are "not found" without reaching the driver."""
    return value if isinstance(value, str) and len(value) <= limit and "\x00" not in value else None


def shown(value: object) -> str:
    """An id as quoted in an error message (at most 80 chars)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
