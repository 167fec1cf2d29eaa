"""``wakeful serve`` (interfaces.md §2, §4.2, §8): uvicorn hosting the HTTP API and a started Harness in one
process; SQLite in the data directory by default, PostgreSQL by ``--db-url``; a graceful stop on SIGTERM/SIGINT.

``--demo`` keeps its data in ``./.wakeful-demo`` and sets up the demo tenant and Loops (``wakeful.api.demo``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from wakeful.cli import nodefile
from wakeful.cli.output import CliExit, Unavailable
from wakeful.cli.which_store import DEMO_DIR

__all__ = ["register", "serve_command"]


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the root command group."""
    app.command("serve")(serve)


def serve(
    host: Annotated[str | None, typer.Option("--host", help="Listen address (server.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Listen port (server.port, 8470; 0 = any free).")] = None,
    db_url: Annotated[str | None, typer.Option("--db-url", help="Store URL (sqlite:///… or postgresql://…).")] = None,
    node_name: Annotated[str | None, typer.Option("--node-name", help="This node's name (server.node_name).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Configuration file (TOML).")] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Demo tenant and Loops in ./.wakeful-demo.")] = False,
    no_docs: Annotated[bool, typer.Option("--no-docs", help="Do not serve /openapi.json and /docs.")] = False,
    no_mcp: Annotated[bool, typer.Option("--no-mcp", help="Do not serve MCP at /mcp.")] = False,
    no_ui: Annotated[bool, typer.Option("--no-ui", help="Do not serve the dashboard at /ui/ (ui.enabled).")] = False,
    upgrade: Annotated[bool, typer.Option("--upgrade", help="Upgrade an older PostgreSQL schema first.")] = False,
) -> None:
    """Run a node: the HTTP API (FastAPI on uvicorn) and the harness in one process."""
    raise CliExit(serve_command(host=host, port=port, db_url=db_url, node_name=node_name, config_path=config,
                                demo=demo, no_docs=no_docs, mcp=not no_mcp, upgrade=upgrade, ui=not no_ui))


# issue 16 / benchmarks.md §2.2 (a restarted node runs its Loops again within 3 s): the HTTP stack's packages — fastapi
# (its OpenAPI models are most of it), uvicorn, and for /mcp the mcp package — are ~1 s of imports on a quiet machine.
# A thread imports them while the main thread loads the Loops (started after the main thread's own imports), which
# waits on the store much of its time. Third-party packages only: no harness code imports them, so the two threads
# never take one import cycle from opposite ends; a failure here is left to the main thread's own import, where it
# is reported.
# anyio's asyncio backend: imported by the first request otherwise (Starlette's exception handling, FastAPI's request
# handling), ~0.1 s on the way to a restarted node's first answer
WARM_IMPORTS = ("fastapi", "fastapi.routing", "uvicorn", "uvicorn.protocols.http.h11_impl", "anyio._backends._asyncio")
WARM_MCP_IMPORTS = ("mcp.server.streamable_http_manager", "mcp.server.lowlevel")
# issue 16 (ingest at N = 10,000): the node's collector runs its youngest generation after this many net container
# allocations instead of CPython's 700. A node's request bursts (an ingest batch's requests, rows and answers made,
# then freed together) set off ~90 young and ~8 middle collections per second at ~1,500 events/s, and a full one
# about each second over whatever the Loops stored since the last freeze: 50–140 ms of every second's CPU (8–20 %)
# at N = 10,000, ~7 % at N = 1,000. Cyclic garbage is still collected: after at most this many allocations,
# a bounded few MB at worst (the older generations' thresholds are CPython's)
NODE_GC_YOUNG = 10_000


def warm_imports(names: tuple[str, ...]) -> threading.Thread:
    """Import ``names`` in a daemon thread (started); returns the thread."""
    def run() -> None:
        for name in names:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="wakeful-warm-imports", daemon=True)
    thread.start()
    return thread


def serve_command(*, host: str | None, port: int | None, db_url: str | None, node_name: str | None,
                  config_path: Path | None, demo: bool, no_docs: bool, mcp: bool = True,
                  upgrade: bool = False, ui: bool = True) -> int:
    # issue 16 (a restart at N = 10,000): the start's imports, store open and load run with the collector off —
    # its automatic runs over a heap that only grows were ~0.1 s of the imports' CPU and ~0.2 s of the load's —
    # and it is on again before the node listens (_serve); the hygiene's collection after the load (vm.md §7)
    # collects what they would have
    collector = gc.isenabled()
    thresholds = gc.get_threshold()
    gc.disable()
    gc.set_threshold(NODE_GC_YOUNG, *thresholds[1:])
    try:
        return _serve_command(host=host, port=port, db_url=db_url, node_name=node_name, config_path=config_path,
                              demo=demo, no_docs=no_docs, mcp=mcp, upgrade=upgrade, ui=ui, collector=collector)
    finally:
        gc.set_threshold(*thresholds)
        if collector:
            gc.enable()


