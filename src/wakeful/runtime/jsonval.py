"""Strict JSON for guests and the protocol: RFC 8259 parsing, compact encoding and the limits of sdk.md §6.
Values are plain Python objects; a checked value travels in a ``Json`` box with its size, nodes and depth.

Error tree (all under ``wakeful.errors.InvalidParams``)::

    JsonError            invalid_request (INVALID_PARAMS)  any refusal
    ├── JsonSyntaxError  invalid_json (PARSE_ERROR)        not RFC 8259 text (NaN, lone surrogates, 1e400, bad UTF-8, …)
    ├── JsonLimitError   invalid_request (INVALID_PARAMS)  valid JSON over a limit (size, depth, nodes; RecursionError)
    └── JsonTypeError    invalid_request (INVALID_PARAMS)  a Python object that is not a JSON value (tuple, NaN, int key, …)

Values held in ``Json`` boxes are never mutated in place: builders make a shallow copy and replace the
box, so boxes may share sub-values (sdk.md §5 allows sharing immutable parts).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any, NamedTuple, TypeAlias

from wakeful.errors import InvalidParams, WakefulError
from wakeful.runtime import footprint

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "Json",
    "JsonError",
    "appended",
    "JsonLimitError",
    "JsonSyntaxError",
    "JsonTypeError",
    "JsonValue",
    "check",
    "dumps",
    "encode",
    "encode_within",
    "equal",
    "from_python",
    "measure",
    "parse",
    "parse_document",
    "parse_plain",
    "parse_value",
    "str_size",
    "part_of",
    "with_member",
]

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"

# sdk.md §6: limits of a valid value
MAX_BYTES = 16384
MAX_DEPTH = 32
MAX_NODES = 4096

# sdk.md §6 number rule: integer literals in [-2^63, 2^64-1] are integers
INT_MIN = -(1 << 63)
INT_MAX = (1 << 64) - 1
_INT_TEXT_MAX = 21  # "-9223372036854775808" has 20 chars, "18446744073709551615" 20; anything longer is a float
_STACK_DEPTH = 800  # walks stop here, well inside the interpreter's recursion limit


class JsonError(InvalidParams):
    """A JSON text or value was refused."""


class JsonSyntaxError(JsonError):
    """The text is not strict RFC 8259 JSON (a guest sees SF_INVALID, a protocol frame -32700)."""

    code = "invalid_json"


class JsonLimitError(JsonError):
    """The value is valid JSON but over the limits of sdk.md §6 (a guest sees SF_LIMIT)."""


class JsonTypeError(JsonError):
    """A Python object handed in as a value is not a JSON value."""


class Json(NamedTuple):
    """A JSON value with its compact encoded size, node count, deepest node depth (sdk.md §6) and ``cost``,
    the estimated bytes of its Python objects (``footprint``; what a handle holding it is charged, sdk.md §5).

    Immutable; a named tuple because several boxes are made per event and a frozen dataclass's ``__init__``
    costs five times as much (benchmarks.md §1.8 fan-out).
    """

    value: JsonValue
    size: int
    nodes: int
    depth: int
    cost: int

    def within_limits(self) -> bool:
        return self.size <= MAX_BYTES and self.nodes <= MAX_NODES and self.depth <= MAX_DEPTH


class _Refused(WakefulError):
    """Raised from inside ``json.loads`` hooks; turned into ``JsonSyntaxError``."""


class _Over(WakefulError):
    """Raised by the walk when a cap is crossed."""


# ---------------------------------------------------------------- parsing (sdk.md §6, §6.1)


# sdk.md §6.1: NaN, Infinity and -Infinity are not JSON
def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON value")


# sdk.md §6.1: no non-finite floats (1e400 would become inf)
def _parse_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _Refused(f"number {text[:32]} is out of range")
    return number


# sdk.md §6 number rule; §6.1: never call int() on more than 4,300 digits
def _parse_int(text: str) -> int | float:
    if len(text) <= _INT_TEXT_MAX:
        number = int(text)
        if INT_MIN <= number <= INT_MAX:
            return number
    return _parse_float(text)


_DECODER = json.JSONDecoder(
    parse_float=_parse_float, parse_int=_parse_int, parse_constant=_refuse_constant, strict=True
)


def parse_value(text: str | bytes) -> JsonValue:
    """Parse strict JSON text (bytes must be UTF-8) into a fresh value; no limits, no surrogate check.

    Raises ``JsonSyntaxError``, or ``JsonLimitError`` when the nesting exhausts the interpreter stack.
    """
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonSyntaxError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        value: JsonValue = _DECODER.decode(text)
    except RecursionError:  # sdk.md §6.1: deep nesting is over the limits, never a traceback
        raise JsonLimitError("JSON nested too deeply") from None
    except _Refused as exc:
        raise JsonSyntaxError(str(exc)) from None
    except ValueError as exc:  # JSONDecodeError and friends
        raise JsonSyntaxError(f"invalid JSON: {exc}") from None
    return value


def parse_plain(text: str) -> JsonValue:
    """``parse_value`` for text that is exactly one JSON value with no whitespace around it, through the C
    scanner alone (no wrapper frames, no whitespace matches). Raises ``ValueError`` for anything else
    (a refusal, whitespace, trailing data): the caller then takes ``parse_value`` for the exact error."""
    value, end = _SCAN(text, 0)
    if end != len(text):
        raise ValueError("not exactly one value")
    return value  # type: ignore[no-any-return]


_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


# runtime-protocol.md §4 step 1 and §4.1: any refusal of a frame is -32700, deep nesting included
def parse_document(text: str | bytes) -> JsonValue:
    """Parse a whole protocol frame strictly (no value limits, no walk); every refusal is a syntax error.

    Lone surrogates are found by encoding the result once (C speed), so a frame costs about two passes.
    """
    try:
        value = parse_value(text)
        _encode_checked(value)
    except JsonError as exc:
        raise JsonSyntaxError(exc.message) from None
    return value


def parse(text: str | bytes, *, limits: bool = True) -> Json:
    """Parse strict JSON text into a checked ``Json`` box (sdk.md §6).

    Syntax is checked before limits: a lone surrogate escape is a ``JsonSyntaxError`` even in a value
    over the limits (except nesting deep enough to exhaust the parser, which is a ``JsonLimitError``).
    """
    value = parse_value(text)
    try:
        encoded = _encode_checked(value)
    except JsonTypeError as exc:
        raise JsonSyntaxError(str(exc)) from None
    box = _box(value, encoded)
    if limits:
        check(box)
    return box


# ---------------------------------------------------------------- encoding (sdk.md §6 Encoding)

# sdk.md §6.1: compact, UTF-8 unescaped, no NaN
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=True)


def _encode_checked(value: JsonValue) -> bytes:
    try:
        return _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        raise JsonTypeError("string contains a lone surrogate") from None
    except RecursionError:
        raise JsonLimitError("JSON nested too deeply") from None
    except (ValueError, TypeError) as exc:
        raise JsonTypeError(f"not a JSON value: {exc}") from None


def str_size(text: str) -> int:
    """Encoded size of a string: printable ASCII without quote or backslash is its length + 2, else encode."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return len(text) + 2
    return len(_encode_checked(text))


