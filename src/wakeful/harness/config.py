"""Harness configuration (interfaces.md §7): every key of the table, typed and validated, with its source.

``load_config`` reads defaults < ``--config`` / ``$WAKEFUL_CONFIG`` / ``<data>/wakeful.toml`` < the environment;
faces apply their flags with ``Config.with_overrides``. ``Config.effective()`` lists every key with its source.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from wakeful.harness.capability_config import HttpCapabilitySpec, parse_capabilities
from wakeful.harness.config_read import (
    BYTES_MAX,
    DEFAULT,
    Key,
    Read,
    boolean,
    check,
    choice,
    integer,
    read,
    refuse,
    strings,
    text,
)
from wakeful.harness.decide.settings import DecideSettings
from wakeful.harness.errors import InvalidRequest
from wakeful.harness.web_policy import WebSettings
from wakeful.sdk.rules import AGENT_LIMITS

__all__ = [
    "KEYS", "BuildSettings", "Config", "ControlSettings", "DecideSettings", "HttpLimits", "Limits", "LogSettings",
    "McpSettings", "Placement", "WebSettings",
    "ScriptLimits", "UiSettings", "default_data_dir", "load_config", "redacted_url",
]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """harness.md §20 (config keys ``limits.*``)."""

    loops_per_agent: int = AGENT_LIMITS["active_loops_per_agent"]
    loops_per_group: int = 100
    notify_per_window: int = AGENT_LIMITS["wakes_per_10_min"]
    notify_window_s: int = 600
    budget_pause_after_s: int = 3600
    reloads_per_hour: int = 3
    pending_events: int = AGENT_LIMITS["pending_events"]
    ack_deadline_s: int = AGENT_LIMITS["ack_deadline_s"]
    group_backlog_bytes: int = 50 * 1024 * 1024  # §10.2 step 5
    ingress_per_loop_per_min: int = AGENT_LIMITS["ingress_per_loop_per_min"]  # §14
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
class BuildSettings:
    """build.md §2, §5, §8 (config keys ``build.*``); ``zig_path`` None = the bundled ``ziglang`` zig."""

    workers: int = 2
    cache: bool = True
    cache_max_bytes: int = 256 << 20
    cache_max_entries: int = 50_000
    zig_path: str | None = None

    def options(self, data_dir: Path) -> Any:
        """The ``wakeful.build.BuildOptions`` of a builder rooted in ``<data>/build`` (build.md §5.1)."""
        from wakeful.build import BuildOptions

        return BuildOptions(data_dir=data_dir, workers=self.workers, cache=self.cache,
                            cache_max_bytes=self.cache_max_bytes, cache_max_entries=self.cache_max_entries,
                            zig_path=self.zig_path)


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpLimits:
    """The HTTP server's connection limits (config keys ``server.header_timeout_s``, ``server.body_timeout_s``,
    ``server.keep_alive_s``, ``server.max_connections``; not in interfaces.md §7, see docs/decisions-api.md)."""

    header_timeout_s: int = 10  # a request's line and headers must arrive within this time
    body_timeout_s: int = 30  # its body within this time after the headers
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this time
    max_connections: int = 1000  # open connections per node; more are answered 503 (capped by the fd limit)


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlSettings:
    """control-plane.md §6, §2.5 (config keys ``control.*``)."""

    intent_grace_s: int = 60
    claim_ttl_s: int = 1800


@dataclass(frozen=True, kw_only=True, slots=True)
class McpSettings:
    """interfaces.md §3.1 (config key ``mcp.tool_names``): ``dotted`` (loop.sdk) or ``underscore`` (loop_sdk)."""

    tool_names: str = "dotted"


@dataclass(frozen=True, kw_only=True, slots=True)
class UiSettings:
    """interfaces.md §6 (config keys ``ui.*``): the dashboard at ``/ui/`` (api/routes_ui.py) and its session length."""

    enabled: bool = True
    session_hours: int = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class LogSettings:
    """interfaces.md §7 (config keys ``log.*``): the level and format of ``wakeful serve``'s log on stderr."""

    level: str = "info"
    format: str = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """interfaces.md §7: every key of the table (``sources`` says where each dotted key's value came from)."""

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
    http: HttpLimits = field(default_factory=HttpLimits)  # server.*_timeout_s, keep_alive_s, max_connections
    decide: DecideSettings = field(default_factory=DecideSettings)  # decide.* (harness.md §16.4)
    web: WebSettings = field(default_factory=WebSettings)  # web.* (harness.md §17.3)
    build: BuildSettings = field(default_factory=BuildSettings)  # build.* (build.md §2, §5, §8)
    control: ControlSettings = field(default_factory=ControlSettings)  # control.* (control-plane.md §6, §2.5)
    mcp: McpSettings = field(default_factory=McpSettings)  # mcp.tool_names
    ui: UiSettings = field(default_factory=UiSettings)  # ui.* (the dashboard, interfaces.md §6)
    log: LogSettings = field(default_factory=LogSettings)  # log.* (wakeful serve)
    # [capabilities."<name>"]: HTTP endpoints offered as tools (docs/decisions-config.md "Configured capabilities")
    capabilities: tuple[HttpCapabilitySpec, ...] = ()
    runtime_command: str | None = None  # runtime.command (read only with runtime.mode = stdio, not supported)
    file: Path | None = None  # the TOML file read, if any
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)  # dotted key → source; absent = default

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
        given = {k: v for k, v in changes.items() if v is not None}
        for name, value in given.items():  # a flag is checked like the file: --port 99999 is refused here
            dotted = _KEY_OF.get(name, "")
            section, _, key = dotted.partition(".")
            if key in KEYS.get(section, {}):
                given[name] = check(dotted, KEYS[section][key], value, "flag")
        sources = {**self.sources, **{_KEY_OF.get(k, k): "flag" for k in given if k != "sources"}}
        return replace(self, **{"sources": sources, **given})

    def source(self, key: str) -> str:
        """Where the value of a dotted key (``build.workers``, ``data_dir``) came from."""
        return self.sources.get(key, DEFAULT)

    def effective(self, *, redact: bool = True) -> dict[str, tuple[Any, str]]:
        """Every key of the §7 table (and ``data_dir``) → (value in force, source); secrets redacted."""
        out: dict[str, tuple[Any, str]] = {"data_dir": (str(self.data_dir), self.source("data_dir"))}
        for section, keys in KEYS.items():
            for name, key in keys.items():
                dotted = f"{section}.{name}"
                value = self._value(dotted)
                if redact and key.secret and value:
                    value = redacted_url(value) if dotted == "store.url" else "<redacted>"
                out[dotted] = (list(value) if isinstance(value, tuple) else value, self.source(dotted))
        return out

    def _value(self, dotted: str) -> Any:
        if dotted == "store.url":
            return self.effective_store_url
        if dotted == "runtime.mode":
            return "inprocess"
        if dotted in _FIELD_OF:
            return getattr(self, _FIELD_OF[dotted])
        section, name = dotted.split(".")
        return getattr(self.http if section == "server" else getattr(self, section), name)


