"""Harness configuration: data directory, store URL and the limits of harness.md §20.

Only the parts of interfaces.md §7 the harness core needs; the faces extend it with their own sections.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from wakeful.harness.decide.settings import DecideSettings
from wakeful.harness.errors import InvalidRequest
from wakeful.harness.web_policy import WebSettings

__all__ = ["Config", "Limits", "Placement", "ScriptLimits", "default_data_dir", "load_config"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """harness.md §20 (config keys ``limits.*``)."""

    loops_per_agent: int = 20
    loops_per_group: int = 100
    notify_per_window: int = 6
    notify_window_s: int = 600
    budget_pause_after_s: int = 3600
    reloads_per_hour: int = 3
    pending_events: int = 32
    ack_deadline_s: int = 900
    group_backlog_bytes: int = 50 * 1024 * 1024  # §10.2 step 5
    ingress_per_loop_per_min: int = 60  # §14
    ingress_global_per_min: int = 6000  # §14


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptLimits:
    """harness.md §18 / §20 (config keys ``scripts.*``)."""

    guest_time_ms: int = 5_000
    wall_time_ms: int = 60_000
    max_resident: int = 64
    per_agent: int = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class Placement:
    """harness.md §19 / interfaces.md §7 (config keys ``placement.*``), in seconds."""

    lease_ttl_s: int = 30
    renew_s: int = 10
    heartbeat_s: int = 5
    dead_after_s: int = 20
    tick_s: int = 10
    reconcile_s: int = 60

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 1:
                raise InvalidRequest(f"placement.{f.name} must be at least 1", field=f"placement.{f.name}")
        if self.renew_s >= self.lease_ttl_s:  # §19.2: self-fencing needs TTL − renew > 0
            raise InvalidRequest("placement.renew_s must be below placement.lease_ttl_s", field="placement.renew_s")


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """interfaces.md §7: ``data_dir``, ``store.url``, ``runtime.max_objects`` and ``limits.*``."""

    data_dir: Path = field(default_factory=lambda: default_data_dir())
    store_url: str | None = None
    max_objects: int = 10_000
    limits: Limits = field(default_factory=Limits)
    public_base_url: str | None = None  # server.public_base_url: prefix of webhook URLs (harness.md §13)
    dedup_retention_s: int = 86_400  # events.dedup_retention_s (harness.md §2.6)
    scripts: ScriptLimits = field(default_factory=ScriptLimits)  # scripts.* (harness.md §18)
    placement: Placement = field(default_factory=Placement)  # placement.* (harness.md §19)
    node_name: str | None = None  # server.node_name / ``serve --node-name``; None → the host name
    server_host: str = "127.0.0.1"  # server.host (interfaces.md §7)
    server_port: int = 8470  # server.port
    public_docs: bool = True  # server.public_docs: serve /openapi.json and /docs
    decide: DecideSettings = field(default_factory=DecideSettings)  # decide.* (harness.md §16.4)
    web: WebSettings = field(default_factory=WebSettings)  # web.* (harness.md §17.3)

    @property
    def effective_store_url(self) -> str:
        """``store.url``, defaulting to the SQLite file in the data directory (§7)."""
        return self.store_url or f"sqlite:///{self.data_dir / 'wakeful.db'}"

    @property
    def artifact_dir(self) -> Path:
        """The verified ELF cache of harness.md §2.4."""
        return self.data_dir / "artifacts"

    def with_overrides(self, **changes: Any) -> Config:
        """A copy with the non-None keyword values replaced (command-line flags over file values)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# interfaces.md §7: $WAKEFUL_HOME, else $XDG_DATA_HOME/wakeful, else ~/.local/share/wakeful
