"""``wakeful serve --demo`` (interfaces.md §8), the README's run command: data in ./.wakeful-demo, credentials
saved 0600, the no-outside-service examples running, and the printed ``curl`` line producing a wake; a restart
reuses the demo tenant and its Loops."""

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

import httpx
import pytest
from live_api import wait_for

pytestmark = pytest.mark.integration


class _Demo:
    def __init__(self, cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WAKEFUL_")}
        self.proc = subprocess.Popen([sys.executable, "-m", "wakeful.cli.main", "serve", "--demo", "--port", "0"],
                                     cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def output_until(self, marker: str, timeout: float = 180) -> str:
        text = ""
        deadline = time.monotonic() + timeout
        while marker not in text:
            try:
                text += self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {marker!r} in the demo output:\n{text}") from None
        return text

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        self.reader.join(5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code


def test_serve_demo_end_to_end(tmp_path: Path) -> None:
    demo = _Demo(tmp_path)
    try:
        text = demo.output_until("-X POST -H \"Authorization")
        creds_path = tmp_path / ".wakeful-demo" / "demo" / "credentials.json"
        assert creds_path.stat().st_mode & 0o777 == 0o600
        creds = json.loads(creds_path.read_text())
        assert set(creds["keys"]) == {"admin", "group", "agent"}
        assert set(creds["loops"]) == {"heartbeat", "batch_summary", "threshold_alert"}
        curl = re.search(r"curl -sS -X POST -H 'Content-Type: application/json' -d '(.+?)' '(http://[^']+)'", text)
        assert curl is not None, text
        body, webhook = curl.group(1), curl.group(2)
        base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", text)
        assert base is not None
        r = httpx.post(webhook, content=body.encode(), headers={"Content-Type": "application/json"})
        assert r.status_code == 202 and r.json()["duplicate"] is False
        messages = f"{base.group(1)}/v1/agent-groups/{creds['group_id']}/sessions/{creds['session_id']}/messages"
        agent = {"Authorization": f"Bearer {creds['keys']['agent']}"}

        def wakes() -> list[dict[str, object]]:
            return [m for m in httpx.get(messages, headers=agent).json()["items"] if m["kind"] == "loop"]

        found = wait_for(wakes, timeout=30)
        assert len(found) == 1 and found[0]["content"] == "cpu is 95, above 90"
        assert all(key not in text for key in creds["keys"].values())  # keys only in the 0600 file
        printed = next(line.strip() for line in text.splitlines() if "Authorization" in line and "GET" not in line
                       and "-X POST" not in line)
        shown = subprocess.run(["bash", "-c", printed], cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert json.loads(shown.stdout)["items"][0]["content"] == "cpu is 95, above 90", shown.stderr
        # interfaces.md §6: the printed one-time dashboard link signs in once (as the demo's admin key)
        login = re.search(r"dashboard: +(http://\S+/ui/) — sign in once with (http://\S+/ui/login\?code=[\w-]+)", text)
        assert login is not None and login.group(1) == base.group(1) + "/ui/", text
        with httpx.Client() as browser:
            assert browser.get(login.group(2)).status_code == 200
            assert browser.get(f"{base.group(1)}/ui/session").json()["principal"]["role"] == "admin"
            assert browser.get(login.group(2)).headers.get("location") == "/ui/login?failed=code"
        loops = httpx.get(f"{base.group(1)}/v1/agent-groups/{creds['group_id']}/loops", headers=agent).json()
        assert {v["name"]: v["state"] for v in loops["items"]} == {
            "heartbeat": "active", "batch_summary": "active", "threshold_alert": "active"}
    finally:
        assert demo.stop() == 0
    again = _Demo(tmp_path)  # a restart reuses the tenant and the Loops, and prints a fresh webhook URL
    try:
        text = again.output_until("-X POST -H \"Authorization")
        assert json.loads(creds_path.read_text())["group_id"] == creds["group_id"]
        assert webhook.rsplit("/", 1)[1] not in text
        base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", text)
        assert base is not None
        loops = httpx.get(f"{base.group(1)}/v1/agent-groups/{creds['group_id']}/loops", headers=agent).json()
        assert len(loops["items"]) == 3
    finally:
        assert again.stop() == 0
