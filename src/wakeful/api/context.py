"""Where a route finds the running ``Harness`` (``app.state.harness``) and the face's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request

from wakeful.harness.errors import StoreUnavailable

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["ApiSettings", "harness_of", "settings_of"]


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """The ``server.*`` values the routes need (interfaces.md §7)."""

    node_name: str = ""
    public_base_url: str | None = None
    public_docs: bool = True


def harness_of(request: Request) -> Harness:
    """The harness hosting this app; ``503 unavailable`` while it is not started (or stopping)."""
    harness: Harness = request.app.state.harness
    try:
        harness.store  # noqa: B018 - raises while the node is not started
    except RuntimeError:
        raise StoreUnavailable("the node is starting or stopping") from None
    return harness


def settings_of(request: Request) -> ApiSettings:
    settings: ApiSettings = request.app.state.settings
    return settings
