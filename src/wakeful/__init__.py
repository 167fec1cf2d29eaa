"""wakeful: an outer loop for always-on AI agents.

Agent-written C watch programs (Loops) compiled to eBPF and run in a sandboxed pure-Python VM.
The embedding API (interfaces.md §5) is ``wakeful.Harness``; its names are imported on first use, so
``import wakeful`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # precise types for embedders' type checkers; at run time the names load on first use
    from wakeful.embed import Harness
    from wakeful.errors import WakefulError
    from wakeful.harness.config import Config, load_config
    from wakeful.harness.embed import WakeMessage
    from wakeful.harness.errors import HostCallRefused
    from wakeful.harness.registry import ToolContext

__version__ = "0.1.0"

# interfaces.md §5: the public names of the embedding API → the module that defines each
_LAZY = {
    "Harness": "wakeful.embed",
    "Config": "wakeful.harness.config",
    "load_config": "wakeful.harness.config",
    "ToolContext": "wakeful.harness.registry",
    "WakeMessage": "wakeful.harness.embed",
    "HostCallRefused": "wakeful.harness.errors",
    "WakefulError": "wakeful.errors",
}

__all__ = ["Config", "Harness", "HostCallRefused", "ToolContext", "WakeMessage", "WakefulError", "__version__",
           "load_config"]


def __getattr__(name: str) -> object:
    """Import a public name on first use (``wakeful.Harness`` is the node with ``h.control`` and
    ``h.serve_http``, ``wakeful.embed``)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'wakeful' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's own attributes."""
    return sorted({*__all__, *(k for k in globals() if k.startswith("__"))})
