"""The VM front fuzz harness for longer runs (vm.md §9.2): ``scripts/fuzz.sh`` calls this.

Runs the cases of tests/support/vm_fuzz.py (hostile names, section headers and spans; warm-cache sequences;
the oracles of S8, S11 and S12) until a time or execution budget is spent, with

* atheris (coverage-guided, libFuzzer; ``pip install -e '.[fuzz]'``) when it is installed,
* else hypothesis (generated binaries), or ``--driver random`` (a seeded stream, no extra dependency).

The first case of each kind of problem is shrunk and saved to tests/corpus/vm_fuzz/, which every test run
replays (tests/unit/vm_front/test_vm_front_fuzz_corpus.py). Exit status 1 if anything was found.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# this checkout's code unless PYTHONPATH names another (e.g. a tree with fixes to try the corpus against)
sys.path[:0] = [str(ROOT / "tests")] + ([] if os.environ.get("PYTHONPATH") else [str(ROOT / "src")])
MAX_LEN = 512  # bytes of decisions per case


def _options() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=300, help="time budget (default 300)")
    p.add_argument("--runs", type=int, default=0, help="case budget (0: until --seconds)")
    p.add_argument("--driver", choices=["auto", "atheris", "hypothesis", "random"], default="auto")
    p.add_argument("--seed", type=int, default=None, help="random driver seed (default: time)")
    p.add_argument("--corpus", type=Path, default=None, help="where found cases go (default tests/corpus/vm_fuzz)")
    return p.parse_args()


def _driver(choice: str) -> str:
    if choice != "auto":
        return choice
    for name in ("atheris", "hypothesis"):
        if importlib.util.find_spec(name) is not None:
            return name
    return "random"


class _Run:
    """The harness, its seeds and a running tally; ``one(data)`` is one case."""

    def __init__(self, corpus: Path | None) -> None:
        from support import vm_fuzz

        self.vf = vm_fuzz
        self.seeds = vm_fuzz.clang_seeds() + vm_fuzz.asm_seeds()
        self.tally = vm_fuzz.Tally()
        self.corpus = corpus or vm_fuzz.CORPUS
        self.started = self.last = time.monotonic()

    def one(self, data: bytes) -> None:
        known = len(self.tally.found)
        self.vf.fuzz([data], self.seeds, self.tally, save_to=self.corpus)
        if len(self.tally.found) > known or time.monotonic() - self.last > 30:
            self.report()

    def report(self) -> None:
        self.last = time.monotonic()
        t = self.tally
        found = ", ".join(f"{kind} -> {path.name}" for kind, path in t.found.items()) or "nothing"
        print(f"[fuzz_vm] {self.last - self.started:.0f} s: {t.cases} cases, {t.loads} loads, "
              f"outcomes {dict(t.outcomes)}; found {found}", file=sys.stderr, flush=True)


def _atheris(run: _Run, seconds: int, runs: int) -> None:
    import atheris  # type: ignore[import-not-found]

    work = Path(tempfile.gettempdir()) / "wakeful-fuzz-work"  # libFuzzer's own working corpus
    work.mkdir(exist_ok=True)
    rng = random.Random(0)
    for n in range(32 - len(list(work.iterdir()))):  # start from varied cases, not from empty inputs
        (work / f"start-{n}").write_bytes(rng.randbytes(256))
    argv = [sys.argv[0], str(work), f"-max_len={MAX_LEN}", "-len_control=0", f"-max_total_time={seconds}",
            "-print_final_stats=1"]
    if runs:
        argv.append(f"-runs={runs}")
    atheris.Setup(argv, run.one)
    atheris.Fuzz()  # exits the process when the budget is spent


def _hypothesis(run: _Run, seconds: int, runs: int) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    batch = 200 if not runs else min(200, runs)

    @settings(max_examples=batch, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.binary(min_size=8, max_size=MAX_LEN))
    def case(data: bytes) -> None:
        run.one(data)

    while time.monotonic() - run.started < seconds and (not runs or run.tally.cases < runs):
        case()


def _random(run: _Run, seconds: int, runs: int, seed: int) -> None:
    rng = random.Random(seed)
    print(f"[fuzz_vm] random driver, seed {seed}", file=sys.stderr)
    while time.monotonic() - run.started < seconds and (not runs or run.tally.cases < runs):
        run.one(rng.randbytes(rng.randrange(8, MAX_LEN)))


def main() -> int:
    opts = _options()
    driver = _driver(opts.driver)
    print(f"[fuzz_vm] driver {driver}, budget {opts.seconds} s / {opts.runs or 'unlimited'} cases",
          file=sys.stderr)
    if driver == "atheris":
        import atheris

        with atheris.instrument_imports(include=["wakeful.vm", "wakeful.errors"]):
            run = _Run(opts.corpus)
    else:
        run = _Run(opts.corpus)
    args: tuple[Any, ...] = (run, opts.seconds, opts.runs)
    if driver == "atheris":
        _atheris(*args)
    elif driver == "hypothesis":
        _hypothesis(*args)
    else:
        _random(*args, opts.seed if opts.seed is not None else int(time.time()))
    run.report()
    return 1 if run.tally.found else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
