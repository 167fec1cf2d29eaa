"""Hostile frames (issue 3 "Bad input"): random bytes and random envelopes get documented errors or nothing,
the session keeps working, and the runtime never logs a traceback or an internal error."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import stdio_guests as g

from wakeful.runtime.client import RuntimeClient

METHODS = ["sf.initialize", "sf.object.load", "sf.object.start", "sf.object.stop", "sf.object.unload",
           "sf.object.get", "sf.object.list", "sf.event.deliver", "sf.build.compile", "sf.stats",
           "wakeful.object.inspect", "wakeful.stats", "wakeful.elf.verify", "nope", ""]
VALUES: list[Any] = [None, True, 0, -1, 2**64, 1.5, "", "o1", "x" * 200, [], {}, [1, {"a": None}],
                     {"object_id": "o1"}, {"elf": "AAAA"}, {"protocol_version": 1}]
KEYS = ["jsonrpc", "id", "method", "params", "result", "error", "extra"]
DOCUMENTED = {-32700, -32600, -32601, -32602, -32000, -32001, -32002, -32003, -32004, -32010, -32020}


def _envelope(rng: random.Random) -> bytes:
    msg: dict[str, Any] = {}
    for key in rng.sample(KEYS, rng.randint(0, len(KEYS))):
        if key == "jsonrpc":
            msg[key] = rng.choice(["2.0", "2.0", "1.0", 2])
        elif key == "method":
            msg[key] = rng.choice(METHODS + [rng.choice(VALUES)])
        elif key == "id":
            msg[key] = rng.choice([f"h{rng.randint(0, 30)}", rng.choice(VALUES)])
        else:
            msg[key] = rng.choice(VALUES)
    return json.dumps(msg).encode()


def _garbage(rng: random.Random) -> bytes:
    data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 80)))
    return data.replace(b"\n", b" ")


def test_random_frames_never_break_the_session() -> None:
    rng = random.Random(20261129)

    async def body() -> None:
        proc = await asyncio.create_subprocess_exec(
            *g.entry_argv(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=g.child_env(), limit=1 << 20)
        client = RuntimeClient(proc)
        await client.initialize()
        for n in range(400):
            line = _envelope(rng) if n % 3 else _garbage(rng)
            await client.write_raw(line + b"\n")
            if n % 50 == 49:
                assert (await client.stats())["execution_threads"] == 1
        stats = await client.stats()
        while not client.unmatched.empty():
            frame = client.unmatched.get_nowait()
            if "error" in frame:
                assert frame["error"]["code"] in DOCUMENTED, frame
        assert stats["execution_threads"] == 1
        assert await client.shutdown() == 0
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        assert "Traceback" not in err and "internal error" not in err, err

    g.run(body)
