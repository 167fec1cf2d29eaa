"""Webhook secrets (harness.md §13, §10.4 steps 1–4, §21 forged secrets) and the intake buckets (§14), on SQLite
and PostgreSQL with a real Loop."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path
from typing import Any

import pytest
from support.ingress_harness import counter_loop, counting_statements, event_rows
from support.loops_harness import loop_row, snapshot, started

from wakeful.harness.config import Config, Limits
from wakeful.harness.embed import Harness
from wakeful.harness.errors import InvalidRequest, LoopNotActive, NotFound, RateLimited
from wakeful.harness.ratelimit import LocalLimiter
from wakeful.harness.store import loops


def _secret(url: str) -> str:
    return url.rsplit("/", 1)[1]


async def test_enable_rotate_revoke_store_only_the_digest(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        made = await h.webhook(loop_id, "enable")
        assert made["enabled"] is True and made["url"].startswith("/v1/loop-webhooks/")  # no base URL: the path
        secret = _secret(made["url"])
        assert len(secret) == 43 and len(base64.urlsafe_b64decode(secret + "=")) == 32
        assert made["hint"] == secret[-4:]
        row = await loop_row(h, loop_id)
        assert row.webhook_secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
        assert row.webhook_hint == secret[-4:]
        assert secret not in repr(await snapshot(h))  # the secret itself is stored nowhere
        assert (await h.get_loop(loop_id))["webhook_enabled"] is True

        again = await h.webhook(loop_id, "enable")
        assert again == {"loop_id": loop_id, "enabled": True, "url": None, "hint": secret[-4:]}
        assert await h.intake.resolve_webhook(secret) == (loop_id, row.webhook_secret_sha256)

        rotated = await h.webhook(loop_id, "rotate")
        new = _secret(rotated["url"])
        assert new != secret
        with pytest.raises(NotFound):
            await h.intake.resolve_webhook(secret)  # the old URL stops at once
        assert (await h.intake.resolve_webhook(new))[0] == loop_id

        assert await h.webhook(loop_id, "revoke") == {"loop_id": loop_id, "enabled": False}
        with pytest.raises(NotFound):
            await h.intake.resolve_webhook(new)
        assert (await h.get_loop(loop_id))["webhook_enabled"] is False
        assert await h.webhook(loop_id, "revoke") == {"loop_id": loop_id, "enabled": False}
        with pytest.raises(InvalidRequest):
            await h.webhook(loop_id, "delete")
    finally:
        await h.stop()


async def test_url_uses_the_public_base_url_and_owner_scope(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data", public_base_url="https://hooks.example.org/")
    try:
        _, agent, _, loop_id = await counter_loop(h, compile_c)
        _, other, _, _ = await counter_loop(h, compile_c, name="b2")
        with pytest.raises(NotFound):
            await h.webhook(loop_id, "enable", agent_id=other)
        made = await h.webhook(loop_id, "enable", agent_id=agent)
        assert made["url"].startswith("https://hooks.example.org/v1/loop-webhooks/")
    finally:
        await h.stop()


async def test_badly_shaped_secret_is_not_found_without_a_database_query(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        for bad in ("", "a" * 42, "a" * 44, "a" * 42 + "=", "a" * 42 + "/", "a" * 42 + "+", "a" * 42 + "é",
                    "a" * 42 + "\n", None, 42):
            with counting_statements(h.store) as sql, pytest.raises(NotFound):
                await h.intake.resolve_webhook(bad)  # type: ignore[arg-type]
            assert sql == [], bad
        forged = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        with counting_statements(h.store) as sql, pytest.raises(NotFound):
            await h.intake.resolve_webhook(forged)  # well shaped: one indexed lookup, then 404
        assert len(sql) >= 1
    finally:
        await h.stop()


async def test_admission_rechecks_the_digest_so_a_rotated_secret_writes_nothing(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        secret = _secret((await h.webhook(loop_id, "enable"))["url"])
        resolved, digest = await h.intake.resolve_webhook(secret)
        await h.webhook(loop_id, "rotate")  # between the lookup and the admission
        with pytest.raises(NotFound):
            await h.intake.admit(loop_id=resolved, topic="webhook", payload={"a": 1}, event_id=None,
                                 source="webhook", secret_sha256=digest)
        assert await event_rows(h, loop_id) == []
        secret = _secret((await h.webhook(loop_id, "rotate"))["url"])
        resolved, digest = await h.intake.resolve_webhook(secret)
        ok = await h.intake.admit(loop_id=resolved, topic="webhook", payload={"a": 1}, event_id=None,
                                  delivery_ids=["d-1"], source="webhook", secret_sha256=digest)
        assert ok == {"status": "accepted", "event_id": "d-1", "duplicate": False}
        assert [(r.source, r.topic) for r in await event_rows(h, loop_id)] == [("webhook", "webhook")]
    finally:
        await h.stop()


@pytest.mark.parametrize("how", ["pause", "fail", "archive"])
async def test_secret_of_a_paused_failed_or_archived_loop_is_kept_and_answers_409(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any, how: str,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, _, loop_id = await counter_loop(h, compile_c)
        secret = _secret((await h.webhook(loop_id, "enable"))["url"])
        if how == "pause":
            await h.pause_loop(loop_id)
        elif how == "archive":
            await h.archive_agent(agent)
        else:
            async with h.store.tx() as tx:
                await loops.update_loop(tx, loop_id, state="failed", pause_reason=None)
        resolved, digest = await h.intake.resolve_webhook(secret)
        with pytest.raises(LoopNotActive):
            await h.intake.admit(loop_id=resolved, topic="webhook", payload={}, event_id=None, source="webhook",
                                 secret_sha256=digest)
        await h.delete_loop(loop_id)
        with pytest.raises(NotFound):
            await h.intake.resolve_webhook(secret)  # delete removes it
    finally:
        await h.stop()


async def test_buckets_global_then_per_loop_with_retry_after_on_the_monotonic_clock(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    limits = Limits(ingress_global_per_min=5, ingress_per_loop_per_min=3)
    config = Config(data_dir=tmp_path / "data", store_url=store_url, limits=limits)
    # the single-node limiter on both backends (a PostgreSQL node may share buckets through the store instead)
    h = Harness(config, clock=store_clock, sweeps=False, limiter=LocalLimiter(store_clock))
    await h.start()
    try:
        _, _, _, one = await counter_loop(h, compile_c)
        _, _, _, two = await counter_loop(h, compile_c, name="b2")
        for _ in range(3):
            await h.intake.take_loop(one)
        with pytest.raises(RateLimited) as refused:
            await h.intake.take_loop(one)
        assert refused.value.code == "rate_limited" and refused.value.details["retry_after_s"] == 20  # 3/min
        await h.intake.take_loop(two)  # keyed by Loop id
        for _ in range(5):
            await h.intake.take_global()
        with pytest.raises(RateLimited) as refused:
            await h.intake.take_global()
        assert refused.value.details["retry_after_s"] == 12
        store_clock.jump_wall(s=3600)  # a wall-clock jump refills nothing
        with pytest.raises(RateLimited):
            await h.intake.take_global()
        store_clock.advance(s=12)
        await h.intake.take_global()
        store_clock.advance(s=20)
        await h.intake.take_loop(one)
    finally:
        await h.stop()
