"""interfaces.md §7 configuration: every key's default, file < environment < flag precedence with sources, and
typed errors naming the key and the source for wrong types, ranges and unknown keys in every section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.harness.config import KEYS, Config, load_config
from wakeful.harness.errors import InvalidRequest


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return path


def test_defaults_of_the_new_sections(tmp_path: Path) -> None:
    cfg = load_config(env={"WAKEFUL_HOME": str(tmp_path)})
    b = cfg.build
    assert (b.workers, b.cache, b.cache_max_bytes, b.cache_max_entries, b.zig_path) == (2, True, 256 << 20, 50_000,
                                                                                         None)
    assert (cfg.control.intent_grace_s, cfg.control.claim_ttl_s, cfg.mcp.tool_names) == (60, 1800, "dotted")
    assert (cfg.ui.enabled, cfg.ui.session_hours, cfg.log.level, cfg.log.format) == (True, 8, "info", "text")
    assert cfg.file is None and cfg.source("build.workers") == "default"
    assert cfg.source("data_dir") == "env WAKEFUL_HOME"
    shown = cfg.effective()
    assert set(shown) == {"data_dir"} | {f"{s}.{k}" for s, keys in KEYS.items() for k in keys}
    assert shown["runtime.mode"] == ("inprocess", "default")


def test_every_section_of_the_table_is_read(tmp_path: Path) -> None:
    path = _file(tmp_path, '[build]\nworkers = 1\ncache = false\ncache_max_bytes = 4096\ncache_max_entries = 7\n'
                           'zig_path = "/opt/zig"\n[control]\nintent_grace_s = 30\nclaim_ttl_s = 600\n'
                           '[mcp]\ntool_names = "underscore"\n[ui]\nenabled = false\nsession_hours = 2\n'
                           '[log]\nlevel = "debug"\nformat = "json"\n[runtime]\nmode = "inprocess"\n'
                           'command = "spinfoam"\nmax_objects = 9\n')
    cfg = load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})
    assert cfg.file == path
    b = cfg.build
    assert (b.workers, b.cache, b.cache_max_bytes, b.cache_max_entries, b.zig_path) == (1, False, 4096, 7, "/opt/zig")
    assert (cfg.control.intent_grace_s, cfg.control.claim_ttl_s, cfg.mcp.tool_names) == (30, 600, "underscore")
    assert (cfg.ui.enabled, cfg.ui.session_hours, cfg.log.level, cfg.log.format) == (False, 2, "debug", "json")
    assert (cfg.runtime_command, cfg.max_objects) == ("spinfoam", 9)
    assert cfg.source("control.claim_ttl_s") == f"file {path}"
    options = b.options(tmp_path)
    assert (options.workers, options.cache, options.cache_max_bytes, options.cache_max_entries,
            options.zig_path, options.data_dir) == (1, False, 4096, 7, "/opt/zig", tmp_path)


def test_flags_over_environment_over_file(tmp_path: Path) -> None:
    path = _file(tmp_path, '[build]\nworkers = 3\ncache = true\n[server]\nport = 9000\n[log]\nformat = "json"\n')
    env = {"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_BUILD__WORKERS": "4", "WAKEFUL_BUILD__CACHE": "off",
           "WAKEFUL_SERVER__PORT": "9100", "WAKEFUL_CONTROL__CLAIM_TTL_S": "120"}
    cfg = load_config(path, env=env)
    assert (cfg.build.workers, cfg.build.cache, cfg.server_port, cfg.control.claim_ttl_s) == (4, False, 9100, 120)
    assert cfg.log.format == "json" and cfg.source("log.format") == f"file {path}"
    assert cfg.source("build.workers") == "env WAKEFUL_BUILD__WORKERS"
    flagged = cfg.with_overrides(server_port=9200, store_url="sqlite:///x.db", server_host=None)
    assert flagged.server_port == 9200 and flagged.source("server.port") == "flag"
    assert flagged.source("store.url") == "flag" and flagged.source("server.host") == "default"
    assert flagged.effective()["server.port"] == (9200, "flag")


def test_the_store_shortcut_and_the_config_variable(tmp_path: Path) -> None:
    path = _file(tmp_path, '[store]\nurl = "postgresql://u:pw@127.0.0.1/db"\n')
    cfg = load_config(env={"WAKEFUL_HOME": str(tmp_path / "h"), "WAKEFUL_CONFIG": str(path)})
    assert cfg.store_url == "postgresql://u:pw@127.0.0.1/db" and cfg.file == path
    assert cfg.effective()["store.url"] == ("postgresql://u:***@127.0.0.1/db", f"file {path}")
    cfg = load_config(env={"WAKEFUL_HOME": str(tmp_path / "h"), "WAKEFUL_CONFIG": str(path),
                           "WAKEFUL_DB_URL": "sqlite:///a.db"})
    assert cfg.store_url == "sqlite:///a.db" and cfg.source("store.url") == "env WAKEFUL_DB_URL"
    with pytest.raises(InvalidRequest, match=r"missing\.toml does not exist.*WAKEFUL_CONFIG"):
        load_config(env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_CONFIG": str(tmp_path / "missing.toml")})


def test_secrets_are_redacted_in_effective_but_kept_in_force(tmp_path: Path) -> None:
    path = _file(tmp_path, '[decide]\nprovider = "jev"\napi_key = "sk-very-secret"\n')
    cfg = load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})
    assert cfg.decide.api_key == "sk-very-secret"
    assert "sk-very-secret" not in json.dumps(cfg.effective(), default=str)
    assert cfg.effective(redact=False)["decide.api_key"][0] == "sk-very-secret"


@pytest.mark.parametrize(("text", "key"), [
    ("[build]\nworkers = 0\n", "build.workers"),
    ("[build]\nworkers = 1.5\n", "build.workers"),
    ('[build]\ncache = "yes"\n', "build.cache"),
    ("[build]\ncache_max_bytes = 0\n", "build.cache_max_bytes"),
    ("[build]\nzig_path = 3\n", "build.zig_path"),
    ("[control]\nclaim_ttl_s = 59\n", "control.claim_ttl_s"),
    ("[control]\nclaim_ttl_s = 86401\n", "control.claim_ttl_s"),
    ("[control]\nintent_grace_s = 0\n", "control.intent_grace_s"),
    ('[mcp]\ntool_names = "camel"\n', "mcp.tool_names"),
    ('[log]\nlevel = "loud"\n', "log.level"),
    ('[log]\nformat = "xml"\n', "log.format"),
    ("[ui]\nenabled = 1\n", "ui.enabled"),
    ("[ui]\nsession_hours = 0\n", "ui.session_hours"),
    ('[runtime]\nmode = "subprocess"\n', "runtime.mode"),
    ('[runtime]\nmode = "stdio"\ncommand = "x"\n', "runtime.mode"),
    ("[runtime]\nmax_objects = 0\n", "runtime.max_objects"),
    ("[limits]\nack_deadline_s = 0\n", "limits.ack_deadline_s"),
    ("[limits]\nloops_per_agent = true\n", "limits.loops_per_agent"),
    ("[scripts]\nper_agent = 0\n", "scripts.per_agent"),
    ("[placement]\nrenew_s = 40\n", "placement.renew_s"),
    ("[server]\nport = 70000\n", "server.port"),
    ('[web]\nallow_networks = ["10.0.0.0/33"]\n', "web.allow_networks"),
    ("[decide]\nper_second = 0\n", "decide.per_second"),
    ('[events]\ndedup_retention_s = "day"\n', "events.dedup_retention_s"),
])
def test_a_bad_value_names_its_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(InvalidRequest) as caught:
        load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})
    assert caught.value.details["field"] == key and key in caught.value.message
    assert caught.value.details["source"] == f"file {path}" and str(path) in caught.value.message


def test_stdio_runtime_is_refused_as_not_supported(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="not supported yet"):
        load_config(env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_RUNTIME__MODE": "stdio"})


@pytest.mark.parametrize(("var", "value"), [
    ("WAKEFUL_BUILD__WORKERS", "many"), ("WAKEFUL_BUILD__CACHE", "maybe"), ("WAKEFUL_CONTROL__CLAIM_TTL_S", "10"),
    ("WAKEFUL_LOG__FORMAT", "xml"), ("WAKEFUL_UI__ENABLED", "2"), ("WAKEFUL_BUILD__WORKRS", "1"),
    ("WAKEFUL_MCP__TOOL_NAME", "dotted"), ("WAKEFUL_PLACEMENT__RENEW_S", "30"),
])
def test_a_bad_environment_value_names_its_variable(tmp_path: Path, var: str, value: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        load_config(env={"WAKEFUL_HOME": str(tmp_path), var: value})
    assert caught.value.details["source"] == f"env {var}" and var in caught.value.message


@pytest.mark.parametrize("section", sorted(KEYS))
def test_unknown_keys_are_refused_in_every_section(tmp_path: Path, section: str) -> None:
    path = _file(tmp_path, f"[{section}]\nno_such_key = 1\n")
    with pytest.raises(InvalidRequest) as caught:
        load_config(path, env={"WAKEFUL_HOME": str(tmp_path)})
    assert caught.value.details["field"] == f"{section}.no_such_key"
    assert str(path) in caught.value.message


def test_an_environment_variable_of_an_unknown_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as caught:
        load_config(env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_BULID__WORKERS": "1"})
    assert caught.value.details["source"] == "env WAKEFUL_BULID__WORKERS"
    load_config(env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_TEST_PG_URL": "x", "WAKEFUL_SERVER": "y"})  # no "__"


def test_a_config_for_the_spec_with_a_dashboard_loads(tmp_path: Path) -> None:
    path = _file(tmp_path, '[ui]\nenabled = true\nsession_hours = 8\n[runtime]\nmode = "inprocess"\n')
    assert load_config(path, env={"WAKEFUL_HOME": str(tmp_path)}).ui.session_hours == 8


def test_a_plain_config_has_default_sources() -> None:
    cfg = Config(data_dir=Path("/tmp/x"))
    assert cfg.source("control.claim_ttl_s") == "default" and cfg.effective()["control.claim_ttl_s"] == (1800,
                                                                                                       "default")
