"""build.md §5.3 / runtime-protocol.md §13: `sandbox_level` is always one of scan | landlock | namespace, with a
`sandbox_reason` whenever Landlock is not in force — also when builds are disabled or the toolchain is missing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from build_support import make_builder

from wakeful.build import disabled_info
from wakeful.runtime.client import RuntimeClient

pytestmark = pytest.mark.integration
LEVELS = ("scan", "landlock", "namespace")


def test_sandbox_level_disabled_builder_is_scan_with_a_reason(tmp_path: Path) -> None:
    with make_builder(tmp_path, enabled=False) as b:
        info = b.info()
    assert not info.available and info.reason == "builds are disabled"
    assert info.sandbox_level == "scan" and info.sandbox_reason == "builds are disabled"
    made = disabled_info("off here", workers=3, cache=False)
    assert (made.sandbox_level, made.sandbox_reason, made.reason, made.workers, made.cache) == (
        "scan", "builds are disabled", "off here", 3, False)


def test_sandbox_level_missing_zig_is_scan_with_a_reason(tmp_path: Path) -> None:
    with make_builder(tmp_path, zig_path=str(tmp_path / "no" / "zig")) as b:
        info = b.info()
    assert not info.available and info.sandbox_level in LEVELS
    assert info.sandbox_reason is not None and "zig" in info.sandbox_reason


def test_sandbox_level_runtime_without_builds_reports_scan(tmp_path: Path) -> None:
    """`wakeful runtime` without --enable-builds: sf.initialize reports `scan` and why (it used to say "none")."""

    async def body() -> dict[str, object]:
        client = await RuntimeClient.spawn(env={"WAKEFUL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                                                "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")})
        try:
            return await client.initialize()
        finally:
            assert await client.shutdown() == 0

    init = asyncio.run(asyncio.wait_for(body(), 60))
    builds = init["wakeful"]["builds"]  # type: ignore[index]
    assert builds["sandbox_level"] == "scan", builds
    assert "builds are disabled" in builds["sandbox_reason"]
    assert init["compiler"]["available"] is False  # type: ignore[index]
