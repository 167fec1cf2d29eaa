"""runtime-protocol.md §6.3: ``elf`` is standard base64 with padding; anything else is ``-32602 invalid base64``
(strict: the alphabet, the padding and the trailing bits must be those of the canonical encoding)."""

from __future__ import annotations

import base64

import pytest

from wakeful.errors import InvalidParams
from wakeful.runtime.stdio_methods import _b64


@pytest.mark.parametrize("data", [b"", b"A", b"AB", b"ABC", bytes(range(256)), b"\x7fELF" + bytes(797)])
def test_canonical_base64_round_trips(data: bytes) -> None:
    assert _b64(base64.b64encode(data).decode()) == data


@pytest.mark.parametrize("text", [
    "QUJD=",  # an extra trailing '=' (the audit's 801-character ELF)
    "QUJD==",
    "QQ=",  # short padding
    "QQ",  # no padding
    "QQ===",
    "QR==",  # non-zero trailing bits: decodes to b"A" but is not its encoding
    "QUI=QUI=",  # padding in the middle
    "QUJ D",
    "QUJD\n",
    "QUJ-",  # the URL-safe alphabet
    "not base64!",
    "QUJDé",
])
def test_non_canonical_base64_is_refused(text: str) -> None:
    with pytest.raises(InvalidParams, match="invalid base64"):
        _b64(text)
