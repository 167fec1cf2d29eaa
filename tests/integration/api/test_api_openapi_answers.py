"""The documented answer schemas (api/schemas.py) hold for real answers of a Loop that took an event: the
Loop, its events, logs, transitions and the lists — validated with jsonschema against /openapi.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from live_api import LiveApi, auth, make_loop, tenant

pytestmark = pytest.mark.integration


def _schema(doc: dict[str, Any], method: str, path: str, status: str = "200") -> dict[str, Any]:
    answer = doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    return {**answer, "components": doc["components"]}


def test_real_answers_match_their_documented_schemas(tmp_path: Path, compile_c: Any) -> None:
    with LiveApi(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data") as live:
        t = live.call(tenant)
        loop_id = make_loop(live, t, compile_c)
        c, key = live.client, auth(t["admin"])
        g = f"{live.url}/v1/agent-groups/{t['group']}"
        posted = c.post(f"{g}/loops/{loop_id}/events", headers=key, json={"topic": "t", "payload": {"n": 1}})
        assert posted.status_code == 202, posted.text
        doc = c.get(f"{live.url}/openapi.json").json()
        G, L = "/v1/agent-groups/{group_id}", "/v1/agent-groups/{group_id}/loops/{loop_id}"
        checked = {
            (G + "/loops", f"{g}/loops"), (L, f"{g}/loops/{loop_id}"), (L + "/events", f"{g}/loops/{loop_id}/events"),
            (L + "/logs", f"{g}/loops/{loop_id}/logs"), (L + "/transitions", f"{g}/loops/{loop_id}/transitions"),
            (G + "/agents", f"{g}/agents"), ("/v1/groups", f"{live.url}/v1/groups"),
            ("/v1/info", f"{live.url}/v1/info"), ("/v1/nodes", f"{live.url}/v1/nodes"),
            (G + "/agents/{agent_id}/sessions", f"{g}/agents/{t['agent']}/sessions"),
        }
        for template, url in sorted(checked):
            answer = c.get(url, headers=key, params={"payloads": "true"} if url.endswith("/events") else None)
            assert answer.status_code == 200, (url, answer.text)
            body = answer.json()
            errors = list(Draft202012Validator(_schema(doc, "get", template)).iter_errors(body))
            assert errors == [], (template, [e.message for e in errors[:3]])
            if "items" in body and not template.endswith("/logs"):  # the counter guest logs nothing
                assert body["items"], template  # a non-empty list, so the item schema was exercised
