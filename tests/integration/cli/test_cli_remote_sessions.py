"""`wakeful session watch` in remote mode: the SSE stream `G/sessions/{id}/stream` of a real `wakeful serve`
(interfaces.md §2.2, §4.1), against a Loop whose wakes (`agent.notify`) land in the session.

The watch runs as a subprocess: it prints one JSON Lines record per new message, in the local record shape,
keeps following after the first, and stops cleanly on SIGINT with exit 0, as local `session watch` does.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli_remote import doc, env_for, ok, serving, wakeful

pytestmark = pytest.mark.integration

COUNTER = Path(__file__).resolve().parents[2] / "support" / "guests" / "ingress_counter.c"
WAIT_S = 90.0  # a generous smoke bound for one wake to reach the watch, never a timing assertion


@dataclass
class Node:
    url: str
    home: Path
    away: Path
    agent: str
    session: str
    key: str
    loop: str

    def remote(self, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        return wakeful(self.away, "--server", self.url, "--key", key or self.key, *args)

    def wake(self, event_id: str) -> None:
        """An operator-sent ``wake`` event: the counter Loop notifies the session with ``ev:<event_id>``."""
        sent = ok(self.remote("loop", "send", self.loop, "--topic", "wake", "--event-id", event_id, "--json"))
        assert sent["duplicate"] is False


class Watch:
    """A `wakeful … session watch` subprocess whose stdout lines are read on a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "wakeful.cli.main", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def record(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=WAIT_S)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(f"no record; stderr: {self.proc.communicate()[1][-2000:]}") from None
        found: dict[str, Any] = json.loads(line)
        return found

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return self.proc.returncode, err


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, compile_c: Callable[..., bytes]) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("cli-remote-sessions")
    home, away = root / "home", root / "away"
    away.mkdir()
    group = ok(wakeful(home, "group", "create", "g-watch", "--json"))["id"]
    agent = ok(wakeful(home, "agent", "create", "a1", "--group", group, "--json"))["id"]
    key = ok(wakeful(home, "key", "create", "--role", "group", "--group", group, "--json"))["key"]
    elf = root / "counter.elf"
    elf.write_bytes(compile_c(COUNTER.read_text(), name="counter.c"))
    with serving(home, "cli-remote-sessions") as url:
        session = ok(wakeful(away, "--server", url, "--key", key, "session", "create", "--agent", agent, "--title",
                             "inbox", "--json"))["id"]
        loop = ok(wakeful(away, "--server", url, "--key", key, "loop", "create", "--agent", agent, "--session",
                          session, "--elf", str(elf), "--name", "counter", "--json"))["id"]
        yield Node(url, home, away, agent, session, key, loop)
    assert not list(away.iterdir()), "a remote command wrote to its local data directory"


def test_watch_follows_the_stream_and_stops_on_sigint(node: Node) -> None:
    node.wake("w1")
    watch = Watch(["--server", node.url, "--key", node.key, "session", "watch", node.session, "--from-start",
                   "--json"], env_for(node.away))
    first = watch.record()
    assert first["type"] == "message" and first["loop_id"] == node.loop and "ev:w1" in json.dumps(first["content"])
    assert set(first) == {"type", "id", "kind", "loop_id", "loop_name", "incarnation", "content", "created_ms",
                          "handled_ms"}  # the local record shape
    node.wake("w2")  # produced while the watch follows: it arrives over the open stream
    second = watch.record()
    assert "ev:w2" in json.dumps(second["content"]) and second["id"] != first["id"]
    code, err = watch.interrupt()
    assert code == 0 and "Traceback" not in err, err

    # without --from-start the watch starts after the newest message: nothing older is printed
    quiet = node.remote("session", "watch", node.session, "--for", "1", "--json")
    assert quiet.returncode == 0 and quiet.stdout == "", (quiet.stdout, quiet.stderr)
    human = node.remote("session", "watch", node.session, "--from-start", "--for", "1")
    assert human.returncode == 0 and "ev:w1" in human.stdout and "ev:w2" in human.stdout


def test_local_watch_also_stops_on_sigint_with_exit_0(node: Node) -> None:
    node.wake("w-local")
    watch = Watch(["session", "watch", node.session, "--from-start", "--json"], env_for(node.home))
    assert watch.record()["type"] == "message"
    code, err = watch.interrupt()
    assert code == 0 and "Traceback" not in err, err


def test_watch_refusals(node: Node) -> None:
    wrong = node.remote("session", "watch", node.session, "--for", "1", "--json", key="wk_key_nope_secret")
    assert wrong.returncode == 1 and doc(wrong)["error"] == "unauthorized"
    missing = node.remote("session", "watch", "ses_nope", "--for", "1", "--json")
    assert missing.returncode == 1 and doc(missing)["error"] == "session_not_found"
    keyless = wakeful(node.away, "--server", node.url, "session", "watch", node.session, "--for", "1")
    assert keyless.returncode == 2 and "WAKEFUL_API_KEY" in keyless.stderr
    tail = node.remote("loop", "tail", node.loop, "--for", "1")  # no route: still refused
    assert tail.returncode == 2 and "`wakeful loop tail` has no remote mode yet" in tail.stderr
