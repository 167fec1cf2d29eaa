"""The CLI's JSON error document keeps a refusal's structured details (field, retry_after_s, scope/limit, …) as
the HTTP face answers them (interfaces.md §4.1), and the bundle error's rule/path."""

from __future__ import annotations

import json

import pytest

from wakeful.cli.output import EXIT_FAILED, CliExit, Out
from wakeful.errors import BundleError
from wakeful.harness.errors import InvalidEvent, QuotaExceeded, RateLimited


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RateLimited("slow down", retry_after_s=2.2),
         {"error": "rate_limited", "message": "slow down", "retry_after_s": 3}),
        (InvalidEvent("bad topic", field="topic"), {"error": "invalid_event", "message": "bad topic", "field": "topic"}),
        (QuotaExceeded("agent", 20), {"error": "quota_exceeded", "message": "the agent is at its limit of 20 active Loops",
                                      "scope": "agent", "limit": 20}),
        (BundleError("path", "bad path", "a/../b.c"),
         {"error": "invalid_bundle", "message": "bad path", "rule": "path", "path": "a/../b.c"}),
    ],
)
def test_json_error_keeps_details(error: Exception, expected: dict[str, object],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = Out(json=True)
    with pytest.raises(CliExit) as ended:
        out.fail(error, extra={"type": "error"})  # type: ignore[arg-type]
    assert ended.value.code == EXIT_FAILED
    assert json.loads(capsys.readouterr().out) == {**expected, "type": "error"}


def test_details_never_replace_the_code_or_message(capsys: pytest.CaptureFixture[str]) -> None:
    err = InvalidEvent("real", field="payload", error="forged")
    err.details["message"] = "forged"
    Out(json=True).error(err)
    assert json.loads(capsys.readouterr().out) == {"error": "invalid_event", "message": "real", "field": "payload"}