def _serve_command(*, host: str | None, port: int | None, db_url: str | None, node_name: str | None,
                   config_path: Path | None, demo: bool, no_docs: bool, mcp: bool, upgrade: bool, ui: bool,
                   collector: bool) -> int:
    from wakeful.harness.config import load_config

    if demo and "WAKEFUL_HOME" not in os.environ:
        os.environ["WAKEFUL_HOME"] = str(Path.cwd() / DEMO_DIR)
    cfg = load_config(config_path)  # a bad key or value: the typed error naming it and its source, exit 1
    cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    cfg = cfg.with_overrides(store_url=db_url, node_name=node_name,  # flags > environment ($WAKEFUL_DB_URL) > file
                             server_host=host, server_port=port, public_docs=False if no_docs else None)
    if cfg.node_name is None:
        cfg = cfg.with_overrides(node_name=socket.gethostname())
    from wakeful.cli.logsetup import configure

    configure(cfg.log.level, cfg.log.format, sys.stderr)  # interfaces.md §7 log.level, log.format
    if upgrade:  # harness.md §3: an older schema is upgraded only when asked (the store's own rules apply)
        asyncio.run(_upgrade(cfg.effective_store_url))
    asyncio.run(_serve(cfg, demo=demo, mcp=mcp, ui=ui and cfg.ui.enabled, collector=collector))
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port is a clear ``unavailable`` (exit 3), not a traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise Unavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def _demo_login(app: Any, key: str, base_url: str) -> str:
    """interfaces.md §6: the demo's one-time dashboard link (10 minutes, once) signing in with the admin key."""
    from wakeful.api.routes_ui import sessions_of

    return f"{base_url}/ui/login?code={sessions_of(app).issue_code(key)}"


async def _upgrade(url: str) -> None:
    from wakeful.harness.ops import store_admin

    await store_admin.upgrade(url, node_lock=False)


async def _serve(cfg: Any, *, demo: bool, mcp: bool = True, ui: bool = True, collector: bool = True) -> None:
    from wakeful.control import Harness  # wakeful.Harness: the node with h.control and the Loop bridge

    listener = _listen(cfg.server_host, cfg.server_port)  # fail fast, before the store is opened
    harness = Harness(cfg)
    # started only now, when the main thread's own imports are done: while the Loops load, the two threads rarely
    # import at once, so a concurrent import of one package from both sides stays unlikely (decisions-cli-start.md)
    warm = warm_imports(WARM_IMPORTS + (WARM_MCP_IMPORTS if mcp else ()))
    try:
        await harness.start()  # the Loops load first; the HTTP stack's imports meanwhile (warm_imports)
    except BaseException:
        listener.close()
        # a daemon thread still in a C extension's import when the interpreter finalizes aborts the process
        # ("FATAL: exception not rethrown", exit -6) instead of the error's exit code: let it finish first
        warm.join()
        raise
    mcp_app: Any = None
    try:
        from wakeful.api.server import make_server

        server = make_server(harness, cfg.server_host, cfg.server_port, node_name=cfg.node_name or "",
                             public_base_url=cfg.public_base_url, public_docs=cfg.public_docs,
                             ui=ui, timeout_graceful_shutdown=5)
        from wakeful.cli.mcp_cmd import mount_mcp

        if mcp:  # interfaces.md §3.1: MCP over streamable HTTP at /mcp, names by the config's mcp.tool_names
            mcp_app = mount_mcp(server.config.app, harness)
        if collector:  # on again (serve_command) before the first request
            gc.enable()
        loop = asyncio.get_running_loop()

        def stop() -> None:
            server.should_exit = True

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        task = loop.create_task(server.serve(sockets=[listener]))
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if task.done():
            await task
            raise Unavailable("the HTTP server did not start (see the log above)")
        bound = listener.getsockname()
        shown_host = cfg.server_host if cfg.server_host not in ("0.0.0.0", "::") else "127.0.0.1"
        base_url = f"http://{shown_host}:{bound[1]}"
        print(f"wakeful serve: listening on {base_url} (node {cfg.node_name}, store "
              f"{harness.store.dialect}, data {cfg.data_dir})", flush=True)
        # issue 19: the CLI and doctor find this node (and its store) through <data>/node.json
        nodefile.write(cfg.data_dir, url=base_url, store_url=cfg.effective_store_url, node_name=cfg.node_name or "",
                       reconcile_s=harness.reconcile_s)
        if demo:
            from wakeful.api.demo import demo_lines, set_up_demo

            info = await set_up_demo(harness)
            login = _demo_login(server.config.app, info.keys["admin"], base_url) if ui else None
            print("\n".join(demo_lines(info, base_url, login_url=login)), flush=True)
            from wakeful.api.demo import WEBHOOK_LOOP
            from wakeful.control import seed_demo_goal

            seeded = await seed_demo_goal(harness, info.group_id, info.agent_id, info.loops[WEBHOOK_LOOP])
            print(f"demo goal: {seeded['goal_id']} (monitor {seeded['monitor']} backed by Loop "
                  f"{info.loops[WEBHOOK_LOOP]}): {base_url}/v1/agent-groups/{info.group_id}/goals/{seeded['goal_id']}",
                  flush=True)
        await task
    finally:
        nodefile.remove(cfg.data_dir)
        if mcp_app is not None:
            with contextlib.suppress(Exception):
                await mcp_app.close()
        with contextlib.suppress(Exception):
            await harness.stop()
        warm.join()  # (a stop right after the start: the /mcp imports may still run)
