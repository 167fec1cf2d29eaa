"""Quick end-to-end check of the stdio runtime: initialise, load, run to exit, shut down with 0."""

from __future__ import annotations

from typing import Any

import pytest
import stdio_guests as g

from wakeful.runtime.client import RuntimeClient, RuntimeClosed


def test_load_start_exit(compile_c: Any) -> None:
    elf = compile_c(g.EXIT_CODE)

    async def body() -> None:
        client = await g.spawn()
        info = await client.initialize()
        assert info["protocol_version"] == 1
        st = await client.load(elf, config={"code": 42})
        assert st.state == "loaded" and st.object_id == "o1"
        await client.start(st.object_id)
        done = await g.wait_state(client, "o1", "exited")
        assert done.outcome == {"exit_code": 42}
        assert await client.shutdown() == 0

    g.run(body)


def test_client_raises_runtime_closed_after_the_child_dies() -> None:
    async def body() -> None:
        client = await g.spawn()
        await client.initialize()
        client.proc.kill()
        with pytest.raises(RuntimeClosed):
            await client.stats()
        assert await client.shutdown() != 0  # already dead: shutdown only reaps it

    g.run(body)


def test_client_is_an_async_context_manager(compile_c: Any) -> None:
    elf = compile_c(g.SLEEPER)

    async def body() -> RuntimeClient:
        async with await g.spawn() as client:
            await client.initialize()
            await client.start((await client.load(elf)).object_id)
        return client

    client = g.run(body)
    assert client.proc.returncode == 0
