"""The session stream is woken by the commit that writes a message, not by its backup poll (the message bell).

The poll is stretched to 120 s here: a wake that reaches the reader at all within the read timeout came
through the bell; a rolled-back write rings nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_api import LiveApi, auth, make_loop, tenant

from wakeful.harness.ops import messages
from wakeful.harness.store import sessions


@pytest.fixture
def live(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveApi]:
    monkeypatch.setattr(messages, "POLL_S", 120.0)  # the backup poll never fires during a test
    with LiveApi(store_url, tmp_path) as api:
        yield api


def _first_message(lines: Iterator[str]) -> dict[str, Any]:
    for line in lines:
        if line.startswith("data:"):
            return dict(json.loads(line[5:]))
    raise AssertionError("the stream ended without a message")


def test_a_wake_reaches_an_open_stream_without_waiting_for_the_poll(live: LiveApi, compile_c: Any) -> None:
    t = live.call(tenant)
    c, g = live.client, f"{live.url}/v1/agent-groups/{t['group']}"
    loop_id = make_loop(live, t, compile_c)
    with httpx.Client(timeout=httpx.Timeout(30, read=20)) as sse, sse.stream(
            "GET", f"{g}/sessions/{t['session']}/stream", headers=auth(t["akey"])) as stream:
        lines = stream.iter_lines()
        assert next(lines).startswith(": stream open")
        # the reader is now parked on the bell (its first poll found nothing)
        live.call(lambda h: _until_parked(h, 1))
        assert c.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]),
                      json={"topic": "wake", "event_id": "b1"}).status_code == 202
        message = _first_message(lines)
    assert message["dedup_key"] == "ev:b1" and message["loop_id"] == loop_id


def test_a_rolled_back_message_rings_nothing(live: LiveApi) -> None:
    t = live.call(tenant)

    async def write_then_fail(h: Any) -> int:
        class Abort(Exception):
            pass

        rung = threading.Event()
        original = h.store.bell.ring
        h.store.bell.ring = lambda session_id, *message: (rung.set(), original(session_id, *message))
        try:
            with pytest.raises(Abort):
                async with h.store.tx() as tx:
                    await sessions.insert_message(tx, session_id=t["session"], agent_id=t["agent"],
                                                  group_id=t["group"], kind="user", content="never")
                    raise Abort
            assert not rung.is_set()
            async with h.store.tx() as tx:
                await sessions.insert_message(tx, session_id=t["session"], agent_id=t["agent"],
                                              group_id=t["group"], kind="user", content="kept")
            assert rung.is_set()
            return len(await h.messages(t["session"]))
        finally:
            h.store.bell.ring = original

    assert live.call(write_then_fail) == 1


async def _until_parked(h: Any, readers: int) -> None:
    import asyncio

    for _ in range(400):
        if h.store.bell.readers >= readers:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the stream never waited on the bell")
