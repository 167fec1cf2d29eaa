"""The FastAPI application of ``wakeful serve`` (interfaces.md §2): one app over one running ``Harness``.

Adding routes: write ``wakeful/api/routes_<area>.py`` exporting ``router = APIRouter()`` (paths absolute, e.g.
``/v1/agent-groups/{group_id}/decide``) and add ``"<area>"`` to ``ROUTERS`` below — one line. Use the
dependencies of ``api/auth.py`` for auth and raise ``WakefulError``s; ``api/errors.py`` maps codes to statuses
(``register_status`` for new codes). See docs/decisions-api.md.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from wakeful.api import errors
from wakeful.api.context import ApiSettings
from wakeful.api.middleware import (
    GroupEventEndpoint,
    LoopCreateEndpoint,
    Receive,
    RecentRefusals,
    RequestGuard,
    Scope,
    Send,
    direct_post,
)
from wakeful.api.openapi import build_openapi

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["ROUTERS", "WakefulApp", "create_app"]

# one entry per area: the module wakeful.api.routes_<name> exports `router`
ROUTERS: tuple[str, ...] = (
    "meta",
    "admin",
    "agents",
    "artifacts",
    "loops",
    "intake",
    "scripts",
    "decide",
    "control",
    "nodes",
)


# issue 16: FastAPI's own OpenTelemetry hooks (FastAPI >= 0.16x) asked for the global tracer, meter and logger
# providers on every request — environment lookups that were ~13 % of the event loop under the ingest benchmark.
# The node configures no OpenTelemetry provider, so they are off; older FastAPI versions have no such hooks.
_NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {})


class WakefulApp(FastAPI):
    """FastAPI, but the POSTs ``RequestGuard`` serves straight to their endpoints (intake route 1, the create of a
    Loop) enter at ``RequestGuard`` itself (issue 16): the layers above it — Starlette's ``ServerErrorMiddleware``,
    FastAPI's exception-telemetry and body-limit wrappers — pass those requests through unchanged (``RequestGuard``
    answers every exception of its direct paths with its own 500, and the app sets no body limit of its own) but
    each added a coroutine frame to the request and to every ``send``: ~5 % of the event loop under the ingest
    benchmark. Every other request takes the full stack."""

    _guard: RequestGuard | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.root_path and direct_post(scope):
            guard = self._guard or self._find_guard()
            if guard is not None:
                scope["app"] = self
                await guard(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _find_guard(self) -> RequestGuard | None:
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        layer: Any = self.middleware_stack
        for _ in range(16):  # (the few layers Starlette and FastAPI put above the user middleware)
            if isinstance(layer, RequestGuard):
                self._guard = layer
                return layer
            layer = getattr(layer, "app", None)
            if layer is None:
                break
        return None


def create_app(harness: Harness, *, node_name: str = "", public_base_url: str | None = None,
               public_docs: bool = True, routers: tuple[str, ...] | None = None, ui: bool | None = None) -> FastAPI:
    """The app for a harness (started before the first request is served, stopped after the last); the dashboard
    at ``/ui/`` unless ``ui`` is False (default: the harness config's ``ui.enabled``)."""
    from wakeful import __version__

    app = WakefulApp(
        title="wakeful",
        version=__version__,
        summary="Durable watch Loops for AI agents: the HTTP API of `wakeful serve`.",
        openapi_url="/openapi.json" if public_docs else None,
        docs_url=None,  # /docs and /redoc from assets in the package (api/docs.py), not from a CDN
        redoc_url=None,
        **_NO_TELEMETRY,
    )
    app.state.harness = harness
    app.state.settings = ApiSettings(node_name=node_name, public_base_url=public_base_url,
                                     public_docs=public_docs)
    errors.install(app)
    names = routers if routers is not None else ROUTERS
    for name in names:
        module = importlib.import_module(f"wakeful.api.routes_{name}")
        app.include_router(module.router)
    if public_docs:
        from wakeful.api.docs import install_docs

        install_docs(app)
    ui_settings = harness.config.ui
    if ui_settings.enabled if ui is None else ui:  # interfaces.md §6, §7 ui.enabled / --no-ui
        from wakeful.api.routes_ui import install_ui

        install_ui(app, ui_settings.session_hours)
    app.state.refusals = RecentRefusals()  # 429/503 in the last hour: /v1/info, dashboard, `wakeful status`
    group_events: GroupEventEndpoint | None = None
    if "intake" in names:  # issue 16: intake route 1 is served by RequestGuard straight to its endpoint
        from wakeful.api.routes_intake import serve_group_event

        group_events = serve_group_event
    loop_creates: LoopCreateEndpoint | None = None
    if "loops" in names:  # issue 16: so is the create of a Loop (benchmarks.md §2.2 creates/s)
        from wakeful.api.routes_loops import serve_create

        loop_creates = serve_create
    app.add_middleware(RequestGuard, refusals=app.state.refusals, group_events=group_events,
                       loop_creates=loop_creates)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The document of api/openapi.py (operationIds, bearer security, every status), built once."""
    if not app.openapi_schema:
        app.openapi_schema = build_openapi(app)
    return app.openapi_schema
