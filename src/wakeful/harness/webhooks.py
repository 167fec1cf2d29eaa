"""``loop.webhook``: one 256-bit secret URL per Loop — enable, rotate, revoke (harness.md §13).

Only the secret's SHA-256 (unique index) and a 4-character hint are stored; the URL is shown once.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from wakeful.harness import lifecycle as lc
from wakeful.harness.errors import InvalidRequest, NotFound
from wakeful.harness.intake import secret_digest
from wakeful.harness.store import loops
from wakeful.harness.store.core import Store
from wakeful.harness.store.ids import lookup_text

__all__ = ["ACTIONS", "HINT_CHARS", "PATH_PREFIX", "new_secret", "webhook", "webhook_url"]

ACTIONS = ("enable", "rotate", "revoke")
PATH_PREFIX = "/v1/loop-webhooks/"
HINT_CHARS = 4


def new_secret() -> str:
    """32 random bytes, URL-safe base64 without padding: 43 characters."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")


def webhook_url(secret: str, public_base_url: str | None) -> str:
    """``server.public_base_url`` + the path; the path alone when no base URL is configured."""
    path = PATH_PREFIX + secret
    return path if not public_base_url else public_base_url.rstrip("/") + path


async def webhook(
    store: Store, loop_id: str, action: str, *, agent_id: str | None = None, public_base_url: str | None = None,
    actor: str = "operator",
) -> dict[str, Any]:
    """``enable`` → ``{enabled: true, url, hint}`` when a secret was created, ``{enabled: true, url: null, hint}``
    when one already existed; ``rotate`` → a new secret, the old URL stops at once; ``revoke`` →
    ``{enabled: false}``. ``agent_id`` limits the call to that agent's Loops (None: operator or admin)."""
    if action not in ACTIONS:
        raise InvalidRequest(f"action must be one of {', '.join(ACTIONS)}", field="action")
    if lookup_text(loop_id) is None or (agent_id is not None and lookup_text(agent_id) is None):
        raise NotFound("no such Loop")
    secret: str | None = None
    async with store.tx() as tx:
        row = await loops.find_loop(tx, loop_id, for_update=True)
        if row is None or (agent_id is not None and row.agent_id != agent_id):
            raise NotFound(f"Loop {loop_id} does not exist")
        if action == "enable" and row.webhook_secret_sha256 is not None:
            return {"loop_id": loop_id, "enabled": True, "url": None, "hint": row.webhook_hint}
        if action == "revoke":
            if row.webhook_secret_sha256 is None:
                return {"loop_id": loop_id, "enabled": False}
            await loops.update_loop(tx, loop_id, webhook_secret_sha256=None, webhook_hint=None,
                                    webhook_rotated_ms=await tx.now_ms())
        else:
            secret = new_secret()
            await loops.update_loop(tx, loop_id, webhook_secret_sha256=secret_digest(secret),
                                    webhook_hint=secret[-HINT_CHARS:], webhook_rotated_ms=await tx.now_ms())
        done = {"enable": "enabled", "rotate": "rotated", "revoke": "revoked"}[action]
        await lc.append_log(tx, loop_id, row.incarnation, "harness", f"{actor}: webhook {done}")
    if secret is None:
        return {"loop_id": loop_id, "enabled": False}
    return {"loop_id": loop_id, "enabled": True, "url": webhook_url(secret, public_base_url),
            "hint": secret[-HINT_CHARS:]}
