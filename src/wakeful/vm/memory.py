"""Guest memory (vm.md §5): section placement, the image template with data relocations, helper region checks.

``check_read``/``check_write``/``check_overlap`` run on every helper call and stay minimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from wakeful.errors import GuestFault, InvalidObject
from wakeful.vm.elf import BSS, DATA, RODATA, ElfObject
from wakeful.vm.isa import BASE, MASK64
from wakeful.vm.linked import Layout

__all__ = [
    "DataReloc",
    "Placement",
    "build_image",
    "check_overlap",
    "check_read",
    "check_write",
    "make_layout",
    "place",
]


class Placement(NamedTuple):
    """Where each data section lives: ``addr[section] = image index`` (guest address - BASE)."""

    addr: dict[int, int]
    rodata_bytes: int  # R
    data_bytes: int  # D
    bss_bytes: int
    copies: tuple[tuple[int, int, int], ...]  # (section index, image index, size) of PROGBITS sections


class DataReloc(NamedTuple):
    """An ``R_BPF_64_ABS64``/``ABS32`` to apply to the image (vm.md §3), re-checked for every ELF."""

    at: int  # image index of the patched field
    width: int  # 8 or 4
    base: int  # guest address of the symbol
    lo: int  # allowed result range [lo, hi] (the symbol's section)
    hi: int
    where: str  # "SECTION+OFF" for messages


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# vm.md §5: rodata packed in section order, R rounded to the largest writable alignment (>= 8),
# then writable data, then bss; D rounded to 8; the whole image <= max_image_bytes (ELF_IMAGE)
def place(obj: ElfObject, *, max_image_bytes: int) -> Placement:
    index: dict[int, int] = {}
    copies: list[tuple[int, int, int]] = []
    end = 0
    for sec in obj.of_kind(RODATA):
        end = _align(end, sec.align)
        index[sec.num] = end
        copies.append((sec.num, end, sec.size))
        end += sec.size
    writable = obj.of_kind(DATA) + obj.of_kind(BSS)
    r = _align(end, max([8, *(s.align for s in writable)]))
    end = r
    bss = 0
    for sec in writable:
        end = _align(end, sec.align)
        index[sec.num] = end
        if sec.kind == DATA:
            copies.append((sec.num, end, sec.size))
        else:
            bss += sec.size
        end += sec.size
    d = _align(end - r, 8)
    if r + d > max_image_bytes:
        raise InvalidObject("ELF_IMAGE", f"globals need {r + d} bytes, more than the limit of {max_image_bytes}")
    return Placement(index, r, d, bss, tuple(copies))


def build_image(obj: ElfObject, placement: Placement, relocs: Sequence[DataReloc]) -> bytes:
    """The image template ``[0, R + D)``: this ELF's data bytes with its data relocations applied."""
    image = bytearray(placement.rodata_bytes + placement.data_bytes)
    data = obj.data
    for index, at, size in placement.copies:
        off = obj.sections[index].offset
        image[at:at + size] = data[off:off + size]
    for r in relocs:
        _apply(image, r)
    return bytes(image)


# vm.md §3 R_BPF_64_ABS64 / ABS32: value = symbol address + stored addend, inside the symbol's section
def _apply(image: bytearray, r: DataReloc) -> None:
    addend = int.from_bytes(image[r.at:r.at + r.width], "little")
    value = r.base + addend
    if r.width == 8:
        value &= MASK64
    if not r.lo <= value <= r.hi:
        raise InvalidObject("RELOC_SYMBOL", f"{r.where}: address {value:#x} outside its section [{r.lo:#x}, {r.hi:#x}]")
    image[r.at:r.at + r.width] = value.to_bytes(r.width, "little")


def make_layout(placement: Placement, stack_bytes: int, image: bytes) -> Layout:
    return Layout(placement.rodata_bytes, placement.data_bytes, placement.bss_bytes, stack_bytes, image)


# -- helper region checks (vm.md §5: readable [BASE, END), writable [BASE+W, END), zero length accepted) --


def check_read(layout_end: int, ptr: int, length: int, helper: str) -> int:
    """Index of readable region ``[ptr, ptr+length)``; ``GuestFault(HELPER_POINTER)`` if outside."""
    if length == 0:
        return 0
    if ptr < BASE or ptr + length > layout_end:
        raise _bad_pointer(ptr, length, helper)
    return ptr - BASE


def check_write(writable_start_addr: int, layout_end: int, ptr: int, length: int, helper: str) -> int:
    """Index of writable region ``[ptr, ptr+length)``; ``GuestFault(HELPER_POINTER)`` if outside."""
    if length == 0:
        return 0
    if ptr < writable_start_addr or ptr + length > layout_end:
        raise _bad_pointer(ptr, length, helper)
    return ptr - BASE


def _bad_pointer(ptr: int, length: int, helper: str) -> GuestFault:
    return GuestFault(
        "HELPER_POINTER", f"{helper}: invalid pointer {ptr:#x} length {length}",
        address=ptr, size=length, helper=helper,
    )


def check_overlap(regions: Sequence[tuple[int, int, bool]], helper: str) -> None:
    """vm.md §5: a writable region ``(ptr, length, True)`` may not overlap any other region of the call."""
    for i, (p, n, w) in enumerate(regions):
        if not w or not n:
            continue
        for j, (q, m, _) in enumerate(regions):
            if j != i and m and p < q + m and q < p + n:
                raise GuestFault("HELPER_OVERLAP", f"{helper}: overlapping regions", address=p, size=n, helper=helper)
