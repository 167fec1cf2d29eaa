"""C guests and a session helper shared by the stdio runtime tests (each guest reads its config via ``cfg``).

The helper spawns the real `wakeful runtime` child through ``wakeful.runtime.client.RuntimeClient``, or the
drop-in `wakeful-spinfoam` when ``ENTRY`` says so (test_stdio_conformance.py reruns the suite that way).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from wakeful.runtime.client import RuntimeClient, default_argv

F_SETPIPE_SZ = 1031
SRC = str(Path(__file__).resolve().parents[3] / "src")

PRELUDE = r"""
#include <wakeful.h>

static sf_i64 cfg(const char *key, sf_i64 fallback) {
    sf_handle c = sf_config();
    sf_i64 v = fallback;
    if (c >= 0) {
        if (wf_json_get_i64(c, key, &v) != 0)
            v = fallback;
        sf_drop(c);
    }
    return v;
}
"""

EXIT_CODE = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_sleep_ms((sf_u64)cfg("delay_ms", 0));
    return cfg("code", 7);
}
"""

# Adds 1 to a global `n` times, sleeping between steps so two objects interleave; returns the global.
COUNTER = PRELUDE + r"""
volatile sf_i64 total;
SF_MAIN sf_i64 main(void) {
    sf_i64 n = cfg("n", 3);
    for (sf_i64 i = 0; i < n; i++) {
        total += 1;
        sf_sleep_ms(2);
    }
    return total;
}
"""

SPIN = PRELUDE + r"""
volatile sf_u64 counter;
SF_MAIN sf_i64 main(void) {
    for (;;)
        counter++;
}
"""

SLEEPER = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_sleep_ms((sf_u64)cfg("ms", 3600000));
    return 1;
}
"""

FAULT = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_sleep_ms((sf_u64)cfg("delay_ms", 0));
    return *(volatile sf_i64 *)(sf_u64)cfg("address", 8);
}
"""

# vm.md §9.1: maximal JSON helper calls in a loop (a helper-looping guest)
JSON_LOOP = PRELUDE + r"""
static char text[16384];
SF_MAIN sf_i64 main(void) {
    sf_u64 n = 0;
    text[n++] = '[';
    for (int i = 0; i < 4095; i++) {
        text[n++] = '1'; text[n++] = '0'; text[n++] = '0'; text[n++] = ',';
    }
    text[n - 1] = ']';
    for (;;) {
        sf_handle v = sf_json_parse(text, n);
        sf_handle d = sf_json_dump(v);
        sf_drop(d);
        sf_drop(v);
    }
}
"""

