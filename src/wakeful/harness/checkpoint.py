"""Loop config and checkpoints: create-time validation, the merged load config, checkpoint limits.

harness.md §6 (and §2.5 for the config column's rules).
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import WakefulError
from wakeful.harness.errors import ConfigTooLarge, InvalidRequest
from wakeful.runtime import jsonval
from wakeful.sdk.rules import AGENT_LIMITS

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "check_fits_config",
    "checkpoint_value",
    "MAX_CONFIG_BYTES",
    "RESERVED_KEYS",
    "CheckpointTooLarge",
    "checked_checkpoint",
    "load_config",
    "validate_config",
]

MAX_CONFIG_BYTES = AGENT_LIMITS["config_bytes"]  # §2.5
MAX_CHECKPOINT_BYTES = AGENT_LIMITS["checkpoint_bytes"]  # §6
RESERVED_KEYS = frozenset({"loop_id", "incarnation", "state"})  # §2.5 / §6: injected at load
_WIDEST_INCARNATION = (1 << 63) - 1  # create-time fit check assumes the widest incarnation the row can hold


class CheckpointTooLarge(WakefulError, ValueError):
    """§6: the state, or the load config merged with it, is over the limits (reason checkpoint_too_large)."""

    code = "checkpoint_too_large"


# §6: the create-time config plus loop_id, incarnation and state (the last checkpoint, or null)
def load_config(config: dict[str, Any] | None, loop_id: str, incarnation: int, state: Any) -> dict[str, Any]:
    """The value the guest reads with ``sf_config()``."""
    merged = dict(config or {})
    merged.update(loop_id=loop_id, incarnation=incarnation, state=state)
    return merged


# §2.5: a JSON object ≤ 16 KiB without the reserved keys; §6: it must fit the JSON limits with state: null
def validate_config(config: object, loop_id: str) -> dict[str, Any]:
    """Check ``loop.create``'s ``config`` and return an independent copy of it."""
    if config is None:
        return {}
    try:
        box = jsonval.from_python(config, limits=False)
    except jsonval.JsonError as exc:
        raise InvalidRequest(f"config: {exc.message}", field="config") from None
    if type(box.value) is not dict:
        raise InvalidRequest("config must be a JSON object", field="config")
    reserved = sorted(RESERVED_KEYS & box.value.keys())
    if reserved:
        raise InvalidRequest(f"config must not contain the injected keys {reserved} (§6)", field="config")
    if box.size > MAX_CONFIG_BYTES:
        raise ConfigTooLarge(f"config is {box.size} bytes encoded; at most {MAX_CONFIG_BYTES}")
    if not _fits(load_config(box.value, loop_id, _WIDEST_INCARNATION, None)):
        raise ConfigTooLarge("config does not fit the JSON limits once loop_id, incarnation and state are added")
    return box.value


# §6 loop.state.put: the state alone ≤ 16,384 bytes and the merged load config still within the limits
def checked_checkpoint(
    state: object, config: dict[str, Any] | None, loop_id: str, incarnation: int
) -> tuple[Any, int]:
    """Return ``(state, encoded_bytes)`` or raise ``CheckpointTooLarge`` / ``jsonval.JsonError``."""
    value, size = checkpoint_value(state)
    check_fits_config(value, config, loop_id, incarnation)
    return value, size


def checkpoint_value(state: object) -> tuple[Any, int]:
    """``checked_checkpoint``'s first half, which needs no config: ``(state, encoded_bytes)`` within §6's bound."""
    box = jsonval.from_python(state, limits=False)
    if box.size > MAX_CHECKPOINT_BYTES:
        raise CheckpointTooLarge(f"checkpoint is {box.size} bytes encoded; at most {MAX_CHECKPOINT_BYTES}")
    return box.value, box.size


def check_fits_config(value: Any, config: dict[str, Any] | None, loop_id: str, incarnation: int) -> None:
    """``checked_checkpoint``'s second half: the load config with this checkpoint fits the JSON limits."""
    if not _fits(load_config(config, loop_id, incarnation, value)):
        raise CheckpointTooLarge("the load config with this checkpoint would exceed the JSON limits")


def _fits(value: dict[str, Any]) -> bool:
    try:
        return jsonval.from_python(value, limits=False).within_limits()
    except (jsonval.JsonError, RecursionError):
        return False
