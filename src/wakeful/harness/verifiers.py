"""A Loop webhook's verifier in the store (issue 19): set, clear, show, and the read the webhook route makes.

Answers are ``{loop_id, verifier: {scheme, …settings, secret_fingerprint} | null}``: the signing secret is
stored as given (verifying an HMAC needs it) and never returned, logged or put in an error message.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from wakeful.harness import lifecycle as lc
from wakeful.harness.errors import NotFound
from wakeful.harness.store import jsontext, loops, schema
from wakeful.harness.store.core import Store, Tx
from wakeful.harness.store.ids import lookup_text
from wakeful.harness.webhook_verify import Verifier, verifier_from

__all__ = ["clear_verifier", "load", "set_verifier", "show_verifier"]

V = schema.loop_webhook_verifier


def _from_row(row: Any) -> Verifier:
    settings = jsontext.decode(row.settings) or {}
    fields = tuple(settings.pop("fields", ()))
    return Verifier(scheme=row.scheme, secret=row.secret, fields=fields, **settings)


async def _read(tx: Tx, loop_id: str) -> Verifier | None:
    row = (await tx.execute(sa.select(V).where(V.c.loop_id == loop_id))).first()
    return None if row is None else _from_row(row)


async def load(store: Store, loop_id: str) -> tuple[Verifier | None, int]:
    """The webhook route's read after the secret resolved: the Loop's verifier (or None) and the store clock."""
    async with store.tx(readonly=True) as tx:
        return await _read(tx, loop_id), await tx.now_ms()


async def _owned(tx: Tx, loop_id: str, agent_id: str | None, *, for_update: bool = True) -> loops.Loop:
    if lookup_text(loop_id) is None or (agent_id is not None and lookup_text(agent_id) is None):
        raise NotFound("no such Loop")
    row = await loops.find_loop(tx, loop_id, for_update=for_update)
    if row is None or (agent_id is not None and row.agent_id != agent_id):
        raise NotFound(f"Loop {loop_id} does not exist")
    return row


def _answer(loop_id: str, verifier: Verifier | None) -> dict[str, Any]:
    return {"loop_id": loop_id, "verifier": None if verifier is None else verifier.public()}


async def set_verifier(store: Store, loop_id: str, spec: dict[str, Any], *, agent_id: str | None = None,
                       actor: str = "operator") -> dict[str, Any]:
    """Give the Loop's webhook a verifier (replacing any); it applies to later requests, across URL rotation.
    ``InvalidRequest`` (with ``field``) for a bad spec, ``NotFound`` outside the caller's Loops."""
    verifier = verifier_from(spec)
    async with store.tx() as tx:
        row = await _owned(tx, loop_id, agent_id)
        values = {"scheme": verifier.scheme, "secret": verifier.secret,
                  "settings": jsontext.encode(verifier.settings()), "updated_ms": await tx.now_ms()}
        await tx.execute(V.delete().where(V.c.loop_id == loop_id))
        await tx.execute(V.insert().values(loop_id=loop_id, **values))
        text = f"{actor}: webhook verifier set ({verifier.scheme})"
        await lc.append_log(tx, loop_id, row.incarnation, "harness", text)
    return _answer(loop_id, verifier)


async def clear_verifier(store: Store, loop_id: str, *, agent_id: str | None = None,
                         actor: str = "operator") -> dict[str, Any]:
    """Remove the verifier: the webhook takes unsigned JSON again (harness.md §10.4). Idempotent."""
    async with store.tx() as tx:
        row = await _owned(tx, loop_id, agent_id)
        gone = await tx.execute(V.delete().where(V.c.loop_id == loop_id))
        if gone.rowcount:
            await lc.append_log(tx, loop_id, row.incarnation, "harness", f"{actor}: webhook verifier cleared")
    return _answer(loop_id, None)


async def show_verifier(store: Store, loop_id: str, *, agent_id: str | None = None) -> dict[str, Any]:
    """The Loop's verifier without its secret (``verifier: null`` when the webhook takes unsigned JSON)."""
    async with store.tx(readonly=True) as tx:
        await _owned(tx, loop_id, agent_id, for_update=False)
        return _answer(loop_id, await _read(tx, loop_id))
