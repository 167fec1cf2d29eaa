"""Protocol frames of the stdio runtime: line splitting with the incoming bound, and frame encoding.

runtime-protocol.md §3 (framing, outgoing bound) and §5 (error objects); no I/O happens here.
"""

from __future__ import annotations

from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from wakeful.errors import RPC_CODES, WakefulError
from wakeful.runtime import jsonval

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_ID_BYTES",
    "MAX_MESSAGE_BYTES",
    "Encoded",
    "FrameTooLong",
    "LineSplitter",
    "encode_frame",
    "encode_response",
    "encode_value",
    "error_frame",
    "error_object",
    "notification",
    "parse_frame",
    "response",
    "utf8_len",
]

MAX_FRAME_BYTES = 262_144  # §3: incoming frames including the newline; outgoing strictly below, before it
MAX_ID_BYTES = 128  # §4 step 5
MAX_MESSAGE_BYTES = 4_096  # §5: error messages are cut at a character boundary


class FrameTooLong(WakefulError):
    """An incoming line is longer than the frame bound (§3): fatal for the session."""


class LineSplitter:
    """Splits incoming bytes into lines; never holds a partial line of ``limit`` bytes or more (§3)."""

    __slots__ = ("_buf", "limit")

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self.limit = limit

    @property
    def partial(self) -> bool:
        """True when bytes of an unterminated line are held (EOF now is a framing error)."""
        return bool(self._buf)

    @property
    def room(self) -> int:
        """Bytes that may still be read before the partial line reaches the frame bound (at least 1)."""
        return max(1, self.limit - len(self._buf))

    # §3: at most 262,144 bytes including the newline, enforced while reading
    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the complete lines (without newline). Raises ``FrameTooLong``."""
        buf = self._buf
        old = len(buf)
        buf += data
        lines: list[bytes] = []
        start = 0
        nl = buf.find(b"\n", old)
        while nl >= 0:
            if nl + 1 - start > self.limit:
                raise FrameTooLong(f"frame of more than {self.limit} bytes")
            lines.append(bytes(buf[start:nl]))
            start = nl + 1
            nl = buf.find(b"\n", start)
        del buf[:start]
        if len(buf) >= self.limit:  # even a newline next would make it too long
            raise FrameTooLong(f"frame of more than {self.limit} bytes")
        return lines


def utf8_len(text: str) -> int:
    """UTF-8 length of ``text``; lone surrogates (never valid) count as too long."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return 1 << 30


def cut_message(message: str) -> str:
    """§5: a message is cut to 4,096 bytes at a character boundary."""
    data = message.encode("utf-8", "replace")  # a lone surrogate becomes "?"
    return data[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")


# §5: error object {code, message, data: {kind}}
def error_object(kind: str, message: str) -> dict[str, Any]:
    code = RPC_CODES.get(kind, -32603)
    return {"code": code, "message": cut_message(message), "data": {"kind": kind}}


def response(request_id: str | None, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_frame(request_id: str | None, kind: str, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error_object(kind, message)}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


# §3 outgoing: compact JSON strictly below 262,144 bytes before the newline
def encode_frame(message: dict[str, Any]) -> bytes | None:
    """The frame's bytes with its newline, or ``None`` when it is over the outgoing bound."""
    data = jsonval.encode(message)
    if len(data) >= MAX_FRAME_BYTES:
        return None
    return data + b"\n"


class Encoded(bytes):
    """A result already encoded as compact JSON (a hot response's pre-built bytes)."""


_RESPONSE_HEAD = b'{"jsonrpc":"2.0","id":'

# the compact encoder of sdk.md §6.1 made once, without the circularity markers (a cycle recurses and fails)
_PLAIN = (c_make_encoder(None, None, encode_basestring, None, ":", ",", False, False, False)
          if c_make_encoder is not None else None)


def encode_value(value: Any) -> bytes:
    """``jsonval.encode(value)``'s bytes with less overhead per call; anything the plain encoder cannot
    take (NaN, lone surrogates, cycles, non-JSON objects) goes through ``jsonval.encode`` and its error."""
    if _PLAIN is not None and not isinstance(value, jsonval.Json):
        try:
            return "".join(_PLAIN(value, 0)).encode("utf-8")
        except Exception:  # noqa: BLE001, S110 - the checked encoder below raises the typed error
            pass
    return jsonval.encode(value)


# §3 outgoing, the response fast path: the same bytes as ``encode_frame(response(request_id, result))``
def encode_response(request_id: str, result: Any) -> bytes | None:
    """A response frame with its newline (``result`` may be ``Encoded``), or ``None`` over the bound."""
    body = result if isinstance(result, bytes) else encode_value(result)
    data = b"".join((_RESPONSE_HEAD, encode_basestring(request_id).encode("utf-8"), b',"result":', body, b"}\n"))
    if len(data) > MAX_FRAME_BYTES:  # strictly below the bound before the newline
        return None
    return data


_SHALLOW = 200  # fewer brackets than this: nesting far inside the interpreter's recursion limit


# §4 step 1 and §4.1: strict parse of an incoming frame; every refusal is a syntax error
def parse_frame(line: bytes) -> Any:
    """``jsonval.parse_document`` with its second pass (the surrogate and depth check) skipped when the
    bytes cannot need it: strict UTF-8 never yields a surrogate, so only a ``\\u`` escape can, and a frame
    with few brackets cannot nest deep enough to fail re-encoding."""
    if b"\\u" in line or line.count(b"[") + line.count(b"{") >= _SHALLOW:
        return jsonval.parse_document(line)
    try:  # the common frame: valid UTF-8, one compact value (C scanner only)
        return jsonval.parse_plain(line.decode("utf-8"))
    except Exception:  # noqa: BLE001, S110 - any refusal: the full parse below says exactly what
        pass
    try:
        return jsonval.parse_value(line)
    except jsonval.JsonError as exc:
        raise jsonval.JsonSyntaxError(exc.message) from None
