"""issue 19: ``<data>/node.json`` names the running node; a file of a dead process or a malformed one names none,
and a node removes only its own file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wakeful.cli import nodefile


def test_written_file_names_this_process(tmp_path: Path) -> None:
    nodefile.write(tmp_path, url="http://127.0.0.1:1234", store_url="sqlite:///x.db", node_name="n")
    found = nodefile.live_node(tmp_path)
    assert found is not None and found["pid"] == os.getpid() and found["url"] == "http://127.0.0.1:1234"
    nodefile.remove(tmp_path)
    assert not (tmp_path / nodefile.FILE).exists()


def test_dead_pid_and_garbage_name_no_node(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)
    (tmp_path / nodefile.FILE).write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": dead}))
    assert nodefile.live_node(tmp_path) is None
    nodefile.remove(tmp_path)  # not this process's file: left alone
    assert (tmp_path / nodefile.FILE).exists()
    for text in ("{", "[]", json.dumps({"url": 1, "pid": os.getpid()}), json.dumps({"url": "u", "pid": "1"})):
        (tmp_path / nodefile.FILE).write_text(text)
        assert nodefile.live_node(tmp_path) is None
