"""issue 19 "Done when": a newcomer's path through README.md, run exactly as written there.

One `wakeful serve --demo` (the README's command, started in a fresh folder) serves the whole module; every other
step is a real subprocess in that folder: the `curl` lines the demo prints (run with bash as printed), `wakeful
loop list`, `wakeful loop create --source loop.c` with the README's C example, a GitHub-signed webhook set up with
the README's `webhook-verifier` line, and the README's `[capabilities."ci.run.read"]` block, checked with its
`capability test` line and granted to a Loop as the README's JSON. The commands, the C example, the TOML block
and the grant are read from README.md itself, so a README that drifts from the code fails here.

Only two things are not the README's: the capability's URL points at a real loopback server standing in for the
CI (tests/support/capability_server.py), and the node's environment picks a free port (`server.port = 0`) and a
1 s reconcile (`placement.*`) so a local create is adopted within a second rather than a minute; both are config
keys, the commands stay as written. Waits poll with generous deadlines; nothing asserts a duration.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.capability_server import CiServer, ci_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
SCRUBBED = ("WAKEFUL_SERVER", "WAKEFUL_API_KEY", "WAKEFUL_CONFIG", "WAKEFUL_DB_URL", "WAKEFUL_HOME")
GH_SECRET = "It's a Secret to Everybody"  # GitHub's own example secret (docs "Validating webhook deliveries")
CI_TOKEN = "ci-token-for-the-readme-path"
WAIT_S = float(os.environ.get("README_PATH_WAIT_S", "240"))  # generous: a loaded 2-core machine builds and starts slowly; never a timing assertion

# a Loop that reads run 42 through the configured capability and wakes its agent with the answer
CAPABILITY_LOOP = r"""#include <wakeful.h>

SF_MAIN sf_i64 main(void) {
    sf_handle args = sf_json_object();
    if (args < 0) return 3;
    if (wf_json_set_owned(args, "run_id", sf_json_number(42)) < 0) return 3;
    sf_handle run = sf_host_call("ci.run.read", args, 15000);
    sf_drop(args);
    if (run == SF_DENIED) return 2;
    if (run < 0) return 4;
    sf_i64 r = wf_notify_value(run, "ci-run-42");   /* {status, body} as the wake's content */
    sf_drop(run);
    if (r < 0) return 5;
    for (;;) {
        sf_handle ev = sf_event_next(3600000);
        if (ev == SF_CLOSED) return 0;
        if (ev > 0) sf_drop(ev);
    }
}
"""


def _block(lang: str) -> str:
    found = re.search(rf"```{lang}\n(.*?)```", README, re.S)
    assert found, f"README.md has no ```{lang} block"
    return found.group(1)


def _quoted(pattern: str) -> str:
    """The README's `code span` matching ``pattern`` (a newcomer copies it)."""
    found = re.search(rf"`({pattern})`", README, re.S)
    assert found, f"README.md names no `{pattern}`"
    return found.group(1).replace("\n", " ")


def _serve_command() -> str:
    line = next(line for line in _block("sh").splitlines() if "wakeful serve --demo" in line)
    return line.split("&&")[-1].strip()  # the install step before it is done: this checkout is installed


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    # `wakeful` and `python3` (in the demo's curl lines) are this interpreter's, running this checkout
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT / "src")
    env["CI_TOKEN"] = CI_TOKEN  # the README's headers = { Authorization = { env = "CI_TOKEN", … } }
    return env


