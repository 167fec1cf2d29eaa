"""Estimated Python memory of guest values, for the handle accounting of sdk.md §5 (decisions-runtime-helpers.md,
"Handle memory"). A value's cost is computed once, when its ``Json`` box is made (parse, copy, set, push),
from counts taken at C speed on the compact encoding the box was sized from; nothing walks the objects.

The constants are bytes on CPython 3.11, 64-bit, where pymalloc rounds every block up to 16 bytes; they were
calibrated against RSS (tests/integration/runtime_core/test_runtime_core_memory_rss.py keeps them honest).
A value is charged as if it owned all its parts (sdk.md §5: every handle owns an independent value), so parts
shared between boxes only make the accounting conservative.
"""

from __future__ import annotations

import sys

__all__ = [
    "DICT", "EMPTY", "FILLED_DICT", "FILLED_LIST", "FLAT_EXACT", "HANDLE", "ITEM", "MEMBER", "NUMBER", "WIDEST",
    "WIDE_STR", "bytes_cost", "estimate", "flat_cost", "str_cost",
]

HANDLE = 160  # a handle: the Json box (5 slots), its number and its entry in the table
BYTES_HEAD = 48  # a bytes object's header, rounded
EMPTY = 64  # {} or [] (no table, no item array)
DICT = 160  # a non-empty dict with its smallest table (up to 5 members)
MEMBER = 24  # each member's share of a dict's table: index, entry and growth slack
LIST = 80  # a non-empty list: the object and its item array's header
ITEM = 9  # each element's slot: 8 bytes plus append over-allocation
FILLED_DICT, FILLED_LIST = DICT - EMPTY, LIST - EMPTY  # what the first member or element adds
STR = 56  # an ASCII str: header, terminator and rounding
WIDE_STR = 80  # a non-ASCII str's header
NUMBER = 32  # a float, or an int outside the interpreter's small-int cache (-5..256)
WIDEST = 4  # bytes per character of the widest str (UCS-4): the bound used when the width is unknown
FLAT_EXACT = 1024  # flat values encoded this large or larger are estimated from their encoding

_COMPACT_ASCII = sys.getsizeof("") - 1  # 48: header of an ASCII str, terminator excluded
_COMPACT = sys.getsizeof("\xe9") - 2  # 72: header of a non-ASCII str
# Small ints the decoder returns from the interpreter's cache: numbers of one or two digits (0..99). In a
# flat encoding every delimiter becomes "," (doubled, so neighbouring numbers do not share one), every
# digit "d" and any other number character "x"; then ",d," and ",dd," are exactly those numbers.
_DIGITS = bytes.maketrans(b"0123456789[]{}:-+.eE", b"dddddddddd,,,,,xxxxx")


def str_cost(text: str) -> int:
    """The exact allocation of one str (O(1): its size follows from its length and character width)."""
    return (sys.getsizeof(text) + 15) & ~15


def bytes_cost(blob: bytes) -> int:
    """A bytes handle's value: header plus data."""
    return BYTES_HEAD + len(blob)


def _width(text: str) -> int:
    """Bytes per character of a non-ASCII str (1, 2 or 4), from its size."""
    return (sys.getsizeof(text) - _COMPACT) // (len(text) + 1)


def estimate(encoded: bytes, flat: bytes, strings: int, nodes: int) -> int:
    """Cost of the value whose compact encoding is ``encoded``.

    ``flat`` is ``encoded`` with each of its ``strings`` strings (keys included) replaced by one byte that is
    neither a bracket, a comma, a colon, a digit, ``a`` nor ``u``; ``nodes`` counts the value's nodes. Outside
    strings only ``true``/``null`` hold a ``u`` and only ``false`` an ``a``, and every ``:`` ends a key.
    """
    members = flat.count(b":")
    empty_dicts, empty_lists = flat.count(b"{}"), flat.count(b"[]")
    dicts, lists = flat.count(b"{"), flat.count(b"[")
    literals = flat.count(b"u") + flat.count(b"a")
    numbers = nodes - dicts - lists - (strings - members) - literals
    if numbers > 0 and nodes > 1:
        marks = flat.translate(_DIGITS).replace(b",", b",,")
        numbers -= marks.count(b",d,") + marks.count(b",dd,")
    outside = len(flat) - strings  # bytes that are not in a string (all ASCII)
    if encoded.isascii():
        text_cost = STR * strings + len(encoded) - outside - 2 * strings
    else:
        text = encoded.decode("utf-8")
        text_cost = WIDE_STR * strings + (len(text) - outside - 2 * strings) * _width(text)
    return (EMPTY * (empty_dicts + empty_lists) + DICT * (dicts - empty_dicts) + MEMBER * members
            + LIST * (lists - empty_lists) + ITEM * (nodes - 1 - members) + NUMBER * numbers + text_cost)


def flat_cost(value: object, kind: type, size: int) -> int:
    """A bound on the cost of a scalar or of a dict/list of scalars encoded in ``size`` bytes (< FLAT_EXACT).

    Strings are exact for a scalar; in a container every string is charged at the widest character width
    and every member value as a string, so small values are never under-counted and cost no walk.
    """
    if kind is str:
        return str_cost(value)  # type: ignore[arg-type]
    if kind is dict:
        count = len(value)  # type: ignore[arg-type]
        return DICT + count * (MEMBER + 2 * STR) + WIDEST * size if count else EMPTY
    if kind is list:
        count = len(value)  # type: ignore[arg-type]
        return LIST + count * (ITEM + STR) + WIDEST * size if count else EMPTY
    return NUMBER if kind is int or kind is float else 0
