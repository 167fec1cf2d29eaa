"""Background tasks of a node: how one is stopped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel every task (None is skipped), then wait for each to end; its ``CancelledError`` is the expected end,
    any other exception it ends with is raised."""
    todo = [task for task in tasks if task is not None]
    for task in todo:
        task.cancel()
    for task in todo:
        with contextlib.suppress(asyncio.CancelledError):
            await task
