"""Derived figures of the density benchmark (benchmarks.md §1.3, §1.7, §1.8): percentiles, /proc snapshots,
per-object memory, target rows, --check failures and the JSON schema."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from wakeful.bench.density import failed_checks, judge, raise_for_failures
from wakeful.bench.memory import per_object, snapshot
from wakeful.bench.progress import percentile
from wakeful.bench.schema import BenchSchemaError, validate
from wakeful.bench.variants import BenchError


def test_percentile_is_nearest_rank_of_sorted_samples() -> None:
    samples = [float(x) for x in range(1000, 0, -1)]
    assert percentile(samples, 99) == 990.0
    assert percentile(samples, 50) == 500.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) == 0.0


def test_snapshot_reads_this_process() -> None:
    snap = snapshot(os.getpid(), {"guest_bytes": 5, "handle_bytes": 7})
    assert snap["rss"] > 1 << 20 and snap["pss"] > 0 and snap["vm_size"] >= snap["rss"]
    assert snap["threads"] >= 1
    assert (snap["guest_bytes"], snap["handle_bytes"]) == (5, 7)


def test_snapshot_of_a_missing_process_is_zero() -> None:
    snap = snapshot(2**22 + 12345)
    assert snap["rss"] == 0 and snap["pss_is_rss"] is True


def test_per_object_divides_the_growth() -> None:
    assert per_object({"pss": 9000}, {"pss": 1000}, "pss", 4) == 2000.0


def _snap(pss: int) -> dict[str, Any]:
    return {
        "rss": pss,
        "pss": pss,
        "pss_is_rss": False,
        "vm_size": pss,
        "vm_rss": pss,
        "threads": 1,
        "guest_bytes": 0,
        "handle_bytes": 0,
    }


def _run(transport: str, **figures: Any) -> dict[str, Any]:
    run = {
        "transport": transport,
        "count": 10,
        "distinct": "data",
        "init": {},
        "snapshots": {
            n: _snap(1) for n in ("baseline", "active", "after_events", "after_soak", "after_unload")
        },
        "load_start_s": 1.0,
        "fanout_s": 0.3,
        "acks": 10,
        "idle_rtt_ms": {"p50": 0.05, "p99": 0.08},
        "control_rtt_ms": {"p50": 0.1, "p99": 0.15} if transport == "stdio" else None,
        "active_pss_per_object": 6000.0,
        "mixed_pss_per_object": 7000.0,
        "shapes": {"translated": 1, "hits": 10, "misses": 1},
        "failures": [],
    }
    run.update(figures)
    return run


def _doc(*runs: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "wakeful.bench.density/1",
        "started_at": "2026-01-01T00:00:00Z",
        "wakeful_version": "0",
        "git_revision": None,
        "git_dirty": None,
        "python": "3.11",
        "platform": "linux",
        "cpu_model": None,
        "cpu_count": 2,
        "mem_total_bytes": None,
        "options": {},
        "runs": list(runs),
        "cpu": {
            "kernels": {"fnv": {"insns": 10, "seconds": 1.0, "minsn_per_s": 25.0}},
            "geomean_minsn_per_s": 25.0,
        },
        "compile": {
            "cold_ms": {"p50": 150.0, "p95": 200.0},
            "parallel_builds_per_s": 10.0,
            "hit_ms": {"p50": 1.0},
        },
        "realistic": None,
        "reference": {},
    }
    doc["targets"] = judge(doc)
    return doc


def test_targets_use_the_median_of_repeats_per_transport() -> None:
    doc = _doc(
        _run("inproc", load_start_s=1.0), _run("inproc", load_start_s=3.0), _run("inproc", load_start_s=1.5)
    )
    row = next(t for t in doc["targets"] if t["name"] == "load_start_s")
    assert row["measured"] == 1.5 and row["pass"] is True and row["target"] == "<= 2"


def test_stdio_is_judged_against_spinfoam() -> None:
    doc = _doc(_run("stdio", fanout_s=0.5, active_pss_per_object=60_000.0))
    rows = {t["name"]: t for t in doc["targets"] if t["transport"] == "stdio"}
    assert rows["fanout_s"]["pass"] is True  # 0.5 s ≤ spinfoam's 0.56 s
    assert rows["active_pss_per_object"]["pass"] is True
    assert rows["control_rtt_p99_ms"]["pass"] is True
    assert "idle_rtt_p99_ms" not in rows


def test_check_names_missed_checked_targets_but_never_compile_time() -> None:
    doc = _doc(_run("inproc", fanout_s=0.9))
    assert failed_checks(doc) == ["fanout_s (inproc)"]
    compile_row = next(t for t in doc["targets"] if t["name"] == "compile_cold_p50_ms")
    assert compile_row["pass"] is False and compile_row["checked"] is False


def test_a_failed_object_is_a_failure() -> None:
    doc = _doc(_run("inproc", failures=["o3 is failed: {}"]))
    assert failed_checks(doc) == ["inproc: o3 is failed: {}"]
    with pytest.raises(BenchError, match="inproc run failed"):
        raise_for_failures(doc)


def test_missing_acks_are_a_failure() -> None:
    with pytest.raises(BenchError, match="9 acks for 10 objects"):
        raise_for_failures(_doc(_run("stdio", acks=9)))


def test_schema_accepts_a_document_and_names_the_first_mismatch() -> None:
    doc = _doc(_run("inproc"), _run("stdio"))
    validate(doc)
    broken = copy.deepcopy(doc)
    del broken["runs"][1]["snapshots"]["after_soak"]
    with pytest.raises(BenchSchemaError, match=r"\$\.runs\[1\]\.snapshots: missing 'after_soak'"):
        validate(broken)
    broken = copy.deepcopy(doc)
    broken["runs"][0]["acks"] = True
    with pytest.raises(BenchSchemaError, match=r"\$\.runs\[0\]\.acks: expected integer"):
        validate(broken)
    broken = copy.deepcopy(doc)
    broken["schema"] = "wakeful.bench.density/2"
    with pytest.raises(BenchSchemaError, match="schema"):
        validate(broken)
