"""The independent oracle (issue 14, vm.md §9.2) against both engines: oracle == interpreter == translator
on registers (spilled to memory), memory, exit code, fault and helper calls, for the §9.2 generated
programs and for edge-case programs of every cpu v1-v4 instruction form; plus the oracle's coverage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import oracle_ebpf as oracle
import oracle_fuzz
import oracle_glue as glue
import pytest
from oracle_edges import Case, all_cases
from vmexec_kit import corpus_programs, corpus_settings
from vmexec_progen import generate

SEED_BASE = 3_000_000  # apart from the S9 quick (1,000,000+) and full (0+) ranges
SEED_COUNT = 3000
DENSE_COUNT = 1000  # oracle_fuzz programs (seeds 0+)
SETTINGS = corpus_settings()


@dataclass
class Run:
    failures: list[str] = field(default_factory=list)
    coverage: set[str] = field(default_factory=set)
    faults: int = 0
    results: dict[str, glue.Three] = field(default_factory=dict)


def _slice(seed: int) -> int:
    return int(SETTINGS["small_slice"]) if seed % SETTINGS["small_slice_every"] == 0 else 16384


@pytest.fixture(scope="module")
def generated() -> Run:
    run = Run()
    for seed in range(SEED_BASE, SEED_BASE + SEED_COUNT):
        prog = generate(seed)
        kw = {"rodata": prog.rodata, "data": prog.data, "bss": prog.bss, "slice_insns": _slice(seed)}
        three = glue.run_three(prog.binary, coverage=run.coverage, **kw)  # type: ignore[arg-type]
        run.faults += three.oracle[1] is not None
        if not three.agree():
            glue.save(f"seed-{seed}", prog.funcs, **kw)  # type: ignore[arg-type]
            run.failures.append(f"seed {seed}: {three.why()}")
    return run


@pytest.fixture(scope="module")
def edges() -> Run:
    run = Run()
    for case in all_cases():
        three = _run_case(case, run.coverage)
        run.results[case.name] = three
        if not three.agree():
            run.failures.append(f"{case.name}: {three.why()}")
    return run


def _run_case(case: Case, coverage: set[str] | None = None) -> glue.Three:
    return glue.run_three(glue.assemble(case.funcs), rodata=case.rodata, data=case.data, bss=case.bss,
                          coverage=coverage)


def test_generated_programs_agree_with_the_oracle(generated: Run) -> None:
    assert not generated.failures, generated.failures[:5]
    assert 0.01 < generated.faults / SEED_COUNT < 0.2  # the strays reach the fault paths


def test_dense_dataflow_programs_agree_with_the_oracle() -> None:
    failures = []
    for seed in range(DENSE_COUNT):
        funcs, data = oracle_fuzz.program(seed)
        three = glue.run_three(glue.assemble(funcs), data=data)
        if not three.agree():
            glue.save(f"dense-{seed}", funcs, rodata=b"", data=data, bss=0, slice_insns=16384)
            failures.append(f"dense seed {seed}: {three.why()}")
    assert not failures, failures[:5]


def test_saved_failures_replay_against_the_oracle() -> None:
    """The oracle's own failure corpus and the S9 corpus (tests/corpus/diff) through all three."""
    for name, entry in [*glue.saved(), *corpus_programs()]:
        three = glue.replay(entry)
        assert three.agree(), f"{name}: {three.why()}"


def test_edge_programs_agree_with_the_oracle(edges: Run) -> None:
    assert not edges.failures, edges.failures[:5]
    assert len(edges.results) > 250


def test_fault_programs_fault_where_vm_md_says(edges: Run) -> None:
    # vm.md §5: the last byte before END is readable and writable; every other probe faults
    in_range = {"read-b-end-1", "write-b-end-1"}
    for name, three in edges.results.items():
        if name.startswith(("read-", "write-", "atomic-", "store-release", "load-acquire", "below-", "end-is",
                            "helper-", "rodata-data", "walk-")):
            assert (three.oracle[1] is None) == (name in in_range), (name, three.oracle[:2])
    assert edges.results["rodata-data-straddle"].oracle[1][0] == "RODATA_WRITE"  # type: ignore[index]
    assert edges.results["helper-pointer"].oracle[1][0] == "HELPER_POINTER"  # type: ignore[index]
    assert edges.results["walk-down"].oracle[1][:3] == ("MEMORY_READ", 0xFFFF, 1)
    assert edges.results["walk-up"].oracle[1][0] == "MEMORY_READ"  # type: ignore[index]


def test_local_calls_keep_the_callers_registers_and_frame(edges: Run) -> None:
    three = edges.results["local-calls"]
    assert three.oracle[1] is None
    data = three.oracle[2][:160]  # no rodata: .data starts at BASE
    words = [int.from_bytes(data[i:i + 8], "little") for i in range(0, 160, 8)]
    # caller after the call: r1..r7 and r9 as before (vm.md §6.1), its stack slot intact
    assert words[1:8] == [0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666, 0x7777]
    assert words[8:10] == [0x9999, 0x9999]
    # callee on entry: r0 = r6 = r7 = r9 = 0, r1 and r5 the caller's
    assert words[10:16] == [0, 0x1111, 0x5555, 0, 0, 0]
    assert edges.results["call-with-stack-pointer"].oracle[0] == 15
    assert edges.results["call-relative"].oracle[0] == 16


def test_oracle_covers_every_instruction_form_and_edge(generated: Run, edges: Run) -> None:
    """Coverage of the executed forms (vm.md §4.1 list: 165 forms; 49 operand edges)."""
    forms, tags = oracle.all_variants(), oracle.all_edge_tags()
    seen = generated.coverage | edges.coverage
    print(f"\noracle coverage: forms {len(forms & seen)}/{len(forms)} (generated programs alone "
          f"{len(forms & generated.coverage)}/{len(forms)}), operand edges {len(tags & seen)}/{len(tags)} "
          f"(generated alone {len(tags & generated.coverage)}/{len(tags)}: missing "
          f"{sorted(tags - generated.coverage)})")
    assert not forms - seen, sorted(forms - seen)
    assert not tags - seen, sorted(tags - seen)
    unknown = {v for v in seen - forms - tags if ":" not in v and v != "ld_imm64.hi"}
    assert not unknown, unknown  # an executed form outside the accepted list
