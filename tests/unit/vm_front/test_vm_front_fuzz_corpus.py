"""vm.md §9.2 corpora: every case the VM front fuzz harness saved (tests/corpus/vm_fuzz/) is replayed on every
run, from cleared caches, under the oracles of S8, S11 and S12 (tests/support/vm_fuzz.py); and each oracle
is shown to fire on a deliberately weakened VM."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import vm_fuzz
from support.elf_fuzz import MARKER, SENTINEL, payload

from wakeful.vm import Program, asm, loader
from wakeful.vm import translate as translate_mod

FILES = vm_fuzz.corpus_files()


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_saved_case_holds(path: Path) -> None:
    case = vm_fuzz.Case.from_json(path.read_text())
    vm_fuzz.clear_all()
    try:
        assert vm_fuzz.run_case(case) == []
    finally:
        vm_fuzz.clear_all()


def test_corpus_is_not_empty() -> None:
    assert FILES, "tests/corpus/vm_fuzz holds the cases the harness found"


def test_case_json_round_trips() -> None:
    case = vm_fuzz.Case([("load", b"\x7fELF\x00"), ("evict", b""), ("clear", b"")])
    assert vm_fuzz.Case.from_json(case.to_json(["x"])).steps == case.steps


# ---------------------------------------------------------------- the oracles can fail


def _object(name: str, r0: int) -> bytes:
    return asm.elf([asm.Func(name, f"r0 = {r0}\nexit")])


@pytest.fixture
def weakened_translator(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A translator that appends the given lines to every module it generates."""
    extra: list[str] = []
    real = translate_mod.generate

    def generate(*args, **kwargs):  # type: ignore[no-untyped-def]
        source, out, infos = real(*args, **kwargs)
        return source + "".join(line + "\n" for line in extra), out, infos

    monkeypatch.setattr(translate_mod, "generate", generate)
    vm_fuzz.clear_all()
    yield extra
    vm_fuzz.clear_all()


def test_s11_oracle_sees_a_name_in_generated_source(weakened_translator: list[str]) -> None:
    name = f"main_{MARKER}"
    weakened_translator.append(f"# {name}")
    problems = vm_fuzz.check_load(_object(name, 1))
    assert [vm_fuzz.signature(p) for p in problems] == ["s11-source"]


def test_s11_oracle_sees_host_code_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A VM that runs host code while a guest starts (what a pasted name did on main) is caught."""
    real = Program.instantiate

    def instantiate(self: Program, env):  # type: ignore[no-untyped-def]
        exec(payload(0).strip())  # noqa: S102 - the weakened VM under test
        return real(self, env)

    monkeypatch.setattr(Program, "instantiate", instantiate)
    vm_fuzz.clear_all()
    problems = vm_fuzz.check_load(_object("main", 1))
    assert "s11-sentinel" in [vm_fuzz.signature(p) for p in problems]
    assert not SENTINEL.exists()


def test_s12_oracle_sees_a_cache_hand_out_other_code(monkeypatch: pytest.MonkeyPatch) -> None:
    victim, attacker = _object("main", 1), _object("main", 2)
    real = loader.prepare

    def mixing(data: bytes, **kwargs):  # type: ignore[no-untyped-def]
        warm = kwargs.get("cache", loader.CACHE) is not None
        return real(attacker if warm else data, **kwargs)

    monkeypatch.setattr(loader, "prepare", mixing)
    vm_fuzz.clear_all()
    try:
        kinds = {vm_fuzz.signature(p) for p in vm_fuzz.check_load(victim)}
    finally:
        vm_fuzz.clear_all()
    assert {"s12-code", "s12-run"} <= kinds
