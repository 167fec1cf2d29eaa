"""The CI smoke run of benchmarks.md §2.1: the real `wakeful bench harness` command, a real `wakeful serve`
child per store (SQLite and PostgreSQL), and DBOS beside it when the ``peers`` extra is installed.

Correctness only: 0 errors, every accepted event acked, the node restarted after kill -9 and SIGTERM, the JSON
validates against the schema. No time or memory figure is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.bench.harness_schema import validate_harness
from wakeful.bench.schema import BenchSchemaError

pytestmark = pytest.mark.integration
SRC = Path(__file__).resolve().parents[3] / "src"
# correctness only: a killed PostgreSQL node's leases are taken over within seconds, so the run stays short; TTL 5 s
# (not 3 s) so the node's session timeouts, (TTL − renew) / 2, are 2 s and survive a descheduled second under load
FAST_PLACEMENT = {"WAKEFUL_PLACEMENT__LEASE_TTL_S": "5", "WAKEFUL_PLACEMENT__RENEW_S": "1",
                  "WAKEFUL_PLACEMENT__HEARTBEAT_S": "1", "WAKEFUL_PLACEMENT__DEAD_AFTER_S": "2",
                  "WAKEFUL_PLACEMENT__TICK_S": "1"}


def _stores() -> str:
    from support.harness_fixtures import _pg_unavailable_reason

    return "both" if _pg_unavailable_reason() is None else "sqlite"


def test_harness_smoke_run_is_correct(tmp_path: Path) -> None:
    stores = _stores()
    env = dict(os.environ, PYTHONPATH=str(SRC), WAKEFUL_HOME=str(tmp_path), **FAST_PLACEMENT)
    done = subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", "bench", "harness", "--count", "20", "--loops-per-agent", "10",
         "--seconds", "1", "--idle-seconds", "1", "--wakes", "3", "--store", stores, "--json", "-"],
        env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    validate_harness(doc)
    wakeful_runs = [r for r in doc["runs"] if r["system"] == "wakeful"]
    assert {r["store"] for r in wakeful_runs} == ({"sqlite", "postgresql"} if stores == "both" else {"sqlite"})
    for run in doc["runs"]:
        assert run["failures"] == [], run["failures"]
        steps = run["steps"]
        assert steps["create"]["errors"] == {} and steps["create"]["created"] == 20
        assert steps["ingest"]["errors"] == {} and steps["ingest"]["accepted"] > 0 and steps["ingest"]["drained"]
        cpu = steps["ingest"]["cpu"]  # the client's work shows as the bench's CPU, inside the machine's busy CPU
        assert 0 < cpu["bench_s"] <= cpu["machine_busy_s"] + 0.05 and cpu["steal_s"] >= 0
        if run["system"] == "wakeful":  # counted on both stores (SQLite: the node's Store.commits, /v1/info)
            assert steps["ingest"]["commits"] > 0 and steps["ingest"]["commits_per_event"] is not None
            assert steps["ingest"]["node_cpu_ms_per_event"] > 0
            assert cpu["other_s"] is not None and steps["ingest"]["node_cpu_s"] <= cpu["machine_busy_s"] + 0.05
            assert isinstance(steps["idle"]["commits"], int)
            assert steps["create"]["node_cpu_s"] > 0 and steps["create"]["node_cpu_ms_per_create"] > 0
        assert steps["wake"]["samples"] == 3
        assert steps["restart"]["kill9_all_running_s"] is not None
        assert steps["restart"]["sigterm_all_running_s"] is not None
    assert {t["store"] for t in doc["targets"]} == {r["store"] for r in wakeful_runs}


def test_harness_schema_rejects_a_run_without_steps() -> None:
    doc = {"schema": "wakeful.bench.harness/1", "started_at": "", "wakeful_version": "0", "git_revision": None,
           "git_dirty": None, "python": "3", "platform": "", "cpu_model": None, "cpu_count": 2,
           "mem_total_bytes": None, "options": {}, "peer_version": None, "targets": [],
           "runs": [{"round": 1, "system": "wakeful", "store": "sqlite", "count": 1, "load_average_start": [0.0],
                     "failures": []}]}
    with pytest.raises(BenchSchemaError, match=r"runs\[0\].*steps"):
        validate_harness(doc)


def test_harness_two_nodes_share_the_loops(tmp_path: Path) -> None:
    """``--nodes 2`` on one PostgreSQL: every Loop is resident on one of the nodes (placement's leases decide which),
    each node reports its share and CPU, and killing node 1 moves or reloads its Loops (correctness only)."""
    from support.harness_fixtures import require_pg

    require_pg()
    env = dict(os.environ, PYTHONPATH=str(SRC), WAKEFUL_HOME=str(tmp_path), **FAST_PLACEMENT)
    done = subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", "bench", "harness", "--count", "20", "--loops-per-agent", "2",
         "--seconds", "1", "--idle-seconds", "1", "--wakes", "2", "--store", "postgresql", "--nodes", "2",
         "--peer", "off", "--json", "-"],
        env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    validate_harness(doc)
    (run,) = doc["runs"]
    assert run["failures"] == [] and run["nodes"] == 2
    per_node = run["steps"]["memory"]["per_node"]
    assert [n["node"] for n in per_node] == ["bench-node-1", "bench-node-2"]
    assert sum(n["loops"] for n in per_node) == 20  # each Loop resident on exactly one node (the split is placement's)
    assert len(run["steps"]["ingest"]["per_node_cpu_s"]) == 2
    assert run["steps"]["ingest"]["drained"] and run["steps"]["restart"]["kill9_all_running_s"] is not None


def test_harness_with_no_ingest_runs_create_and_restart_only(tmp_path: Path) -> None:
    """issue 16: ``--seconds 0 --idle-seconds 0 --wakes 0`` measures a restart without the ingest (the restart
    figures at N = 10,000 in a few minutes, not 20); the document still validates, the ingest step is null."""
    env = dict(os.environ, PYTHONPATH=str(SRC), WAKEFUL_HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "wakeful.cli.main", "bench", "harness", "--count", "20", "--loops-per-agent", "10",
         "--seconds", "0", "--idle-seconds", "0", "--wakes", "0", "--store", "sqlite", "--peer", "off",
         "--json", "-"],
        env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]  # previously: "--seconds must be positive"
    doc = json.loads(done.stdout)
    validate_harness(doc)
    (run,) = doc["runs"]
    assert run["failures"] == [], run["failures"]
    steps = run["steps"]
    assert steps["ingest"] is None and steps["idle"] is None and steps["wake"] is None
    assert steps["create"]["created"] == 20
    assert steps["restart"]["kill9_all_running_s"] is not None
    assert steps["restart"]["sigterm_all_running_s"] is not None