# SQLAlchemy's reading: the password runs to the first "@" ("/" and ":" included); asyncpg also takes ?password=
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/@]*:)[^@]*@", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redacted_url(url: str) -> str:
    """A store URL without its password (``postgresql://u:***@h/db``, ``…?password=***``)."""
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", url))


# interfaces.md §7: $WAKEFUL_HOME, else $XDG_DATA_HOME/wakeful, else ~/.local/share/wakeful
def default_data_dir() -> Path:
    """Where the harness keeps its files when nothing else is configured."""
    return _data_dir(os.environ)[0]


def _ints(cls: Any, low: Callable[[str], int]) -> dict[str, Key]:
    return {f.name: integer(f.default if isinstance(f.default, int) else 0, low(f.name),
                            *([BYTES_MAX] if f.name.endswith("_bytes") else [])) for f in fields(cls)}


# interfaces.md §7, the key table: section → key → kind, default and bounds (docs/decisions-config.md)
KEYS: dict[str, dict[str, Key]] = {
    "server": {"host": text("127.0.0.1", blank=False), "port": integer(8470, 0, 65_535), "public_base_url": text(),
               "public_docs": boolean(True), "node_name": text(),
               # docs/decisions-api.md "Slow clients": read deadlines, keep-alive and the connection limit
               "header_timeout_s": integer(10, 1, 3600), "body_timeout_s": integer(30, 1, 3600),
               "keep_alive_s": integer(5, 1, 3600), "max_connections": integer(1000, 1, 1_000_000)},
    "store": {"url": text(secret=True)},
    "runtime": {"mode": choice("inprocess", "inprocess", "stdio"), "command": text(),
                "max_objects": integer(10_000, 1)},
    "build": {"workers": integer(2, 1, 64), "cache": boolean(True), "cache_max_bytes": integer(256 << 20, 1, BYTES_MAX),
              "cache_max_entries": integer(50_000, 1), "zig_path": text(blank=False)},
    # counts may be 0 (nothing allowed); windows, deadlines and rates must be at least 1
    "limits": _ints(Limits, lambda n: 1 if n.endswith(("_s", "_per_min")) else 0),
    "events": {"dedup_retention_s": integer(86_400, 0)},
    "decide": {"provider": text(), "endpoint": text(), "api_key": text(secret=True), "api_key_env": text(),
               "model": text(), "timeout_ms": integer(2000, 1), "per_minute": integer(60, 1),
               "per_second": integer(4, 1)},
    "web": {"allow_private": boolean(False), "allow_networks": strings(), "max_in_flight": integer(64, 1)},
    "scripts": _ints(ScriptLimits, lambda n: 1),
    "placement": _ints(Placement, lambda n: 1),
    "control": {"intent_grace_s": integer(60, 1, 86_400), "claim_ttl_s": integer(1800, 60, 86_400)},
    "mcp": {"tool_names": choice("dotted", "dotted", "underscore")},
    "ui": {"enabled": boolean(True), "session_hours": integer(8, 1, 168)},
    "log": {"level": choice("info", "debug", "info", "warning", "error", "critical"),
            "format": choice("text", "text", "json")},
}

