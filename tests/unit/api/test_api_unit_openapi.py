"""The OpenAPI document says what the app does (issue 19): short unique operationIds by one rule, the bearer
scheme on every keyed operation and none on the unauthenticated ones, every refusal status with the Error body."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from wakeful.api.app import create_app
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness

NO_KEY = {"/healthz", "/v1/loop-webhooks/{secret}"}
ERROR_REF = {"$ref": "#/components/schemas/Error"}


@pytest.fixture
def doc(tmp_path: Path) -> dict[str, Any]:
    harness = Harness(Config(data_dir=tmp_path / "data", store_url=f"sqlite:///{tmp_path / 'w.db'}"))
    document: dict[str, Any] = create_app(harness).openapi()
    return document


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, op) for p, item in doc["paths"].items() for m, op in item.items()]


def test_operation_ids_are_short_unique_and_follow_the_area_rule(doc: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids)) and len(ids) >= 50
    for op_id in ids:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", op_id) and len(op_id) <= 30, op_id
    by_route = {(m, p): op["operationId"] for m, p, op in _operations(doc)}
    assert by_route[("post", "/v1/agent-groups/{group_id}/loops")] == "loops_create"
    assert by_route[("get", "/v1/agent-groups/{group_id}/loops")] == "loops_list"
    assert by_route[("get", "/v1/agent-groups/{group_id}/loops/{loop_id}")] == "loops_get"
    assert by_route[("post", "/v1/groups")] == "admin_create_group"
    assert by_route[("get", "/healthz")] == "meta_healthz"


def test_bearer_security_exactly_on_keyed_operations(doc: dict[str, Any]) -> None:
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for method, path, op in _operations(doc):
        if path in NO_KEY:
            assert "security" not in op, (method, path)
        else:
            assert op["security"] == [{"bearer": []}], (method, path)
    assert not any(p.startswith("/ui/") for p in doc["paths"])  # the dashboard login is no API operation


def test_every_refusal_status_is_documented_with_the_error_body(doc: dict[str, Any]) -> None:
    error = doc["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"error", "message"} and "field" in error["properties"]
    for method, path, op in _operations(doc):
        responses = op["responses"]
        assert "422" not in responses, (method, path)
        want = {"400", "503"} | (set() if path in NO_KEY else {"401", "403"})
        want |= {"404"} if "{" in path else set()
        want |= {"413", "415"} if method in ("post", "put") else set()
        assert want <= set(responses), (method, path, sorted(want - set(responses)))
        for status, answer in responses.items():
            if status >= "400":
                assert answer["content"]["application/json"]["schema"] == ERROR_REF, (method, path, status)


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("PUT", "/v1/groups", "GET, POST"),
    ("PUT", "/v1/agent-groups/g/loops", "GET, POST"),
    ("PATCH", "/v1/agent-groups/g/loops/l", "DELETE, GET"),
    ("POST", "/v1/agent-groups/g/loops/l/webhook/verifier", "DELETE, GET, PUT"),
    ("POST", "/healthz", "GET"),
])
def test_405_allow_names_every_method_of_the_path(tmp_path: Path, method: str, path: str, allow: str) -> None:
    from fastapi.testclient import TestClient

    harness = Harness(Config(data_dir=tmp_path / "data", store_url=f"sqlite:///{tmp_path / 'w.db'}"))
    answer = TestClient(create_app(harness)).request(method, path)
    assert answer.status_code == 405 and answer.json()["error"] == "method_not_allowed"
    assert answer.headers["allow"] == allow


def test_known_refusals_name_real_operations_and_registered_codes(doc: dict[str, Any]) -> None:
    from wakeful.api.errors import STATUS
    from wakeful.api.openapi import REFUSALS

    ids = {op["operationId"]: op for _, _, op in _operations(doc)}
    for op_id, codes in REFUSALS.items():
        assert op_id in ids, op_id
        for code in codes:
            assert code in STATUS, (op_id, code)
            assert str(STATUS[code]) in ids[op_id]["responses"], (op_id, code)
    assert "409" in ids["agents_delete_session"]["responses"]  # session_in_use: the fuzzer found it undocumented


def test_every_success_answer_has_a_described_schema(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    assert {"Loop", "Agent", "Session", "Group", "Key", "KeyCreated", "Node", "Info", "Health"} <= set(schemas)
    assert {"id", "state", "session_id"} <= set(schemas["Loop"]["required"])
    for method, path, op in _operations(doc):
        for status, answer in op["responses"].items():
            content = answer.get("content", {}).get("application/json")
            if not status.startswith("2") or content is None:
                continue
            schema = content["schema"]
            assert "$ref" in schema or schema.get("properties") or schema.get("description"), (method, path)
    by_id = {op["operationId"]: op for _, _, op in _operations(doc)}

    def success(op_id: str, status: str = "200") -> dict[str, Any]:
        schema: dict[str, Any] = by_id[op_id]["responses"][status]["content"]["application/json"]["schema"]
        return schema

    assert success("loops_get") == {"$ref": "#/components/schemas/Loop"}
    assert success("loops_create", "201") == {"$ref": "#/components/schemas/Loop"}
    assert success("loops_list")["properties"]["items"]["items"] == {"$ref": "#/components/schemas/Loop"}
    assert success("admin_create_key", "201") == {"$ref": "#/components/schemas/KeyCreated"}
