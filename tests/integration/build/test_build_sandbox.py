"""build.md §5.3: the per-step Landlock domain, exercised directly in a child process (real syscalls)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import IN_CI, make_canary

from wakeful.build import sandbox
from wakeful.build.driver import find_zig

pytestmark = pytest.mark.integration

CHILD = r"""
import json, os, socket, subprocess, sys
from wakeful.build import sandbox
zig, staging, canary = sys.argv[1:4]
sandbox.restrict(sandbox.step_rules(os.path.dirname(zig), staging), sandbox.abi_version())
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__
out = {
    "read_canary": attempt(lambda: open(canary).read()),
    "list_canary_dir": attempt(lambda: os.listdir(os.path.dirname(canary))),
    "read_src": attempt(lambda: open(os.path.join(staging, "src", "main.c")).read()),
    "write_src": attempt(lambda: open(os.path.join(staging, "src", "new.c"), "w").close()),
    "write_out": attempt(lambda: open(os.path.join(staging, "out", "x.o"), "w").close()),
    "write_tmp": attempt(lambda: open(os.path.join(staging, "tmp", "t"), "w").close()),
    "read_urandom": attempt(lambda: open("/dev/urandom", "rb").read(4)),
    "run_zig": attempt(lambda: subprocess.run([zig, "version"], check=True, capture_output=True)),
    "run_sh": attempt(lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True)),
}
print(json.dumps(out))
"""


def test_sandbox_step_domain(tmp_path: Path) -> None:
    try:
        sandbox.abi_version()
    except sandbox.LandlockError as exc:
        if IN_CI:
            pytest.fail(f"Landlock unavailable: {exc}")
        pytest.skip(f"Landlock unavailable: {exc}")
    zig = find_zig(None)
    assert zig is not None
    canary = make_canary(tmp_path / "canary")
    staging = tmp_path / "staging"
    for sub in ("src", "sdk", "out", "tmp"):
        (staging / sub).mkdir(parents=True)
    (staging / "src" / "main.c").write_text("int x;\n")
    env = {"PYTHONPATH": os.pathsep.join(sys.path), "PATH": ""}
    proc = subprocess.run([sys.executable, "-c", CHILD, zig, str(staging), canary.path], capture_output=True,
                          text=True, env=env, timeout=60, check=True)
    got = json.loads(proc.stdout)
    assert got == {
        "read_canary": "PermissionError", "list_canary_dir": "PermissionError", "read_src": "ok",
        "write_src": "PermissionError", "write_out": "ok", "write_tmp": "ok", "read_urandom": "ok",
        "run_zig": "ok", "run_sh": "PermissionError",
    }
    assert canary.secret not in proc.stdout + proc.stderr
