"""Object methods over stdio: load errors and ids, start once, stop/unload/get, list paging, states and
wait reasons, outcomes and state notifications (runtime-protocol.md §6.2-§6.8, §7; §16 items 5, 6, 12)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
import stdio_guests as g

from wakeful.errors import Busy, InvalidObject, InvalidParams, ObjectNotFound
from wakeful.runtime import ObjectStatus


@pytest.fixture(scope="module")
def elfs(compile_c: Any) -> dict[str, bytes]:
    return {name: compile_c(getattr(g, name.upper()))
            for name in ("exit_code", "spin", "sleeper", "fault", "event_sink", "host_caller")}


def test_load_errors_in_order_and_ids_keep_advancing(elfs: dict[str, bytes], compile_c: Any) -> None:
    no_main = compile_c("int f(void) { return 1; }\n")
    mainx = compile_c('#include <wakeful.h>\n'
                      '__attribute__((section("spinfoam.mainx"), used)) sf_i64 main(void) { return 1; }\n')
    named = compile_c('const char *volatile note = "spinfoam.main";\nint f(void) { return note[0]; }\n')
    assert b"spinfoam.main" in mainx and b"spinfoam.main" in named
    two_mains = compile_c('#include <wakeful.h>\n'
                          '__attribute__((section("spinfoam.main"), used)) sf_i64 a(void) { return 1; }\n'
                          '__attribute__((section("spinfoam.main"), used)) sf_i64 b(void) { return 2; }\n')
    good = elfs["exit_code"]

    async def body() -> None:
        async with g.session("--max-objects", "2") as c:
            with pytest.raises(InvalidParams, match="invalid base64"):
                await c.request("sf.object.load", {"elf": "not base64!"})
            with pytest.raises(InvalidParams, match="invalid base64"):
                await c.request("sf.object.load", {"elf": "QUJD"[:3]})
            with pytest.raises(InvalidParams, match="invalid base64"):  # strict: no extra padding
                await c.request("sf.object.load", {"elf": base64.b64encode(good).decode() + "="})
            with pytest.raises(InvalidParams, match="config exceeds JSON limits"):
                await c.load(good, config={"x": "a" * 16_400})
            deep: Any = 1
            for _ in range(40):
                deep = [deep]
            with pytest.raises(InvalidParams, match="config exceeds JSON limits"):
                await c.load(good, config=deep)
            for caps in ([{"name": ""}], [{"name": "x" * 129}], [{"name": "a", "extra": 1}],
                         [{"name": "a", "arguments": [1]}], [{"name": "a"}] * 1025, "cap"):
                with pytest.raises(InvalidParams, match="invalid capabilities"):
                    await c.request("sf.object.load", {"elf": base64.b64encode(good).decode(), "capabilities": caps})
            with pytest.raises(InvalidParams, match="spinfoam.main"):
                await c.load(no_main)  # takes id o1
            # §6.3: the section name must be exactly spinfoam.main; the bytes elsewhere do not count
            with pytest.raises(InvalidParams, match="spinfoam.main"):
                await c.load(mainx)  # o2
            with pytest.raises(InvalidParams, match="spinfoam.main"):
                await c.load(named)  # o3
            with pytest.raises(InvalidObject) as wrong_entry:
                await c.load(two_mains)  # o4: the section exists, so any other refusal is -32010
            assert wrong_entry.value.rpc_code == -32010 and wrong_entry.value.rule == "ELF_ENTRY"  # type: ignore[attr-defined]
            with pytest.raises(InvalidObject) as bad:
                await c.load(b"\x7fELF" + b"\0" * 60)  # takes id o5
            assert bad.value.rpc_code == -32010 and bad.value.rule.startswith("ELF")  # type: ignore[attr-defined]
            a = await c.load(good)
            assert a.object_id == "o6" and a.state == "loaded" and a.wait == "none"
            assert a.sha256 == hashlib.sha256(good).hexdigest() and a.outcome is None
            await c.load(good)
            with pytest.raises(Busy, match="object limit reached"):
                await c.load(good)  # the limit is checked before an id is taken
            await c.unload("o6")
            assert (await c.load(good)).object_id == "o8"

    g.run(body)


def test_objects_from_one_elf_are_independent_and_start_once(elfs: dict[str, bytes]) -> None:
    async def body() -> None:
        async with g.session() as c:
            a = await c.load(elfs["exit_code"], config={"code": 1})
            b = await c.load(elfs["exit_code"], config={"code": 2, "delay_ms": 50})
            started = await c.start(a.object_id)
            assert started.state == "starting"
            with pytest.raises(Busy, match="object can only start once"):
                await c.start(a.object_id)
            await c.start(b.object_id)
            assert (await g.wait_state(c, a.object_id, "exited")).outcome == {"exit_code": 1}
            assert (await g.wait_state(c, b.object_id, "exited")).outcome == {"exit_code": 2}
            with pytest.raises(Busy):
                await c.start(b.object_id)
            with pytest.raises(ObjectNotFound):
                await c.start("o99")

    g.run(body)


def test_objects_of_one_elf_have_their_own_memory(compile_c: Any) -> None:
    counter = compile_c(g.COUNTER)

    async def body() -> None:
        async with g.session() as c:
            a = await c.load(counter, config={"n": 5})
            b = await c.load(counter, config={"n": 9})
            assert a.sha256 == b.sha256
            await c.start(a.object_id)
            await c.start(b.object_id)
            assert (await g.wait_state(c, a.object_id, "exited")).outcome == {"exit_code": 5}
            assert (await g.wait_state(c, b.object_id, "exited")).outcome == {"exit_code": 9}

    g.run(body)


def test_states_wait_reasons_and_notifications(elfs: dict[str, bytes]) -> None:
    async def body() -> None:
        async with g.session() as c:
            notes: list[ObjectStatus] = []
            c.on_state(notes.append)

            async def pending_call(call: Any) -> Any:
                import asyncio

                await asyncio.sleep(3600)

            c.on_host_call(pending_call)
            sleeper = await c.load(elfs["sleeper"])
            waiter = await c.load(elfs["event_sink"])
            caller = await c.load(elfs["host_caller"], capabilities=[{"name": "cap"}],
                                  config={"params": {}, "timeout_ms": 600000})
            spinner = await c.load(elfs["spin"])
            faulty = await c.load(elfs["fault"])
            for oid in (sleeper.object_id, waiter.object_id, caller.object_id, spinner.object_id, faulty.object_id):
                await c.start(oid)
            for oid, wait in ((sleeper.object_id, "timer"), (waiter.object_id, "event"),
                              (caller.object_id, "host_rpc")):
                async def reached(oid: str = oid, wait: str = wait) -> bool:
                    st = await c.get(oid)
                    return st.state == "running" and st.wait == wait

                await g.until(reached)
            assert (await c.get(spinner.object_id)).wait == "none"
            failed = await g.wait_state(c, faulty.object_id, "failed")
            assert failed.outcome is not None and failed.outcome["kind"] == "PROGRAM_FAULT"
            assert isinstance(failed.outcome["error"], str) and failed.wait == "none"
            for oid in (sleeper.object_id, waiter.object_id, caller.object_id, spinner.object_id):
                st = await c.stop(oid)
                assert (st.state, st.wait, st.outcome) == ("stopped", "none", None)
                assert (await c.stop(oid)).state == "stopped"  # terminal: unchanged
            loaded = await c.load(elfs["sleeper"])
            assert (await c.stop(loaded.object_id)).state == "stopped"  # loaded → stopped at once
            with pytest.raises(Busy):
                await c.start(loaded.object_id)

            async def all_noted() -> bool:
                return len(notes) >= 6

            await g.until(all_noted)
            by_id = {n.object_id: n.state for n in notes}
            assert by_id[faulty.object_id] == "failed" and by_id[spinner.object_id] == "stopped"
            await c.unload(spinner.object_id)
            await c.unload(spinner.object_id)  # unknown now: still fine
            await c.unload("o404")
            with pytest.raises(ObjectNotFound):
                await c.get(spinner.object_id)
            assert (await c.stats())["objects"] == 5

    g.run(body)


def test_concurrent_stops_all_succeed(elfs: dict[str, bytes]) -> None:
    async def body() -> None:
        import asyncio

        async with g.session() as c:
            st = await c.load(elfs["spin"])
            await c.start(st.object_id)
            results = await asyncio.gather(*(c.stop(st.object_id) for _ in range(10)))
            assert {r.state for r in results} == {"stopped"}

    g.run(body)


def test_list_string_order_paging_and_limit_bounds(elfs: dict[str, bytes]) -> None:
    async def body() -> None:
        async with g.session() as c:
            for _ in range(12):
                await c.load(elfs["exit_code"])
            page, nxt = await c.list(limit=5)
            assert [s.object_id for s in page] == ["o1", "o10", "o11", "o12", "o2"] and nxt == "o2"
            page, nxt = await c.list(after=nxt, limit=5)
            assert [s.object_id for s in page] == ["o3", "o4", "o5", "o6", "o7"] and nxt == "o7"
            page, nxt = await c.list(after=nxt, limit=5)
            assert [s.object_id for s in page] == ["o8", "o9"] and nxt is None
            page, nxt = await c.list(after="o12", limit=3)
            assert [s.object_id for s in page] == ["o2", "o3", "o4"]
            page, nxt = await c.list()
            assert len(page) == 12 and nxt is None
            page, nxt = await c.list(limit=12)
            assert len(page) == 12 and nxt is None
            for limit in (0, 257, -1):
                with pytest.raises(InvalidParams):
                    await c.list(limit=limit)
            assert len((await c.list(limit=256))[0]) == 12

    g.run(body)


def test_null_capabilities_are_invalid_params_at_their_step(elfs: dict[str, bytes]) -> None:
    # issue 21 item 5: spinfoam refuses `capabilities: null` with -32602 (main accepted it as "none");
    # §6.3 order: base64 and config come first, and no id is taken
    elf = base64.b64encode(elfs["exit_code"]).decode()

    async def body() -> None:
        async with g.session() as c:
            with pytest.raises(InvalidParams, match="invalid base64"):
                await c.request("sf.object.load", {"elf": "not base64!", "capabilities": None})
            with pytest.raises(InvalidParams, match="config exceeds JSON limits"):
                await c.request("sf.object.load", {"elf": elf, "config": "a" * 16_400, "capabilities": None})
            with pytest.raises(InvalidParams, match="invalid capabilities") as refused:
                await c.request("sf.object.load", {"elf": elf, "capabilities": None})
            assert refused.value.rpc_code == -32602  # type: ignore[attr-defined]
            assert (await c.request("sf.object.load", {"elf": elf}))["object_id"] == "o1"
            assert (await c.request("sf.object.load", {"elf": elf, "capabilities": []}))["object_id"] == "o2"

    g.run(body)