def _scalar_size(value: object, kind: type) -> int:
    """Encoded size of a checked scalar, without the encoder for strings, ints, booleans and null."""
    if kind is str:
        return str_size(value)  # type: ignore[arg-type]
    if kind is int:
        return len(int.__repr__(value))  # what json's encoder writes
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    return len(_encode_checked(value))  # type: ignore[arg-type]


def _flat_size(value: object) -> int:
    """Encoded size of a checked scalar or a dict/list of checked scalars (sdk.md §6.1 compact form)."""
    kind = type(value)
    if kind is dict:
        size = 1 + len(value)  # type: ignore[arg-type]  # braces + (n-1) commas, or "{}"
        for key, member in value.items():  # type: ignore[attr-defined]
            size += str_size(key) + 1 + _scalar_size(member, type(member))
        return size if value else 2
    if kind is list:
        size = 1 + len(value)  # type: ignore[arg-type]
        for member in value:  # type: ignore[attr-defined]
            size += _scalar_size(member, type(member))
        return size if value else 2
    return _scalar_size(value, kind)


def encode(value: JsonValue | Json) -> bytes:
    """Compact UTF-8 encoding of a value (sdk.md §6); raises ``JsonTypeError`` if it cannot be encoded."""
    if isinstance(value, Json):
        value = value.value
    return _encode_checked(value)


def dumps(value: JsonValue | Json) -> str:
    """Compact encoding as text."""
    return encode(value).decode("utf-8")


# ---------------------------------------------------------------- measuring and limits