def default_data_dir() -> Path:
    """Where the harness keeps its files when nothing else is configured."""
    home = os.environ.get("WAKEFUL_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg) / "wakeful"
    return Path.home() / ".local" / "share" / "wakeful"


# interfaces.md §7: the sections and keys this layer reads; the faces add their own before calling
_SECTIONS: dict[str, dict[str, str]] = {
    "store": {"url": "store_url"},
    "runtime": {"max_objects": "max_objects", "mode": "", "command": ""},
    "limits": {f.name: f.name for f in fields(Limits)},
    "events": {"dedup_retention_s": "dedup_retention_s"},
    "scripts": {f.name: f"scripts.{f.name}" for f in fields(ScriptLimits)},
    "placement": {f.name: f"placement.{f.name}" for f in fields(Placement)},
}


# interfaces.md §7 sections read by other parts of wakeful (their owners check their keys)
OTHER_SECTIONS = frozenset({
    "server", "build", "decide", "web", "control", "mcp", "ui", "log",
})


# interfaces.md §7: flags > environment > file > defaults; unknown keys are an error at start
def load_config(
    path: Path | None = None, *, env: Mapping[str, str] | None = None, extra_sections: frozenset[str] = OTHER_SECTIONS,
) -> Config:
    """Read ``--config`` / ``$WAKEFUL_CONFIG`` / ``<data>/wakeful.toml`` and the environment."""
    env = os.environ if env is None else env
    data_dir = Path(env["WAKEFUL_HOME"]) if env.get("WAKEFUL_HOME") else default_data_dir()
    file = path or (Path(env["WAKEFUL_CONFIG"]) if env.get("WAKEFUL_CONFIG") else data_dir / "wakeful.toml")
    values = _from_file(file, required=path is not None, extra_sections=extra_sections)
    values.update(_from_env(env))
    limits = Limits(**{k: v for k, v in values.items() if k in Limits.__dataclass_fields__})
    store_url = env.get("WAKEFUL_DB_URL") or values.get("store_url")
    values.update(_server_values({k: env[f"WAKEFUL_SERVER__{k.upper()}"] for k in _SERVER_KEYS
                                  if f"WAKEFUL_SERVER__{k.upper()}" in env}, "the environment"))
    base_url = env.get("WAKEFUL_SERVER__PUBLIC_BASE_URL") or values.get("public_base_url")
    return Config(data_dir=data_dir, store_url=store_url, max_objects=int(values.get("max_objects", 10_000)),
                  limits=limits, public_base_url=base_url or None,
                  dedup_retention_s=int(values.get("dedup_retention_s", 86_400)),
                  scripts=ScriptLimits(**{k[8:]: v for k, v in values.items() if k.startswith("scripts.")}),
                  placement=Placement(**{k[10:]: v for k, v in values.items() if k.startswith("placement.")}),
                  decide=DecideSettings.parse(values.get("decide", {}), env, str(file)),
                  web=WebSettings.parse(values.get("web", {}), env, str(file)),
                  **{k: values[k] for k in ("node_name", "server_host", "server_port", "public_docs") if k in values})


def _from_file(file: Path, *, required: bool, extra_sections: frozenset[str]) -> dict[str, Any]:
    try:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise InvalidRequest(f"config file {file} does not exist", field="config") from None
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"config file {file}: {exc}", field="config") from None
    out: dict[str, Any] = {}
    for section, table in doc.items():
        if section in extra_sections:
            if section == "server" and isinstance(table, dict):
                out.update(_server_values(table, str(file)))
            if section in ("decide", "web"):  # checked by DecideSettings.parse / WebSettings.parse
                if not isinstance(table, dict):
                    raise InvalidRequest(f"config section [{section}] must be a table", field=section)
                out[section] = table
            continue
        keys = _SECTIONS.get(section)
        if keys is None or not isinstance(table, dict):
            raise InvalidRequest(f"unknown config section [{section}] in {file}", field=section)
        for key, value in table.items():
            if key not in keys:
                raise InvalidRequest(f"unknown config key {section}.{key} in {file}", field=f"{section}.{key}")
            if keys[key]:  # "" marks a key another part reads
                out[keys[key]] = _typed(f"{section}.{key}", value, str if key == "url" else int)
    return out


# interfaces.md §7 server.*: host, port, public_docs, node_name, public_base_url (file or WAKEFUL_SERVER__*)
_SERVER_KEYS = {"host": "server_host", "port": "server_port", "public_docs": "public_docs",
                "node_name": "node_name", "public_base_url": "public_base_url"}


def _server_values(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _SERVER_KEYS:
            raise InvalidRequest(f"unknown config key server.{key} in {where}", field=f"server.{key}")
        if key == "port":
            value = _typed("server.port", value, int)
            if not 0 <= value <= 65535:
                raise InvalidRequest("server.port must be 0..65535", field="server.port")
        elif key == "public_docs":
            if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
                value = value.lower() in ("true", "1", "yes")
            if not isinstance(value, bool):
                raise InvalidRequest("server.public_docs must be true or false", field="server.public_docs")
        else:
            value = _typed(f"server.{key}", value, str)
        out[_SERVER_KEYS[key]] = value
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for section, keys in _SECTIONS.items():
        for key, target in keys.items():
            raw = env.get(f"WAKEFUL_{section.upper()}__{key.upper()}")
            if raw is not None and target:
                out[target] = raw if key == "url" else _typed(f"{section}.{key}", raw, int)
    return out


def _typed(name: str, value: Any, kind: type) -> Any:
    if kind is int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InvalidRequest(f"{name} must be an integer, not {value!r}", field=name) from None
        if isinstance(value, bool) or number < 0:
            raise InvalidRequest(f"{name} must be a non-negative integer", field=name)
        return number
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string", field=name)
    return value
