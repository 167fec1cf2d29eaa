"""The HTTP face of wakeful (interfaces.md §2): a FastAPI app over a running ``Harness``, served by uvicorn.

``create_app(harness)`` builds it; ``serve(harness, host, port)`` runs it (``wakeful serve``, ``h.serve_http``).
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    if name == "create_app":
        from wakeful.api.app import create_app

        return create_app
    raise AttributeError(name)
