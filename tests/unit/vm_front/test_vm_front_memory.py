"""Guest memory layout (vm.md §5) and the helper region checks used by the runtime."""

from __future__ import annotations

import pytest

from wakeful.errors import GuestFault
from wakeful.vm import asm, loader
from wakeful.vm.asm import Func, Section
from wakeful.vm.isa import BASE
from wakeful.vm.memory import check_overlap, check_read, check_write


def test_layout_order_alignment_and_sizes() -> None:
    extra = [Section(".rodata.b", 1, 0x2, b"B" * 3, 16), Section(".data.c", 1, 0x3, b"C" * 5, 32),
             Section(".bss.d", 8, 0x3, size=7, align=4)]
    data = asm.elf([Func("main", "*(u64 *)(r10 - 24) = 0\nexit")], rodata=b"A" * 5, data=b"D" * 3, bss=2,
                   extra_sections=extra)
    p = loader.prepare(data, cache=None)
    lay = p.layout
    assert lay.image[0:5] == b"A" * 5 and lay.image[16:19] == b"B" * 3  # rodata in section order, aligned
    assert lay.rodata_bytes == 32  # R rounded up to the largest writable alignment
    assert lay.image[32:35] == b"D" * 3  # writable data first, in section order
    assert lay.image[64:69] == b"C" * 5  # .data.c aligned to 32
    # then bss: .bss (align 8) at 72, .bss.d (align 4) at 76; D = 83 - 32 rounded to 8
    assert lay.data_bytes == 56 and lay.bss_bytes == 9
    assert lay.image[69:] == bytes(len(lay.image) - 69)
    assert len(lay.image) == lay.rodata_bytes + lay.data_bytes
    assert lay.stack_bytes == 24 and lay.size == 32 + 56 + 24 and lay.end == BASE + lay.size
    assert lay.writable == 32


def test_empty_image() -> None:
    lay = loader.prepare(asm.elf([Func("main", "exit")]), cache=None).layout
    assert (lay.rodata_bytes, lay.data_bytes, lay.stack_bytes, lay.image) == (0, 0, 0, b"")


END = BASE + 0x100
W = BASE + 0x40


@pytest.mark.parametrize(("ptr", "length"), [(BASE, 0x100), (END - 1, 1), (BASE + 5, 3)])
def test_read_inside(ptr: int, length: int) -> None:
    assert check_read(END, ptr, length, "memcmp") == ptr - BASE


@pytest.mark.parametrize(
    ("ptr", "length"),
    [(0, 1), (BASE - 1, 1), (BASE - 1, 2), (END, 1), (END - 1, 2), (BASE, (1 << 64) - 1), ((1 << 64) - 1, 1)],
)
def test_read_outside(ptr: int, length: int) -> None:
    with pytest.raises(GuestFault) as info:
        check_read(END, ptr, length, "sf_log_raw")
    assert info.value.fault_code == "HELPER_POINTER" and info.value.helper == "sf_log_raw"
    assert str(info.value) == f"sf_log_raw: invalid pointer {ptr:#x} length {length}"


def test_zero_length_is_accepted_anywhere() -> None:
    assert check_read(END, 1, 0, "memcpy") == 0
    assert check_write(W, END, (1 << 64) - 1, 0, "memcpy") == 0


def test_write_region() -> None:
    assert check_write(W, END, W, 0xC0, "memset") == 0x40
    for ptr, length in [(W - 1, 1), (BASE, 1), (END - 4, 8), (END, 1)]:
        with pytest.raises(GuestFault) as info:
            check_write(W, END, ptr, length, "memset")
        assert info.value.fault_code == "HELPER_POINTER"


def test_overlap() -> None:
    check_overlap([(BASE, 8, True), (BASE + 8, 8, False)], "memcpy")
    check_overlap([(BASE, 8, False), (BASE + 4, 8, False)], "memcmp")  # reads may overlap
    check_overlap([(BASE, 0, True), (BASE, 8, False)], "memcpy")  # zero length never overlaps
    with pytest.raises(GuestFault) as info:
        check_overlap([(BASE + 4, 8, True), (BASE, 8, False)], "memcpy")
    assert info.value.fault_code == "HELPER_OVERLAP" and str(info.value) == "memcpy: overlapping regions"
    with pytest.raises(GuestFault):
        check_overlap([(BASE, 1, False), (BASE, 16, True)], "sf_json_read_string")
