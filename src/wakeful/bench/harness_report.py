"""Human output of ``wakeful bench harness`` (benchmarks.md §2.1 "Output"): one row per figure, a column per
store and the peer (median over rounds, the range when rounds differ), the target, the ratio to the peer and
whether the target passed; then the load average of every round.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from wakeful.bench.harness_bench import STORES, TARGETS, median_figure

__all__ = ["render_harness"]

# (label, step path, unit, lower is better)
ROWS: list[tuple[str, tuple[str, ...], str, bool]] = [
    ("creates/s (16 in flight)", ("create", "creates_per_s"), "/s", False),
    ("all running after create", ("create", "all_running_s"), " s", True),
    ("node CPU per create", ("create", "node_cpu_ms_per_create"), " ms", True),
    ("memory per durable waiter (PSS)", ("memory", "pss_per_loop"), " B", True),
    ("idle node CPU per minute", ("idle", "cpu_s_per_min"), " s", True),
    ("commits per idle minute", ("idle", "commits_per_min"), "", True),
    ("ingest accepted/s (64 in flight)", ("ingest", "accepted_per_s"), "/s", False),
    ("ingest p50", ("ingest", "latency_ms", "p50"), " ms", True),
    ("ingest p99", ("ingest", "latency_ms", "p99"), " ms", True),
    ("commits per ingested event", ("ingest", "commits_per_event"), "", True),
    ("ingest drain", ("ingest", "drain_s"), " s", True),
    ("node CPU per ingested event", ("ingest", "node_cpu_ms_per_event"), " ms", True),
    ("event → wake p50", ("wake", "latency_ms", "p50"), " ms", True),
    ("event → wake p99", ("wake", "latency_ms", "p99"), " ms", True),
    ("all running after kill -9", ("restart", "kill9_all_running_s"), " s", True),
    ("all running after SIGTERM", ("restart", "sigterm_all_running_s"), " s", True),
]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return (f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}") + unit


def _cell(runs: list[dict[str, Any]], path: tuple[str, ...], unit: str) -> str:
    from wakeful.bench.harness_bench import figure

    values = sorted(v for v in (figure(r, path) for r in runs) if v is not None)
    if not values:
        return "-"
    median = _fmt(median_figure(runs, path), unit)
    return median if len(values) == 1 or values[0] == values[-1] else f"{median} ({_fmt(values[0], '')}–" \
        f"{_fmt(values[-1], '')})"


def _ratio(ours: float | None, peer: float | None, lower_better: bool) -> str:
    if ours is None or peer is None or ours == 0 or peer == 0:
        return "-"
    ratio = peer / ours if lower_better else ours / peer
    return f"{ratio:.2f}×"


def _target(doc: dict[str, Any], path: tuple[str, ...]) -> tuple[str, str]:
    names = {tuple(p): n for n, p, _, _ in TARGETS}
    name = names.get(path)
    rows = [r for r in doc["targets"] if r["name"] == name]
    if not rows:
        return "", ""
    passed = " ".join(("✓" if r["pass"] else "✗" if r["pass"] is False else "·") + r["store"][:2] for r in rows)
    return rows[0]["target"], passed


def render_harness(doc: dict[str, Any], console: Console) -> None:
    runs = doc.get("runs", [])
    columns = [(s, [r for r in runs if r["system"] == "wakeful" and r["store"] == s]) for s in STORES]
    columns = [(s, rs) for s, rs in columns if rs]
    peer = [r for r in runs if r["system"] == "dbos"]
    opts = doc["options"]
    table = Table(title=f"wakeful bench harness — N = {opts['count']:,}, {opts['repeat']} round(s); "
                        f"{doc['cpu_count']} CPU {doc['cpu_model'] or ''}; ratio = wakeful ÷ DBOS (>1 is better)")
    table.add_column("figure")
    for store, _ in columns:
        table.add_column(f"wakeful {store}", justify="right")
    if peer:
        table.add_column(f"DBOS {doc.get('peer_version') or ''}", justify="right")
        for store, _ in columns:
            table.add_column(f"ratio {store[:2]}", justify="right")
    table.add_column("target", justify="right")
    table.add_column("pass")
    for label, path, unit, lower in ROWS:
        cells = [_cell(rs, path, unit) for _, rs in columns]
        if peer:
            cells.append(_cell(peer, path, unit))
            cells += [_ratio(median_figure(rs, path), median_figure(peer, path), lower) for _, rs in columns]
        table.add_row(label, *cells, *_target(doc, path))
    console.print(table)
    for run in runs:
        console.print(f"round {run['round']} {run['system']}/{run['store']}: load average at start "
                      f"{run['load_average_start']}; failures: {len(run.get('failures', []))}")
        _per_node(run, console)
    vs = [r for r in doc["targets"] if r["name"] == "ingest_vs_peer"]
    for r in vs:
        console.print(f"ingest vs DBOS ({r['store']}): {_fmt(r['measured'], '×')} (target {r['target']})")


def _per_node(run: dict[str, Any], console: Console) -> None:
    """``--nodes K``: each node's Loops, memory growth, idle and ingest CPU."""
    steps = run.get("steps") or {}
    memory = steps.get("memory") or {}
    nodes = memory.get("per_node") or []
    if len(nodes) < 2:
        return
    idle = (steps.get("idle") or {}).get("per_node_cpu_s_per_min") or [None] * len(nodes)
    ingest = (steps.get("ingest") or {}).get("per_node_cpu_s") or [None] * len(nodes)
    for node, idle_cpu, ingest_cpu in zip(nodes, idle, ingest):
        console.print(f"  {node['node']}: {node['loops']} Loops, PSS +{node['pss_growth'] / 1024:,.0f} KiB, "
                      f"idle CPU {_fmt(idle_cpu, ' s/min')}, ingest CPU {_fmt(ingest_cpu, ' s')}")
