"""The scripted host of `wakeful run --host-replies FILE` (interfaces.md §4.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.cli.output import UsageError
from wakeful.cli.replies import LOOP_BUILTINS, HostReplies


def test_replies_are_consumed_in_order_and_the_last_repeats() -> None:
    host = HostReplies.parse('{"t": [{"result": 1}, {"result": 2}], "u": [{"result": "x"}]}')
    assert [host.answer("t").result for _ in range(4)] == [1, 2, 2, 2]
    assert host.answer("u").result == "x"  # per capability, independent of t


def test_error_replies() -> None:
    host = HostReplies.parse('{"t": [{"error": {"code": "boom", "message": "no"}}, {"result": null}]}')
    first = host.answer("t")
    assert first.error == {"code": "boom", "message": "no"}
    assert first.to_json() == {"error": {"code": "boom", "message": "no"}}
    second = host.answer("t")
    assert second.error is None and second.to_json() == {"result": None}


def test_unlisted_capability_is_not_scripted() -> None:
    reply = HostReplies.parse("{}").answer("agent.notify")
    assert reply.error == {"code": "not_scripted", "message": "no reply for agent.notify"}


def test_capabilities_are_file_names_plus_loop_builtins() -> None:
    host = HostReplies.parse('{"service.status": [{"result": 1}], "decide": [{"result": 2}]}')
    caps = host.capabilities()
    assert caps[: len(LOOP_BUILTINS)] == list(LOOP_BUILTINS)
    assert caps.count("decide") == 1 and "service.status" in caps
    assert set(LOOP_BUILTINS) == {
        "agent.notify",
        "loop.state.put",
        "loop.state.get",
        "loop.ack",
        "loop.log",
        "decide",
        "web.http_request",
    }


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"t": {"result": 1}}',
        '{"t": []}',
        '{"t": [1]}',
        '{"t": [{"result": 1, "error": {"code": "a", "message": "b"}}]}',
        '{"t": [{"reply": 1}]}',
        '{"t": [{"error": "boom"}]}',
        '{"t": [{"error": {"code": "a"}}]}',
        '{"t": [{"error": {"code": 1, "message": "b"}}]}',
        '{"t": [{"result": NaN}]}',
        '{"": [{"result": 1}]}',
        "[" * 100_000,
    ],
)
def test_bad_files_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        HostReplies.parse(text)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        HostReplies.load(tmp_path / "missing.json")
    assert HostReplies.load(None).replies == {}
