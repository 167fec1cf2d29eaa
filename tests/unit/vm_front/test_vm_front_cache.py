"""The verification cache of vm.md §1.1: data-only variants share link+verify and stay exactly as strict."""

from __future__ import annotations

import struct

import pytest

from wakeful.errors import InvalidObject
from wakeful.vm import asm, loader
from wakeful.vm.asm import Func, Reloc, Symbol

TEXT = """
    r1 = rodata + 0 ll
    r2 = 6
    call sf_log_raw
    r1 = data + 8 ll
    r0 = *(u64 *)(r1 + 0)
    call helper
    exit
"""


def variant(word: bytes, pointer_addend: int, counter: int) -> bytes:
    data = struct.pack("<QQ", pointer_addend, counter)
    sym = Symbol("ptr", 0, 8, 1, 1, ".data")
    return asm.elf([Func("main", TEXT), Func("helper", "*(u64 *)(r10 - 8) = 1\nr0 = 0\nexit")],
                   rodata=word, data=data, bss=8, extra_symbols=[sym],
                   extra_relocs=[(".data", Reloc(0, 2, ".rodata"))])


def test_data_variants_share_a_code_key() -> None:
    a = loader.prepare(variant(b"hello!", 1, 5), cache=None)
    b = loader.prepare(variant(b"world!", 2, 9), cache=None)
    assert a.report.code_key == b.report.code_key
    assert a.sha256 != b.sha256


def test_code_changes_change_the_key() -> None:
    a = loader.prepare(variant(b"hello!", 1, 5), cache=None)
    other = asm.elf([Func("main", TEXT.replace("r2 = 6", "r2 = 7")), Func("helper", "r0 = 0\nexit")],
                    rodata=b"hello!", data=bytes(16), bss=8)
    assert loader.prepare(other, cache=None).report.code_key != a.report.code_key
    bigger = variant(b"hello!!", 1, 5)  # data section size is part of the key
    assert loader.prepare(bigger, cache=None).report.code_key != a.report.code_key


def test_hit_equals_miss() -> None:
    cache = loader.VerifyCache()
    first = loader.prepare(variant(b"hello!", 1, 5), cache=cache)
    assert len(cache) == 1
    for word, addend, counter in [(b"world!", 2, 9), (b"\0\0\0\0\0\0", 5, 1 << 63)]:
        data = variant(word, addend, counter)
        hit = loader.prepare(data, cache=cache)
        miss = loader.prepare(data, cache=None)
        assert hit.code is first.code  # reused, not rebuilt
        assert hit.code == miss.code and hit.layout == miss.layout
        assert hit.report == miss.report and hit.sha256 == miss.sha256
        assert hit.layout.image[:6] == word
    assert len(cache) == 1


def test_hit_still_range_checks_data_relocations() -> None:
    cache = loader.VerifyCache()
    loader.prepare(variant(b"hello!", 1, 5), cache=cache)
    bad = variant(b"hello!", 100, 5)  # the ABS64 addend lives in data: outside .rodata
    for c in (cache, None):
        with pytest.raises(InvalidObject) as info:
            loader.prepare(bad, cache=c)
        assert info.value.rule == "RELOC_SYMBOL"
    assert len(cache) == 1


def test_hit_is_as_strict_for_shape_rules() -> None:
    cache = loader.VerifyCache()
    good = variant(b"hello!", 1, 5)
    loader.prepare(good, cache=cache)
    with pytest.raises(InvalidObject) as info:
        loader.prepare(good, cache=cache, max_elf_bytes=len(good) - 1)
    assert info.value.rule == "ELF_SIZE"
    with pytest.raises(InvalidObject):
        loader.prepare(good, cache=cache, max_instructions=5)  # options are part of the key


def test_lru_capacity() -> None:
    cache = loader.VerifyCache(capacity=2)
    objs = [asm.elf([Func("main", f"r0 = {i}\nexit")]) for i in range(3)]
    keys = [loader.prepare(o, cache=cache).report.code_key for o in objs[:2]]
    loader.prepare(objs[0], cache=cache)  # touch 0: 1 is now least recent
    loader.prepare(objs[2], cache=cache)
    assert len(cache) == 2
    assert cache.get(keys[0]) is not None and cache.get(keys[1]) is None


def test_default_cache_holds_at_most_1024() -> None:
    assert loader.CACHE.capacity == 1024
