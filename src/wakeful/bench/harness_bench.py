"""``wakeful bench harness`` (benchmarks.md §2): durable Loops in a real node, on SQLite and PostgreSQL, with
DBOS Transact as the peer in the same run when the ``peers`` extra is installed.

``run_harness(options, progress)`` returns the ``wakeful.bench.harness/1`` document; ``judge`` turns it into
target rows (§2.2) and ``failed_checks`` into what ``--check`` fails on.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from wakeful.bench.density import _cpu_model, _git, _mem_total
from wakeful.bench.harness_node import NodeProcess, TestStore, load_average, make_tenant
from wakeful.bench.harness_steps import NodeSteps
from wakeful.bench.progress import NullProgress, Progress
from wakeful.bench.variants import BenchError

__all__ = ["SCHEMA", "HarnessOptions", "failed_checks", "judge", "run_harness"]

SCHEMA = "wakeful.bench.harness/1"
STORES = ("sqlite", "postgresql")
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass
class HarnessOptions:
    """benchmarks.md §2.1 options; ``store`` is sqlite, postgresql or both."""

    count: int = 10_000
    loops_per_agent: int = 20
    store: str = "both"
    seconds: float = 20.0
    idle_seconds: float = 60.0
    wakes: int = 200
    repeat: int = 1
    peer: str = "auto"  # auto (when dbos is installed), on, off
    pg_url: str = PG_URL
    check: bool = False
    nodes: int = 1  # K nodes on one PostgreSQL, Loops spread by leases

    def validate(self) -> None:
        if self.count < 1 or self.loops_per_agent < 1 or self.repeat < 1:
            raise BenchError("--count, --loops-per-agent and --repeat must be at least 1")
        if self.store not in (*STORES, "both"):
            raise BenchError(f"--store is sqlite, postgresql or both (not {self.store!r})")
        if self.peer not in ("auto", "on", "off"):
            raise BenchError(f"--peer is auto, on or off (not {self.peer!r})")
        if self.peer == "on" and not peer_installed():
            raise BenchError("--peer on needs DBOS Transact: pip install 'wakeful[peers]'")
        if self.nodes < 1 or (self.nodes > 1 and self.store != "postgresql"):
            raise BenchError("--nodes K above 1 needs --store postgresql (a SQLite store has one node)")
        if self.seconds < 0 or self.idle_seconds < 0 or self.wakes < 0:
            raise BenchError("--seconds, --idle-seconds and --wakes must not be negative")

    @property
    def stores(self) -> tuple[str, ...]:
        return STORES if self.store == "both" else (self.store,)

    @property
    def with_peer(self) -> bool:
        return self.peer == "on" or (self.peer == "auto" and peer_installed() and "postgresql" in self.stores)


def peer_installed() -> bool:
    return importlib.util.find_spec("dbos") is not None


def run_harness(options: HarnessOptions, progress: Progress | None = None) -> dict[str, Any]:
    """§2.1: ``--repeat`` rounds; each round runs every store and then the peer (rounds interleave them)."""
    progress = progress or NullProgress()
    doc = _header(options)
    runs: list[dict[str, Any]] = []
    for round_ in range(options.repeat):
        for system in _systems(options):
            progress.note(f"round {round_ + 1}/{options.repeat}: {system}, load average {load_average()}")
            run = run_peer(options, progress) if system == "dbos" else run_store(system, options, progress)
            runs.append({"round": round_ + 1, **run})
    doc["runs"] = runs
    doc["targets"] = judge(doc)
    return doc


def _systems(options: HarnessOptions) -> list[str]:
    return [*options.stores, *(["dbos"] if options.with_peer else [])]


def run_store(kind: str, options: HarnessOptions, progress: Progress) -> dict[str, Any]:
    """One store's run (§2.1 steps 1–7) on a fresh store, the node cleaned up whatever happens."""
    store = TestStore(kind, options.pg_url).open()
    nodes = [NodeProcess(store, f"bench-node-{k + 1}") for k in range(options.nodes)]
    run: dict[str, Any] = {"system": "wakeful", "store": kind, "count": options.count, "nodes": options.nodes,
                           "load_average_start": load_average()}
    try:
        tenant = make_tenant(store.url, store.data_dir, options.count, options.loops_per_agent)
        run["start_s"] = round(sum(node.start() for node in nodes), 3)
        steps = NodeSteps(nodes, store, tenant, progress)
        run["steps"] = asyncio.run(_steps(steps, options))
        run["failures"] = steps.failures
        for node in nodes:
            code = node.terminate()
            if code != 0:
                run["failures"].append(f"{node.node_name} exited {code} on SIGTERM")
        run["exit_code"] = 0 if all(n.proc is None or n.proc.returncode == 0 for n in nodes) else 1
    except BenchError as exc:
        run.setdefault("steps", {})
        run["failures"] = [*run.get("failures", []), exc.message, nodes[0].log_tail()[-500:]]
    finally:
        for node in nodes:
            node.close()
        store.close()
    return run


