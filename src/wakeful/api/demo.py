"""``wakeful serve --demo`` (interfaces.md §8): a demo group, agent, session and keys (saved to
``<data>/demo/credentials.json``, mode 0600), the SDK examples that need no outside service built and started,
a webhook on the webhook example, and the lines to print (webhook URL, a ``curl`` that produces a wake).

Idempotent: a restart reuses the saved tenant and its Loops and rotates the webhook (only its digest is stored,
so a fresh URL is the only way to print one again).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wakeful.harness import ops
from wakeful.harness.errors import NotFound

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["DEMO_LOOPS", "DemoInfo", "WEBHOOK_LOOP", "demo_lines", "set_up_demo"]

# the sdk.md examples that use only Loop builtins (no decide, web, tools or services), with demo configs
DEMO_LOOPS: dict[str, dict[str, Any]] = {
    "heartbeat": {"interval_ms": 60_000, "max_beats": 0},
    "batch_summary": {"window_ms": 60_000},
    "threshold_alert": {"threshold": 90},
}
WEBHOOK_LOOP = "threshold_alert"  # webhook payload {"name": "cpu", "value": 95} crosses the threshold: a wake


@dataclass(frozen=True)
class DemoInfo:
    group_id: str
    agent_id: str
    session_id: str
    keys: dict[str, str]
    loops: dict[str, str]
    webhook_path: str
    credentials: Path


def _examples_dir() -> Path:
    from wakeful import sdk

    return Path(sdk.__file__).parent / "examples"


async def set_up_demo(h: Harness) -> DemoInfo:
    """Create (or reuse) the demo tenant and Loops; returns what to print."""
    path = h.config.data_dir / "demo" / "credentials.json"
    found = _read(path)
    saved: dict[str, Any] | None = await _reuse(h, found) if found else None
    if saved is None:
        group = await h.create_group("demo")
        agent = await h.create_agent(group.id, "demo-agent")
        session = await h.create_session(agent.id, "demo inbox")
        keys = {}
        for role, scope in (("admin", {}), ("group", {"group_id": group.id}),
                            ("agent", {"group_id": group.id, "agent_id": agent.id})):
            _, text = await h.create_key(role, label=f"demo {role}", **scope)
            keys[role] = text
        saved = {"group_id": group.id, "agent_id": agent.id, "session_id": session.id, "keys": keys, "loops": {}}
    loop_ids: dict[str, str] = dict(saved.get("loops") or {})
    for name, config in DEMO_LOOPS.items():
        loop_id = loop_ids.get(name)
        if loop_id is not None and await _loop_exists(h, loop_id):
            continue
        source = (_examples_dir() / f"{name}.c").read_text()
        report = await h.build(saved["agent_id"], {"sdk_version": 1, "entry": f"{name}.c",
                                                   "files": {f"{name}.c": source}}, path=f"/loops/{name}.elf")
        if report.get("state") != "succeeded":
            raise RuntimeError(f"the demo example {name} did not build: {report.get('error')}")
        view = await h.create_loop(agent_id=saved["agent_id"], session_id=saved["session_id"],
                                   artifact=report["artifact"], name=name, config=config)
        loop_ids[name] = str(view["id"] if "id" in view else view["loop_id"])
    saved["loops"] = loop_ids
    hook = await h.webhook(loop_ids[WEBHOOK_LOOP], "rotate")
    url = str(hook.get("url") or "")
    _write(path, saved)
    return DemoInfo(saved["group_id"], saved["agent_id"], saved["session_id"], dict(saved["keys"]), loop_ids,
                    url, path)


async def _reuse(h: Harness, saved: dict[str, Any]) -> dict[str, Any] | None:
    try:
        await ops.agents.get(h, ops.OPERATOR, group_id=str(saved["group_id"]), agent_id=str(saved["agent_id"]))
    except (NotFound, KeyError, TypeError):
        return None
    return saved


async def _loop_exists(h: Harness, loop_id: str) -> bool:
    try:
        await h.get_loop(loop_id)
    except NotFound:
        return False
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def demo_lines(info: DemoInfo, base_url: str, login_url: str | None = None) -> list[str]:
    """What ``wakeful serve --demo`` prints once the server listens (``login_url``: the dashboard's one-time link)."""
    webhook = info.webhook_path if info.webhook_path.startswith("http") else base_url + info.webhook_path
    group_events = f"{base_url}/v1/agent-groups/{info.group_id}/loops/{info.loops[WEBHOOK_LOOP]}/events"
    messages = f"{base_url}/v1/agent-groups/{info.group_id}/sessions/{info.session_id}/messages"
    return [
        "wakeful demo is running",
        f"  credentials:   {info.credentials} (0600: admin, group and agent keys)",
        f"  group/agent:   {info.group_id} / {info.agent_id}, session {info.session_id}",
        "  Loops:         " + ", ".join(f"{name} {loop_id}" for name, loop_id in info.loops.items()),
        *([f"  dashboard:     {base_url}/ui/ — sign in once with {login_url} (10 minutes, single use)"]
          if login_url else []),
        f"  API docs:      {base_url}/docs",
        f"  webhook URL:   {webhook}",
        f"  data dir:      {info.credentials.parent.parent} (`wakeful …` run in this folder uses this store)",
        "",
        "use the wakeful command against this node (group key, read from the credentials file):",
        f"  export WAKEFUL_SERVER='{base_url}' "
        f"WAKEFUL_API_KEY=\"$({_key_cmd(info.credentials, 'group')})\"",
        "",
        "post an event that produces a wake (threshold_alert: cpu above 90):",
        f"  curl -sS -X POST -H 'Content-Type: application/json' -d '{{\"name\": \"cpu\", \"value\": 95}}' '{webhook}'",
        "",
        "then read the wake in the demo session (keys are read from the credentials file, never printed):",
        f"  curl -sS -H \"Authorization: Bearer $({_key_cmd(info.credentials, 'agent')})\" '{messages}'",
        "",
        "or post to the Loop with the group key:",
        f"  curl -sS -X POST -H \"Authorization: Bearer $({_key_cmd(info.credentials, 'group')})\" "
        f"-H 'Content-Type: application/json' "
        f"-d '{{\"topic\": \"metric\", \"payload\": {{\"name\": \"cpu\", \"value\": 97}}}}' '{group_events}'",
    ]


def _key_cmd(path: Path, role: str) -> str:
    """A shell command printing one demo key from the credentials file."""
    return f"python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"keys\"][\"{role}\"])' '{path}'"
