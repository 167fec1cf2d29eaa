"""harness.md §2.1: groups and API keys — hashed secrets, position-split key text, revocation (both backends)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import sqlalchemy as sa

from wakeful.harness.errors import InvalidRequest, NotFound
from wakeful.harness.store import agents, groups, schema


async def test_group_round_trip(store: Any) -> None:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="acme", limits={"loops_per_agent": 3})
    async with store.tx(readonly=True) as tx:
        found = await groups.get_group(tx, group.id)
        listed = await groups.list_groups(tx)
    assert found == group
    assert group.id.startswith("grp_") and len(group.id) == 30
    assert [g.id for g in listed] == [group.id]


@pytest.mark.parametrize("name", ["", "   ", "x" * 81, 7])
async def test_group_name_rules(store: Any, name: Any) -> None:
    with pytest.raises(InvalidRequest) as info:
        async with store.tx() as tx:
            await groups.create_group(tx, name=name)
    assert info.value.details["field"] == "name"


async def test_key_text_shape_and_only_the_digest_is_stored(store: Any) -> None:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        key, text = await groups.create_key(tx, role="group", group_id=group.id, label="ci")
    assert text.startswith(f"wk_{key.id}_") and len(key.id) == 16
    secret = text[len("wk_") + 16 + 1 :]
    assert len(secret) == 43 and "=" not in secret
    async with store.tx(readonly=True) as tx:
        row = (await tx.execute(sa.select(schema.api_key))).one()
    assert row.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in repr(tuple(row))


async def test_verify_accepts_live_key_and_refuses_wrong_unknown_revoked(store: Any) -> None:
    async with store.tx() as tx:
        key, text = await groups.create_key(tx, role="admin")
    async with store.tx() as tx:
        good = await groups.verify_key(tx, text)
        assert good is not None and good.id == key.id and good.role == "admin"
        wrong = text[:-1] + ("A" if text[-1] != "A" else "B")
        assert await groups.verify_key(tx, wrong) is None
        unknown = "wk_key_000000000000_" + text[-43:]
        assert await groups.verify_key(tx, unknown) is None
        for garbage in ["", "wk_", text + "x", text.replace("wk_", "xx_", 1), None, 12]:
            assert await groups.verify_key(tx, garbage) is None
        assert await groups.revoke_key(tx, key.id) is True
        assert await groups.revoke_key(tx, key.id) is False
        assert await groups.verify_key(tx, text) is None
    with pytest.raises(NotFound):
        async with store.tx() as tx:
            await groups.revoke_key(tx, "key_000000000000")


async def test_last_used_is_written_at_most_once_a_minute(store: Any, store_clock: Any) -> None:
    async with store.tx() as tx:
        key, text = await groups.create_key(tx, role="admin")
    stamps = []
    for step_s in (0, 30, 31):
        store_clock.advance(s=step_s)
        async with store.tx() as tx:
            await groups.verify_key(tx, text)
        async with store.tx(readonly=True) as tx:
            stamps.append((await tx.execute(sa.select(schema.api_key.c.last_used_ms))).scalar_one())
    assert stamps[0] == stamps[1]  # 30 s later: not rewritten
    assert stamps[2] == stamps[0] + 61_000


async def test_key_scopes(store: Any) -> None:
    async with store.tx() as tx:
        g1 = await groups.create_group(tx, name="one")
        g2 = await groups.create_group(tx, name="two")
        a1 = await agents.create_agent(tx, group_id=g1.id, name="bot")
        key, _ = await groups.create_key(tx, role="agent", group_id=g1.id, agent_id=a1.id)
    assert (key.group_id, key.agent_id) == (g1.id, a1.id)
    bad: list[dict[str, Any]] = [
        {"role": "root"},
        {"role": "admin", "group_id": g1.id},
        {"role": "group"},
        {"role": "group", "group_id": g1.id, "agent_id": a1.id},
        {"role": "agent", "group_id": g1.id},
    ]
    for kwargs in bad:
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await groups.create_key(tx, **kwargs)
    with pytest.raises(NotFound):  # the agent is in another group
        async with store.tx() as tx:
            await groups.create_key(tx, role="agent", group_id=g2.id, agent_id=a1.id)
    async with store.tx(readonly=True) as tx:
        assert [k.id for k in await groups.list_keys(tx)] == [key.id]


async def test_group_limits_validation_and_update(store: Any) -> None:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        updated = await groups.set_group_limits(tx, group.id, {"loops_per_group": 5})
    assert updated.limits == {"loops_per_group": 5}
    for limits in ([1], {"loops_per_group": -1}, {"loops_per_group": "5"}, {"x": 1.5}):
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await groups.set_group_limits(tx, group.id, limits)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        async with store.tx() as tx:
            await groups.set_group_limits(tx, "grp_missing", None)


async def test_key_cache_reuses_rows_for_at_most_five_seconds(store: Any, store_clock: Any) -> None:
    from wakeful.harness.store.keycache import KeyCache

    async with store.tx() as tx:
        key, text = await groups.create_key(tx, role="admin")
    cache = KeyCache(store, monotonic_ns=store_clock.monotonic_ns)
    assert (await cache.verify(text)) is not None and cache.lookups == 1
    assert (await cache.verify(text)) is not None and cache.lookups == 1  # cached
    assert await cache.verify(text[:-1] + ("A" if text[-1] != "A" else "B")) is None  # wrong secret, same row
    async with store.tx() as tx:
        await groups.revoke_key(tx, key.id)
    store_clock.advance(ms=4999)
    assert (await cache.verify(text)) is not None  # still inside the window
    store_clock.advance(ms=1)
    assert await cache.verify(text) is None and cache.lookups == 2  # revocation effective within 5 s
    unknown = "wk_key_000000000000_" + text[-43:]
    assert await cache.verify(unknown) is None and await cache.verify(unknown) is None
    assert cache.lookups == 3  # unknown ids are cached too
    assert await cache.verify("garbage") is None and cache.lookups == 3
    cache.forget(key.id)
    assert await cache.verify(text) is None and cache.lookups == 4