# dotted keys held in a top-level Config field (the rest live in the section's settings object)
_FIELD_OF = {"server.host": "server_host", "server.port": "server_port", "server.public_docs": "public_docs",
             "server.public_base_url": "public_base_url", "server.node_name": "node_name", "store.url": "store_url",
             "runtime.max_objects": "max_objects", "runtime.command": "runtime_command",
             "events.dedup_retention_s": "dedup_retention_s"}
_KEY_OF = {v: k for k, v in _FIELD_OF.items()}


# interfaces.md §7: flags > environment > file > defaults; unknown keys are an error at start
def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Read ``--config`` / ``$WAKEFUL_CONFIG`` / ``<data>/wakeful.toml`` and the environment."""
    env = os.environ if env is None else env
    data_dir, data_source = _data_dir(env)
    if path is not None:
        file, required = path, True
    elif env.get("WAKEFUL_CONFIG"):
        file, required = Path(env["WAKEFUL_CONFIG"]), True
    else:
        file, required = data_dir / "wakeful.toml", False
    doc = _document(file, required=required, named_by=None if path else "WAKEFUL_CONFIG")
    declared = parse_capabilities(doc.pop("capabilities"), f"file {file}") if "capabilities" in doc else ()
    got = read(KEYS, doc, str(file), env)
    if env.get("WAKEFUL_DB_URL"):  # the shortcut over store.url
        got.values["store.url"], got.sources["store.url"] = env["WAKEFUL_DB_URL"], "env WAKEFUL_DB_URL"
    if got.values["runtime.mode"] == "stdio":
        raise refuse("runtime.mode", "= stdio is not supported yet (only inprocess)", got.sources["runtime.mode"])
    sources = {k: v for k, v in got.sources.items() if v != DEFAULT}
    if data_source != DEFAULT:
        sources["data_dir"] = data_source
    v = got.values
    return Config(
        data_dir=data_dir, store_url=v["store.url"] or None, max_objects=v["runtime.max_objects"],
        limits=_section(got, "limits", Limits), public_base_url=v["server.public_base_url"] or None,
        dedup_retention_s=v["events.dedup_retention_s"], scripts=_section(got, "scripts", ScriptLimits),
        placement=_section(got, "placement", Placement), node_name=v["server.node_name"] or None,
        server_host=v["server.host"], server_port=v["server.port"], public_docs=v["server.public_docs"],
        http=HttpLimits(**{f.name: v[f"server.{f.name}"] for f in fields(HttpLimits)}),
        decide=_checked(got, lambda: DecideSettings.parse(_given(got, "decide"), {}, str(file))),
        web=_checked(got, lambda: WebSettings.parse(_given(got, "web", lists=True), {}, str(file))),
        build=_section(got, "build", BuildSettings), control=_section(got, "control", ControlSettings),
        mcp=_section(got, "mcp", McpSettings), ui=_section(got, "ui", UiSettings),
        log=_section(got, "log", LogSettings), runtime_command=v["runtime.command"], capabilities=declared,
        sources=sources,
        file=file if required or file.is_file() else None)


def _data_dir(env: Mapping[str, str]) -> tuple[Path, str]:
    if env.get("WAKEFUL_HOME"):
        return Path(env["WAKEFUL_HOME"]), "env WAKEFUL_HOME"
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "wakeful", "env XDG_DATA_HOME"
    return Path.home() / ".local" / "share" / "wakeful", DEFAULT


MAX_CONFIG_BYTES = 1 << 20


def _read_regular(file: Path) -> str:
    """The text of a regular file of at most 1 MiB; opening never blocks (a FIFO would hang every command)."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{file} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise OSError(f"{file} is larger than {MAX_CONFIG_BYTES} bytes")
    return data.decode("utf-8")


