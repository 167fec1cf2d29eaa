"""kill -9 in the middle of a committing batch (issue 16, group commit): a real ``wakeful serve`` takes concurrent
HTTP events for several Loops; a test-only pause point (``WAKEFUL_TEST_GROUP_COMMIT_PAUSE_DIR``) stops the next
group-commit batch right before — or right after — its COMMIT, and the node is killed with SIGKILL there. After a
restart every event that was answered 202 is in the store, and delivered: nothing accepted is lost."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from live_api import ServeProcess, auth, make_loop, wait_for
from test_api_crash import FAST_PLACEMENT, _tenant

from wakeful.bench.harness_node import NODE_ENV
from wakeful.harness.store import Store, schema
from wakeful.harness.store.group import PAUSE_ENV

pytestmark = pytest.mark.integration
WORKERS = 16
BEFORE_HOLD = 48  # accepted events before the pause point is armed


async def _drive(serve: ServeProcess, t: dict[str, str], loops: list[str], pause: Path, point: str,
                 ) -> tuple[set[str], set[str], dict[str, int]]:
    """Concurrent posts until the node dies; (ids answered 202, ids cut off without an answer, other answers)."""
    accepted: set[str] = set()
    cut: set[str] = set()
    other: dict[str, int] = {}
    enough, dead = asyncio.Event(), asyncio.Event()
    g = f"{serve.url}/v1/agent-groups/{t['group']}"

    async def worker(w: int, client: httpx.AsyncClient) -> None:
        n = 0
        while not dead.is_set():
            event_id, n = f"w{w}-{n}", n + 1
            loop_id = loops[(w + n) % len(loops)]
            try:
                r = await client.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]),
                                      json={"topic": "metric", "event_id": event_id, "payload": {"n": n}})
            except httpx.TransportError:
                cut.add(event_id)
                return
            if r.status_code == 202:
                accepted.add(event_id)
                if len(accepted) >= BEFORE_HOLD:
                    enough.set()
            else:
                other[str(r.status_code)] = other.get(str(r.status_code), 0) + 1

    async def killer() -> None:
        await enough.wait()
        (pause / f"hold-{point}").touch()
        while not (pause / f"held-{point}").exists():  # the next batch reached the pause point
            await asyncio.sleep(0.01)
        # a grace period, not a timing assertion: a node that answered the held batch before its COMMIT would
        # have those 202s arrive now, and lose the events below
        await asyncio.sleep(0.5)
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(serve.proc.wait, 30)
        dead.set()

    limits = httpx.Limits(max_connections=WORKERS, max_keepalive_connections=WORKERS)
    async with httpx.AsyncClient(timeout=httpx.Timeout(120), limits=limits) as client:
        await asyncio.wait_for(asyncio.gather(killer(), *(worker(w, client) for w in range(WORKERS))), 300)
    return accepted, cut, other


async def _stored(url: str) -> dict[str, str]:
    store = await Store.open(url, migrate=False)
    try:
        E = schema.loop_event
        async with store.tx(readonly=True) as tx:
            return {r.event_id: r.status for r in await tx.execute(sa.select(E.c.event_id, E.c.status))}
    finally:
        await store.close()


@pytest.mark.parametrize("point", ["before", "after"])
def test_kill9_while_a_batch_commits_loses_no_accepted_event(store_url: str, tmp_path: Path, compile_c: Any,
                                                              point: str) -> None:
    data, pause = tmp_path / "data", tmp_path / "pause"
    pause.mkdir()
    t = asyncio.run(_tenant(store_url, data))
    serve = ServeProcess(data, store_url)
    serve.env = {**NODE_ENV, PAUSE_ENV: str(pause), **(FAST_PLACEMENT if store_url.startswith("postgresql") else {})}
    serve.start()
    try:
        loops = [make_loop(serve, t, compile_c, name=f"c{i}") for i in range(4)]
        accepted, cut, other = asyncio.run(_drive(serve, t, loops, pause, point))
        assert serve.proc is not None and serve.proc.returncode == -signal.SIGKILL
        assert len(accepted) >= BEFORE_HOLD and cut, (len(accepted), cut, other)  # killed with requests open
        assert not accepted & cut

        stored = asyncio.run(_stored(store_url))
        assert accepted <= set(stored), sorted(accepted - set(stored))[:10]  # every 202 survived the kill

        (pause / f"hold-{point}").unlink()
        serve.start()  # and the restarted node delivers them (the guest acks each)
        try:
            wait_for(lambda: all(s == "acked" for e, s in asyncio.run(_stored(store_url)).items() if e in accepted),
                     timeout=90, every=0.5)
        except AssertionError as exc:  # say which events and what the restarted node was doing
            left = {e: s for e, s in asyncio.run(_stored(store_url)).items() if e in accepted and s != "acked"}
            alive = serve.proc is not None and serve.proc.poll() is None
            raise AssertionError(f"{exc}; not acked: {len(left)} {sorted(left.items())[:5]}; node alive: {alive}; "
                                 f"log:\n{serve.log.read_text()[-3000:]}") from None
        assert set(asyncio.run(_stored(store_url))) >= accepted
        assert serve.terminate() == 0
    finally:
        serve.close()
