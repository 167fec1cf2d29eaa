"""The LISTEN connection keeps the store URL's options (TLS and the rest): it is opened with the same asyncpg
arguments as the pool's connections, not from host and database alone (harness.md §19.3 signals)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from support.harness_fixtures import PG_URL

from wakeful.harness.placement import signals
from wakeful.harness.store.core import Store

SSL_REQUEST = bytes.fromhex("0000000804d2162f")  # the PostgreSQL SSLRequest packet


async def test_the_listen_connection_arguments_keep_the_query_options(harness_runner: Any) -> None:
    store = await Store.open(f"{PG_URL}?ssl=require&search_path=wk_x&prepared_statement_cache_size=0",
                             migrate=False)
    try:
        kwargs = signals.connect_kwargs(store)
    finally:
        await store.close()
    assert kwargs["ssl"] == "require"  # a TLS option reaches the LISTEN connection
    assert "prepared_statement_cache_size" not in kwargs and "search_path" not in kwargs
    parts = urlsplit(PG_URL)
    assert kwargs["host"] == parts.hostname and kwargs["database"] == parts.path.lstrip("/")


async def test_the_listener_connects_with_the_url_tls_mode(harness_runner: Any) -> None:
    """Through a recording TCP relay: with ``ssl=disable`` in the URL the LISTEN connection sends no SSLRequest
    (asyncpg's default, ``prefer``, would), and it still receives a notification."""
    parts = urlsplit(PG_URL)
    firsts: list[bytes] = []

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(parts.hostname, parts.port or 5432)
        first = await reader.read(8)
        firsts.append(first)
        up_w.write(first)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    netloc = f"{parts.username}@127.0.0.1:{port}" if parts.username else f"127.0.0.1:{port}"
    store = await Store.open(f"postgresql://{netloc}{parts.path}?ssl=disable", migrate=False)
    got: list[tuple[str, str]] = []
    listener = signals.Listener(store, lambda channel, message: got.append((channel, message)))
    try:
        listener.start()
        await asyncio.wait_for(listener.connected.wait(), 15)
        assert firsts and all(first != SSL_REQUEST for first in firsts), firsts
        await signals.notify(store, signals.LOOPS, "lp_probe node_x")
        for _ in range(200):
            if got:
                break
            await asyncio.sleep(0.02)
        assert ("wakeful_loops", "lp_probe node_x") in got
    finally:
        await listener.stop()
        await store.close()
        server.close()
