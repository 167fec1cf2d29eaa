"""The load path's data twins (vm.md §10, loader.py): a data-only variant of the last parsed object skips
parse and code key yet loads exactly as a fresh parse would; a layout whose data bytes overlap anything
else is refused (S12)."""

from __future__ import annotations

import struct

import pytest

from wakeful.bench.variants import density_source, make_variants
from wakeful.errors import InvalidObject
from wakeful.vm import asm, loader
from wakeful.vm.loader import TWINS, prepare


@pytest.fixture(scope="module")
def density_elf(compile_c):  # type: ignore[no-untyped-def]
    return compile_c(density_source())


def _fresh(data: bytes):  # type: ignore[no-untyped-def]
    return prepare(data, cache=None)


def test_a_data_variant_loads_as_a_fresh_parse(density_elf: bytes) -> None:
    variant = make_variants(density_elf, "data")
    prepare(variant(0))  # the twin of this size
    twin = TWINS.get((len(density_elf), 65536, 8192, 65536))
    assert twin is not None and twin.matches(variant(7))
    got, want = prepare(variant(7)), _fresh(variant(7))
    assert got.layout == want.layout and got.report == want.report and got.sha256 == want.sha256
    assert got.code.insns == want.code.insns
    assert struct.pack("<Q", 8) in got.layout.image


def test_a_code_change_is_not_a_twin(density_elf: bytes) -> None:
    prepare(density_elf)
    at = density_elf.index(struct.pack("<I", 1000))  # the `% 1000` immediate in the code section
    changed = density_elf[:at] + struct.pack("<I", 999) + density_elf[at + 4 :]
    twin = TWINS.get((len(density_elf), 65536, 8192, 65536))
    assert twin is not None and not twin.matches(changed)
    assert prepare(changed).report.code_key != prepare(density_elf).report.code_key


def _overlapping(density_elf: bytes) -> tuple[bytes, int]:
    """.data moved onto the code section's bytes: its 'data' is code."""
    code = density_elf.index(struct.pack("<I", 1000)) & ~7
    return asm.patch_shdr(density_elf, ".data", sh_offset=code), code


def test_overlapping_data_is_refused_with_and_without_the_caches(density_elf: bytes) -> None:
    """vm.md §9 S12: overlapping spans never load, so they never become a twin."""
    hostile, code = _overlapping(density_elf)
    prepare(density_elf)  # a twin of this size exists
    patched = hostile[:code] + bytes(8) + hostile[code + 8 :]  # changes code bytes inside the 'data' span
    for data in (hostile, patched):
        for cache in (loader.CACHE, None):
            with pytest.raises(InvalidObject) as info:
                prepare(data, cache=cache)
            assert info.value.rule == "ELF_SECTION" and "overlap" in info.value.message
