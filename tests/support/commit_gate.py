"""A ``Store.before_commit`` hook that holds the first commit it sees until released, counting the commits it saw
(the group-commit tests: nothing is answered or visible while a batch waits at its COMMIT)."""

from __future__ import annotations

import asyncio

from wakeful.harness.store import Tx

__all__ = ["Gate"]


class Gate:
    """``entered`` is set when the first commit arrives; it waits until ``release`` is set."""

    def __init__(self) -> None:
        self.entered, self.release = asyncio.Event(), asyncio.Event()
        self.seen = 0

    async def __call__(self, tx: Tx) -> None:
        self.seen += 1
        if self.seen == 1:
            self.entered.set()
            await self.release.wait()
