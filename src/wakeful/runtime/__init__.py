"""The wakeful runtime: objects, scheduler, mailboxes, host calls and guest helpers in one process.

Public surface: ``Runtime`` and its option/status types (runtime-protocol.md §14), and the clocks; the guest
context and handle space the benchmarks drive directly; and, imported on first use, the stdio server's
``Session`` and the scripted test host of ``wakeful run`` / ``loop.test`` (``run_scripted`` and its types).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.runtime.clock import Clock, ManualClock, SystemClock
from wakeful.runtime.core import Delivery, ObjectStatus, Runtime, RuntimeOptions
from wakeful.runtime.handles import HandleSpace
from wakeful.runtime.helpers import GuestContext
from wakeful.runtime.hostcall import HostCall, HostHandler, HostReply

if TYPE_CHECKING:
    from wakeful.runtime.scripted import (
        INJECTED_CONFIG,
        LOOP_BUILTINS,
        Ending,
        EventRefused,
        Reply,
        run_scripted,
        status_dict,
    )
    from wakeful.runtime.stdio import Session

_LAZY = {"Session": "stdio", **{name: "scripted" for name in (
    "INJECTED_CONFIG", "LOOP_BUILTINS", "Ending", "EventRefused", "Reply", "run_scripted", "status_dict")}}

__all__ = [
    "INJECTED_CONFIG",
    "LOOP_BUILTINS",
    "Clock",
    "Delivery",
    "Ending",
    "EventRefused",
    "GuestContext",
    "HandleSpace",
    "HostCall",
    "HostHandler",
    "HostReply",
    "ManualClock",
    "ObjectStatus",
    "Reply",
    "Runtime",
    "RuntimeOptions",
    "Session",
    "SystemClock",
    "run_scripted",
    "status_dict",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(f"wakeful.runtime.{module}"), name)
