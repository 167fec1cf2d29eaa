"""issue 16 / benchmarks.md §2.2: what `wakeful serve` imports before it serves. The MCP machinery (the mcp
package behind /mcp) is made by the first request to /mcp, not before the node listens; the HTTP stack's packages are
imported by a thread while the main thread opens the store and loads the Loops (``warm_imports``)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_remote import env_for

from wakeful.cli.serve_cmd import warm_imports


def _imported(stderr: Path) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.read_text().splitlines()
            if line.startswith("import time:")}


def test_mcp_is_made_by_the_first_request_to_it_not_before_the_node_serves(tmp_path: Path) -> None:
    err = tmp_path / "serve.err"
    with err.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "wakeful.cli.main", "serve", "--port",
                                 "0", "--no-ui"], stdout=subprocess.PIPE, stderr=sink, text=True,
                                env=env_for(tmp_path / "home", {"PYTHONUNBUFFERED": "1"}))
        try:
            assert proc.stdout is not None
            url = None
            while url is None:
                line = proc.stdout.readline()
                assert line, err.read_text()[-3000:]
                found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
                url = found.group(1) if found else None
            assert "wakeful.mcp.http" not in _imported(err)  # listening, MCP not made
            answer = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=60,
                                trust_env=False)
            assert answer.status_code == 401, answer.text  # the MCP app answered: no key
            for _ in range(100):  # the import lines reach the file as the imports end
                if "wakeful.mcp.http" in _imported(err):
                    break
                time.sleep(0.05)
            assert "wakeful.mcp.http" in _imported(err)
        finally:
            proc.terminate()
            proc.wait(30)
            if proc.stdout is not None:
                proc.stdout.close()
    assert proc.returncode == 0, err.read_text()[-3000:]


def test_warm_imports_imports_in_a_thread_and_leaves_failures_to_the_importer() -> None:
    sys.modules.pop("wave", None)
    thread = warm_imports(("wave", "no_such_module_for_wakeful"))
    thread.join(30)
    assert not thread.is_alive() and thread.daemon
    assert "wave" in sys.modules and "no_such_module_for_wakeful" not in sys.modules


def test_a_serve_that_fails_to_start_waits_for_the_warm_imports_before_it_returns(
        tmp_path: Path, monkeypatch: Any) -> None:
    """A daemon thread still importing (a C extension's module init) when the interpreter finalizes is torn down
    with ``FATAL: exception not rethrown`` and the process aborts (-6) instead of exiting with its error's code: a
    node whose start fails must let the warm thread finish first (seen in CI: a bad config value, exit -6)."""
    import threading

    from wakeful.cli import serve_cmd

    slow = tmp_path / "mods"
    slow.mkdir()
    (slow / "wakeful_slow_import_probe.py").write_text("import time\ntime.sleep(1.5)\n")
    monkeypatch.syspath_prepend(str(slow))
    monkeypatch.setattr(serve_cmd, "WARM_IMPORTS", ("wakeful_slow_import_probe",))
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "home"))
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")  # the store's directory is a file: the node's start fails at once
    with pytest.raises(Exception) as failed:
        serve_cmd.serve_command(host="127.0.0.1", port=0, db_url=f"sqlite:///{blocked}/node.db", node_name="n",
                                config_path=None, demo=False, no_docs=True, mcp=False)
    assert not isinstance(failed.value, AssertionError)
    assert not [t for t in threading.enumerate() if t.name == "wakeful-warm-imports" and t.is_alive()]
    sys.modules.pop("wakeful_slow_import_probe", None)


def test_a_serve_starts_with_the_collector_off_and_serves_with_it_on(tmp_path: Path, monkeypatch: Any) -> None:
    """issue 16 (a restart at N = 10,000): the start's imports, store open and Loop load run without the cyclic
    collector's automatic runs (~0.3 s of CPU there), and the collector is on again before the server serves."""
    import gc

    import uvicorn

    from wakeful.control import Harness

    seen: dict[str, bool] = {}
    real_start = Harness.start

    async def start(self: Harness) -> None:
        seen["start"] = gc.isenabled()
        await real_start(self)

    async def serve(self: uvicorn.Server, sockets: Any = None) -> None:  # ends at once: the serve stops unserved
        seen["serve"] = gc.isenabled()
        for sock in sockets or ():
            sock.close()

    monkeypatch.setattr(Harness, "start", start)
    assert gc.isenabled()
    _serve_unserved(tmp_path, monkeypatch, serve)
    assert seen == {"start": False, "serve": True}  # previously: the start ran with the collector on
    assert gc.isenabled()


YOUNG = 10_000  # the node's young-generation threshold (serve_cmd.NODE_GC_YOUNG)


class _Node:
    """A container in a reference cycle: garbage only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


def test_a_serve_collects_its_young_generation_less_often_and_still_frees_cycles(tmp_path: Path,
                                                                                 monkeypatch: Any) -> None:
    """issue 16 (ingest at N = 10,000): while the node serves, the collector's youngest generation runs after
    ``NODE_GC_YOUNG`` net container allocations (CPython: 700), so a burst of requests sets off few collections,
    and cyclic garbage made while serving is still freed by the collector's own runs (no gc.collect() here)."""
    import gc
    import weakref

    import uvicorn


    before = gc.get_threshold()
    seen: dict[str, Any] = {}

    async def serve(self: uvicorn.Server, sockets: Any = None) -> None:  # ends at once: the serve stops unserved
        seen["threshold"] = gc.get_threshold()
        gc.collect(0)  # the young generation's count from zero: the burst below alone decides
        counts = gc.get_stats()
        alive: weakref.WeakSet[_Node] = weakref.WeakSet()
        burst: list[list[int]] = [[] for _ in range(5_000)]  # a request burst's containers, alive together
        seen["young_after_burst"] = gc.get_stats()[0]["collections"] - counts[0]["collections"]
        del burst
        for _ in range(4 * YOUNG):  # cyclic garbage, 4× the young generation's threshold
            alive.add(_Node())
        seen["cycles_alive"] = len(alive)
        for sock in sockets or ():
            sock.close()

    _serve_unserved(tmp_path, monkeypatch, serve)
    assert seen["threshold"][0] == YOUNG  # previously CPython's 700
    assert seen["threshold"][1:] == before[1:]
    assert seen["young_after_burst"] == 0  # previously 7 young collections over 5,000 live containers
    assert seen["cycles_alive"] <= YOUNG  # 40,000 cycles made, the collector freed the rest
    assert gc.get_threshold() == before  # the command gives the process back its thresholds


def _serve_unserved(tmp_path: Path, monkeypatch: Any, serve: Any) -> None:
    """``serve_command`` on a fresh SQLite store with uvicorn's ``serve`` replaced by ``serve`` (which closes the
    sockets and returns: the command then ends ``Unavailable``, the server never having started)."""
    import uvicorn

    from wakeful.cli import serve_cmd
    from wakeful.cli.output import Unavailable

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "home"))
    with pytest.raises(Unavailable):
        serve_cmd.serve_command(host="127.0.0.1", port=0, db_url=f"sqlite:///{tmp_path / 'node.db'}",
                                node_name="n", config_path=None, demo=False, no_docs=True, mcp=False)
