"""``wakeful.Harness``, the public embedding class: the harness node with ``h.control`` and ``h.serve_http``.

It ranks above the faces (``serve_http`` runs the HTTP face on this node) and below the CLI, so no lower layer
has to load a face by name (docs/design.md, layers; interfaces.md §5).
"""

from __future__ import annotations

from typing import Any

from wakeful.control import Harness as ControlHarness

__all__ = ["Harness"]


class Harness(ControlHarness):
    """A node inside the embedder's process, with ``h.control`` once started and ``h.serve_http``."""

    async def serve_http(self, host: str = "127.0.0.1", port: int = 8470, **options: Any) -> None:
        """interfaces.md §5: also serve the HTTP API from this started harness until cancelled; the port is
        released when the serving task ends. The HTTP face (FastAPI, uvicorn) is imported on first call."""
        from wakeful.api.server import serve

        await serve(self, host, port, node_name=self.config.node_name or "",
                    public_base_url=self.config.public_base_url, public_docs=self.config.public_docs, **options)
