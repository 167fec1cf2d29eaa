"""wakeful: an outer loop for always-on AI agents.

Agent-written C watch programs (Loops) compiled to eBPF and run in a sandboxed pure-Python VM.
"""

__version__ = "0.1.0"

from typing import Any

__all__ = ["Harness", "__version__"]


def __getattr__(name: str) -> Any:
    """``wakeful.Harness`` is imported on first use, so ``import wakeful`` stays light (interfaces.md §5); it is
    the harness node with ``h.control`` and ``h.serve_http`` (``wakeful.embed``)."""
    if name == "Harness":
        from wakeful.embed import Harness

        return Harness
    raise AttributeError(f"module 'wakeful' has no attribute {name!r}")
