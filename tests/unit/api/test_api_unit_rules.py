"""Pure rules of the HTTP face: the error table, cursors, body bounds, content types, log redaction, the
message cursor and the ``server.*`` configuration keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.api import errors, pages
from wakeful.api.middleware import body_limit_for, body_self_checked, is_json_type
from wakeful.api.server import _redact
from wakeful.api.views import parse_message_cursor
from wakeful.harness.config import load_config
from wakeful.harness.errors import InvalidRequest


def test_error_table_and_registration() -> None:
    expected = {"invalid_request": 400, "invalid_event": 400, "invalid_json": 400, "json_object_required": 400,
                "invalid_bundle": 400, "invalid_command": 400, "unauthorized": 401, "forbidden": 403,
                "not_registered": 403, "excluded": 403, "not_found": 404, "session_not_found": 404,
                "loop_not_active": 409, "session_in_use": 409, "quota_exceeded": 409, "payload_too_large": 413,
                "json_required": 415, "rate_limited": 429, "mailbox_full": 429, "group_backlog_full": 429,
                "busy": 429, "unavailable": 503, "compiler_unavailable": 503, "internal": 500}
    assert {code: errors.status_for(code) for code in expected} == expected
    assert errors.status_for("never_heard_of_it") == 500
    errors.register_status("not_found", 404)  # confirming a row of wakeful.errors.ERROR_CODES is fine
    with pytest.raises(ValueError):  # a code that is not a row: codes are added to the one table only
        errors.register_status("unit_test_refusal", 409)
    with pytest.raises(ValueError):
        errors.register_status("not_found", 410)


def test_error_body_and_retry_after() -> None:
    response = errors.error_response("rate_limited", "slow down", details={"retry_after_s": 2.2, "error": "x"})
    assert response.status_code == 429 and response.headers["retry-after"] == "3"
    assert response.body == b'{"error":"rate_limited","message":"slow down","retry_after_s":3}'
    assert errors.error_response("busy", "b", details={"retry_after_s": 0}).headers["retry-after"] == "1"


def test_cursors() -> None:
    for key in ("grp_01", "a:b:c", "ü"):
        assert pages.decode_cursor(pages.encode_cursor(key)) == key
    for bad in ("%%%", "AAA\x00", pages.encode_cursor("\x00")):
        with pytest.raises(InvalidRequest):
            pages.decode_cursor(bad)
    items = [f"k{i}" for i in range(5)]
    first = pages.page(items, limit=2, cursor=None, key=str, render=str)
    assert first["items"] == ["k0", "k1"] and first["next_cursor"]
    second = pages.page(items, limit=2, cursor=first["next_cursor"], key=str, render=str)
    assert second["items"] == ["k2", "k3"]
    last = pages.page(items, limit=2, cursor=second["next_cursor"], key=str, render=str)
    assert last == {"items": ["k4"], "next_cursor": None}


def test_message_cursor() -> None:
    assert parse_message_cursor(pages.encode_cursor("0000000000000012:msg_1")) == (12, "msg_1")
    assert parse_message_cursor(None) is None
    for bad in (pages.encode_cursor("x:msg"), pages.encode_cursor("12"), "!!", pages.encode_cursor("9" * 19 + ":m"),
                pages.encode_cursor("١٢:m")):
        with pytest.raises(InvalidRequest):
            parse_message_cursor(bad)


def test_body_bounds_and_types() -> None:
    assert body_limit_for("/v1/loop-webhooks/abc") == 1_048_576  # the route reads 16 KiB unless a verifier maps fields
    assert body_limit_for("/v1/agent-groups/g/builds") == body_limit_for("/v1/agent-groups/g/scripts/run") == 262_144
    assert body_limit_for("/v1/agent-groups/g/loops") == 65_536
    assert body_self_checked("/v1/agent-groups/g/loops/l/events", "POST")
    assert body_self_checked("/v1/loop-webhooks/s", "POST")
    assert not body_self_checked("/v1/agent-groups/g/loops/l/events", "GET")
    assert not body_self_checked("/v1/agent-groups/g/loops", "POST")
    for ok in ("application/json", "Application/JSON; charset=utf-8", " application/json ;x=y"):
        assert is_json_type(ok)
    for bad in (None, "", "text/plain", "application/jsonx", "application/json-patch+json"):
        assert not is_json_type(bad)


def test_webhook_paths_are_redacted_in_access_logs() -> None:
    line = 'POST /v1/loop-webhooks/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcde HTTP/1.1'
    assert _redact(line) == "POST /v1/loop-webhooks/<redacted> HTTP/1.1"
    assert _redact("/v1/loop-webhooks/secret?x=1") == "/v1/loop-webhooks/<redacted>?x=1"
    assert _redact("GET /healthz") == "GET /healthz"


def test_server_config_keys(tmp_path: Path) -> None:
    file = tmp_path / "wakeful.toml"
    file.write_text('[server]\nhost = "0.0.0.0"\nport = 9000\npublic_docs = false\nnode_name = "n1"\n')
    cfg = load_config(file, env={"WAKEFUL_HOME": str(tmp_path)})
    assert (cfg.server_host, cfg.server_port, cfg.public_docs, cfg.node_name) == ("0.0.0.0", 9000, False, "n1")
    cfg = load_config(file, env={"WAKEFUL_HOME": str(tmp_path), "WAKEFUL_SERVER__PORT": "9100",
                                 "WAKEFUL_SERVER__PUBLIC_DOCS": "true"})
    assert (cfg.server_port, cfg.public_docs) == (9100, True)
    defaults = load_config(env={"WAKEFUL_HOME": str(tmp_path / "none")})
    assert (defaults.server_host, defaults.server_port, defaults.public_docs) == ("127.0.0.1", 8470, True)
    for bad in ('[server]\nprot = 1\n', '[server]\nport = 70000\n', '[server]\npublic_docs = "maybe"\n',
                '[server]\nhost = 7\n'):
        file.write_text(bad)
        with pytest.raises(InvalidRequest):
            load_config(file, env={"WAKEFUL_HOME": str(tmp_path)})


def test_recent_refusals_window() -> None:
    from wakeful.api.middleware import RecentRefusals

    now = [1000.0]
    counts = RecentRefusals(lambda: now[0])
    for status in (429, 429, 503, 200, 404, 429):
        counts.record(status)
    assert counts.counts() == {"429": 3, "503": 1}
    now[0] += 1800
    counts.record(503)
    assert counts.counts() == {"429": 3, "503": 2}
    now[0] += 1801  # the first second left the hour
    assert counts.counts() == {"429": 0, "503": 1}
    now[0] += 3600
    assert counts.counts() == {"429": 0, "503": 0}