def _walk(value: JsonValue, depth: int, caps: list[int]) -> int:
    """Count the nodes of ``value`` (a node at ``depth``) into ``caps[0]``; return its deepest node depth.

    ``caps`` is ``[nodes_so_far, max_nodes, max_depth]``; crossing a cap raises ``_Over``. Scalars are
    type-checked here so a single pass validates a Python object.
    """
    caps[0] += 1
    kind = type(value)
    if kind is list:
        members: Any = value
    elif kind is dict:
        for key in value:  # type: ignore[union-attr]
            if type(key) is not str:
                raise JsonTypeError(f"object key {key!r} is not a string")
        members = value.values()  # type: ignore[union-attr]
    else:
        _check_scalar(value, kind)
        return depth
    deepest = depth
    child = depth + 1
    for member in members:
        mkind = type(member)
        if mkind is list or mkind is dict:
            if child > caps[2]:
                raise _Over
            got = _walk(member, child, caps)
            if got > deepest:
                deepest = got
        else:
            if mkind is not str and member is not None:
                _check_scalar(member, mkind)
            caps[0] += 1
            deepest = child if child > deepest else deepest
    if caps[0] > caps[1] or deepest > caps[2]:
        raise _Over
    return deepest


def _check_scalar(value: object, kind: type) -> None:
    if kind is str or kind is bool or value is None:
        return
    if kind is int:
        if not INT_MIN <= value <= INT_MAX:  # type: ignore[operator]
            raise JsonTypeError("integer outside [-2^63, 2^64-1]")
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise JsonTypeError("non-finite number")
        return
    raise JsonTypeError(f"{kind.__name__} is not a JSON type")


def _count(value: JsonValue, max_nodes: int, max_depth: int) -> tuple[int, int]:
    """(nodes, deepest depth) of a value; ``JsonLimitError`` past the caps or the interpreter stack."""
    caps = [0, max_nodes, min(max_depth, _STACK_DEPTH)]
    try:
        depth = _walk(value, 0, caps)
    except _Over:
        raise JsonLimitError("JSON value over the node or depth limit") from None
    except RecursionError:
        raise JsonLimitError("JSON nested too deeply") from None
    return caps[0], depth


# Shape of a value from its compact encoding, at C speed. Every string becomes the scalar "s" (a split
# on quotes when no escaped quote exists; else a regex that always consumes whole strings), every
# empty container "0" too; then each remaining "[" or "{" is a non-empty container, so
# nodes = 1 + commas + containers, and the deepest node sits at the highest bracket nesting.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")


def _profile(encoded: bytes) -> tuple[int, int, int]:
    """(nodes, deepest depth, cost) of a value from its compact encoding (trusted: produced by ``encode``)."""
    if b'\\"' in encoded:
        strings_out, strings = _STRING.subn(b"s", encoded)
    else:
        parts = encoded.split(b'"')
        strings_out, strings = b"s".join(parts[::2]), len(parts) >> 1
    flat = strings_out.replace(b"[]", b"0").replace(b"{}", b"0")
    steps = flat.translate(_STEPS, _NOT_BRACKET)
    nodes = 1 + flat.count(b",") + steps.count(1)
    depth = max(accumulate(array("b", steps))) if steps else 0
    return nodes, depth, footprint.estimate(encoded, strings_out, strings, nodes)


def _box(value: JsonValue, encoded: bytes) -> Json:
    """Box a value known to hold only JSON types (parsed by us, or part of a box)."""
    nodes, depth, cost = _profile(encoded)
    return Json(value, len(encoded), nodes, depth, cost)


# the boxes of the three constants (their Python objects are shared: no cost), as ``_box`` makes them
_CONSTANT_PARTS = {None: Json(None, 4, 1, 0, 0), True: Json(True, 4, 1, 0, 0), False: Json(False, 5, 1, 0, 0)}


def part_of(value: JsonValue) -> Json:
    """Box a part of a boxed value (already validated) from its encoding alone: no walk, no limits."""
    kind = type(value)
    if kind is int:  # a validated int encodes as its decimal text: skip the encoder (hot in events)
        return Json(value, len(str(value)), 1, 0, footprint.NUMBER)
    if value is None or kind is bool:  # issue 16: a config's "state": null at every guest's start, no encoder
        return _CONSTANT_PARTS[value]  # type: ignore[index]
    if kind is str and _plain(value):  # type: ignore[arg-type]
        # issue 16 (a guest reading an event's topic or a string member): printable ASCII without quote or
        # backslash encodes as itself in quotes, so its box is known without the encoder — what ``_box`` gives:
        # one node, depth 0, an ASCII str's cost (``footprint.estimate`` of one string of len(value) bytes)
        return Json(value, len(value) + 2, 1, 0, footprint.STR + len(value))  # type: ignore[arg-type]
    if kind is dict or kind is list:
        size = _measure_flat(value, kind)  # one pass: the size, or -1 when it holds a container
        if 0 <= size < footprint.FLAT_EXACT:
            return Json(value, size, 1 + len(value), 1 if value else 0,  # type: ignore[arg-type]
                        footprint.flat_cost(value, kind, size))
    return _box(value, _encode_checked(value))