def _document(file: Path, *, required: bool, named_by: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads(_read_regular(file))
    except FileNotFoundError:
        if required:
            named = f" (named by ${named_by})" if named_by else ""
            raise InvalidRequest(f"config file {file} does not exist{named}", field="config",
                                 source=f"env {named_by}" if named_by else "flag") from None
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"config file {file}: {exc}", field="config", source=f"file {file}") from None


def _given(got: Read, section: str, *, lists: bool = False) -> dict[str, Any]:
    """The keys of a section set by the file or the environment (decide/web parse their own defaults)."""
    out = {}
    for name in KEYS[section]:
        dotted = f"{section}.{name}"
        if got.sources[dotted] != DEFAULT:
            value = got.values[dotted]
            out[name] = list(value) if lists and isinstance(value, tuple) else value
    return out


def _section(got: Read, section: str, cls: Callable[..., T]) -> T:
    return _checked(got, lambda: cls(**{n: got.values[f"{section}.{n}"] for n in KEYS[section]}))


def _checked(got: Read, make: Callable[[], T]) -> T:
    """Build a settings object; a refusal of its own (a cross-key rule, a bad CIDR) names the source too."""
    try:
        return make()
    except (InvalidRequest, ValueError) as exc:
        key = exc.details.get("field") if isinstance(exc, InvalidRequest) else None
        if not isinstance(key, str) or key not in got.sources:
            key = max((k for k in got.sources if str(exc).startswith(k)), key=len, default=None)
        if key is None:
            raise
        message = exc.message if isinstance(exc, InvalidRequest) else str(exc)
        raise InvalidRequest(f"{message} (from {got.sources[key]})", field=key, source=got.sources[key]) from None
