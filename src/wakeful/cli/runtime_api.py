"""The CLI's one seam to the in-process runtime (runtime-protocol.md §14): open, load, deliver, run, close.

Statuses come back as plain dicts (the status object of §6.2) so the printers never depend on runtime types.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import TracebackType
from typing import Any

from wakeful.cli.output import Unavailable


def status_dict(status: Any) -> dict[str, Any]:
    """The status object of runtime-protocol.md §6.2 (+ `guest_ms`, `instructions`, `fault`) as a dict."""
    if isinstance(status, dict):
        return dict(status)
    names = (
        "object_id",
        "sha256",
        "state",
        "wait",
        "mailbox_entries",
        "outcome",
        "guest_ms",
        "instructions",
        "fault",
    )
    return {name: getattr(status, name, None) for name in names}


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class RuntimeSession:
    """An opened in-process ``Runtime`` for one `wakeful run`, closed on exit."""

    def __init__(
        self,
        *,
        engine: str,
        host_handler: Callable[[Any], Any],
        on_log: Callable[[str, str], None],
        on_state: Callable[[Any], None],
    ) -> None:
        self._engine = engine
        self._handlers = (host_handler, on_log, on_state)
        self._rt: Any = None

    async def __aenter__(self) -> RuntimeSession:
        self._rt = _make_runtime(self._engine, *self._handlers)
        await _settle(self._rt.open())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._rt is not None:
            await _settle(self._rt.close())

    async def load(self, elf: bytes, *, config: Any, capabilities: list[dict[str, Any]]) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.load(elf, config=config, capabilities=capabilities)))

    async def deliver(self, object_id: str, event_id: str, topic: str, payload: Any) -> None:
        await _settle(self._rt.deliver(object_id, event_id, topic, payload))

    async def start(self, object_id: str) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.start(object_id)))

    async def get(self, object_id: str) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.get(object_id)))

    async def stop(self, object_id: str) -> dict[str, Any]:
        return status_dict(await _settle(self._rt.stop(object_id)))


def _make_runtime(
    engine: str,
    host_handler: Callable[[Any], Any],
    on_log: Callable[[str, str], None],
    on_state: Callable[[Any], None],
) -> Any:
    try:
        from wakeful.runtime import Runtime, RuntimeOptions  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:  # the runtime layer is not installed/built yet
        raise Unavailable(f"the in-process runtime is unavailable: {exc}") from exc
    options = RuntimeOptions(engine=engine)
    return Runtime(options, host_handler=host_handler, on_state=on_state, on_log=on_log)