def _plain(text: str) -> bool:
    """Printable ASCII without quote or backslash: the string's encoding is itself in quotes."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def _measure_flat(value: Any, kind: type) -> int:
    """Encoded size of a validated dict/list holding only scalars; -1 if it holds a dict or a list."""
    if not value:
        return 2
    size = 1 + len(value)  # braces + (n-1) commas
    if kind is dict:
        for key, member in value.items():
            mkind = type(member)
            if mkind is dict or mkind is list:
                return -1
            size += str_size(key) + 1 + (len(int.__repr__(member)) if mkind is int else _scalar_size(member, mkind))
        return size
    for member in value:
        mkind = type(member)
        if mkind is dict or mkind is list:
            return -1
        size += len(int.__repr__(member)) if mkind is int else _scalar_size(member, mkind)
    return size


_SMALL_COPY_NODES = 64  # below this a Python copy beats encode + parse


def copy_of(box: Json) -> JsonValue:
    """An independent copy of a boxed value (a host gets its own, runtime-protocol.md §9.2)."""
    if box.nodes <= _SMALL_COPY_NODES:
        return _copy(box.value)
    copy: JsonValue = json.loads(_encode_checked(box.value))
    return copy


def _copy(value: JsonValue) -> JsonValue:
    kind = type(value)
    if kind is dict:  # scalars are shared, only containers recurse (one call per container, not per node)
        return {k: _copy(v) if type(v) in _CONTAINERS else v for k, v in value.items()}  # type: ignore[union-attr]
    if kind is list:
        return [_copy(v) if type(v) in _CONTAINERS else v for v in value]  # type: ignore[union-attr]
    return value


_CONTAINERS = frozenset((dict, list))


def _flat_copy(value: object) -> tuple[JsonValue, int, int] | None:
    """(copy, nodes, depth) of a checked scalar or a dict/list holding only scalars; ``None`` otherwise.

    Scalars are type- and range-checked here (lone surrogates and the like are left to the encoder).
    """
    kind = type(value)
    if kind is dict:
        for key, member in value.items():  # type: ignore[attr-defined]
            mkind = type(member)
            if type(key) is not str or mkind is dict or mkind is list:
                return None
            if mkind is not str and member is not None:
                _check_scalar(member, mkind)
        return dict(value), 1 + len(value), 1 if value else 0  # type: ignore[call-overload, arg-type]
    if kind is list:
        for member in value:  # type: ignore[attr-defined]
            mkind = type(member)
            if mkind is dict or mkind is list:
                return None
            if mkind is not str and member is not None:
                _check_scalar(member, mkind)
        return list(value), 1 + len(value), 1 if value else 0  # type: ignore[call-overload, arg-type]
    _check_scalar(value, kind)
    return value, 1, 0  # type: ignore[return-value]


def encode_within(value: JsonValue, *, max_nodes: int, max_depth: int) -> bytes:
    """The compact encoding of a value we own, after ``measure``'s checks (types, the node and depth caps) but
    without a box: for a value that is stored as text rather than handed to a guest (an event's payload)."""
    _count(value, max_nodes, max_depth)
    return _encode_checked(value)


def measure(value: JsonValue, *, max_nodes: int = 1 << 30, max_depth: int = 1 << 30) -> Json:
    """Box a value we own, without copying: validates types, counts nodes and depth, encodes for the size.

    ``max_nodes``/``max_depth`` stop the walk early with ``JsonLimitError`` (the size is not capped).
    """
    nodes, depth = _count(value, max_nodes, max_depth)
    encoded = _encode_checked(value)
    return Json(value, len(encoded), nodes, depth, _profile(encoded)[2])


# ---------------------------------------------------------------- building (sdk.md §9.5)


def appended(array: Json, item: Json) -> Json:
    """A new box for ``array + [item]`` with exact size, nodes and depth, without walking either value."""
    assert type(array.value) is list
    comma = 1 if array.value else 0
    cost = array.cost + footprint.ITEM + item.cost + (0 if comma else footprint.FILLED_LIST)
    return Json([*array.value, item.value], array.size + comma + item.size, array.nodes + item.nodes,
                max(array.depth, item.depth + 1), cost)


def with_member(obj: Json, key: str, item: Json) -> Json:
    """A new box for ``obj`` with ``key`` set to ``item`` (replaced in place, or appended at the end).

    Adding a key is computed from the boxes alone; replacing one re-measures the result.
    """
    assert type(obj.value) is dict
    updated = dict(obj.value)  # never mutate a box's value: boxes share sub-values
    replacing = key in updated
    updated[key] = item.value
    if replacing:
        return part_of(updated)
    comma = 1 if obj.value else 0
    size = obj.size + comma + len(_encode_checked(key)) + 1 + item.size
    cost = obj.cost + footprint.MEMBER + footprint.str_cost(key) + item.cost
    cost += 0 if comma else footprint.FILLED_DICT
    return Json(updated, size, obj.nodes + item.nodes, max(obj.depth, item.depth + 1), cost)


def check(box: Json) -> Json:
    """Raise ``JsonLimitError`` unless the value is within the limits of sdk.md §6."""
    if box.size > MAX_BYTES:
        raise JsonLimitError(f"JSON value of {box.size} bytes exceeds {MAX_BYTES}")
    if box.depth > MAX_DEPTH:
        raise JsonLimitError(f"JSON value nested {box.depth} deep exceeds {MAX_DEPTH}")
    if box.nodes > MAX_NODES:
        raise JsonLimitError(f"JSON value of {box.nodes} nodes exceeds {MAX_NODES}")
    return box


def from_python(value: object, *, limits: bool = True) -> Json:
    """Validate a Python object as a JSON value and box an independent copy of it.

    Only exact ``None``/``bool``/``int``/``float``/``str``/``list``/``dict`` (string keys) are accepted;
    integers must lie in [-2^63, 2^64-1] and floats be finite, else ``JsonTypeError``. With ``limits`` the
    sdk.md §6 limits apply (``JsonLimitError``; the walk stops early past them). A ``Json`` box is taken
    as is (boxes are immutable).
    """
    if isinstance(value, Json):
        return check(value) if limits else value
    flat = _flat_copy(value)
    if flat is not None:  # a scalar or an object/array of scalars: no walk, no parse (event payloads, replies)
        duplicate, nodes, depth = flat
        if limits and nodes > MAX_NODES:
            raise JsonLimitError(f"JSON value of {nodes} nodes exceeds {MAX_NODES}")
        # the encoded size without encoding (encodes only unusual strings); the scalars are checked now
        kind = type(value)
        size = _measure_flat(value, kind) if kind is dict or kind is list else _flat_size(value)
        if limits and size > MAX_BYTES:
            raise JsonLimitError(f"JSON value of {size} bytes exceeds {MAX_BYTES}")
        if size < footprint.FLAT_EXACT:
            return Json(duplicate, size, nodes, depth, footprint.flat_cost(duplicate, kind, size))
        return Json(duplicate, size, nodes, depth, _profile(_encode_checked(duplicate))[2])
    cap_nodes, cap_depth = (MAX_NODES, MAX_DEPTH) if limits else (1 << 30, 1 << 30)
    nodes, depth = _count(value, cap_nodes, cap_depth)  # type: ignore[arg-type]
    encoded = _encode_checked(value)  # type: ignore[arg-type]
    if limits and len(encoded) > MAX_BYTES:
        raise JsonLimitError(f"JSON value of {len(encoded)} bytes exceeds {MAX_BYTES}")
    try:
        copy: JsonValue = json.loads(encoded)  # our own encoding of a checked value: plain loads is exact
    except RecursionError:
        raise JsonLimitError("JSON nested too deeply") from None
    return Json(copy, len(encoded), nodes, depth, _profile(encoded)[2])


# ---------------------------------------------------------------- equality (sdk.md §6 Equality)


def equal(a: JsonValue, b: JsonValue) -> bool:
    """sdk.md §6 equality: same JSON type and value; ints never equal floats, bools never equal numbers."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is list:
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    if kind is dict:
        if a.keys() != b.keys():  # type: ignore[union-attr]
            return False
        return all(equal(v, b[k]) for k, v in a.items())  # type: ignore[index, union-attr]
    return a == b
