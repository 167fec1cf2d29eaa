"""Remote mode of `wakeful group | key | agent | session` and the control plane (`goal`, `work`, `gate`,
`evidence`, `effect`, `next`) against a real `wakeful serve` on SQLite (interfaces.md §4.1, §2.2).

Every command runs as a subprocess with the kind of key the API demands: admin for groups, a group key for
agents, keys and a person's gate decision, an agent key for the agent's own work. The wrong kind of key gets the
API's typed ``forbidden`` (exit 1); `--json` outputs keep the local shape (compared with local mode on the node's
own store); a route the API lacks (`goal rebuild`) refuses with exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli_remote import doc, ok, serving, wakeful

pytestmark = pytest.mark.integration


@dataclass
class Node:
    url: str
    home: Path
    away: Path
    group: str
    agent: str
    group_key: str
    agent_key: str
    admin_key: str

    def run(self, key: str, *args: str) -> Any:
        """A remote command; the completed process."""
        return wakeful(self.away, "--server", self.url, "--key", key, *args)

    def group_(self, *args: str) -> Any:
        return ok(self.run(self.group_key, *args, "--json"))

    def agent_(self, *args: str) -> Any:
        return ok(self.run(self.agent_key, *args, "--json"))

    def refused(self, key: str, *args: str, code: int = 1) -> dict[str, Any]:
        proc = self.run(key, *args, "--json")
        assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
        found: dict[str, Any] = doc(proc)
        return found

    def local(self, *args: str) -> Any:
        return ok(wakeful(self.home, *args, "--json"))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("cli-remote-control")
    home, away = root / "home", root / "away"
    away.mkdir()
    group = ok(wakeful(home, "group", "create", "g-control", "--json"))["id"]
    agent = ok(wakeful(home, "agent", "create", "worker", "--group", group, "--json"))["id"]
    keys = [ok(wakeful(home, "key", "create", *args, "--json"))["key"] for args in (
        ["--role", "group", "--group", group], ["--role", "agent", "--group", group, "--agent", agent],
        ["--role", "admin"])]
    with serving(home, "cli-remote-control") as url:
        yield Node(url, home, away, group, agent, *keys)
    assert not list(away.iterdir()), "a remote command wrote to its local data directory"


def test_groups_keys_agents_and_sessions(node: Node) -> None:
    made = ok(node.run(node.admin_key, "group", "create", "g-second", "--json"))
    assert made["name"] == "g-second" and set(made) == {"id", "name", "limits", "created_ms"}
    assert {node.group, made["id"]} <= {g["id"] for g in ok(node.run(node.admin_key, "group", "list", "--json"))}
    assert node.refused(node.group_key, "group", "create", "nope")["error"] == "forbidden"  # an admin route
    assert node.refused(node.group_key, "group", "list")["error"] == "forbidden"

    other = node.group_("agent", "create", "helper", "--group", node.group)
    assert other["group_id"] == node.group and other["status"] == "active"
    assert node.refused(node.agent_key, "agent", "create", "x", "--group", node.group)["error"] == "forbidden"
    by_admin = ok(node.run(node.admin_key, "agent", "create", "by-admin", "--group", node.group, "--json"))
    assert by_admin["group_id"] == node.group  # an admin key names the group itself
    assert {node.agent, other["id"], by_admin["id"]} <= {a["id"] for a in node.group_("agent", "list")}
    assert [a["id"] for a in node.agent_("agent", "list")] == [node.agent]  # an agent key sees itself
    local = {a["id"]: a for a in node.local("agent", "list", "--group", node.group)}
    assert local[other["id"]] == other  # the local record shape

    archived = node.group_("agent", "archive", other["id"])
    assert archived["agent"]["status"] == "archived" and archived["paused_loops"] == []
    back = node.group_("agent", "unarchive", other["id"])
    assert back["agent"]["status"] == "active" and back["resumed"] == [] and back["quota_paused"] == []
    assert node.refused(node.agent_key, "agent", "archive", other["id"])["error"] == "forbidden"

    session = node.agent_("session", "create", "--agent", node.agent, "--title", "inbox")
    assert session["agent_id"] == node.agent and session["title"] == "inbox"
    assert session["id"] in {s["id"] for s in node.group_("session", "list", "--agent", node.agent)}
    assert session["id"] in {s["id"] for s in node.group_("session", "list")}  # every agent's sessions
    assert node.refused(node.agent_key, "session", "create", "--agent", other["id"])["error"] == "agent_not_found"

    key = node.group_("key", "create", "--role", "agent", "--agent", other["id"], "--label", "helper")
    assert key["key"].startswith("wk_") and key["agent_id"] == other["id"] and key["group_id"] == node.group
    listed = {k["id"]: k for k in node.group_("key", "list")}
    assert "key" not in listed[key["id"]] and listed[key["id"]]["label"] == "helper"  # never the secret
    assert ok(node.run(key["key"], "agent", "list", "--json"))[0]["id"] == other["id"]
    assert node.group_("key", "revoke", key["id"]) == {"key_id": key["id"], "revoked": True}
    assert node.refused(key["key"], "agent", "list")["error"] == "unauthorized"
    assert node.refused(node.agent_key, "key", "list")["error"] == "forbidden"
    assert node.refused(node.group_key, "key", "create", "--role", "admin")["error"] == "invalid_request"
    assert node.refused(node.admin_key, "key", "list")["error"] == "forbidden"  # an admin key names no group
    people = node.run(node.group_key, "agent", "list")
    assert people.returncode == 0 and node.agent in people.stdout


def uncached(value: Any) -> Any:
    """A projection without its ``cached`` flag (whether this read found the cache current differs by reader)."""
    if isinstance(value, dict):
        return {k: uncached(v) for k, v in value.items() if k != "cached"}
    return value


def item_of(receipt: dict[str, Any]) -> str:
    return str(next(c["id"] for c in receipt["changed"] if c["entity"] == "item"))


def test_goal_work_evidence_and_next_over_http(node: Node, tmp_path: Path) -> None:
    # a goal created by the group key acting as the agent (X-Wakeful-Agent): the agent is registered on it
    made = node.group_("goal", "create", "--group", node.group, "--title", "fast p99", "--objective", "p99 < 5 ms",
                       "--subject", "repo=git:a", "--agent", node.agent, "--operation-id", "remote-goal")
    goal = made["goal"]["id"]
    assert made["receipt"]["seq"] == 1 and made["goal"]["subjects"] == {"repo": "git:a"}
    again = node.group_("goal", "create", "--group", node.group, "--title", "fast p99", "--objective",
                        "p99 < 5 ms", "--subject", "repo=git:a", "--agent", node.agent, "--operation-id",
                        "remote-goal")
    assert again["receipt"]["replayed"] is True and again["goal"]["id"] == goal
    assert [g["id"] for g in node.agent_("goal", "list", "--group", node.group)] == [goal]
    assert goal in {g["id"] for g in ok(node.run(node.admin_key, "goal", "list", "--group", node.group, "--json"))}

    bench = item_of(node.agent_("work", "add", goal, "--class", "advancement", "--title", "bench",
                                "--priority", "1")["receipt"])
    ship = node.group_("work", "add", goal, "--class", "advancement", "--title", "ship", "--priority", "0",
                       "--field", 'required_scopes=["production:action:ship"]')["item"]["id"]
    gate = node.group_("work", "add", goal, "--class", "user_gate", "--title", "ship?", "--field",
                       "scope=production:goal:ship", "--field", f'targets=["{ship}"]', "--field",
                       "question=Ship it?")["item"]["id"]
    contract = tmp_path / "acceptance.json"
    contract.write_text(json.dumps({"document": {"criteria": [{"id": "lat", "text": "p99", "subject": "repo"}]},
                                    "bindings": {bench: ["lat"]}}))
    fence0 = ("--expected-revision", "0")
    assert node.refused(node.agent_key, "goal", "acceptance", "set", goal, str(contract), *fence0)["error"] == \
        "forbidden"
    assert node.group_("goal", "acceptance", "set", goal, str(contract), *fence0)["command_type"] == "acceptance.set"
    assert node.group_("goal", "acceptance", "show", goal)["revision"] == 1
    node.group_("goal", "subject", "set", goal, "repo", "git:b")

    decision = node.agent_("next", "--agent", node.agent, "--goal", goal)
    assert (decision["decision"], decision["action"], decision["item"]["id"]) == ("deliver", "start", bench)
    assert decision["ask"]["gate_id"] == gate
    claimed = node.agent_("work", "claim", goal, bench, "--agent", node.agent)
    assert claimed["command_type"] == "claim.acquire"
    held = ("--claim-epoch", str(claimed["claim"]["epoch"]), "--claim-key", claimed["claim"]["key"])
    assert node.agent_("work", "show", goal, bench)["claim"]["holder"] == node.agent
    evidence = node.agent_("evidence", "add", goal, "--kind", "test", "--verdict", "pass", "--item", bench,
                           "--criterion", "lat", "--subject", "repo", "--artifact-revision", "git:b", "--summary",
                           "3 ms", "--agent", node.agent)
    assert evidence["command_type"] == "evidence.add"
    (row,) = node.group_("evidence", "list", goal, "--item", bench)
    assert row["verdict"] == "pass" and row["summary"] == "3 ms"
    assert node.agent_("work", "complete", goal, bench, "--agent", node.agent, "--expected-revision", "1",
                       *held)["command_type"] == "work.complete"
    assert node.group_("goal", "status", goal)["acceptance"]["status"] == "accepted"

    # a person's decision: an agent key is the wrong kind (forbidden); the group key, a person, decides
    fence1 = ("--expected-revision", "1")
    assert node.refused(node.agent_key, "gate", "resolve", goal, gate, "approve", *fence1)["error"] == "forbidden"
    assert node.group_("gate", "resolve", goal, gate, "approve", *fence1)["command_type"] == "gate.resolve"
    with_claim = node.agent_("next", "--agent", node.agent, "--goal", goal, "--claim")
    assert with_claim["item"]["id"] == ship and with_claim["claim"]["claim"]["holder"] == node.agent

    node.agent_("effect", "intend", goal, "--request-key", "pr-1", "--kind", "github.pr.create", "--target", "repo",
                "--payload-digest", "d1", "--item", ship, "--agent", node.agent)
    node.agent_("effect", "settle", goal, "--request-key", "pr-1", "--attempt", "1", "unknown", "--agent", node.agent)
    assert node.group_("effect", "list", goal, "--state", "unknown")[0]["request_key"] == "pr-1"
    readback = node.agent_("next", "--agent", node.agent, "--goal", goal)
    assert (readback["action"], readback["effect"]["request_key"]) == ("readback_effect", "pr-1")
    node.agent_("effect", "readback", goal, "--request-key", "pr-1", "--attempt", "1", "present", "--agent",
                node.agent)

    # the --json shapes are the local ones: the node's own store answers the same documents
    for args in (["goal", "status", goal], ["goal", "board", goal], ["goal", "show", goal],
                 ["goal", "commits", goal], ["evidence", "list", goal], ["effect", "list", goal],
                 ["work", "show", goal, ship], ["goal", "acceptance", "show", goal]):
        assert uncached(node.group_(*args)) == uncached(node.local(*args)), args
    remote_items = {i["id"]: i for i in node.group_("work", "list", goal)}
    assert remote_items == {i["id"]: i for i in node.local("work", "list", goal)}
    commits = node.group_("goal", "commits", goal, "--after-seq", "2", "--limit", "3")
    assert [c["seq"] for c in commits] == [3, 4, 5]

    human = node.run(node.group_key, "goal", "board", goal)
    assert human.returncode == 0 and ship in human.stdout
    assert node.group_("goal", "pause", goal, "--reason", "holiday")["command_type"] == "goal.pause"
    assert node.agent_("next", "--agent", node.agent, "--goal", goal)["reasons"] == ["goal_paused"]


def test_refusals_of_the_control_commands(node: Node) -> None:
    rebuild = node.run(node.group_key, "goal", "rebuild")
    assert rebuild.returncode == 2 and "`wakeful goal rebuild` has no remote mode yet" in rebuild.stderr
    assert node.refused(node.group_key, "goal", "status", "goal_nope")["error"] == "not_found"
    assert node.refused(node.group_key, "work", "show", "../../nodes", "w_x")["error"] == "not_found"
    assert node.refused(node.admin_key, "goal", "status", "goal_nope")["error"] == "forbidden"  # names no group
    assert node.refused(node.group_key, "goal", "list", "--group", "grp_other")["error"] == "not_found"
    made = node.group_("goal", "create", "--group", node.group, "--title", "t", "--objective", "o")
    (first,) = node.group_("goal", "commits", made["goal"]["id"])
    assert first["actor"]["kind"] == "person"  # the key's person principal, not the local operator
    assert node.refused(node.group_key, "next", "--agent", "agt_nope")["error"] == "not_found"
    wrong = node.run("wk_key_nope_secret", "work", "list", made["goal"]["id"])
    assert wrong.returncode == 1 and "unauthorized" in wrong.stderr and wrong.stdout == ""
