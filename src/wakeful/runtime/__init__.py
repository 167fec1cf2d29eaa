"""The wakeful runtime: objects, scheduler, mailboxes, host calls and guest helpers in one process.

Public surface: ``Runtime`` and its option/status types (runtime-protocol.md §14), and the clocks.
"""

from wakeful.runtime.clock import Clock, ManualClock, SystemClock
from wakeful.runtime.core import Delivery, ObjectStatus, Runtime, RuntimeOptions
from wakeful.runtime.hostcall import HostCall, HostHandler, HostReply

__all__ = [
    "Clock",
    "Delivery",
    "HostCall",
    "HostHandler",
    "HostReply",
    "ManualClock",
    "ObjectStatus",
    "Runtime",
    "RuntimeOptions",
    "SystemClock",
]
