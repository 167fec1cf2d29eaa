"""Loop webhook operations (interfaces.md §2.2 "Loops", harness.md §13, issue 19): the secret URL (enable,
rotate, revoke) and its signature verifier (set, show, clear).

Each answers exactly what its HTTP route answers; the caller is recorded in the Loop's log. A verifier's secret
is stored and never answered (only its fingerprint).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.harness import verifiers
from wakeful.harness import webhooks as hooks
from wakeful.harness.errors import InvalidRequest
from wakeful.harness.ops.scope import loop_in_scope
from wakeful.harness.ops.table import operation

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness
    from wakeful.harness.principal import Principal

__all__ = ["VERIFIER_KEYS", "clear_verifier", "get_verifier", "set_verifier", "webhook"]

VERIFIER_KEYS = ("scheme", "secret", "tolerance_s", "fields", "header", "encoding", "prefix", "id_header",
                 "topic_header")


@operation("webhooks.webhook")
async def webhook(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
                  action: str) -> dict[str, Any]:
    """``enable`` (the URL shown once), ``rotate`` (a new URL, the old one stops) or ``revoke``."""
    if action not in hooks.ACTIONS:  # checked first, as the route's body model does
        raise InvalidRequest(f"action must be one of {', '.join(hooks.ACTIONS)}", field="action")
    await loop_in_scope(harness, principal, group_id, loop_id)
    return await hooks.webhook(harness.store, loop_id, action, public_base_url=harness.config.public_base_url,
                               actor=principal.actor)


@operation("webhooks.set_verifier")
async def set_verifier(harness: Harness, principal: Principal, *, group_id: str, loop_id: str,
                       **spec: Any) -> dict[str, Any]:
    """Give the webhook a verifier ``{scheme, secret, tolerance_s?, fields?, header?, encoding?, prefix?,
    id_header?, topic_header?}``: ``{loop_id, verifier}`` without the secret."""
    unknown = sorted(set(spec) - set(VERIFIER_KEYS))
    if unknown:
        raise InvalidRequest(f"a verifier has no key {unknown[0][:64]!r}", field=unknown[0][:64])
    await loop_in_scope(harness, principal, group_id, loop_id)
    given = {key: value for key, value in spec.items() if value is not None}
    return await verifiers.set_verifier(harness.store, loop_id, given, actor=principal.actor)


@operation("webhooks.get_verifier")
async def get_verifier(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> dict[str, Any]:
    """``{loop_id, verifier}`` (``verifier`` null when the webhook takes unsigned JSON; never the secret)."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    return await verifiers.show_verifier(harness.store, loop_id)


@operation("webhooks.clear_verifier")
async def clear_verifier(harness: Harness, principal: Principal, *, group_id: str, loop_id: str) -> None:
    """Remove the verifier (the webhook takes unsigned JSON again); the route answers 204."""
    await loop_in_scope(harness, principal, group_id, loop_id)
    await verifiers.clear_verifier(harness.store, loop_id, actor=principal.actor)
