"""`Runtime.compile` through the real build pipeline (runtime-protocol.md §6.10, §14), then load + run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from wakeful.runtime import HostCall, Runtime, RuntimeOptions

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
DENSITY = REPO / "src" / "wakeful" / "bench" / "guests" / "density.c"


def test_compile_then_load_the_density_guest(tmp_path: Path) -> None:
    acks: list[HostCall] = []

    def handler(call: HostCall) -> object:
        acks.append(call)
        return {"ok": True}

    async def main() -> None:
        options = RuntimeOptions(enable_builds=True, build_root=str(tmp_path / "build"), build_cache="off")
        async with Runtime(options, host_handler=handler) as rt:
            request = {"sdk_version": 1, "entry": "density.c", "files": {"density.c": DENSITY.read_text()}}
            result = await rt.compile(request)
            assert result.state == "succeeded", result.error
            assert result.elf is not None and result.sha256 is not None
            status = await rt.load(result.elf, capabilities=[{"name": "benchmark.ack"}])
            assert status.sha256 == result.sha256
            await rt.start(status.object_id)
            for _ in range(100):
                if (await rt.get(status.object_id)).wait == "event":
                    break
                await asyncio.sleep(0.01)
            await rt.deliver(status.object_id, "ev1", "bench", {"sequence": 7})
            for _ in range(100):
                if acks:
                    break
                await asyncio.sleep(0.01)
            assert acks and acks[0].arguments["payload"] == {"sequence": 7}
            assert acks[0].capability == "benchmark.ack" and acks[0].timeout_ms == 10_000

    asyncio.run(main())


def test_stats_count_a_build_in_flight(tmp_path: Path) -> None:
    """runtime-protocol.md §13 ``wakeful.stats``: builds ``running`` / ``queued`` are the builder's counters
    (issue 15: they were read from private names the builder never had, so they always said 0)."""

    async def main() -> None:
        options = RuntimeOptions(enable_builds=True, build_root=str(tmp_path / "build"), build_cache="off",
                                 build_workers=1)
        async with Runtime(options, host_handler=lambda call: {"ok": True}) as rt:
            files = [{"sdk_version": 1, "entry": "density.c", "files": {"density.c": DENSITY.read_text() + f"\n// {n}\n"}}
                     for n in range(2)]
            builds = [asyncio.create_task(rt.compile(request)) for request in files]
            builder = rt._builder
            # the count rises on the event loop before the pipeline thread starts and falls on it after
            while builder is None or builder.stats()["running"] + builder.stats()["queued"] < 2:
                await asyncio.sleep(0)
                builder = rt._builder
            seen = rt.stats_nowait()["wakeful"]["builds"]
            assert (seen["running"], seen["queued"]) == (1, 1)
            for result in await asyncio.gather(*builds):
                assert result.state == "succeeded", result.error
            seen = rt.stats_nowait()["wakeful"]["builds"]
            assert (seen["running"], seen["queued"]) == (0, 0)

    asyncio.run(main())
