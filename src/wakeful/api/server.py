"""Running the app with uvicorn on a started ``Harness``: ``await serve(harness, host, port)`` (interfaces.md §5
``h.serve_http``) serves until cancelled or ``server.should_exit``; ``wakeful serve`` wraps it with signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import uvicorn

from wakeful.api.app import create_app
from wakeful.api.connections import guarded_protocol

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["connection_limit", "make_server", "serve"]

log = logging.getLogger("wakeful.api")
FD_RESERVE = 100  # descriptors kept for the store, artifacts, logs and refused connections' 503s


class _RedactWebhooks(logging.Filter):
    """harness.md §10.4: access logs show ``/v1/loop-webhooks/<redacted>``; the secret never reaches logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_redact(a) if isinstance(a, str) else a for a in args)
        return True


def _redact(text: str) -> str:
    marker = "/v1/loop-webhooks/"
    at = text.find(marker)
    if at < 0:
        return text
    end = at + len(marker)
    stop = end
    while stop < len(text) and text[stop] not in " ?#\"":
        stop += 1
    return text[:end] + "<redacted>" + text[stop:]


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling: the embedder (or ``wakeful serve``) owns signals.

    issue 16 / benchmarks.md §2.1 step 4: uvicorn's main loop wakes every 0.1 s to look at ``should_exit`` and
    refresh the Date header once a second — 600 wakes of an idle node a minute, most of its event-loop wakes. Here
    it wakes once a second (the header is still refreshed each second) and at once when ``should_exit`` is set."""

    TICK_S = 1.0
    TICKS = 10  # uvicorn's ``on_tick`` counter advances 10 per second (it refreshes the header when % 10 == 0)

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit_set: asyncio.Event | None = None
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._exit_set is not None:
            self._exit_set.set()

    async def main_loop(self) -> None:
        self._exit_set = asyncio.Event()
        if self._should_exit:
            self._exit_set.set()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + self.TICKS) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit_set.wait(), self.TICK_S)
            should_exit = await self.on_tick(counter)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def make_server(harness: Harness, host: str, port: int, *, node_name: str = "", public_base_url: str | None = None,
                public_docs: bool = True, access_log: bool = True, ui: bool | None = None,
                **uvicorn_options: Any) -> uvicorn.Server:
    """A uvicorn server for the harness's app (not started), with the connection limits of ``server.*``
    (``api/connections.py``); ``ui`` None follows the config's ``ui.enabled``."""
    app = create_app(harness, node_name=node_name, public_base_url=public_base_url, public_docs=public_docs, ui=ui)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactWebhooks) for f in access.filters):
        access.addFilter(_RedactWebhooks())
    limits = harness.config.http
    protocol = guarded_protocol(limits, connection_limit(limits.max_connections), app.state.refusals.record)
    options = {"http": protocol, "timeout_keep_alive": limits.keep_alive_s, **uvicorn_options}
    config = uvicorn.Config(app, host=host, port=port, access_log=access_log, log_config=None,
                            lifespan="off", server_header=False, **options)
    return _Server(config)


def connection_limit(configured: int, fd_limit: int | None = None) -> int:
    """``server.max_connections``, lowered to fit the descriptor limit (the process's soft ``RLIMIT_NOFILE``
    unless given) less ``FD_RESERVE`` or an eighth of it, whichever is more, so the limit's 503 comes before
    ``accept`` runs out of descriptors."""
    if fd_limit is None:
        try:
            fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        except (OSError, ValueError):
            return configured
    if fd_limit == resource.RLIM_INFINITY or fd_limit < 0:
        return configured
    fitted = max(1, min(configured, fd_limit - max(FD_RESERVE, fd_limit // 8)))
    if fitted < configured:
        log.warning("server.max_connections %d lowered to %d to fit the descriptor limit of %d", configured,
                    fitted, fd_limit)
    return fitted


async def serve(harness: Harness, host: str = "127.0.0.1", port: int = 8470, **options: Any) -> None:
    """Serve the HTTP API from this process until cancelled (the harness must be started)."""
    server = make_server(harness, host, port, **options)
    task = asyncio.ensure_future(server.serve())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:  # a cancelled caller: stop gracefully, then let the cancellation through
        server.should_exit = True
        await task
        raise
