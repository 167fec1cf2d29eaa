"""Quick end-to-end check of the stdio runtime: initialise, load, run to exit, shut down with 0."""

from __future__ import annotations

from typing import Any

import stdio_guests as g


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
