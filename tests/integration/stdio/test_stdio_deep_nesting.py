"""vm.md §9 S8 over stdio (runtime-protocol.md §6.3): a verified ELF with 21 nested loops loads (no
``-32603`` internal error) and runs to its exit code."""

from __future__ import annotations

from typing import Any

import stdio_guests as g


def nest_source(depth: int) -> str:
    head = "".join(f"for (volatile int i{k} = 0; i{k} < 1; i{k}++) {{ g++;\n" for k in range(depth))
    return ("#include <wakeful.h>\nstatic volatile sf_u64 g;\n"
            f"SF_MAIN sf_i64 main(void) {{ sf_u64 t = 0;\n{head} t += g;\n{'}' * depth}\nreturn (sf_i64)t; }}\n")


def test_load_of_a_21_deep_loop_nest_succeeds_and_runs(compile_c: Any) -> None:
    elf = compile_c(nest_source(21))

    async def body() -> None:
        client = await g.spawn()
        await client.initialize()
        st = await client.load(elf)
        assert st.state == "loaded"
        await client.start(st.object_id)
        done = await g.wait_state(client, st.object_id, "exited")
        assert done.outcome == {"exit_code": 21}
        assert await client.shutdown() == 0

    g.run(body)
