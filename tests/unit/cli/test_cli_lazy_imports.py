"""`wakeful runtime` (the stdio runtime server) and `wakeful --help` start without loading the harness or
SQLAlchemy: command modules import them when a command runs (start-up time of every runtime process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("sqlalchemy", "wakeful.harness", "wakeful.control", "fastapi")


def _imported(args: list[str], stdin: bytes | None = b"", home: Path | None = None) -> tuple[int, set[str], str]:
    env = {**os.environ, **({"WAKEFUL_HOME": str(home)} if home else {})}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "wakeful.cli.main", *args], env=env,
                          input=stdin, capture_output=True, timeout=60)
    err = proc.stderr.decode()
    names = {line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import time:")}
    return proc.returncode, names, proc.stdout.decode()


def _heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names for h in HEAVY if n == h or n.startswith(h + "."))


def test_the_runtime_server_starts_and_stops_without_the_harness() -> None:
    code, names, _ = _imported(["runtime"])  # pipes for stdin/stdout; EOF on stdin ends it cleanly
    assert code == 0
    assert "wakeful.runtime.stdio" in names  # it really started the server
    assert not _heavy(names), _heavy(names)


@pytest.mark.parametrize("args", [["--help"], ["runtime", "--help"]])
def test_help_does_not_load_the_harness(args: list[str]) -> None:
    code, names, out = _imported(args)
    assert code == 0 and "Usage" in out
    assert not _heavy(names), _heavy(names)


def test_a_store_command_still_loads_the_harness_when_it_runs(tmp_path: Path) -> None:
    code, names, out = _imported(["db", "version", "--json"], stdin=None, home=tmp_path)
    assert code == 0, out
    assert "sqlalchemy" in names and '"code"' in out