@dataclass
class Demo:
    folder: Path
    env: dict[str, str]
    ci: CiServer
    lines: list[str]
    base: str
    group: str
    agent: str
    session: str
    loops: dict[str, str]
    keys: dict[str, str] = field(default_factory=dict)

    def sh(self, command: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """One line as a newcomer types it, run by bash in the demo folder."""
        proc = subprocess.run(["bash", "-c", command], cwd=self.folder, env=self.env, capture_output=True,
                              text=True, timeout=300)
        if check:
            assert proc.returncode == 0, (command, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def printed(self, heading: str) -> str:
        """The command line the demo printed under ``heading``."""
        at = next(i for i, line in enumerate(self.lines) if line.startswith(heading))
        return self.lines[at + 1].strip()

    def api(self, path: str) -> Any:
        request = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {self.keys['group']}"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            return json.loads(reply.read())

    def loop(self, loop_id: str) -> dict[str, Any]:
        value: dict[str, Any] = self.api(f"/v1/agent-groups/{self.group}/loops/{loop_id}")
        return value

    def events(self, loop_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api(f"/v1/agent-groups/{self.group}/loops/{loop_id}/events")["items"]
        return items

    def messages(self) -> list[dict[str, Any]]:
        """The demo session's messages, read with the demo's own "read the wake" curl line."""
        items: list[dict[str, Any]] = json.loads(self.sh(self.printed("then read the wake")).stdout)["items"]
        return items


def _until(what: str, probe: Callable[[], Any], seen: Callable[[], Any] = lambda: None) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"still waiting for {what}: {seen()}"
        time.sleep(0.5)


def _read_lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    folder = tmp_path_factory.mktemp("newcomer")
    with ExitStack() as stack:
        ci = stack.enter_context(ci_server())
        # README: "declare an HTTP endpoint in `wakeful.toml` (in the data directory …)"; the demo's is ./.wakeful-demo
        toml = _block("toml")
        assert "https://ci.internal/api/runs/{run_id}" in toml
        (folder / ".wakeful-demo").mkdir(mode=0o700)
        (folder / ".wakeful-demo" / "wakeful.toml").write_text(
            toml.replace("https://ci.internal/api/runs/{run_id}", f"{ci.base}/runs/{{run_id}}"))
        env = _env()
        node_env = {**env, "PYTHONUNBUFFERED": "1", "WAKEFUL_SERVER__PORT": "0",
                    "WAKEFUL_PLACEMENT__TICK_S": "1", "WAKEFUL_PLACEMENT__RECONCILE_S": "1"}
        log = stack.enter_context((folder / "serve.log").open("w"))
        proc = subprocess.Popen(["bash", "-c", f"exec {_serve_command()}"], cwd=folder, env=node_env,
                                stdout=subprocess.PIPE, stderr=log, text=True)

        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
        reader.start()

        def stop() -> None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            reader.join(30)  # it reads to the end of the node's stdout, then the pipe is closed here
            if proc.stdout is not None:
                proc.stdout.close()

        stack.callback(stop)
        printed: list[str] = []
        while not printed or not printed[-1].startswith("demo goal:"):
            try:
                line = lines.get(timeout=WAIT_S)
            except queue.Empty:
                pytest.fail(f"the demo printed no more after {printed}:\n{(folder / 'serve.log').read_text()[-3000:]}")
            assert line is not None, f"wakeful serve --demo ended:\n{(folder / 'serve.log').read_text()[-3000:]}"
            printed.append(line)
        base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", printed[0])
        ids = re.search(r"group/agent:\s+(grp_\w+) / (agt_\w+), session (ses_\w+)", "\n".join(printed))
        loops = re.search(r"Loops:\s+(.*)", "\n".join(printed))
        assert base and ids and loops, printed
        named = dict(pair.split(" ") for pair in loops.group(1).split(", "))
        group, agent, session = ids.groups()
        made = Demo(folder, env, ci, printed, base.group(1), group, agent, session, loops=named)
        made.keys = json.loads((folder / ".wakeful-demo" / "demo" / "credentials.json").read_text())["keys"]
        yield made


def test_the_printed_curl_lines_wake_the_demo_agent(demo: Demo) -> None:
    posted = json.loads(demo.sh(demo.printed("post an event")).stdout)
    assert posted["status"] == "accepted" and posted["duplicate"] is False, posted
    wake = _until("the demo wake", lambda: [m for m in demo.messages()
                                             if m.get("loop_id") == demo.loops["threshold_alert"]])
    assert wake[0]["content"] == "cpu is 95, above 90"
    assert wake[0]["dedup_key"] == f"above:{posted['event_id']}"


def test_loop_list_in_the_folder_lists_the_demo_loops(demo: Demo) -> None:
    listed = demo.sh("wakeful loop list")
    for name, loop_id in demo.loops.items():
        assert re.search(rf"^{loop_id}\s+{name}\s+active\b", listed.stdout, re.M), listed.stdout
    assert f"using the store of the node at {demo.base}" in listed.stderr


def _github_post(demo: Demo, url: str, body: bytes, delivery: str, signature: str) -> tuple[int, str]:
    """POST as GitHub does; an empty ``signature`` sends no signature header."""
    (demo.folder / "push.json").write_bytes(body)
    signed = f"-H 'X-Hub-Signature-256: {signature}' " if signature else ""
    reply = demo.sh(f"curl -sS -o reply.json -w '%{{http_code}}' -X POST -H 'Content-Type: application/json' "
                    f"-H 'X-GitHub-Event: push' -H 'X-GitHub-Delivery: {delivery}' "
                    f"{signed}--data-binary @push.json {shlex.quote(url)}")
    return int(reply.stdout), (demo.folder / "reply.json").read_text()


def test_a_loop_from_source_takes_github_signed_webhooks(demo: Demo) -> None:
    (demo.folder / "loop.c").write_text(_block("c"))
    create = _quoted(r"wakeful loop create --agent AGT --session SES --source loop\.c")
    made = demo.sh(create.replace("AGT", demo.agent).replace("SES", demo.session))
    loop_id = re.search(r"^id: (lp_\w+)$", made.stdout, re.M)
    assert loop_id, made.stdout
    loop = loop_id.group(1)
    assert f"waiting for the node at {demo.base} to adopt it" in made.stderr
    _until("the node to adopt the Loop", lambda: demo.loop(loop)["runtime"]["state"] == "resident",
           lambda: (demo.loop(loop), demo.api(f"/v1/agent-groups/{demo.group}/loops/{loop}/logs")))
    assert demo.loop(loop)["state"] == "active"

    hook = demo.sh(_quoted(r"wakeful loop webhook LOOP enable").replace("LOOP", loop))
    path = re.search(r"^url: (\S+)", hook.stdout, re.M)
    assert path, hook.stdout
    url = path.group(1)  # a URL to hand the provider: the running node's address, not a bare path
    assert url.startswith(f"{demo.base}/v1/loop-webhooks/"), hook.stdout
    (demo.folder / "gh.secret").write_text(GH_SECRET)
    verifier = _quoted(r"wakeful loop webhook-verifier LOOP github --secret-file gh\.secret")
    assert "verifier: github" in demo.sh(verifier.replace("LOOP", loop)).stdout

    body = json.dumps({"ref": "refs/heads/main", "repository": {"full_name": "octo/hello"}}).encode()
    signed = "sha256=" + hmac.new(GH_SECRET.encode(), body, hashlib.sha256).hexdigest()
    delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    status, text = _github_post(demo, url, body, delivery, signed)
    assert status == 202, text
    assert json.loads(text)["event_id"] == delivery
    stored = demo.events(loop)
    assert [(e["event_id"], e["topic"]) for e in stored] == [(delivery, "push")], stored

    status, text = _github_post(demo, url, body, "an-unsigned-delivery", "")
    assert status == 401, text
    forged = "sha256=" + hmac.new(b"not the secret", body, hashlib.sha256).hexdigest()
    status, text = _github_post(demo, url, body, "a-forged-delivery", forged)
    assert status == 401, text
    status, text = _github_post(demo, url, body, delivery, signed)  # GitHub's "Redeliver"
    assert status == 202 and json.loads(text)["duplicate"] is True, text
    assert [e["event_id"] for e in demo.events(loop)] == [delivery]


def test_a_configured_capability_reaches_the_ci_and_wakes_the_agent(demo: Demo) -> None:
    tested = demo.sh(_quoted(r"wakeful capability test ci\.run\.read --args '[^`]*'"))
    assert "status 200" in tested.stdout and '"path": "/runs/42"' in tested.stdout, tested.stdout
    assert [(s.path, s.headers.get("authorization")) for s in demo.ci.seen] == [("/runs/42", f"Bearer {CI_TOKEN}")]

    listed = demo.sh(_quoted(r"wakeful capability\s+list"))
    assert "ci.run.read" in listed.stdout and "Read one CI" in listed.stdout, listed.stdout

    (demo.folder / "ci_watch.c").write_text(CAPABILITY_LOOP)
    grant = json.loads(_quoted(r'\[\{"name": "ci\.run\.read".*?\}\]'))
    assert grant == [{"name": "ci.run.read", "arguments": {"run_id": 42}}, {"name": "agent.notify"}]
    (demo.folder / "caps.json").write_text(json.dumps(grant))
    create = _quoted(r"loop create --capabilities caps\.json")
    # the demo's export line puts `wakeful` in remote mode: the node adopts the Loop at once
    made = demo.sh(f"{demo.printed('use the wakeful command')}\n"
                   f"wakeful {create} --agent {demo.agent} --session {demo.session} --source ci_watch.c "
                   f"--name ci-watch")
    assert "name: ci-watch" in made.stdout, made.stdout
    loop = re.search(r"^id: (lp_\w+)$", made.stdout, re.M)
    assert loop, made.stdout
    wake = _until("the capability Loop's wake", lambda: [m for m in demo.messages()
                                                          if m.get("loop_id") == loop.group(1)])
    content = json.loads(wake[0]["content"])
    assert content["status"] == 200 and "/runs/42" in json.dumps(content["body"]), content
    assert [(s.path, s.headers.get("authorization")) for s in demo.ci.seen] == [
        ("/runs/42", f"Bearer {CI_TOKEN}"), ("/runs/42", f"Bearer {CI_TOKEN}")]
