"""The texts of lifecycle notices: what the agent is told when a Loop ends, fails or is held back.

harness.md §4.4: one notice per outcome and incarnation, id ``loop:<loop_id>:lifecycle:<kind>:<incarnation>``.
"""

from __future__ import annotations

from wakeful.harness.store.sessions import lifecycle_message_id

__all__ = [
    "KINDS", "budget", "exit_code_text", "exited", "failed", "fault", "notice_id", "quota", "telling_on_exit",
]

KINDS = ("exited", "failed", "event-deadline", "budget", "fault", "quota")

# sdk.md §3: the statuses a guest may return as its exit code, spelled out in lifecycle messages (issue 18)
STATUSES = {
    -1: ("SF_INVALID", "an unknown, dropped or foreign handle, a wrong handle kind, a missing key or a syntax error"),
    -2: ("SF_LIMIT", "a bound was hit (the 128-handle table, often a handle leak; a value size, length, log rate "
                     "or pending-call bound)"),
    -3: ("SF_TIMEOUT", "an event wait or host call reached its timeout"),
    -4: ("SF_DENIED", "the capability name or arguments are not permitted for this Loop"),
    -5: ("SF_HOST_ERROR", "the host call was answered with an error"),
    -6: ("SF_CLOSED", "the output closed or the Loop is being stopped"),
}


def notice_id(loop_id: str, kind: str, incarnation: int) -> str:
    """§2.3: the message id that makes a notice idempotent per incarnation."""
    return lifecycle_message_id(loop_id, kind, incarnation)


def _who(name: str, loop_id: str) -> str:
    return f"Loop {name!r} ({loop_id})"


# §4.2 row 4: told if exit_code ≠ 0 or the Loop delivered no wake since it was last activated
def telling_on_exit(exit_code: int, notified_since_activation: bool) -> bool:
    return exit_code != 0 or not notified_since_activation


def exit_code_text(exit_code: int) -> str:
    """``-2 SF_LIMIT: a bound was hit (…)`` for an SDK status, else the number."""
    if exit_code not in STATUSES:
        return str(exit_code)
    name, meaning = STATUSES[exit_code]
    return f"{exit_code} {name}: {meaning}"


# §4.4 exited
def exited(name: str, loop_id: str, exit_code: int) -> str:
    return (
        f"{_who(name, loop_id)} ended with exit code {exit_code_text(exit_code)}. It is now paused. "
        "Call loop.resume to restart it from its last checkpoint."
    )


# §4.4 failed
def failed(name: str, loop_id: str, reloads: int, failure: str, pending: int) -> str:
    return (
        f"{_who(name, loop_id)} faulted and was reloaded {reloads} times within an hour, so it is now failed. "
        f"Last failure: {failure}. {pending} pending event(s) are kept. "
        "Fix the program and call loop.resume to retry it, or loop.delete to remove it."
    )


# §4.4 budget
def budget(name: str, loop_id: str, per_window: int, window_min: int) -> str:
    return (
        f"{_who(name, loop_id)} was rate-limited on agent.notify ({per_window} wakes per {window_min} minutes) "
        "for an hour without a break, so it is now paused. Fix its dedup keys or its notify conditions "
        "before calling loop.resume."
    )


# §4.4 fault
def fault(name: str, loop_id: str, problem: str) -> str:
    return (
        f"{_who(name, loop_id)} could not be loaded and is paused: {problem}. "
        "Recreate the Loop from a good artifact (loop.build, then loop.create)."
    )


# §4.4 quota
def quota(name: str, loop_id: str, scope: str, limit: int) -> str:
    return (
        f"{_who(name, loop_id)} stayed paused because the {scope} is at its limit of {limit} active Loops. "
        "Pause or delete another Loop, then call loop.resume."
    )
