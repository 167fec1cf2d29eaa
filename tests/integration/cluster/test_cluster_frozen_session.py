"""issue 16: a node frozen (SIGSTOP) while its PostgreSQL session is idle in a transaction holding a Loop's row
lock no longer pins that Loop: the server ends the idle session (idle_in_transaction_session_timeout, below the
lease's TTL − renew), so once the frozen node's lease expires another node adopts the Loop — on its placement
tick, with the reconcile set to 600 s so it cannot be what moves it. The frozen process stays stopped throughout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster_nodes import Probe, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "frozen_node.py"


def _stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


async def test_a_frozen_node_idle_in_a_transaction_does_not_pin_its_loop(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=1, loops_per_agent=1)
    (loop_id,) = tenant.loops
    log = (tmp_path / "frozen.log").open("wb")
    frozen = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), url, str(tmp_path / "f"), loop_id, stdout=asyncio.subprocess.PIPE, stderr=log,
    )
    spare = ServeNode("spare", url, tmp_path / "s", env={"WAKEFUL_PLACEMENT__RECONCILE_S": "600"})
    probe = await Probe.open(url)
    try:
        assert frozen.stdout is not None
        async with asyncio.timeout(120):
            while (line := (await frozen.stdout.readline()).decode()) != "LOCKED\n":
                assert line, (tmp_path / "frozen.log").read_text()[-3000:]
                if line.startswith("NODE "):
                    frozen_id = line.split()[1]
        os.kill(frozen.pid, signal.SIGSTOP)  # frozen mid-transaction, the row lock held by its session
        before = await probe.loop(loop_id)
        assert before.node_id == frozen_id

        await probe.start(spare)
        await until(lambda: probe.placed_on(spare, [loop_id]), timeout=120)  # generous: expected a few seconds
        after = await probe.loop(loop_id)
        assert after.incarnation > before.incarnation
        assert _stopped(frozen.pid)  # the frozen node never ran again: its session ended on the server's side
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(frozen.pid, signal.SIGCONT)
            frozen.kill()
        await frozen.wait()
        log.close()
        await spare.close()
        await probe.close()
