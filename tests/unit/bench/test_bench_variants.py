"""Density guest variants (benchmarks.md §1.2): each marker once, one shape for data/imm, one per object for
structure; a guest without its marker is refused with a typed error."""

from __future__ import annotations

import struct

import pytest

from wakeful.bench.variants import (
    DATA_MARKER,
    IMM_MARKER,
    BenchError,
    density_request,
    density_source,
    make_variants,
    structure_variant,
)
from wakeful.vm import load


@pytest.fixture(scope="module")
def density_elf(compile_c):  # type: ignore[no-untyped-def]
    return compile_c(density_source())


def _diff(a: bytes, b: bytes) -> list[int]:
    assert len(a) == len(b)
    return [i for i in range(len(a)) if a[i] != b[i]]


def test_data_variant_rewrites_only_the_seed(density_elf: bytes) -> None:
    variant = make_variants(density_elf, "data")
    a, b = variant(0), variant(41)
    at = density_elf.index(struct.pack("<Q", DATA_MARKER))
    assert a[at : at + 8] == struct.pack("<Q", 1)
    assert b[at : at + 8] == struct.pack("<Q", 42)
    assert all(at <= i < at + 8 for i in _diff(a, b))


def test_imm_variant_rewrites_the_ld_imm64_halves(density_elf: bytes) -> None:
    variant = make_variants(density_elf, "imm")
    low = struct.pack("<I", IMM_MARKER & 0xFFFFFFFF)
    at = density_elf.index(low)
    v = variant((1 << 40) - 1)  # n + 1 = 2^40: both halves change
    assert v[at : at + 4] == struct.pack("<I", 0)
    assert v[at + 8 : at + 12] == struct.pack("<I", 1 << 8)
    assert v.count(low) == 0


@pytest.mark.parametrize("mode", ["data", "imm"])
def test_data_and_imm_variants_share_one_shape(density_elf: bytes, mode: str) -> None:
    variant = make_variants(density_elf, mode)
    programs = [load(variant(n)) for n in (0, 1, 999)]
    assert len({p.shape_key for p in programs}) == 1
    assert len({p.sha256 for p in programs}) == 3


def test_structure_variants_are_one_shape_each() -> None:
    programs = [load(structure_variant(n)) for n in (0, 1, 2, 3, 61, 62)]
    assert len({p.shape_key for p in programs}) == 6


def test_a_guest_without_its_marker_is_refused(density_elf: bytes) -> None:
    broken = density_elf.replace(struct.pack("<Q", DATA_MARKER), struct.pack("<Q", 7))
    with pytest.raises(BenchError, match="data marker occurs 0 times"):
        make_variants(broken, "data")


def test_unknown_mode_is_refused(density_elf: bytes) -> None:
    with pytest.raises(BenchError, match="unknown --distinct"):
        make_variants(density_elf, "shape")


def test_compile_request_rewrites_the_seed_constant() -> None:
    text = density_request(0xABC)["files"]["main.c"]  # type: ignore[index]
    assert "0xabcULL" in text and "0x1122334455667788ULL" not in text
