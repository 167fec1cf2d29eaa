"""build.md §6 row 26: the compile step, traced with strace on every fixture that reaches it, reads no
regular file outside the zig installation other than out/main.i and writes only under out/ and tmp/.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from build_support import IN_CI, MAIN, make_builder, make_canary, require_available
from test_build_confinement import CASES
from test_build_pipeline import SWITCH

from wakeful.build.driver import COMPILE, command_line
from wakeful.build.helper import compiler_env

pytestmark = pytest.mark.integration

STRACE = shutil.which("strace") or ("/usr/bin/strace" if os.path.exists("/usr/bin/strace") else None)
OPEN = re.compile(r'^\d+\s+(open|openat|openat2|creat)\((?:AT_FDCWD, |\d+, )?"([^"]*)", ([A-Z_|]+)?.*\) = (\d+)')
MUTATE = re.compile(r'^\d+\s+(rename|renameat2?|unlink|unlinkat|mkdir|mkdirat|link|linkat|symlink|symlinkat|truncate|'
                    r'rmdir|chmod|fchmodat)\((?:AT_FDCWD, |\d+, )?"([^"]*)"(?:, (?:AT_FDCWD, )?"([^"]*)")?.*\) = 0')
EXTRA = [
    SWITCH,
    "#include <wakeful.h>\nint f(int n, ...) { return n; }\nSF_MAIN sf_i64 main(void){ return f(1, 2); }\n",
    "#include <wakeful.h>\nSF_MAIN sf_i64 main(void){ double d = sf_now_mono_ms(); return (long)(d * 1.5); }\n",
    "#include <wakeful.h>\nSF_MAIN sf_i64 main(void){ char b[5000]; b[sf_now_mono_ms() % 5000] = 1; return b[3]; }\n",
    "const char big[65000] = {1};\n" + MAIN,
    "#pragma pack(push, 1)\nstruct s { char a; long b; };\n#pragma pack(pop)\n#pragma GCC diagnostic ignored \"-Wall\"\n" + MAIN,
]


def test_trace_row26_compile_step_file_access(tmp_path: Path) -> None:
    if STRACE is None:
        if IN_CI:
            pytest.fail("strace is required in CI (apt-get install -y strace)")
        pytest.skip("strace is not installed (apt-get install -y strace)")
    canary = make_canary(tmp_path / "canary")
    copies: list[Path] = []

    def keep(staging: Path) -> None:
        if (staging / "out" / "main.i").exists():
            copy = tmp_path / "traced" / f"c{len(copies)}"
            shutil.copytree(staging, copy, symlinks=True)
            for leftover in ("main.o",):
                (copy / "out" / leftover).unlink(missing_ok=True)
            copies.append(copy)

    with make_builder(tmp_path / "b", cache=False, keep_staging=keep) as builder:
        require_available(builder)
        zig = builder.zig or ""
        for _, template, _, _ in CASES:
            builder.compile_blocking({"sdk_version": 1, "entry": "main.c",
                                      "files": {"main.c": template.replace("@P@", canary.path) + MAIN,
                                                "data.h": "1, 2, 3\n"}})
        for source in EXTRA:
            builder.compile_blocking({"sdk_version": 1, "entry": "main.c", "files": {"main.c": source}})
    assert len(copies) >= len(EXTRA) + 3
    zig_dir = os.path.realpath(os.path.dirname(zig))
    for copy in copies:
        _trace_one(copy, zig, zig_dir)


def _trace_one(staging: Path, zig: str, zig_dir: str) -> None:
    log = staging.parent / f"{staging.name}.strace"
    argv = command_line(COMPILE, zig, "main.c", str(staging))
    subprocess.run([STRACE or "strace", "-f", "-qq", "-e", "trace=%file", "-e", "signal=none", "-o", str(log), *argv],
                   cwd=staging, env=compiler_env(str(staging)), capture_output=True, timeout=60, check=False)
    reads, writes = _accesses(log.read_text(), staging)
    allowed_reads = {os.path.realpath(staging / "out" / "main.i")}
    bad_reads = [p for p in reads if os.path.isfile(p) and not p.startswith(zig_dir + "/")
                 and p not in allowed_reads and not p.startswith("/proc/")]
    assert bad_reads == [], f"{staging.name} read {bad_reads}"
    roots = (os.path.realpath(staging / "out") + "/", os.path.realpath(staging / "tmp") + "/")
    bad_writes = [p for p in writes if not p.startswith(roots)]
    assert bad_writes == [], f"{staging.name} wrote {bad_writes}"
    assert os.path.realpath(staging / "out" / "main.i") in reads


def _accesses(text: str, cwd: Path) -> tuple[list[str], list[str]]:
    reads: list[str] = []
    writes: list[str] = []
    for line in text.splitlines():
        m = OPEN.match(line)
        if m:
            path = os.path.realpath(cwd / m.group(2))
            flags = m.group(3) or ""
            is_write = m.group(1) == "creat" or any(f in flags for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"))
            (writes if is_write else reads).append(path)
            continue
        m = MUTATE.match(line)
        if m:
            writes.extend(os.path.realpath(cwd / p) for p in m.groups()[1:] if p)
    return reads, writes