# Waits `wait_ms` first (so events can queue), then pops events and sends each envelope to `sink`.
EVENT_SINK = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_sleep_ms((sf_u64)cfg("wait_ms", 0));
    sf_i64 count = cfg("count", 1);
    sf_u64 timeout = (sf_u64)cfg("timeout_ms", 60000);
    for (sf_i64 i = 0; i < count; i++) {
        sf_handle ev = sf_event_next(timeout);
        if (ev < 0)
            return ev;
        sf_handle r = sf_host_call("sink", ev, 10000);
        if (r >= 0)
            sf_drop(r);
        sf_drop(ev);
    }
    return count;
}
"""

# One host call to `cap` with the config's "params" member; returns result.v + 1, or the status.
HOST_CALLER = PRELUDE + r"""
SF_MAIN sf_i64 main(void) {
    sf_handle c = sf_config();
    sf_handle p = sf_json_get(c, "params");
    char cap[64];
    if (wf_json_get_str(c, "cap", cap, sizeof cap) < 0) {
        cap[0] = 'c'; cap[1] = 'a'; cap[2] = 'p'; cap[3] = 0;
    }
    sf_handle r = sf_host_call(cap, p, (sf_u64)cfg("timeout_ms", 10000));
    if (r < 0)
        return r;
    sf_i64 v = 0;
    sf_i64 st = wf_json_get_i64(r, "v", &v);
    sf_drop(r);
    return st < 0 ? st : v + 1;
}
"""

# Logs `count` messages of `size` bytes at the rate limit (10 attempts per 1 s window, sdk.md §9.3),
# then sleeps; every SF_LIMIT (a full output queue) is counted into the global `limited`.
LOGGER = PRELUDE + r"""
static char text[1024];
volatile sf_i64 limited;
SF_MAIN sf_i64 main(void) {
    sf_i64 count = cfg("count", 10);
    sf_u64 size = (sf_u64)cfg("size", 1000);
    for (sf_u64 i = 0; i < size; i++)
        text[i] = 'a' + (char)(cfg("letter", 0));
    for (sf_i64 i = 0; i < count; i++) {
        text[0] = '0' + (char)(i % 10);
        if (sf_log_raw(text, size) == SF_LIMIT)
            limited++;
        if (i % 10 == 9)
            sf_sleep_ms(1000);
    }
    sf_sleep_ms((sf_u64)cfg("linger_ms", 3600000));
    return limited;
}
"""


# the entry point every child of this suite runs: "runtime" (`wakeful runtime`) or "spinfoam" (`wakeful-spinfoam`)
ENTRY = {"name": "runtime"}


def spinfoam_argv() -> list[str]:
    """The drop-in entry point: the installed console script when on PATH, else the same module run by this
    interpreter (the script is only ``sys.exit(wakeful.cli.spinfoam.main())``)."""
    script = shutil.which("wakeful-spinfoam")
    return [script] if script else [sys.executable, "-m", "wakeful.cli.spinfoam"]


def entry_argv(enable_builds: bool = False) -> list[str]:
    """argv of the current entry point; ``--enable-builds`` goes last, as spinfoam embedders pass it."""
    if ENTRY["name"] == "spinfoam":
        return [*spinfoam_argv(), *(["--enable-builds"] if enable_builds else [])]
    return default_argv(enable_builds)


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


async def spawn(*args: str, enable_builds: bool = False, env: dict[str, str] | None = None) -> RuntimeClient:
    argv = [*entry_argv(), *args, *(["--enable-builds"] if enable_builds else [])]
    return await RuntimeClient.spawn(argv, env=child_env(**(env or {})))


@contextlib.asynccontextmanager
async def session(*args: str, detail: bool = False, init: bool = True) -> AsyncIterator[RuntimeClient]:
    """An initialised client over a fresh child; shut down (and checked to exit 0) at the end."""
    client = await spawn(*args)
    try:
        if init:
            await client.initialize(detail=detail)
        yield client
    finally:
        await client.shutdown()


def run(test: Callable[[], Awaitable[Any]]) -> Any:
    """Run an async test body with a hard bound."""
    return asyncio.run(asyncio.wait_for(test(), 60))


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0, step: float = 0.02) -> None:
    """Poll ``predicate`` until it is true (fails the test after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(step)


async def wait_state(client: RuntimeClient, object_id: str, *states: str, timeout: float = 10.0) -> Any:
    async def reached() -> bool:
        return (await client.get(object_id)).state in states

    await until(reached, timeout)
    return await client.get(object_id)


async def raw(client: RuntimeClient, line: bytes | str, timeout: float = 5.0) -> dict[str, Any]:
    """Write one raw line and return the next response that matches no call of the client."""
    data = line.encode() if isinstance(line, str) else line
    await client.write_raw(data if data.endswith(b"\n") else data + b"\n")
    return await next_unmatched(client, timeout)


async def next_unmatched(client: RuntimeClient, timeout: float = 5.0) -> dict[str, Any]:
    """The next response that matches no call of the client."""
    return await asyncio.wait_for(client.unmatched.get(), timeout)


class RawChild:
    """A runtime child driven with plain blocking pipes, so the test decides when stdout is read."""

    def __init__(self, pipe_bytes: int = 4096) -> None:
        self.proc = subprocess.Popen(entry_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=child_env())
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        fcntl.fcntl(self.stdout.fileno(), F_SETPIPE_SZ, pipe_bytes)  # a small stdout pipe fills fast
        self.buf = b""

    def send(self, request_id: str, method: str, params: Any) -> None:
        msg = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.stdin.write(json.dumps(msg).encode() + b"\n")
        self.stdin.flush()

    def frames(self, timeout: float = 5.0, until_id: str | None = None) -> list[dict[str, Any]]:
        """Read frames until one with ``until_id`` arrives (or nothing comes for ``timeout``)."""
        out: list[dict[str, Any]] = []
        fd = self.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                out.append(json.loads(line))
                if until_id is not None and out[-1].get("id") == until_id:
                    return out
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return out
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return out
            self.buf += chunk

    def call(self, request_id: str, method: str, params: Any) -> dict[str, Any]:
        self.send(request_id, method, params)
        return self.frames(until_id=request_id)[-1]

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def close(self) -> int:
        with contextlib.suppress(BrokenPipeError):
            self.stdin.close()
        try:
            code = self.proc.wait(10)
        finally:
            self.proc.kill()
            self.proc.wait()
            self.stdout.close()
        return code
