"""The answers of the bench harness's load steps (benchmarks.md §2.1 steps 2 and 5): a 503 is sent again after its
Retry-After, as a client would, and counted in ``retried``; only an answer still failing after the retries is an
error; the first body of each failing status is kept (``error_samples``). A real keep-alive HTTP server on loopback
answers from a script."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

import wakeful.bench.harness_steps as steps
from wakeful.bench.harness_http import Connection, HttpAnswer
from wakeful.bench.harness_schema import validate_harness
from wakeful.bench.harness_steps import Answers, sample_of
from wakeful.bench.schema import BenchSchemaError

UNAVAILABLE = (503, {"Retry-After": "0"}, {"error": "unavailable", "message": "store unavailable: " + "x" * 300})
ACCEPTED = (202, {}, {"status": "accepted"})
FULL = (429, {}, {"error": "mailbox_full", "message": "Loop lp_x already holds 32 pending events"})


@asynccontextmanager
async def _server(script: list[tuple[int, dict[str, str], object]]) -> AsyncIterator[tuple[Connection, list[bytes]]]:
    """A server answering the requests of one connection from ``script`` in turn (its last entry from then on)."""
    bodies: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                length = next(int(line.split(":", 1)[1]) for line in head.split("\r\n")
                              if line.lower().startswith("content-length:"))
                bodies.append(await reader.readexactly(length))
                status, headers, body = script[min(len(bodies), len(script)) - 1]
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                writer.write(f"HTTP/1.1 {status} X\r\n{extra}Content-Length: {len(data)}\r\n\r\n".encode() + data)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    conn = Connection("127.0.0.1", server.sockets[0].getsockname()[1], {})
    try:
        yield conn, bodies
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


async def test_a_503_is_sent_again_after_its_retry_after_and_counted_as_retried(harness_runner: asyncio.Runner) -> None:
    answers = Answers()
    async with _server([UNAVAILABLE, UNAVAILABLE, ACCEPTED]) as (conn, bodies):
        answer = await answers.send(conn, "POST", "/events", {"event_id": "e1"})
    assert answer.status == 202 and answer.retry_after is None
    assert bodies == [b'{"event_id":"e1"}'] * 3  # the same event again: the node's dedup makes it safe
    assert dict(answers.statuses) == {"202": 1} and answers.errors(202) == {}
    assert dict(answers.retried) == {"503": 2}
    assert answers.samples == {"503": {"error": "unavailable", "message": ("store unavailable: " + "x" * 300)[:200]}}


async def test_a_503_still_failing_after_the_retries_is_an_error(harness_runner: asyncio.Runner,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "RETRIES", 3)
    answers = Answers()
    async with _server([UNAVAILABLE]) as (conn, bodies):
        answer = await answers.send(conn, "POST", "/events", {})
    assert answer.status == 503 and answer.retry_after == 0.0 and len(bodies) == 4
    assert answers.errors(202) == {"503": 1} and dict(answers.retried) == {"503": 3}


async def test_a_full_mailbox_is_back_pressure_sent_again_later(harness_runner: asyncio.Runner,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A 429 (the Loop's mailbox is full until its guest acks) is answered like a 503: the same event again after
    Retry-After, or RETRY_S when it names none — the smoke run's 20 Loops at 64 in flight met it as 115 errors."""
    monkeypatch.setattr(steps, "RETRY_S", 0.0)
    answers = Answers()
    async with _server([FULL, UNAVAILABLE, ACCEPTED]) as (conn, bodies):
        answer = await answers.send(conn, "POST", "/events", {"event_id": "e1"})
    assert answer.status == 202 and len(bodies) == 3 and answers.errors(202) == {}
    assert dict(answers.retried) == {"429": 1, "503": 1}
    assert answers.samples["429"] == {"error": "mailbox_full", "message": "Loop lp_x already holds 32 pending events"}


async def test_other_failures_are_not_retried_and_each_status_keeps_its_first_body(harness_runner: asyncio.Runner) -> None:
    answers = Answers()
    script = [(409, {}, {"error": "loop_not_active", "message": "first"}), (409, {}, {"error": "x", "message": "2nd"}),
              (500, {}, b"<html>oops</html>"), ACCEPTED]
    async with _server(script) as (conn, bodies):
        statuses = [(await answers.send(conn, "POST", "/events", {})).status for _ in range(4)]
    assert statuses == [409, 409, 500, 202] and len(bodies) == 4 and dict(answers.retried) == {}
    assert answers.errors(202) == {"409": 2, "500": 1}
    assert answers.samples == {"409": {"error": "loop_not_active", "message": "first"},
                               "500": {"error": None, "message": "<html>oops</html>"}}


def test_a_sample_of_a_body_that_is_no_error_object_is_its_first_bytes() -> None:
    assert sample_of(HttpAnswer(502, b"\xff" + b"y" * 500)) == {"error": None, "message": "\ufffd" + "y" * 199}
    assert sample_of(HttpAnswer(400, b'{"error": 3, "message": "m"}')) == {"error": None, "message": "m"}


def _doc(ingest: dict[str, object]) -> dict[str, object]:
    return {"schema": "wakeful.bench.harness/1", "started_at": "", "wakeful_version": "0", "git_revision": None,
            "git_dirty": None, "python": "3", "platform": "", "cpu_model": None, "cpu_count": 2,
            "mem_total_bytes": None, "options": {}, "peer_version": None, "targets": [],
            "runs": [{"round": 1, "system": "wakeful", "store": "postgresql", "count": 1, "load_average_start": [0.0],
                      "failures": [], "steps": {"ingest": ingest}}]}


def test_the_schema_wants_retried_and_error_samples_of_ingest() -> None:
    ingest: dict[str, object] = {
        "seconds": 1.0, "in_flight": 64, "accepted": 1, "accepted_per_s": 1.0, "errors": {}, "retried": {"503": 2},
        "error_samples": {"503": {"error": "unavailable", "message": "m"}}, "latency_ms": {"p50": 1.0, "p99": 2.0},
        "drained": True, "drain_s": 0.1, "commits": None, "commits_per_event": None, "node_cpu_s": 0.5,
        "node_cpu_ms_per_event": 0.5, "load_average": [0.0]}
    validate_harness(_doc(ingest))
    with pytest.raises(BenchSchemaError, match="error_samples"):
        validate_harness(_doc({**ingest, "error_samples": {"503": {"message": "no code"}}}))
    with pytest.raises(BenchSchemaError, match="retried"):
        validate_harness(_doc({k: v for k, v in ingest.items() if k != "retried"}))


def test_the_schema_wants_the_nodes_cpu_per_ingested_event() -> None:
    ingest: dict[str, object] = {
        "seconds": 1.0, "in_flight": 64, "accepted": 1000, "accepted_per_s": 1000.0, "errors": {}, "retried": {},
        "error_samples": {}, "latency_ms": {"p50": 1.0, "p99": 2.0}, "drained": True, "drain_s": 0.1,
        "commits": 20, "commits_per_event": 0.02, "node_cpu_s": 0.6, "node_cpu_ms_per_event": 0.6,
        "load_average": [0.0]}
    validate_harness(_doc(ingest))
    validate_harness(_doc({**ingest, "node_cpu_s": None, "node_cpu_ms_per_event": None}))  # the peer's
    with pytest.raises(BenchSchemaError, match="node_cpu_ms_per_event"):
        validate_harness(_doc({k: v for k, v in ingest.items() if k != "node_cpu_ms_per_event"}))
