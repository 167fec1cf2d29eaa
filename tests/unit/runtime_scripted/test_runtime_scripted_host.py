"""The scripted test host below the faces (``wakeful run`` and MCP ``loop.test``): replies from decoded JSON with
typed refusals, and the record a run reports."""

from __future__ import annotations

import pytest

from wakeful.errors import InvalidParams, WakefulError
from wakeful.runtime.scripted import Recorder, Reply, parse_replies


def test_replies_from_decoded_json_and_their_refusals() -> None:
    host = parse_replies({"t": [{"result": 1}, {"error": {"code": "boom", "message": "no"}}]})
    assert host.answer("t").result == 1
    assert host.answer("t").error == {"code": "boom", "message": "no"}
    assert host.answer("t").error is not None  # the last repeats
    for bad in ([], {"t": []}, {"t": [{"answer": 1}]}, {"": [{"result": 1}]}, {"t": [{"error": {"code": 1}}]}):
        with pytest.raises(InvalidParams) as refused:
            parse_replies(bad, source="host_replies")
        assert isinstance(refused.value, WakefulError) and refused.value.message.startswith("host_replies")


def test_the_recorder_reports_calls_notifications_logs_and_the_outcome() -> None:
    rec = Recorder()
    rec.state({"state": "loaded", "wait": None})
    rec.state({"state": "running", "wait": "event"})
    rec.state({"state": "running", "wait": "event"})  # a repeat is not a change
    rec.log("hello")
    rec.host_call("agent.notify", {"content": "x", "dedup_key": "k"}, Reply(result={"status": "queued"}))
    rec.host_call("loop.ack", {"event_id": "e1"}, Reply(error={"code": "not_scripted", "message": "m"}))
    report = rec.report({"state": "exited", "outcome": {"exit_code": 0}, "stopped_by": None, "guest_ms": 3})
    assert report["notifications"] == [{"content": "x", "dedup_key": "k"}]
    assert [c["reply"] for c in report["host_calls"]] == [
        {"result": {"status": "queued"}}, {"error": {"code": "not_scripted", "message": "m"}}]
    assert report["states"] == [{"state": "loaded", "wait": "none"}, {"state": "running", "wait": "event"}]
    assert (report["exit_code"], report["fault"], report["logs"]) == (0, None, ["hello"])
    failed = Recorder().report({"state": "failed", "outcome": {"error": "fault: invalid pointer"}})
    assert failed["fault"] == "fault: invalid pointer" and failed["exit_code"] is None
