"""`wakeful loop webhook-verifier` (issue 19) as a real subprocess, in local mode on the store of a running server
and in remote mode with an agent key; the server then checks requests signed with the secret the CLI was given.
The secret never reaches argv or any output."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from live_api import LiveApi, auth, make_loop, tenant

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[3] / "src"
SECRET = "cli-given-github-secret-0123456789"


def _cli(env_extra: dict[str, str], home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAKEFUL_SERVER", "WAKEFUL_API_KEY")}
    env.update({"PYTHONPATH": str(SRC), "WAKEFUL_HOME": str(home), **env_extra})
    return subprocess.run([sys.executable, "-m", "wakeful.cli.main", "--json", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=60)


def _ok(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert SECRET not in proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _signed(body: bytes, secret: str, delivery: str) -> dict[str, str]:
    sig = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()  # GitHub's documented scheme
    return {"X-Hub-Signature-256": sig, "X-GitHub-Delivery": delivery, "X-GitHub-Event": "push",
            "Content-Type": "application/json"}


def test_cli_sets_shows_and_clears_a_verifier(tmp_path: Path, compile_c: Any) -> None:
    # SQLite only: the CLI adds no backend-specific code (the HTTP tests beside this one run on both)
    store_url = f"sqlite:///{tmp_path / 'wakeful.db'}"
    home = tmp_path / "home"
    secret_file = tmp_path / "gh.secret"
    secret_file.write_text(SECRET + "\n")
    with LiveApi(store_url, tmp_path / "data") as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        base = f"{live.url}/v1/agent-groups/{t['group']}/loops/{loop_id}"
        url = live.url + live.client.post(f"{base}/webhook", headers=auth(t["akey"]),
                                          json={"action": "enable"}).json()["url"]
        local = {"WAKEFUL_DB_URL": store_url}
        made = _ok(_cli(local, home, "loop", "webhook-verifier", loop_id, "github", "--secret-file", str(secret_file),
                        "--field", "ref"))
        assert made["verifier"] == {"scheme": "github", "fields": ["ref"],
                                    "secret_fingerprint": hashlib.sha256(SECRET.encode()).hexdigest()[:8]}
        body = b'{"ref": "refs/heads/main", "commits": []}'
        r = live.client.post(url, content=body, headers=_signed(body, SECRET, "d-1"))
        assert r.status_code == 202 and r.json()["event_id"] == "d-1", r.text
        r = live.client.post(url, content=body, headers=_signed(body, "another secret entirely", "d-2"))
        assert r.status_code == 401
        # remote mode with the agent key; the secret from standard input
        remote = {"WAKEFUL_SERVER": live.url, "WAKEFUL_API_KEY": t["akey"]}
        shown = _ok(_cli(remote, home, "loop", "webhook-verifier", loop_id))
        assert shown["verifier"]["scheme"] == "github"
        slack = _ok(_cli(remote, home, "loop", "webhook-verifier", loop_id, "slack", "--secret-file", "-",
                         "--tolerance", "60", stdin=SECRET))
        assert slack["verifier"]["tolerance_s"] == 60
        bad = _cli(remote, home, "loop", "webhook-verifier", loop_id, "github")  # no secret given
        assert bad.returncode == 2 and "--secret-file" in bad.stdout + bad.stderr
        refused = _cli(remote, home, "loop", "webhook-verifier", loop_id, "github", "--secret-env", "WK_T_SECRET",
                       "--tolerance", "60")
        assert refused.returncode == 2  # the variable is unset
        wrong = _cli({**remote, "WK_T_SECRET": SECRET}, home, "loop", "webhook-verifier", loop_id, "github",
                     "--secret-env", "WK_T_SECRET", "--tolerance", "60")
        assert wrong.returncode == 1 and json.loads(wrong.stdout or wrong.stderr)["field"] == "tolerance_s"
        cleared = _ok(_cli(remote, home, "loop", "webhook-verifier", loop_id, "--clear"))
        assert cleared == {"loop_id": loop_id, "verifier": None}
        assert _ok(_cli(local, home, "loop", "webhook-verifier", loop_id))["verifier"] is None
        r = live.client.post(url, content=b'{"unsigned": true}', headers={"Content-Type": "application/json"})
        assert r.status_code == 202