async def _steps(steps: NodeSteps, options: HarnessOptions) -> dict[str, Any]:
    out: dict[str, Any] = {"create": await steps.create(options.count, options.loops_per_agent)}
    await asyncio.sleep(1.0)  # let the burst's garbage go before the memory snapshot
    out["memory"] = steps.memory()
    out["idle"] = await steps.idle(options.idle_seconds) if options.idle_seconds else None
    out["ingest"] = await steps.ingest(options.seconds) if options.seconds else None  # 0: create + restart only
    out["wake"] = await steps.wake(options.wakes) if options.wakes else None
    out["restart"] = await steps.restart()
    return out


def run_peer(options: HarnessOptions, progress: Progress) -> dict[str, Any]:
    from wakeful.bench.harness_peer import run_dbos

    return run_dbos(options, progress)


# ---------------------------------------------------------------------- document header


def _header(options: HarnessOptions) -> dict[str, Any]:
    import datetime as dt
    import os
    import platform
    import sys

    from wakeful import __version__

    dirty = _git("status", "--porcelain", "--untracked-files=no")
    opts = {k: v for k, v in asdict(options).items() if k != "pg_url"}
    return {"schema": SCHEMA,
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "wakeful_version": __version__, "git_revision": _git("rev-parse", "HEAD"),
            "git_dirty": None if dirty is None else bool(dirty), "python": sys.version.split()[0],
            "platform": platform.platform(), "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
            "mem_total_bytes": _mem_total(), "options": opts, "peer_version": _peer_version(options)}


def _peer_version(options: HarnessOptions) -> str | None:
    if not options.with_peer:
        return None
    from importlib.metadata import version

    return version("dbos")


# ---------------------------------------------------------------------- targets (§2.2)

# (name, step, figure path, comparison, target); every row is checked by --check on each wakeful store
TARGETS: list[tuple[str, tuple[str, ...], str, float]] = [
    ("pss_per_loop", ("memory", "pss_per_loop"), "<=", 8_192),
    ("ingest_accepted_per_s", ("ingest", "accepted_per_s"), ">=", 2_000),
    ("ingest_p99_ms", ("ingest", "latency_ms", "p99"), "<=", 100),
    ("commits_per_event", ("ingest", "commits_per_event"), "<=", 1),
    ("wake_p50_ms", ("wake", "latency_ms", "p50"), "<=", 10),
    ("wake_p99_ms", ("wake", "latency_ms", "p99"), "<=", 50),
    ("idle_cpu_s_per_min", ("idle", "cpu_s_per_min"), "<=", 0.3),
    ("idle_commits_per_min", ("idle", "commits_per_min"), "<=", 60),
    ("kill9_all_running_s", ("restart", "kill9_all_running_s"), "<=", 3),
    ("creates_per_s", ("create", "creates_per_s"), ">=", 500),
    ("create_all_running_s", ("create", "all_running_s"), "<=", 30),
]
PEER_RATIO = 3.0  # §2.2: ingest ≥ 3× the peer


def figure(run: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = run.get("steps")
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def median_figure(runs: list[dict[str, Any]], path: tuple[str, ...]) -> float | None:
    values = [v for v in (figure(r, path) for r in runs) if v is not None]
    return statistics.median(values) if values else None


def _runs(doc: dict[str, Any], system: str, store: str | None = None) -> list[dict[str, Any]]:
    return [r for r in doc.get("runs", []) if r["system"] == system and (store is None or r["store"] == store)]


def judge(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """§2.2: one row per target and wakeful store, the median over ``--repeat`` rounds."""
    rows: list[dict[str, Any]] = []
    peer_ingest = median_figure(_runs(doc, "dbos"), ("ingest", "accepted_per_s"))
    for store in STORES:
        runs = _runs(doc, "wakeful", store)
        if not runs:
            continue
        for name, path, op, target in TARGETS:
            row = _row(name, op, target, median_figure(runs, path), store)
            if "commits" in name and row["measured"] is None:
                row["checked"] = False  # no commit count was read (a node did not answer): reported, not judged
            rows.append(row)
        if peer_ingest:
            ours = median_figure(runs, ("ingest", "accepted_per_s"))
            rows.append(_row("ingest_vs_peer", ">=", PEER_RATIO, None if ours is None else ours / peer_ingest,
                             store))
    return rows


def _row(name: str, op: str, target: float, measured: float | None, store: str) -> dict[str, Any]:
    ok = None if measured is None else (measured <= target if op == "<=" else measured >= target)
    return {"name": name, "target": f"{op} {target:g}", "measured": measured, "store": store, "pass": ok,
            "checked": True}


def failed_checks(doc: dict[str, Any]) -> list[str]:
    """Missed targets (unmeasured counts as missed) and every correctness failure of a run."""
    missed = [f"{r['name']} ({r['store']})" for r in doc["targets"] if r["checked"] and r["pass"] is not True]
    for run in doc.get("runs", []):
        missed += [f"{run['system']}/{run['store']} round {run['round']}: {f}" for f in run.get("failures", [])]
    return missed
