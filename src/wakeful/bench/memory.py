"""Memory snapshots of a process from /proc (benchmarks.md §1.3): Rss/Pss, VmSize, VmRSS, Threads.

A snapshot also carries the runtime's own counters (guest bytes, handle bytes) when the caller has them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["per_object", "per_object_figures", "snapshot"]

_KIB = 1024


def _kib_fields(path: Path, names: tuple[str, ...]) -> dict[str, int]:
    """``Name:  123 kB`` lines of a /proc file → bytes; missing file or field → absent."""
    out: dict[str, int] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        name, _, rest = line.partition(":")
        if name in names:
            parts = rest.split()
            if parts:
                out[name] = int(parts[0]) * (_KIB if parts[-1] == "kB" else 1)
    return out


# §1.3 memory snapshot: smaps_rollup (Rss, Pss) and status (VmSize, VmRSS, Threads)
def snapshot(pid: int, counters: dict[str, Any] | None = None) -> dict[str, Any]:
    """One snapshot of ``pid``; PSS falls back to RSS (``pss_is_rss`` says so) where smaps_rollup is missing."""
    proc = Path("/proc") / str(pid)
    rollup = _kib_fields(proc / "smaps_rollup", ("Rss", "Pss"))
    status = _kib_fields(proc / "status", ("VmSize", "VmRSS", "Threads"))
    rss = rollup.get("Rss", status.get("VmRSS", 0))
    pss = rollup.get("Pss")
    counters = counters or {}
    return {
        "rss": rss,
        "pss": pss if pss is not None else rss,
        "pss_is_rss": pss is None,
        "vm_size": status.get("VmSize", 0),
        "vm_rss": status.get("VmRSS", 0),
        "threads": status.get("Threads", 0),
        "guest_bytes": int(counters.get("guest_bytes", 0)),
        "handle_bytes": int(counters.get("handle_bytes", 0)),
    }


def per_object(after: dict[str, Any], before: dict[str, Any], key: str, count: int) -> float:
    """§1.3 derived figure: ``(after.key − before.key) / N`` in bytes."""
    return (after[key] - before[key]) / count if count else 0.0


def per_object_figures(snaps: dict[str, Any], count: int) -> dict[str, float]:
    """§1.7 the four per-object figures of a run: PSS and RSS, active and after events, over the baseline."""
    return {
        f"{phase}_{key}_per_object": per_object(snaps[snap], snaps["baseline"], key, count)
        for key in ("pss", "rss")
        for phase, snap in (("active", "active"), ("mixed", "after_events"))
    }
