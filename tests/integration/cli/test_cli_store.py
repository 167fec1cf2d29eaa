"""issue 19: one store for the demo and the CLI. ``wakeful serve --demo`` writes ``<data>/node.json``; the CLI
run in the same folder (no --data-dir, no $WAKEFUL_HOME) lists the demo's Loops and says which store it uses;
``doctor`` reports the node whatever its port; the demo prints the exports, which give remote mode; a clean stop
removes ``node.json``."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("WAKEFUL_")}, "PYTHONUNBUFFERED": "1"}


def _cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wakeful.cli.main", *args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=180)


def _until(lines: queue.Queue[str], marker: str) -> str:
    text = ""
    deadline = time.monotonic() + 240
    while marker not in text:
        try:
            text += lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {marker!r} in the demo output:\n{text}") from None
    return text


def test_cli_in_the_demo_folder_uses_the_demo_node(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "wakeful.cli.main", "serve", "--demo", "--port", "0", "--no-ui"],
                            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True)
    reader.start()
    data = tmp_path / ".wakeful-demo"
    try:
        text = _until(lines, "demo goal:")
        base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", text)
        assert base is not None
        node = json.loads((data / "node.json").read_text())
        assert node["url"] == base.group(1) and node["pid"] == proc.pid and node["data_dir"] == str(data)
        assert (data / "node.json").stat().st_mode & 0o777 == 0o600
        assert f"data dir:      {data}" in text

        listed = _cli(tmp_path, "loop", "list")
        assert listed.returncode == 0, listed.stderr
        for name in ("heartbeat", "batch_summary", "threshold_alert"):
            assert name in listed.stdout
        assert f"using the store of the node at {base.group(1)}" in listed.stderr

        doctor = _cli(tmp_path, "doctor", "--json")
        port = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "port")
        assert port["status"] == "ok" and base.group(1) in port["detail"]

        export = re.search(r"^  export (.+)$", text, re.M)
        assert export is not None, text
        shell = subprocess.run(["bash", "-c", f"export {export.group(1)}; exec \"$0\" -m wakeful.cli.main --json "
                                "loop list", sys.executable], cwd=tmp_path, env=_env(), capture_output=True,
                               text=True, timeout=180)
        assert shell.returncode == 0, shell.stderr
        assert {"heartbeat", "batch_summary", "threshold_alert"} <= {loop["name"] for loop in json.loads(shell.stdout)}
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        reader.join(5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert code == 0
    assert not (data / "node.json").exists()  # a clean stop removes it


def test_cli_says_when_it_creates_an_empty_store(tmp_path: Path) -> None:
    env = {**_env(), "WAKEFUL_HOME": str(tmp_path / "home")}
    first = _cli(tmp_path, "loop", "list", env=env)
    assert first.returncode == 0
    assert f"creating an empty one at {tmp_path / 'home' / 'wakeful.db'}" in first.stderr
    again = _cli(tmp_path, "loop", "list", env=env)
    assert "creating" not in again.stderr
