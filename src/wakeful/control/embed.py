"""``wakeful.Harness`` with the control plane: the harness node plus ``h.control`` (interfaces.md §5).

The control plane sits above the harness, so this subclass (not the harness) opens a ``Control`` on the node's
store at start and runs its 60 s resume sweep (control-plane.md §3.4) alongside the harness sweeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from wakeful.control.actor import Actor
from wakeful.control.core import Control
from wakeful.control.loops import SWEEP_S, LoopBridge
from wakeful.control.validators import script_runner, validate
from wakeful.harness.embed import Harness as NodeHarness
from wakeful.harness.tasks import cancel_and_wait

__all__ = ["RESUME_SWEEP_S", "Harness"]

log = logging.getLogger("wakeful.control")
RESUME_SWEEP_S = 60.0  # §3.4: time: conditions are evaluated every 60 s


class Harness(NodeHarness):
    """A node like ``wakeful serve`` without the HTTP server, with ``h.control`` once started."""

    _control: Control | None = None
    _control_sweep: asyncio.Task[None] | None = None
    _bridge: LoopBridge | None = None

    async def start(self) -> None:
        """Start the node (store, migrations, runtime, adoption, sweeps), then the control kernel ``h.control``."""
        await super().start()
        try:
            settings = self.config.control  # control.claim_ttl_s, control.intent_grace_s (interfaces.md §7)
            control = Control(self.store, claim_ttl_s=settings.claim_ttl_s, intent_grace_s=settings.intent_grace_s)
            await control.open()
        except BaseException:
            await super().stop()
            raise
        self._control = control
        self._bridge = LoopBridge(self, control)  # §9: Loop wakes and transitions become commits
        self._bridge.install(sweep_every_s=SWEEP_S if self.sweeps else None)
        if self.sweeps:
            self._control_sweep = asyncio.get_running_loop().create_task(self._resume_sweep(control))

    @contextlib.asynccontextmanager
    async def offline(self) -> AsyncIterator[Harness]:
        """The harness on its store with nothing running (``NodeHarness.offline``), plus the control kernel on
        that store — no Loop bridge, no resume sweep: the command line's local mode, whose commits a node running
        on the store acts on."""
        async with super().offline():
            settings = self.config.control
            control = Control(self.store, claim_ttl_s=settings.claim_ttl_s, intent_grace_s=settings.intent_grace_s)
            await control.open()
            self._control = control
            try:
                yield self
            finally:
                self._control = None

    async def stop(self) -> None:
        """Stop the control sweep, then drain and stop the node (harness.md §19.4)."""
        await cancel_and_wait([self._control_sweep])
        self._control_sweep = None
        if self._bridge is not None:
            await self._bridge.close()
            self._bridge = None
        self._control = None
        await super().stop()

    @staticmethod
    async def _resume_sweep(control: Control) -> None:
        while True:
            await asyncio.sleep(RESUME_SWEEP_S)
            try:
                await control.tick()
            except Exception:
                log.exception("control resume sweep failed")

    async def validate(self, actor: Actor, goal_id: str, criterion_id: str) -> dict[str, Any]:
        """Run the criterion's validator in this node's script sandbox and record its evidence (issue 20)."""
        return await validate(self.control, actor, goal_id, criterion_id, script_runner(self.scripts))

    @property
    def control_if_running(self) -> Control | None:
        """The control-plane kernel once started, None before ``start`` and after ``stop`` (the faces answer
        "unavailable" then)."""
        return self._control

    @property
    def loop_bridge(self) -> LoopBridge | None:
        """The bridge feeding this node's Loop wakes and transitions to the kernel, while started."""
        return self._bridge

    @property
    def control(self) -> Control:
        """The control-plane kernel and reads on this node's store (``submit``, reads, ``snapshot``)."""
        return self._once_started(self._control)
