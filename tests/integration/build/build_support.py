"""Shared pieces of the build integration tests: builders on private build roots, the canary, leak checks."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from wakeful.build.driver import Builder, BuildOptions, BuildResult

IN_CI = os.environ.get("CI") == "true"
MAIN = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return 7; }\n"


def make_builder(root: Path, **options: Any) -> Builder:
    """A Builder on its own data directory; the probe must pass unless the test says otherwise."""
    root.mkdir(parents=True, exist_ok=True)
    return Builder(BuildOptions(data_dir=root, **options))


def build(builder: Builder, source: str | dict[str, str], entry: str = "main.c") -> BuildResult:
    files = {entry: source} if isinstance(source, str) else source
    return builder.compile_blocking({"sdk_version": 1, "entry": entry, "files": files})


def require_available(builder: Builder) -> None:
    info = builder.info()
    assert info.available, f"toolchain unavailable: {info.reason}"


def require_landlock(builder: Builder) -> None:
    """With CI=true a machine without Landlock fails the run; elsewhere the test is skipped visibly."""
    info = builder.info()
    if info.sandbox_level != "landlock":
        message = f"Landlock not in force: {info.sandbox_reason}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@dataclass(frozen=True)
class Canary:
    """A secret file outside every build tree, and a path of the same basename that does not exist."""

    path: str
    missing: str
    secret: str

    def pick(self, which: str) -> str:
        return self.path if which == "existing" else self.missing


def make_canary(base: Path) -> Canary:
    secret = "CANARY-" + secrets.token_hex(16)
    (base / "present").mkdir(parents=True)
    (base / "absent").mkdir(parents=True)
    path = base / "present" / "secret.h"
    path.write_text(f"{secret}\nint {secret.replace('-', '_')} = 1;\n")
    return Canary(str(path), str(base / "absent" / "secret.h"), secret)


def leaks(result: BuildResult, secret: str, build_root: Path) -> list[str]:
    """Every place the secret shows up: result text, ELF, or any file left under the build root."""
    found = []
    for name in ("error", "diagnostics"):
        if secret in (getattr(result, name) or ""):
            found.append(name)
    if result.elf and secret.encode() in result.elf:
        found.append("elf")
    for path in build_root.rglob("*"):
        if path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes():
            found.append(str(path))
    return found


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (the build helper's compiler process groups)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def processes_in_group(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found
