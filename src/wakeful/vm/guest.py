"""The contract between a running guest and its embedder (the runtime): helper env and suspensions.

A started guest is a Python generator. This module names what it yields and what it must be sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

# Suspending helpers (sdk.md §9.8) and preemption. A guest generator yields
#     (kind, fuel, args)      kind: one of the names below; fuel: fuel left (<= 0 for PREEMPT);
#                             args: tuple of the helper's u64 arguments (empty for PREEMPT)
# and must be sent back
#     (r0, fuel)              r0: the helper's result (any int; the VM masks it to u64),
#                             fuel: the fuel the guest continues with.
# The scheduler decides the fuel: after a real wait, slice_insns; after sf_yield, the fuel it had;
# after PREEMPT, slice_insns + fuel (the debt carries over). The first send is ``None``.
PREEMPT = "preempt"
SUSPENDING_HELPERS: dict[str, int] = {
    "sf_sleep_ms": 1,
    "sf_yield": 0,
    "sf_event_next": 1,
    "sf_host_call_raw": 4,
}

# Synchronous helpers with their arity (sdk.md §9.8).
SYNC_HELPERS: dict[str, int] = {
    "sf_now_mono_ms": 0,
    "sf_now_unix_ms": 0,
    "sf_config": 0,
    "sf_json_object": 0,
    "sf_json_array": 0,
    "sf_json_null": 0,
    "sf_drop": 1,
    "sf_json_kind": 1,
    "sf_json_bool": 1,
    "sf_json_number": 1,
    "sf_json_boolean": 1,
    "sf_json_dump": 1,
    "sf_bytes_len": 1,
    "sf_log_raw": 2,
    "sf_json_parse": 2,
    "sf_json_at": 2,
    "sf_json_i64": 2,
    "sf_json_string_raw": 2,
    "sf_json_push": 2,
    "sf_bytes": 2,
    "sf_json_get_raw": 3,
    "sf_json_read_string": 3,
    "memcpy": 3,
    "memset": 3,
    "memcmp": 3,
    "memmove": 3,
    "sf_json_set_raw": 4,
    "sf_bytes_read": 4,
    "sf_json_string_equals_raw": 5,
}

HELPER_ARITY: dict[str, int] = {**SYNC_HELPERS, **SUSPENDING_HELPERS}

# Largest fuel one call of a helper can charge (vm.md §6.3, used for plain-function cost bounds):
# 8 + memory (1 per 16 bytes per region, regions <= 16 KiB) + JSON nodes (<= 4096 per value touched).
HELPER_MAX_CHARGE: dict[str, int] = {name: 8 for name in HELPER_ARITY}
HELPER_MAX_CHARGE.update(
    {
        "memcpy": 8 + 1024 + 1024,
        "memmove": 8 + 1024 + 1024,
        "memcmp": 8 + 1024 + 1024,
        "memset": 8 + 1024,
        "sf_log_raw": 8 + 64,
        "sf_json_parse": 8 + 1024 + 4096,
        "sf_json_get_raw": 8 + 1024 + 4096,
        "sf_json_at": 8 + 4096,
        "sf_json_i64": 8 + 1,
        "sf_json_read_string": 8 + 1024,
        "sf_json_string_raw": 8 + 1024 + 1,
        "sf_json_string_equals_raw": 8 + 2048,
        "sf_json_set_raw": 8 + 1024 + 2 * 4096,
        "sf_json_push": 8 + 2 * 4096,
        "sf_json_dump": 8 + 4096,
        "sf_config": 8 + 4096,
        "sf_bytes": 8 + 1024,
        "sf_bytes_read": 8 + 1024,
    }
)


class GuestEnv(Protocol):
    """What the runtime gives a guest at instantiation.

    ``helper(name)`` returns the callable for a *synchronous* helper: it takes exactly the helper's
    arity of u64 ints and returns an int (negative statuses allowed; the VM masks r0 to u64). It adds
    the fuel it charges (vm.md §6.3) to ``debt``; the VM subtracts ``debt`` from its fuel right after the
    call and sets it back to 0. Helpers raise ``wakeful.errors.GuestFault`` for HELPER_* faults.

    ``retired`` is increased by the reference interpreter by the number of instructions it retired
    (at each suspension and at exit); the translator leaves it alone.

    ``fuel_left`` is set by both engines when the guest ends (exit or fault) to the fuel it had left,
    so the runtime can count the last slice's work (vm.md §7 ``instructions``).

    An env class whose ``helper(name)`` answers its own method ``name`` bound to the env does so for every
    instance: ``Program.instantiate`` then asks only the first env of that class (issue 16).
    """

    debt: int
    retired: int
    fuel_left: int

    def helper(self, name: str) -> Callable[..., int]: ...
