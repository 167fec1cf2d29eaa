"""The `wakeful` command's global options (interfaces.md §4.1): remote mode against a real `wakeful serve`.

Every command runs as a real subprocess. Remote mode (`--server`, `$WAKEFUL_SERVER`) drives the `loop` family and
`session messages` through the HTTP API with the key; store-only commands refuse (exit 2); `--config` reaches the
configuration; with no server the same commands still open the local store as the operator. The environment of
this process is never changed: each subprocess gets its own.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli_remote import doc, serving, wakeful

pytestmark = pytest.mark.integration

COUNTER = Path(__file__).resolve().parents[2] / "support" / "guests" / "ingress_counter.c"


@dataclass
class Node:
    url: str
    home: Path  # the node's data directory (local mode runs here)
    away: Path  # an empty data directory for the remote commands: they must never create a store in it
    group: str
    agent: str
    session: str
    key: str
    key_id: str
    elf: Path

    def remote(self, *args: str, key: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return wakeful(self.away, "--server", self.url, "--key", key or self.key, *args, env=env)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, compile_c: Callable[..., bytes]) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("cli-remote")
    home, away = root / "home", root / "away"
    away.mkdir()
    group = doc(wakeful(home, "group", "create", "g-remote", "--json"))["id"]  # the tenant, made locally
    agent = doc(wakeful(home, "agent", "create", "a1", "--group", group, "--json"))["id"]
    session = doc(wakeful(home, "session", "create", "--agent", agent, "--title", "inbox", "--json"))["id"]
    made = doc(wakeful(home, "key", "create", "--role", "group", "--group", group, "--json"))
    elf = root / "counter.elf"
    elf.write_bytes(compile_c(COUNTER.read_text(), name="counter.c"))
    with serving(home, "cli-remote") as url:
        yield Node(url, home, away, group, agent, session, made["key"], made["id"], elf)
    assert not list(away.iterdir()), "a remote command wrote to its local data directory"


def test_the_loop_family_runs_through_the_api(node: Node, tmp_path: Path) -> None:
    made = node.remote("loop", "create", "--agent", node.agent, "--session", node.session, "--elf",
                       str(node.elf), "--name", "first", "--json")
    assert made.returncode == 0, made.stderr
    first = doc(made)
    assert first["state"] == "active" and first["name"] == "first"
    assert first["creator"] == f"key:{node.key_id}"  # the key's identity, not the local operator's
    again = doc(node.remote("loop", "create", "--agent", node.agent, "--session", node.session, "--artifact",
                            first["artifact"], "--name", "second", "--json"))
    assert again["artifact"] == first["artifact"] and again["id"] != first["id"]

    listed = doc(node.remote("loop", "list", "--json"))
    assert isinstance(listed, list) and {first["id"], again["id"]} <= {v["id"] for v in listed}
    people = node.remote("loop", "list", "--agent", node.agent)
    assert people.returncode == 0 and first["id"] in people.stdout and "first" in people.stdout
    got = doc(node.remote("loop", "get", first["id"], "--json"))
    assert got["id"] == first["id"] and got["session_id"] == node.session

    payload = tmp_path / "payload.json"
    payload.write_text('{"n": 7}')
    sent = doc(node.remote("loop", "send", first["id"], "--topic", "tick", "--payload", str(payload),
                           "--event-id", "ev-1", "--json"))
    assert sent["event_id"] == "ev-1" and sent["duplicate"] is False
    dup = node.remote("loop", "send", first["id"], "--topic", "tick", "--payload", str(payload), "--event-id",
                      "ev-1")
    assert dup.returncode == 0 and "accepted ev-1 (duplicate)" in dup.stdout
    events = doc(node.remote("loop", "events", first["id"], "--payloads", "--json"))
    assert events["loop_id"] == first["id"] and "pending_count" in events
    (event,) = [e for e in events["events"] if e["event_id"] == "ev-1"]
    assert event["topic"] == "tick" and event["payload"] == {"n": 7}
    payload.write_text('{"n": 1}, "extra": 2')  # not one JSON value: refused here, never spliced into the body
    assert node.remote("loop", "send", first["id"], "--topic", "tick", "--payload", str(payload)).returncode == 2

    paused = doc(node.remote("loop", "pause", first["id"], "--json"))
    assert paused["state"] == "paused" and paused["pause_reason"] == "manual"
    resumed = doc(node.remote("loop", "resume", first["id"], "--json"))
    assert resumed["state"] == "active" and resumed["incarnation"] == paused["incarnation"] + 1
    assert doc(node.remote("loop", "discard", first["id"], "--json")) == {"discarded": []}
    retried = doc(node.remote("loop", "retry", first["id"], "--json"))
    assert retried["retried"] == [] and retried["loop"]["id"] == first["id"]
    assert isinstance(doc(node.remote("loop", "logs", first["id"], "--json")), list)
    hook = doc(node.remote("loop", "webhook", first["id"], "enable", "--json"))
    assert hook["enabled"] is True and "/v1/loop-webhooks/" in hook["url"]
    messages = doc(node.remote("session", "messages", node.session, "--json"))
    assert isinstance(messages, list) and all(m["session_id"] == node.session for m in messages)

    assert doc(node.remote("loop", "delete", again["id"], "--json")) == {"loop_id": again["id"], "deleted": True}
    gone = node.remote("loop", "get", again["id"], "--json")
    assert gone.returncode == 1 and doc(gone)["error"] == "not_found"
    assert again["id"] not in {v["id"] for v in doc(node.remote("loop", "list", "--json"))}


def test_the_key_may_come_from_the_environment(node: Node) -> None:
    found = wakeful(node.away, "--server", node.url, "loop", "list", "--json", env={"WAKEFUL_API_KEY": node.key})
    assert found.returncode == 0 and isinstance(doc(found), list)
    by_env = wakeful(node.away, "loop", "list", "--json",
                     env={"WAKEFUL_SERVER": node.url, "WAKEFUL_API_KEY": node.key})
    assert by_env.returncode == 0 and doc(by_env) == doc(found)


def test_refusals_and_exit_codes(node: Node) -> None:
    wrong = node.remote("loop", "list", "--json", key="wk_key_nope_secret")
    assert wrong.returncode == 1 and doc(wrong)["error"] == "unauthorized"
    people = node.remote("loop", "get", "lp_nope", key="wk_key_nope_secret")
    assert people.returncode == 1 and "unauthorized" in people.stderr and people.stdout == ""

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    down = wakeful(node.away, "--server", dead, "--key", node.key, "loop", "list", "--json")
    assert down.returncode == 3 and doc(down)["error"] == "unavailable"

    keyless = wakeful(node.away, "--server", node.url, "loop", "list", "--json")
    assert keyless.returncode == 2 and "WAKEFUL_API_KEY" in doc(keyless)["message"]
    bad_url = wakeful(node.away, "--server", "not a url", "--key", node.key, "loop", "list")
    assert bad_url.returncode == 2 and "http://" in bad_url.stderr

    db = node.remote("db", "version")  # a command with no route refuses instead of running locally
    assert db.returncode == 2 and db.stdout == ""
    assert "`wakeful db` has no remote mode yet" in db.stderr and "WAKEFUL_SERVER" in db.stderr
    as_json = node.remote("db", "version", "--json")
    assert as_json.returncode == 2 and "no remote mode" in doc(as_json)["message"]
    for args in (["db", "prune"], ["goal", "rebuild"], ["loop", "tail", "lp_x", "--for", "1"]):
        refused = node.remote(*args)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        assert "no remote mode yet" in refused.stderr, args
    assert "`wakeful loop tail`" in node.remote("loop", "tail", "lp_x").stderr
    assert node.remote("version").returncode == 0  # a command with no store ignores the server
    assert node.remote("goal", "list", "--help").returncode == 0  # help never opens the store


def test_commands_with_their_own_server_option_see_the_global_one(node: Node) -> None:
    status = node.remote("status", "--json")  # a group key: the nodes route needs an admin key
    assert status.returncode == 1 and doc(status)["error"] == "forbidden"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    own = wakeful(node.away, "--server", dead, "--key", "wk_key_nope_secret", "status", "--server", node.url,
                  "--key", node.key, "--json")
    assert own.returncode == 1 and doc(own)["error"] == "forbidden"  # its own flags won: the live node answered


def test_local_mode_is_unchanged_and_config_is_read(node: Node, tmp_path: Path) -> None:
    made = doc(node.remote("loop", "create", "--agent", node.agent, "--session", node.session, "--elf",
                           str(node.elf), "--name", "local-view", "--json"))
    local = wakeful(node.home, "loop", "list", "--json")
    assert local.returncode == 0, local.stderr
    views = {v["id"]: v for v in doc(local)}
    assert made["id"] in views and isinstance(views[made["id"]]["runtime"], str)  # the local view, not the API's
    empty = wakeful(node.home, "loop", "get", made["id"], "--json", env={"WAKEFUL_SERVER": ""})
    assert empty.returncode == 0 and doc(empty)["id"] == made["id"]  # an empty $WAKEFUL_SERVER is local mode

    config = tmp_path / "wakeful.toml"
    config.write_text('[server]\npublic_base_url = "https://hooks.example.test"\n')
    hook = wakeful(node.home, "--config", str(config), "loop", "webhook", made["id"], "enable", "--json")
    assert hook.returncode == 0, hook.stderr
    assert doc(hook)["url"].startswith("https://hooks.example.test/v1/loop-webhooks/")
    missing = wakeful(node.home, "--config", str(tmp_path / "absent.toml"), "loop", "list")
    assert missing.returncode == 2 and "absent.toml" in missing.stderr
    elsewhere = tmp_path / "elsewhere.db"
    config.write_text(f'[store]\nurl = "sqlite:///{elsewhere}"\n')
    moved = wakeful(node.home, "--config", str(config), "db", "upgrade", "--json")
    assert moved.returncode == 0, moved.stderr
    assert elsewhere.exists()  # store.url of the file, not the data dir's wakeful.db
    assert wakeful(node.home, "--config", str(config), "loop", "list", "--json").stdout.strip() == "[]"
    config.write_text("[nonsense]\nx = 1\n")
    refused = wakeful(node.home, "--config", str(config), "loop", "list", "--json")
    assert refused.returncode == 1 and "nonsense" in doc(refused)["message"]  # the file really was read


def test_an_admin_key_creates_a_loop_for_a_named_agent(node: Node) -> None:
    """issue 19: with an admin key (no group of its own) `loop create --agent` finds the agent's group through
    the API (`/v1/info` with X-Wakeful-Agent) instead of answering forbidden; a command naming no agent still
    needs a group key."""
    admin = doc(wakeful(node.home, "key", "create", "--role", "admin", "--json"))
    made = node.remote("loop", "create", "--agent", node.agent, "--session", node.session, "--elf", str(node.elf),
                       "--name", "by-admin", "--json", key=admin["key"])
    assert made.returncode == 0, made.stderr + made.stdout
    view = doc(made)
    assert view["name"] == "by-admin" and view["group_id"] == node.group and view["creator"] == f"key:{admin['id']}"
    listed = doc(node.remote("loop", "list", "--agent", node.agent, "--json", key=admin["key"]))
    assert view["id"] in {v["id"] for v in listed}
    refused = node.remote("loop", "list", "--json", key=admin["key"])
    assert refused.returncode == 1 and doc(refused)["error"] == "forbidden"
    missing = node.remote("loop", "create", "--agent", "agt_nobody", "--session", node.session, "--elf",
                          str(node.elf), "--json", key=admin["key"])
    assert missing.returncode == 1 and doc(missing)["error"] == "not_found", missing.stdout
