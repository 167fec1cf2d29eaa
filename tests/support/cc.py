"""A direct `zig clang` BPF compile for test fixtures, with the fixed flags of build.md §2.1.

Tests of the VM and runtime use it so they do not depend on the confined build pipeline; tests of
`wakeful.build` use the real `Builder` instead.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import subprocess
import tempfile
from pathlib import Path

SDK_INCLUDE = Path(__file__).resolve().parents[2] / "src" / "wakeful" / "sdk" / "include"
CACHE = Path(tempfile.gettempdir()) / "wakeful-test-cc-cache"


@functools.cache
def zig_path() -> str:
    spec = importlib.util.find_spec("ziglang")
    assert spec is not None and spec.origin, "the ziglang wheel is not installed"
    return str(Path(spec.origin).parent / "zig")


FLAGS = [
    "clang", "--target=bpfel", "-x", "c", "-std=gnu17", "-O2", "-mcpu=v4", "-ffreestanding",
    "-fno-raw-string-literals", "-nostdinc", "--no-default-config", "-mllvm", "-bpf-stack-size=4096",
    "-fno-builtin", "-fno-common", "-fno-jump-tables", "-fno-unwind-tables",
    "-fno-asynchronous-unwind-tables", "-Wall", "-fno-color-diagnostics",
]


def compile_c(source: str, *, extra_flags: tuple[str, ...] = (), name: str = "main.c") -> bytes:
    """Compile one C source (which may include <wakeful.h>) to a BPF ELF; cached by content."""
    key = hashlib.sha256(
        repr((source, extra_flags, name, _sdk_digest())).encode()
    ).hexdigest()
    CACHE.mkdir(parents=True, exist_ok=True)
    hit = CACHE / f"{key}.o"
    if hit.exists():
        return hit.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / name
        src.write_text(source)
        out = Path(tmp) / "out.o"
        env = {"PATH": "", "HOME": tmp, "ZIG_GLOBAL_CACHE_DIR": tmp, "ZIG_LOCAL_CACHE_DIR": tmp}
        proc = subprocess.run(
            [zig_path(), *FLAGS, *extra_flags, "-I", str(SDK_INCLUDE), "-c", str(src), "-o", str(out)],
            capture_output=True, text=True, env=env, timeout=60,
        )
        if proc.returncode != 0:
            raise AssertionError(f"fixture did not compile:\n{proc.stderr}")
        data = out.read_bytes()
    tmp_hit = hit.with_suffix(f".{os.getpid()}.tmp")
    tmp_hit.write_bytes(data)
    tmp_hit.replace(hit)
    return data


def _sdk_digest() -> str:
    h = hashlib.sha256()
    if SDK_INCLUDE.exists():
        for p in sorted(SDK_INCLUDE.glob("*.h")):
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()
