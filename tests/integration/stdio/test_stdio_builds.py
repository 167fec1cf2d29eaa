"""sf.build.compile over stdio (runtime-protocol.md §6.10, §12; §16 items 13 and 14): validation before
availability, identical requests give identical sha256, failures, and compiles cancelled by shutdown."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
import stdio_guests as g

from wakeful.errors import BuildUnavailable, InvalidParams

SOURCE = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { return 5; }\n"
REQUEST = {"sdk_version": 1, "entry": "main.c", "files": {"main.c": SOURCE}}


def test_validation_comes_before_availability() -> None:
    async def body() -> None:
        async with g.session() as c:
            with pytest.raises(InvalidParams):
                await c.compile({"sdk_version": 2, "entry": "main.c", "files": {"main.c": SOURCE}})
            with pytest.raises(InvalidParams):
                await c.compile({"sdk_version": 1, "entry": "missing.c", "files": {"main.c": SOURCE}})
            with pytest.raises(BuildUnavailable) as off:
                await c.compile(REQUEST)
            assert off.value.rpc_code == -32020  # type: ignore[attr-defined]

    g.run(body)


@pytest.mark.integration
def test_compile_identical_sha_failure_and_load(tmp_path: Path) -> None:
    async def body() -> None:
        c = await g.spawn(enable_builds=True, env={"WAKEFUL_HOME": str(tmp_path)})
        try:
            info = await c.initialize(detail=True)
            if not info["compiler"]["available"]:
                pytest.skip(f"toolchain unusable here: {info['compiler']['reason']}")
            first = await c.compile(REQUEST)
            assert first.state == "succeeded", first
            second = await c.compile(REQUEST)
            assert second.result["sha256"] == first.result["sha256"]
            assert set(first.result) == {"sha256", "elf", "sdk_version", "toolchain", "diagnostics",
                                         "diagnostics_truncated"}
            st = await c.load(base64.b64decode(first.result["elf"]))
            await c.start(st.object_id)
            assert (await g.wait_state(c, st.object_id, "exited")).outcome == {"exit_code": 5}
            broken = await c.compile({"sdk_version": 1, "entry": "main.c", "files": {"main.c": "int main( {"}})
            assert broken.state == "failed" and broken.result["kind"] == "BUILD_FAILED"
            assert isinstance(broken.result["error"], str) and broken.result["error"]
            raw = await c.request("sf.build.compile", REQUEST)
            assert raw["wakeful"]["cached"] is False  # detail: the build.md §1 fields; no cache by default
        finally:
            assert await c.shutdown() == 0

    g.run(body)


@pytest.mark.integration
def test_shutdown_answers_running_compiles_cancelled(tmp_path: Path) -> None:
    async def body() -> None:
        c = await g.spawn("--build-cache", "off", enable_builds=True, env={"WAKEFUL_HOME": str(tmp_path)})
        info = await c.initialize()
        if not info["compiler"]["available"]:
            await c.shutdown()
            pytest.skip(f"toolchain unusable here: {info['compiler']['reason']}")
        frames = [json.dumps({"jsonrpc": "2.0", "id": f"b{i}", "method": "sf.build.compile",
                              "params": {**REQUEST, "files": {"main.c": SOURCE + f"// {i}\n"}}})
                  for i in range(3)]
        await c.write_raw("\n".join(frames).encode() + b"\n")
        await asyncio.sleep(0.05)
        await c.write_raw(b'{"jsonrpc":"2.0","id":"bye","method":"sf.shutdown"}\n')
        got = []
        while True:
            try:
                got.append(await asyncio.wait_for(c.unmatched.get(), 10))
            except TimeoutError:
                break
            if len(got) == 4:
                break
        assert await c.wait(5) == 0
        ids = [f["id"] for f in got]
        assert ids[0] == "bye" or all(f["result"]["state"] == "succeeded" for f in got[: ids.index("bye")])
        after = got[ids.index("bye") + 1:]
        assert after and all(f["result"] == {"state": "cancelled", "result": None} for f in after), got

    g.run(body)


# issue 21 item 4: a compile bomb (doubling macros: the 4 MiB output limit within a second, build.md §6 row 16)
BOMB = {"sdk_version": 1, "entry": "main.c", "files": {"main.c": "#define A0 x\n" + "".join(
    f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 40)) + "int A39;\n" + SOURCE}}


def _cache_entries(home: Path) -> int:
    return sum(1 for p in home.rglob("*") if p.is_file() and len(p.name) == 64 and p.parent.name == p.name[:2])


async def _two_builds(home: Path, *args: str) -> list[tuple[str, str | None, bool]]:
    """One child: compile REQUEST and BOMB; (state, failure, cached) of each."""
    c = await g.spawn(*args, enable_builds=True, env={"WAKEFUL_HOME": str(home)})
    try:
        info = await c.initialize(detail=True)
        if not info["compiler"]["available"]:
            pytest.skip(f"toolchain unusable here: {info['compiler']['reason']}")
        got = []
        for request in (REQUEST, BOMB):
            raw = await c.request("sf.build.compile", request)
            got.append((raw["state"], raw["wakeful"]["failure"], raw["wakeful"]["cached"]))
        return got
    finally:
        assert await c.shutdown() == 0


@pytest.mark.integration
def test_no_build_state_survives_the_process_unless_asked(tmp_path: Path) -> None:
    # on main the second child answered both from ~/.local/share/wakeful/build/cache, the bomb's failure included
    async def body() -> None:
        fresh = [("succeeded", None, False), ("failed", "too_large", False)]
        assert await _two_builds(tmp_path) == fresh
        assert await _two_builds(tmp_path) == fresh  # nothing kept between processes by default
        assert _cache_entries(tmp_path) == 0
        # --build-cache on: successes are reused across processes, a limit failure never is
        assert await _two_builds(tmp_path, "--build-cache", "on") == fresh
        assert await _two_builds(tmp_path, "--build-cache", "on") == [("succeeded", None, True), fresh[1]]
        assert _cache_entries(tmp_path) == 1

    g.run(body)
