"""wakeful extensions over stdio (runtime-protocol.md §13, §16 items 3 and 15): absent unless requested,
inspect / stats / verify, load options, and an oversized response replaced by -32003 with the same id."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import stdio_guests as g

from wakeful.errors import InvalidObject, InvalidParams, ObjectNotFound


def test_detail_is_absent_unless_requested(compile_c: Any) -> None:
    elf = compile_c(g.EXIT_CODE)

    async def body() -> None:
        async with g.session() as c:
            raw = await c.request("sf.object.load", {"elf": base64.b64encode(elf).decode()})
            assert set(raw) == {"object_id", "sha256", "state", "wait", "mailbox_entries", "outcome"}
            assert "wakeful" not in await c.stats()
        async with g.session(detail=True) as c:
            raw = await c.request("sf.object.load", {"elf": base64.b64encode(elf).decode()})
            assert set(raw["wakeful"]) >= {"guest_ms", "instructions", "memory_bytes"}
            assert raw["wakeful"]["memory_bytes"] > 0
            assert "scheduler" in (await c.stats())["wakeful"]

    g.run(body)


def test_initialize_advertises_extensions() -> None:
    async def body() -> None:
        async with g.session(init=False) as c:
            info = await c.initialize()
            ext = info["wakeful"]
            assert set(ext["extensions"]) == {"wakeful.object.inspect", "wakeful.stats", "wakeful.elf.verify",
                                              "detail", "load_options"}
            assert ext["vm"] == {"max_elf_bytes": 65536, "max_instructions": 8192, "max_image_bytes": 65536,
                                 "slice_insns": 16384, "stack_frame_bytes": 4096, "max_call_depth": 8}
            assert info["limits"]["frame_bytes"] == 262144 and info["target"].startswith("linux-")
            assert info["compiler"]["available"] is False and info["compiler"]["name"] == "zig-clang-bpf"
            assert info["compiler"]["revision"] == "zig 0.17.1 / clang 22.1.8"
            assert info["memory_target_bytes"] == 8192 and info["memory_target_enforced"] is False

    g.run(body)


def test_inspect_stats_verify_and_load_options(compile_c: Any) -> None:
    spin, exit_elf = compile_c(g.SPIN), compile_c(g.EXIT_CODE)

    async def body() -> None:
        async with g.session(detail=True) as c:
            st = await c.load(spin, cpu_limit_ms=100, label="spinner")
            await c.start(st.object_id)
            failed = await g.wait_state(c, st.object_id, "failed")
            assert failed.fault is not None and failed.fault["code"] == "CPU_LIMIT"
            info = await c.request("wakeful.object.inspect", {"object_id": st.object_id})
            assert info["label"] == "spinner" and info["fault"]["code"] == "CPU_LIMIT"
            assert info["cpu"]["slices"] > 0 and info["program"]["sha256"] == st.sha256
            assert info["times"]["ended_ms"] >= info["times"]["started_ms"] >= info["times"]["loaded_ms"]
            with pytest.raises(ObjectNotFound):
                await c.request("wakeful.object.inspect", {"object_id": "o99"})
            for bad in ({"cpu_limit_ms": 0}, {"cpu_limit_ms": 86_400_001}, {"label": "x" * 129}, {"other": 1}):
                with pytest.raises(InvalidParams):
                    await c.request("sf.object.load", {"elf": base64.b64encode(exit_elf).decode(), "wakeful": bad})
            stats = await c.request("wakeful.stats", {})
            assert {"scheduler", "guests", "memory", "shapes", "builds", "server"} <= set(stats)
            ok = await c.request("wakeful.elf.verify", {"elf": base64.b64encode(exit_elf).decode()})
            assert ok["ok"] is True and ok["report"]["entry"] == "main"
            with pytest.raises(InvalidObject) as bad_elf:
                await c.request("wakeful.elf.verify", {"elf": base64.b64encode(b"\x7fELF").decode()})
            assert bad_elf.value.rpc_code == -32010  # type: ignore[attr-defined]
            with pytest.raises(InvalidParams, match="invalid base64"):
                await c.request("wakeful.elf.verify", {"elf": "%%%"})

    g.run(body)


def test_oversized_response_becomes_response_too_large(compile_c: Any) -> None:
    # §3: a VerifyReport of 600 functions with 240-byte names encodes over 262,144 bytes
    pre = "g" * 240
    fns = "".join(f"__attribute__((noinline)) sf_i64 {pre}_{i}(sf_i64 a) {{ return a + {i}; }}\n"
                  for i in range(600))
    calls = " ".join(f"a = {pre}_{i}(a);" for i in range(600))
    elf = compile_c("#include <wakeful.h>\n" + fns + "volatile sf_i64 k = 2;\n"
                    f"SF_MAIN sf_i64 main(void) {{ sf_i64 a = k; {calls} return a; }}\n")

    async def body() -> None:
        async with g.session("--max-elf-bytes", "1048576") as c:
            msg = {"jsonrpc": "2.0", "id": "big", "method": "wakeful.elf.verify",
                   "params": {"elf": base64.b64encode(elf).decode()}}
            frame = await g.raw(c, json.dumps(msg), timeout=30)
            assert frame == {"jsonrpc": "2.0", "id": "big", "error": {
                "code": -32003, "message": "response too large", "data": {"kind": "RESPONSE_TOO_LARGE"}}}
            assert (await c.stats())["objects"] == 0  # the session keeps working

    g.run(body)
