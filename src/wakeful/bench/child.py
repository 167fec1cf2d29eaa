"""A fresh process for one in-process measurement (``python -m wakeful.bench.child``; benchmarks.md §1.3, §1.2).

Python keeps freed memory for reuse, so a second in-process run in one process measures PSS deltas against
arenas the first run left behind (a few bytes per object). ``--repeat`` rounds after the first and the realistic
variant therefore run here: the request (JSON on stdin) names the run; the ``runs[]``/``realistic`` entry of §1.7
comes back as JSON on stdout.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from wakeful.bench.variants import BenchError

__all__ = ["run_in_child"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def run_in_child(request: dict[str, Any], elf: bytes, timeout: float = 900.0) -> dict[str, Any]:
    """Run ``request`` (``kind`` ``inproc`` or ``realistic``) in a fresh interpreter; its result dict."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    payload = json.dumps(request | {"elf": base64.b64encode(elf).decode("ascii")})
    proc = subprocess.run(
        [sys.executable, "-m", "wakeful.bench.child"],
        input=payload,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise BenchError(f"the {request.get('kind')} child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    elf = base64.b64decode(request["elf"])
    if request["kind"] == "realistic":
        from wakeful.bench.realistic import measure_realistic

        return measure_realistic(elf, int(request["count"]))
    from wakeful.bench.inproc import InprocPlan, run_inproc
    from wakeful.bench.variants import make_variants

    plan = InprocPlan(
        variant=make_variants(elf, request["distinct"]),
        count=int(request["count"]),
        distinct=request["distinct"],
        samples=int(request["samples"]),
        soak_seconds=float(request["soak_seconds"]),
    )
    run = asyncio.run(run_inproc(plan))
    run["init"]["process"] = "fresh child"
    return run


def main() -> int:
    try:
        result = _serve(json.loads(sys.stdin.read()))
    except BenchError as exc:
        sys.stderr.write(f"{exc.message}\n")
        return 1
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
