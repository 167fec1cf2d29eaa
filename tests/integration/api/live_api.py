"""A real uvicorn server on loopback hosting a started Harness in a thread of its own (its own event loop),
and a ``wakeful serve`` subprocess; tests talk to both over HTTP with httpx.

``LiveApi.call(fn)`` runs ``fn(harness)`` (a coroutine function) on the server's loop, for setup and for reading
the store the way the node sees it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import httpx

from wakeful import Harness
from wakeful.api.server import make_server
from wakeful.harness.config import Config, Limits

T = TypeVar("T")
GUESTS = Path(__file__).parent / "guests"
SUPPORT_GUESTS = Path(__file__).resolve().parents[2] / "support" / "guests"


class LiveApi:
    """``with LiveApi(store_url, data_dir) as api: api.client.get(...)``."""

    def __init__(self, store_url: str, data_dir: Path, *, limits: Limits | None = None, clock: Any = None,
                 **config: Any) -> None:
        self.config = Config(data_dir=data_dir, store_url=store_url, limits=limits or Limits(), **config)
        self.clock = clock  # e.g. a TestClock: token buckets then refill only when the test says so
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.harness: Harness | None = None
        self.server: Any = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0
        self.client = httpx.Client(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveApi:
        self.thread.start()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
            self.run(_drain())
        finally:
            self.client.close()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    def run(self, coro: Awaitable[T], timeout: float = 60) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return future.result(timeout)

    def call(self, fn: Callable[[Harness], Awaitable[T]], timeout: float = 60) -> T:
        assert self.harness is not None
        return self.run(fn(self.harness), timeout)

    def start(self) -> None:
        self.run(self._start())

    async def _start(self) -> None:
        self.harness = Harness(self.config, tick_s=1.0, clock=self.clock)
        await self.harness.start()
        self.server = make_server(self.harness, "127.0.0.1", self.port, access_log=False, timeout_graceful_shutdown=2)
        self._task = asyncio.get_running_loop().create_task(self.server.serve())
        while not self.server.started:
            if self._task.done():
                await self._task
            await asyncio.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self.harness is not None:
            self.run(self._stop())

    async def _stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self._task is not None:
            await self._task
        if self.harness is not None:
            await self.harness.stop()
        self.harness = self.server = self._task = None

    def restart(self) -> None:
        """Stop the node cleanly and start it again on the same store and port."""
        self.stop()
        self.start()


async def _drain() -> None:
    """Let the loop's leftover tasks (driver connection closes) finish, then cancel what still waits."""
    tasks: list[asyncio.Task[Any]] = []
    for _ in range(40):
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if not tasks:
            return
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def auth(key: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **headers}


async def tenant(h: Harness) -> dict[str, str]:
    """A group, an agent, a session, and admin/group/agent keys."""
    group = await h.create_group("g")
    agent = await h.create_agent(group.id, "a1")
    session = await h.create_session(agent.id, "inbox")
    _, admin = await h.create_key("admin")
    _, gkey = await h.create_key("group", group_id=group.id)
    _, akey = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
    return {"group": group.id, "agent": agent.id, "session": session.id, "admin": admin, "gkey": gkey, "akey": akey}


def wait_for(check: Callable[[], T], *, timeout: float = 20.0, every: float = 0.05) -> T:
    """Poll ``check`` until it returns something truthy (generous smoke bound, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s (last value {value!r})")
        time.sleep(every)


class ServeProcess:
    """``wakeful serve`` as a real subprocess on a free port (``kill -9`` and restart it)."""

    def __init__(self, data_dir: Path, db_url: str, *args: str) -> None:
        self.data_dir, self.db_url, self.args = data_dir, db_url, args
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.log = data_dir / "serve.log"
        self.client = httpx.Client(timeout=30)
        self.env: dict[str, str] = {}
        self.prefix: list[str] = []  # e.g. ["prlimit", "--nofile=256:256", "--"]
        self._files: list[Any] = []

    def close_pipes(self) -> None:
        for f in self._files:
            f.close()
        self._files = []
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def close(self) -> None:
        """Kill the process if it still runs; close the client and pipes."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.close_pipes()
        self.client.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> None:
        env = {**os.environ, "WAKEFUL_HOME": str(self.data_dir), "PYTHONUNBUFFERED": "1", **self.env}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.close_pipes()
        out = open(self.log, "a")  # noqa: SIM115 - closed by close_pipes
        self._files.append(out)
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "wakeful.cli.main", "serve", "--port", str(self.port), "--db-url", self.db_url,
             "--node-name", "test-node", *self.args],
            stdout=subprocess.PIPE, stderr=out, text=True, env=env,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"wakeful serve ended early:\n{self.log.read_text()[-3000:]}")
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                return
        raise AssertionError("wakeful serve did not start")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


COUNTER_C = (SUPPORT_GUESTS / "ingress_counter.c").read_text()


def make_loop(api: LiveApi | ServeProcess, t: dict[str, str], compile_c: Any, name: str = "counter",
              source: str = COUNTER_C, client: httpx.Client | None = None) -> str:
    """Upload a guest over HTTP and create a Loop from it; returns the Loop id."""
    elf = compile_c(source, name=f"{name}.c")
    g = f"{api.url}/v1/agent-groups/{t['group']}"
    client = client or api.client
    up = client.post(f"{g}/artifacts", params={"path": f"/loops/{name}.elf"}, content=elf,
                         headers=auth(t["akey"], **{"Content-Type": "application/octet-stream"}))
    assert up.status_code == 201, up.text
    made = client.post(f"{g}/loops", headers=auth(t["akey"]), json={
        "agent_id": t["agent"], "session_id": t["session"], "artifact": up.json()["artifact"], "name": name})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def count_events(api: LiveApi, loop_id: str) -> int:
    async def n(h: Any) -> int:
        async with h.store.tx(readonly=True) as tx:
            import sqlalchemy as sa

            from wakeful.harness.store import schema
            E = schema.loop_event
            return int((await tx.execute(sa.select(sa.func.count()).where(E.c.loop_id == loop_id))).scalar_one())
    return api.call(n)


def seen(api: LiveApi, loop_id: str) -> list[str]:
    async def checkpoint(h: Any) -> list[str]:
        from wakeful.harness.store import loops
        async with h.store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop_id)
        return list((row.checkpoint or {}).get("seen", []))
    return api.call(checkpoint)
