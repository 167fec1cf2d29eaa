"""``wakeful config show [--effective]`` (sources, redaction, one JSON document) and the log set-up of
``wakeful serve`` (log.level, log.format = json, redaction of webhook paths and secrets)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from wakeful.cli.logsetup import configure, redact
from wakeful.cli.main import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    for var in ("WAKEFUL_CONFIG", "WAKEFUL_DB_URL", "WAKEFUL_SERVER", "WAKEFUL_BUILD__WORKERS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_config_show_lists_what_is_set_with_sources(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (home / "wakeful.toml").write_text('[build]\nworkers = 1\n[decide]\napi_key = "sk-hidden"\n'
                                       '[store]\nurl = "postgresql://me:pw123@127.0.0.1/test"\n')
    monkeypatch.setenv("WAKEFUL_BUILD__WORKERS", "3")
    assert main(["config", "show", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    keys = doc["keys"]
    assert doc["file"] == str(home / "wakeful.toml") and doc["effective"] is False
    assert keys["build.workers"] == {"value": 3, "source": "env WAKEFUL_BUILD__WORKERS"}
    assert keys["decide.api_key"]["value"] == "<redacted>"
    assert keys["store.url"]["value"] == "postgresql://me:***@127.0.0.1/test"
    assert "control.claim_ttl_s" not in keys  # a default: only with --effective
    assert main(["config", "show", "--effective", "--json"]) == 0
    out = capsys.readouterr().out
    assert "sk-hidden" not in out and "pw123" not in out
    assert json.loads(out)["keys"]["control.claim_ttl_s"] == {"value": 1800, "source": "default"}
    assert main(["config", "show", "--effective"]) == 0
    text = capsys.readouterr().out
    assert "build.workers" in text and "env WAKEFUL_BUILD__WORKERS" in text and "sk-hidden" not in text


def test_config_show_refuses_a_bad_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "wakeful.toml").write_text("[build]\nworkers = 0\n")
    assert main(["config", "show", "--json"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "invalid_request" and err["field"] == "build.workers"
    assert err["source"] == f"file {home / 'wakeful.toml'}"


def test_redaction_of_webhook_paths_keys_and_passwords() -> None:
    line = ('POST /v1/loop-webhooks/AAAsecret1 and /v1/loop-webhooks/BBBsecret2?x=1 key wk_key_0123456789ab_SeCrEt '
            'Bearer tok3n url postgresql://u:pw@h/db')
    shown = redact(line)
    for secret in ("AAAsecret1", "BBBsecret2", "SeCrEt", "tok3n", ":pw@"):
        assert secret not in shown
    assert shown.count("/v1/loop-webhooks/<redacted>") == 2 and "?x=1" in shown and "u:***@h/db" in shown


def test_json_format_writes_one_object_per_line_at_the_level() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure("warning", "json", stream)
        log = logging.getLogger("wakeful.test")
        log.info("not shown")
        log.warning("hook %s", "/v1/loop-webhooks/s3cr3t")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
        configure("debug", "text", stream)
        log.debug("debug line")
    finally:
        root.handlers[:], root.level = saved
    lines = stream.getvalue().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    assert first["level"] == "warning" and first["logger"] == "wakeful.test"
    assert first["message"] == "hook /v1/loop-webhooks/<redacted>"
    assert second["message"] == "failed" and "ValueError: boom" in second["exc"]
    assert "not shown" not in stream.getvalue() and "s3cr3t" not in stream.getvalue()
    assert lines[-1].endswith("DEBUG wakeful.test: debug line")
