"""Schemathesis over the live server's own ``/openapi.json`` (with a valid admin key): no 5xx, no 422, every
answer carries ``X-Request-Id`` and every error body is ``{error, message, …}`` (interfaces.md §2.1, §9)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from live_api import LiveApi, make_loop, tenant
from schemathesis.checks import CHECKS, load_all_checks, negative_data_rejection, positive_data_acceptance
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode

pytestmark = pytest.mark.integration
PER_OPERATION = 8  # a few hundred requests per store, well under the 90 s budget
STATUSES: list[int] = []  # every status seen, for the coverage check
SKIP = ("/stream",)  # an endless text/event-stream; covered by test_api_routes


Check = Callable[[Any, Any], None]


def _fuzz(live: LiveApi, compile_c: Any, per_operation: int, check: Check,
          modes: tuple[GenerationMode, ...] = (GenerationMode.POSITIVE,)) -> int:
    """Every operation of the live document at ``per_operation`` derandomized examples, each case and its answer
    given to ``check``; every other case aims at real resources. Returns the number of cases."""
    t = live.call(tenant)
    loop_id = make_loop(live, t, compile_c)
    known = {"group_id": t["group"], "agent_id": t["agent"], "session_id": t["session"], "loop_id": loop_id}
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    headers = {"Authorization": f"Bearer {t['admin']}"}
    calls = 0
    results = list(schema.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results)  # the document loads whole
    assert len(operations) >= 30
    for operation, mode in [(operation, mode) for operation in operations for mode in modes]:
        if any(part in operation.path for part in SKIP):
            continue

        @settings(max_examples=per_operation, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(mode))
        def run(case: Any) -> None:
            nonlocal calls
            calls += 1
            if calls % 2 and case.path_parameters:
                for name in case.path_parameters:
                    if name in known:
                        case.path_parameters[name] = known[name]
            check(case, case.call(base_url=live.url, headers=headers, timeout=30))

        try:
            run()
        except Unsatisfiable:  # an operation with no parameters has no invalid request to make
            assert mode is GenerationMode.NEGATIVE, operation.path
    return calls


def test_schemathesis_finds_no_5xx_and_no_422(store_url: str, tmp_path: Path, compile_c: Any) -> None:
    failures: list[str] = []
    started = time.monotonic()

    def check(case: Any, response: Any) -> None:
        status = response.status_code
        STATUSES.append(status)
        where = f"{case.method} {case.formatted_path} -> {status}: {response.text[:300]}"
        if status >= 500 or status == 422:
            failures.append(where)
        names = {k.lower(): v for k, v in response.headers.items()}
        if "x-request-id" not in names:
            failures.append("no X-Request-Id: " + where)
        kind = names.get("content-type", "")
        kind = kind[0] if isinstance(kind, list) else kind
        if status >= 400 and str(kind).startswith("application/json"):
            body = response.json()
            if not (isinstance(body, dict) and "error" in body and "message" in body):
                failures.append("error body: " + where)

    with LiveApi(store_url, tmp_path / "data") as live:
        calls = _fuzz(live, compile_c, PER_OPERATION, check)
        assert calls >= 200
        assert {200, 201, 400, 404} <= set(STATUSES)  # the fuzzer got past validation and into real resources
        assert failures == [], "\n".join(failures[:20])
        assert live.client.get(f"{live.url}/healthz").status_code == 200
        assert time.monotonic() - started < 90


ALL_CHECKS_PER_OPERATION = 8  # per mode (positive, negative): 881 cases on SQLite, ~20 s
# Excluded, with the reason (docs/decisions-api.md "OpenAPI"): positive_data_acceptance wants every schema-valid
# request accepted, but some rules are not JSON Schema — a person principal must name agent_id, cursors are
# opaque tokens only this server issues, "exactly one of message_ids or up_to"; those answer a typed 400.
# negative_data_rejection: schemathesis counts an unknown query parameter as invalid data, and the app ignores
# unknown query parameters (bodies refuse unknown fields); a body over its bound answers 413, which the check does
# not count as a rejection. The negative cases still run every other check.
EXCLUDED_CHECKS = (positive_data_acceptance, negative_data_rejection)


def test_schemathesis_all_checks_pass_on_sqlite(tmp_path: Path, compile_c: Any) -> None:
    """Every schemathesis check (status codes, content types, response schemas and headers, negative data,
    missing headers, auth, …) over the server's own document: the document says what the app answers."""
    load_all_checks()
    checks = [check for check in CHECKS.get_all() if check not in EXCLUDED_CHECKS]  # `--checks all`, less these
    assert len(checks) >= 12
    failures: list[str] = []

    def check(case: Any, response: Any) -> None:
        try:
            case.validate_response(response, headers=dict(response.request.headers), checks=checks)
        except FailureGroup as group:
            for failure in group.exceptions:
                failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: "
                                f"{type(failure).__name__}: {str(failure)[:300]} {response.text[:200]}")

    with LiveApi(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data") as live:
        cases = _fuzz(live, compile_c, ALL_CHECKS_PER_OPERATION, check, tuple(GenerationMode))
        assert cases >= 500
    assert failures == [], f"{len(failures)} failures:\n" + "\n".join(failures[:30])
