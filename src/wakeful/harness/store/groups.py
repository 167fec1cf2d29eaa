"""Groups (tenants) and their API keys: creation, hashed-secret verification and revocation (harness.md §2.1).

Key text is ``wk_<key_id>_<secret>``; only SHA-256(secret) is stored and compared in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from wakeful.harness.errors import InvalidRequest, NotFound
from wakeful.harness.store import jsontext, schema
from wakeful.harness.store.core import Tx
from wakeful.harness.store.ids import is_id, lookup_text, new_id, new_key_id, shown

__all__ = [
    "ApiKey",
    "Group",
    "check_name",
    "refuse_controls",
    "create_group",
    "create_key",
    "get_group",
    "list_groups",
    "list_keys",
    "load_key",
    "revoke_key",
    "set_group_limits",
    "split_key_text",
    "touch_keys",
    "verify_key",
]

MAX_NAME = 80
ROLES = ("admin", "group", "agent")
KEY_ID_LEN = 16  # "key_" + 12 base32 chars
SECRET_LEN = 43  # 32 bytes, URL-safe base64 without padding
LAST_USED_EVERY_MS = 60_000
# compared against when the key id is unknown, so timing does not tell unknown from wrong
_DUMMY_DIGEST = hashlib.sha256(b"wakeful-unknown-key").hexdigest()
G = schema.agent_group
K = schema.api_key


@dataclass(frozen=True)
class Group:
    id: str
    name: str
    limits: dict[str, Any] | None
    created_ms: int


@dataclass(frozen=True)
class ApiKey:
    id: str
    role: str
    group_id: str | None
    agent_id: str | None
    label: str | None
    created_ms: int
    last_used_ms: int | None
    revoked_ms: int | None


def check_name(name: object, *, field: str = "name", limit: int = MAX_NAME) -> str:
    """§2: names are non-blank strings of at most ``limit`` characters."""
    if not isinstance(name, str) or not name.strip() or len(name) > limit:
        raise InvalidRequest(f"{field} must be a non-blank string of at most {limit} characters", field=field)
    refuse_controls(name, field)
    return name


# issue 19: a name is one line of text: C0 and C1 controls (a newline, an escape, U+0000, which PostgreSQL text
# cannot hold) are refused at the store, so every face (CLI, HTTP, MCP, embedding) refuses them the same way
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def refuse_controls(text: str, field: str) -> None:
    """A typed ``invalid_request`` naming ``field`` when ``text`` holds a control character."""
    found = _CONTROLS.search(text)
    if found is not None:
        raise InvalidRequest(f"{field} must not contain control characters (found U+{ord(found.group()):04X})",
                             field=field)


def _group(row: Any) -> Group:
    return Group(row.id, row.name, jsontext.decode(row.limits), row.created_ms)


def _key(row: Any) -> ApiKey:
    return ApiKey(
        row.id,
        row.role,
        row.group_id,
        row.agent_id,
        row.label,
        row.created_ms,
        row.last_used_ms,
        row.revoked_ms,
    )


async def create_group(tx: Tx, *, name: str, limits: dict[str, Any] | None = None) -> Group:
    _check_limits(limits)
    now = await tx.now_ms()
    group = Group(new_id("grp", now), check_name(name), limits, now)
    encoded = None if limits is None else jsontext.encode(limits)
    await tx.execute(G.insert().values(id=group.id, name=name, limits=encoded, created_ms=now))
    return group


# §2.1: optional JSON overrides of the §15 quotas (operator only)
def _check_limits(limits: dict[str, Any] | None) -> None:
    if limits is None:
        return
    if not isinstance(limits, dict):
        raise InvalidRequest("limits must be an object", field="limits")
    for key, value in limits.items():
        if not isinstance(key, str) or type(value) is not int or value < 0:
            raise InvalidRequest(f"limits.{key} must be a non-negative integer", field="limits")


async def get_group(tx: Tx, group_id: str) -> Group:
    row = None
    if lookup_text(group_id) is not None:
        row = (await tx.execute(sa.select(G).where(G.c.id == group_id))).first()
    if row is None:
        raise NotFound(f"group {shown(group_id)} not found", resource="group", id=shown(group_id))
    return _group(row)


async def list_groups(tx: Tx) -> list[Group]:
    rows = await tx.execute(sa.select(G).order_by(G.c.created_ms, G.c.id))
    return [_group(r) for r in rows]


async def set_group_limits(tx: Tx, group_id: str, limits: dict[str, Any] | None) -> Group:
    _check_limits(limits)
    text = None if limits is None else jsontext.encode(limits)
    await get_group(tx, group_id)
    await tx.execute(G.update().where(G.c.id == group_id).values(limits=text))
    return await get_group(tx, group_id)


# §2.1: key text wk_<key_id>_<secret>, shown once; the row keeps only SHA-256(secret)
async def create_key(
    tx: Tx,
    *,
    role: str,
    group_id: str | None = None,
    agent_id: str | None = None,
    label: str | None = None,
) -> tuple[ApiKey, str]:
    await _check_scope(tx, role, group_id, agent_id)
    if label is not None:
        check_name(label, field="label", limit=200)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    key = ApiKey(new_key_id(), role, group_id, agent_id, label, await tx.now_ms(), None, None)
    digest = hashlib.sha256(secret.encode()).hexdigest()
    await tx.execute(
        K.insert().values(
            id=key.id,
            secret_sha256=digest,
            role=role,
            group_id=group_id,
            agent_id=agent_id,
            label=label,
            created_ms=key.created_ms,
        )
    )
    return key, f"wk_{key.id}_{secret}"


# §2.1: role admin (all groups), group (one group), agent (one agent in one group)
async def _check_scope(tx: Tx, role: str, group_id: str | None, agent_id: str | None) -> None:
    if role not in ROLES:
        raise InvalidRequest(f"role must be one of {', '.join(ROLES)}", field="role")
    if role == "admin" and (group_id or agent_id):
        raise InvalidRequest("an admin key has no group or agent scope", field="role")
    if role in ("group", "agent"):
        if group_id is None:
            raise InvalidRequest(f"a {role} key needs a group_id", field="group_id")
        await get_group(tx, group_id)
    if role == "group" and agent_id is not None:
        raise InvalidRequest("a group key has no agent scope", field="agent_id")
    if role == "agent":
        await _check_agent_in_group(tx, agent_id, group_id)


async def _check_agent_in_group(tx: Tx, agent_id: str | None, group_id: str | None) -> None:
    if agent_id is None:
        raise InvalidRequest("an agent key needs an agent_id", field="agent_id")
    A = schema.agent
    found = None
    if lookup_text(agent_id) is not None:
        found = (await tx.execute(sa.select(A.c.group_id).where(A.c.id == agent_id))).scalar()
    if found is None or found != group_id:
        raise NotFound(f"agent {shown(agent_id)} not found in group {shown(group_id)}", resource="agent")


def split_key_text(text: object) -> tuple[str, str] | None:
    """§2.1: the key id has a fixed length, so the text splits by position, not by ``_``."""
    if not isinstance(text, str) or len(text) != 3 + KEY_ID_LEN + 1 + SECRET_LEN:
        return None
    key_id, sep, secret = text[3 : 3 + KEY_ID_LEN], text[3 + KEY_ID_LEN], text[4 + KEY_ID_LEN :]
    if not text.startswith("wk_") or sep != "_" or not is_id(key_id, "key"):
        return None
    return key_id, secret


async def verify_key(tx: Tx, key_text: object) -> ApiKey | None:
    """The key's row when the text is a live key, else None (unknown, wrong secret, revoked, malformed).

    Looks the row up by key id and compares SHA-256 digests in constant time; refreshes ``last_used_ms`` at
    most once a minute.
    """
    parts = split_key_text(key_text)
    if parts is None:
        return None
    key_id, secret = parts
    row = (await tx.execute(sa.select(K).where(K.c.id == key_id))).first()
    digest = hashlib.sha256(secret.encode()).hexdigest()
    stored = _DUMMY_DIGEST if row is None else row.secret_sha256
    if not hmac.compare_digest(digest, stored) or row is None or row.revoked_ms is not None:
        return None
    await _touch(tx, row)
    return _key(row)


async def load_key(tx: Tx, key_id: str) -> tuple[ApiKey, str] | None:
    """The key row and its stored digest (for a cache); reads only — the cache records uses and writes
    ``last_used_ms`` later in batches (``touch_keys``), so authentication never takes the write lock."""
    if lookup_text(key_id) is None:
        return None
    row = (await tx.execute(sa.select(K).where(K.c.id == key_id))).first()
    if row is None:
        return None
    return _key(row), str(row.secret_sha256)


async def _touch(tx: Tx, row: Any) -> None:
    await touch_keys(tx, [row.id])


# §2.1: last_used_ms is updated at most once a minute (the guard holds across nodes)
async def touch_keys(tx: Tx, key_ids: Iterable[str]) -> int:
    """Set ``last_used_ms`` to the transaction's store time on the given keys whose stamp is older than a
    minute (or unset), in one statement; the number of rows written."""
    ids = list(key_ids)
    if not ids:
        return 0
    now = await tx.now_ms()
    stale = sa.or_(K.c.last_used_ms.is_(None), K.c.last_used_ms <= now - LAST_USED_EVERY_MS,
                   K.c.last_used_ms > now)
    result = await tx.execute(K.update().where(K.c.id.in_(ids), stale).values(last_used_ms=now))
    return int(result.rowcount or 0)


async def revoke_key(tx: Tx, key_id: str) -> bool:
    """Revoke a key; True when it was live. An unknown id is ``NotFound``."""
    row = None
    if lookup_text(key_id) is not None:
        row = (await tx.execute(sa.select(K.c.revoked_ms).where(K.c.id == key_id))).first()
    if row is None:
        raise NotFound(f"key {shown(key_id)} not found", resource="key", id=shown(key_id))
    if row.revoked_ms is not None:
        return False
    await tx.execute(K.update().where(K.c.id == key_id).values(revoked_ms=await tx.now_ms()))
    return True


async def list_keys(tx: Tx, *, group_id: str | None = None) -> list[ApiKey]:
    stmt = sa.select(K).order_by(K.c.created_ms, K.c.id)
    if group_id is not None:
        stmt = stmt.where(K.c.group_id == group_id)
    return [_key(r) for r in await tx.execute(stmt)]
