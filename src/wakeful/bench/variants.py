"""The density guest and its per-object variants (benchmarks.md §1.2): data, imm and structure modes.

The guest is compiled once through the build service; variants are produced on the fly by rewriting a marker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from importlib import resources

from wakeful.errors import WakefulError
from wakeful.vm import asm

__all__ = ["DISTINCT_MODES", "BenchError", "density_request", "density_source", "make_variants"]

DISTINCT_MODES = ("data", "imm", "structure")
DATA_MARKER = 0x1122334455667788  # §1.2: the volatile `seed` global
IMM_MARKER = 0x8877665544332211  # §1.2: the LD_IMM64 constant
# LD_IMM64 slot pair: low imm in the first slot, 4 zero bytes (code/regs/off of slot 2), high imm
_IMM_PATTERN = struct.pack("<I", IMM_MARKER & 0xFFFFFFFF) + bytes(4) + struct.pack("<I", IMM_MARKER >> 32)
_IMM_LOW_OFFSET = 0  # the pattern starts at the first slot's imm field

Variant = Callable[[int], bytes]


class BenchError(WakefulError):
    """The benchmark could not run as benchmarks.md §1 describes (a missing marker, a failed build, a lost ack)."""

    code = "bench_failed"


def density_source() -> str:
    """The text of ``guests/density.c``."""
    return resources.files("wakeful.bench").joinpath("guests/density.c").read_text(encoding="utf-8")


def density_request(constant: int | None = None) -> dict[str, object]:
    """The build request of the density guest; ``constant`` rewrites the seed marker in the source (§1.6)."""
    text = density_source()
    if constant is not None:
        text = text.replace("0x1122334455667788ULL", f"{constant:#x}ULL", 1)
    return {"sdk_version": 1, "entry": "main.c", "files": {"main.c": text}}


def _only_offset(elf: bytes, pattern: bytes, what: str) -> int:
    """§1.2: each marker must occur exactly once in the object."""
    count = elf.count(pattern)
    if count != 1:
        raise BenchError(f"the {what} marker occurs {count} times in the density guest, expected once")
    return elf.index(pattern)


# §1.2 data mode: the data marker replaced by n + 1
def _data_variants(elf: bytes) -> Variant:
    at = _only_offset(elf, struct.pack("<Q", DATA_MARKER), "data")
    head, tail = elf[:at], elf[at + 8 :]
    return lambda n: head + struct.pack("<Q", n + 1) + tail


# §1.2 imm mode: the LD_IMM64 constant replaced by n + 1 (low and high halves of the slot pair)
def _imm_variants(elf: bytes) -> Variant:
    at = _only_offset(elf, _IMM_PATTERN, "imm") + _IMM_LOW_OFFSET
    head, tail = elf[:at], elf[at + len(_IMM_PATTERN) :]

    def variant(n: int) -> bytes:
        value = n + 1
        mid = struct.pack("<I", value & 0xFFFFFFFF) + bytes(4) + struct.pack("<I", value >> 32)
        return head + mid + tail

    return variant


def make_variants(elf: bytes, distinct: str) -> Variant:
    """``variant(n)`` → ELF bytes of object ``n`` for the mode (§1.2); every marker is checked once."""
    if distinct not in DISTINCT_MODES:
        raise BenchError(f"unknown --distinct mode {distinct!r}")
    data = _data_variants(elf)
    imm = _imm_variants(elf)
    if distinct == "data":
        return data
    if distinct == "imm":
        return imm
    return structure_variant


# ---------------------------------------------------------------------- structure mode (§1.2)

_ACK = b"benchmark.ack"
_CHAIN_OPS = ("r7 += 1", "r7 ^= 3")  # bit 0 / bit 1 of n: the opcode sequence encodes n


def _chain(n: int) -> list[str]:
    bits = max(n.bit_length(), 1)
    return [_CHAIN_OPS[(n >> i) & 1] for i in range(bits)] + ["r8 = r7"]


def _branches(n: int) -> list[str]:
    out = []
    for i in range(n % 61 + 1):
        out += [f"if r8 > {i * 7 + 1} goto b{i}", "r8 += 1", f"b{i}:"]
    return out


def structure_text(n: int) -> str:
    """The density event loop plus ``n``-dependent code: an ALU chain and ``n mod 61 + 1`` branch blocks."""
    body = [
        "loop:",
        "r1 = 30000",
        "call sf_event_next",
        "r6 = r0",
        "if r6 == -3 goto loop",
        "r0 = 0",
        "if r6 == -6 goto done",
        "r0 = r6",
        "if r6 s< 0 goto done",
        "r7 = 0",
        *_chain(n),
        *_branches(n),
        "r1 = rodata + 0 ll",
        f"r2 = {len(_ACK)}",
        "r3 = r6",
        "r4 = 10000",
        "call sf_host_call_raw",
        "if r0 s< 0 goto drop",
        "r1 = r0",
        "call sf_drop",
        "drop:",
        "r1 = r6",
        "call sf_drop",
        "goto loop",
        "done:",
        "exit",
    ]
    return "\n".join(body)


def structure_variant(n: int) -> bytes:
    """Object ``n`` of structure mode, assembled with ``vm/asm.py`` (one shape per object)."""
    return asm.elf([asm.Func("main", structure_text(n), section=asm.ENTRY_SECTION)], rodata=_ACK + b"\0")
