"""Offline API docs (interfaces.md §2, issue 17): ``/docs`` (Swagger UI) and ``/redoc`` from the assets the
``fastapi-offline`` wheel ships, mounted at ``/docs-static`` — FastAPI's defaults load them from a CDN, so a machine
without internet saw a blank page. Only its static files are used, not its app class.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC", "install_docs"]

STATIC = "/docs-static"
# nothing from elsewhere: ReDoc's bundle would fetch its "powered by" logo from its vendor's CDN otherwise
_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' blob:; worker-src 'self' blob:; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'")


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["content-security-policy"] = _CSP
    return page


def _assets() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def install_docs(app: FastAPI) -> None:
    app.mount(STATIC, StaticFiles(directory=_assets()), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        # persistAuthorization: the key typed into "Authorize" stays across reloads; every operation needing a key
        # names the bearer scheme (app._openapi), so "Try it out" sends it
        return _local(get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} — API docs",
                                          swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
                                          swagger_css_url=f"{STATIC}/swagger-ui.css",
                                          swagger_favicon_url=f"{STATIC}/favicon.png",
                                          swagger_ui_parameters={"persistAuthorization": True, "validatorUrl": None}))

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return _local(get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} — API reference",
                                     redoc_js_url=f"{STATIC}/redoc.standalone.js",
                                     redoc_favicon_url=f"{STATIC}/favicon.png", with_google_fonts=False))
