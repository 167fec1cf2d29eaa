"""The `wakeful` command as a subprocess and a real `wakeful serve` on SQLite, for the remote-mode CLI tests.

Each subprocess gets its own environment (the remote-mode variables of this process are scrubbed), so the tests
never change the environment of the test process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"
SCRUBBED = ("WAKEFUL_SERVER", "WAKEFUL_API_KEY", "WAKEFUL_CONFIG", "WAKEFUL_DB_URL", "WAKEFUL_HOME")


def env_for(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    return {**env, "PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home), **(extra or {})}


def wakeful(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wakeful.cli.main", *args], capture_output=True, text=True,
                          env=env_for(home, env), timeout=120)


def doc(proc: subprocess.CompletedProcess[str]) -> Any:
    """The one JSON document a `--json` command printed."""
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(lines[0])


def ok(proc: subprocess.CompletedProcess[str]) -> Any:
    """The document of a command that must have succeeded."""
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    return doc(proc)


@contextmanager
def serving(home: Path, name: str) -> Iterator[str]:
    """`wakeful serve --port 0` on ``home``'s store; yields its URL, terminates it after."""
    log_path = home.parent / f"{name}.serve.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "wakeful.cli.main", "serve", "--port", "0", "--node-name", name],
                            stdout=subprocess.PIPE, stderr=log, text=True,
                            env=env_for(home, {"PYTHONUNBUFFERED": "1"}))
    try:
        assert proc.stdout is not None
        url = None
        while url is None:
            line = proc.stdout.readline()
            assert line, f"wakeful serve ended early:\n{log_path.read_text()[-3000:]}"
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()
