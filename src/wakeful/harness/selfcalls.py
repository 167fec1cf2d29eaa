"""The self-scoped host calls in the store: loop.state.put/get, agent.notify, loop.ack and loop.log.

harness.md §6, §9.5, §9.6; each is one transaction fenced by incarnation (§5).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from wakeful.harness import lifecycle as lc
from wakeful.harness import notices, wake_args
from wakeful.harness.budget import LimitWatch, WakeWindow, judge_wake
from wakeful.harness.checkpoint import (
    CheckpointTooLarge,
    check_fits_config,
    checked_checkpoint,
    checkpoint_value,
)
from wakeful.harness.config import Limits
from wakeful.harness.errors import HostCallRefused
from wakeful.harness.store import jsontext, loops, schema, sessions
from wakeful.harness.store.clock import STORE_MS_SQL
from wakeful.harness.store.core import Store, Tx
from wakeful.harness.store.each import json_list, json_rows
from wakeful.harness.store.loops import Loop
from wakeful.harness.store.reads import built_once
from wakeful.runtime import jsonval

__all__ = ["ACK_LANE", "NotifyOutcome", "ack", "get_state", "notify", "put_state", "write_log"]

E, L = schema.loop_event, schema.loop
ACK_LANE = "loop.ack"  # the acks' group-commit lane: beside the admissions' batches on PostgreSQL (Store.lane)


# §6 loop.state.put: fenced, limits, last write wins → {status: stored, bytes}
async def put_state(store: Store, loop_id: str, incarnation: int, args: Any) -> dict[str, Any]:
    state = wake_args.state_arg(args)

    if store.dialect == "postgresql":
        fast = await _put_state_single(store, loop_id, incarnation, state)
        if fast is not None:
            return {"status": "stored", "bytes": fast}

    async def work(tx: Tx) -> int:  # (every refusal before the write: a unit of the group commit on SQLite)
        if tx.dialect == "postgresql":
            stored = await _put_state_fenced(tx, loop_id, incarnation, state, store_url=store.url_text)
            if stored is not None:
                return stored
        row = await lc.fenced_loop(tx, loop_id, incarnation)
        try:
            value, size = checked_checkpoint(state, row.config, loop_id, incarnation)
        except CheckpointTooLarge as exc:
            raise HostCallRefused("checkpoint_too_large", str(exc)) from None
        except jsonval.JsonError as exc:
            raise HostCallRefused("invalid_arguments", f"state: {exc.message}") from None
        await loops.update_loop(tx, loop_id, checkpoint=value, checkpoint_bytes=size,
                                checkpoint_ms=await tx.now_ms())
        return size

    size = await store.write(work, key=loop_id)
    return {"status": "stored", "bytes": size}


# issue 16 (event → wake on PostgreSQL): the guest checkpoints an event before it acks it, so a state.put is on the
# path of the next event's wake; the fence and the write are one statement there (an UPDATE fenced in its WHERE,
# returning the config the checkpoint is checked against), instead of a locked read and then the UPDATE. A checkpoint
# the config refuses raises after that UPDATE: on PostgreSQL a state.put is a transaction of its own (Store.write),
# which the refusal rolls back. None: no row matched (retired or not active) — the caller's read says which.
async def _put_state_fenced(tx: Tx, loop_id: str, incarnation: int, state: Any, *, store_url: str = "",
                            config_is: str | None = None, checked: tuple[Any, int] | None = None) -> int | None:
    try:
        value, size = checkpoint_value(state) if checked is None else checked
    except CheckpointTooLarge as exc:
        raise HostCallRefused("checkpoint_too_large", str(exc)) from None
    except jsonval.JsonError as exc:
        raise HostCallRefused("invalid_arguments", f"state: {exc.message}") from None
    fence = [L.c.id == loop_id, L.c.incarnation == incarnation, L.c.state == lc.ACTIVE]
    if config_is is not None:  # checked against this config already (``_put_state_single``)
        fence.append(L.c.config == config_is)
    clock = tx.clock_column()
    now: Any
    if clock is None:
        now = sa.literal(await tx.now_ms(), sa.BigInteger)
    else:  # one store-clock reading for both columns (harness.md §3), joined to the row by its id
        read = sa.select(sa.literal(loop_id, sa.String).label("id"), clock).cte("wakeful_clock")
        now = read.c.wakeful_store_ms
        fence.append(L.c.id == read.c.id)
    stmt = (sa.update(L).where(*fence)
            .values(checkpoint=None if value is None else jsontext.encode(value), checkpoint_bytes=size, checkpoint_ms=now, updated_ms=now)
            .returning(L.c.config))
    row = (await tx.execute(stmt)).first()
    if row is None or config_is is not None:
        return None if row is None else size
    config = jsontext.decode(row.config) if row.config is not None else None
    try:
        check_fits_config(value, config, loop_id, incarnation)
    except CheckpointTooLarge as exc:
        raise HostCallRefused("checkpoint_too_large", str(exc)) from None
    _CONFIGS.keep((store_url, loop_id), (incarnation, row.config, config))
    return size


# issue 16 (event → wake on PostgreSQL): the guest's state.put of an event holds its Loop row until it commits, and
# the next event's admission waits for that row; as a transaction of its own it was BEGIN, the UPDATE and COMMIT,
# three round trips. The load config it is checked against is the row's, which a state.put reads back; kept from
# the last state.put of the incarnation (a small LRU bounded in entries and bytes, not a copy per Loop), the check
# runs before the write and the UPDATE is the only statement (``Store.single``: one round trip, committed as it
# runs), fenced also on that config being the row's still. No row (a new config, another incarnation, not active, or
# nothing kept): the transaction above decides as before.
async def _put_state_single(store: Store, loop_id: str, incarnation: int, state: Any) -> int | None:
    kept = _CONFIGS.get((store.url_text, loop_id))
    if kept is None or kept[0] != incarnation:
        return None
    try:
        checked = checkpoint_value(state)
        check_fits_config(checked[0], kept[2], loop_id, incarnation)
    except (CheckpointTooLarge, jsonval.JsonError):
        return None  # refused: the transaction says how, against the row's own config

    async def work(tx: Tx) -> int | None:
        return await _put_state_fenced(tx, loop_id, incarnation, state, config_is=kept[1], checked=checked)

    return await store.single(work)


class _Kept:
    """A small LRU: (store, Loop) → (incarnation, the load config's text, the load config) of its last state.put; at
    most ``size`` entries holding at most ``text_bytes`` characters of config text (a config is ≤ 16 KiB: without
    the byte bound a full cache could hold 16 MiB of text and its parsed copies)."""

    def __init__(self, size: int, text_bytes: int) -> None:
        self.size, self.text_bytes, self._held = size, text_bytes, 0
        self._items: OrderedDict[tuple[str, str], tuple[int, str, Any]] = OrderedDict()

    def get(self, key: tuple[str, str]) -> tuple[int, str, Any] | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def keep(self, key: tuple[str, str], value: tuple[int, str, Any]) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._held -= len(old[1])
        if len(value[1]) > self.text_bytes:
            return
        self._items[key] = value
        self._held += len(value[1])
        while len(self._items) > self.size or self._held > self.text_bytes:
            self._held -= len(self._items.popitem(last=False)[1][1])


_CONFIGS = _Kept(1024, 1 << 20)


# §6 loop.state.get {} → {state}
async def get_state(store: Store, loop_id: str, incarnation: int) -> dict[str, Any]:
    async with store.tx(readonly=True) as tx:
        row = await lc.fenced_loop(tx, loop_id, incarnation)
    return {"state": row.checkpoint}


@dataclass(frozen=True, slots=True)
class NotifyOutcome:
    """What the node does after the commit: answer, announce a message, end the incarnation."""

    result: dict[str, Any] | None
    refusal: HostCallRefused | None
    message_id: str | None
    paused: bool


# §9.5: one transaction — fence, duplicate, window, limited/exhausted, admit
async def notify(
    store: Store, watch: LimitWatch, limits: Limits, mono_ns: int, loop_id: str, incarnation: int, args: Any,
) -> NotifyOutcome:
    content, dedup_key = wake_args.notify_args(args)
    message_id = sessions.wake_message_id(loop_id, dedup_key)
    if store.dialect == "postgresql":
        admitted = await _notify_kept(store, watch, limits, mono_ns, loop_id, incarnation, content, dedup_key,
                                      message_id)
        if admitted is None:
            admitted = await _notify_single(store, watch, limits, mono_ns, loop_id, incarnation, content, dedup_key,
                                            message_id)
        if admitted is not None:
            return admitted

    async def work(tx: Tx) -> tuple[NotifyOutcome, WakeWindow | None]:  # (a group-commit unit on SQLite)
        # the message's existence comes with the locked row (one statement); on PostgreSQL that read's snapshot
        # may predate a message committed while it waited for the row lock, so a "no" is confirmed before a
        # refusal (a statement of its own, as before) and by the insert itself when the wake is admitted
        row, exists = await lc.fenced_loop_message(tx, loop_id, incarnation, message_id)
        duplicate = NotifyOutcome({"status": "duplicate", "message_id": message_id}, None, None, False), None
        if exists:
            return duplicate
        now = await tx.now_ms()
        window = WakeWindow(row.notify_window_start_ms, row.notify_window_count, row.notify_limited_since_ms)
        verdict, window = judge_wake(window, now, watch.elapsed_ns(loop_id, mono_ns), limits)
        if verdict != "admit" and await sessions.message_exists(tx, message_id):
            return duplicate
        counted = {"notify_window_start_ms": window.start_ms, "notify_window_count": window.count,
                   "notify_limited_since_ms": window.limited_since_ms}
        outcome = await _apply_verdict(tx, row, verdict, message_id, content, dedup_key, limits, counted)
        return outcome, (None if outcome == duplicate[0] else window)

    outcome, window = await store.write(work, key=loop_id)
    if window is not None:
        watch.record(loop_id, window.limited_since_ms, mono_ns)
    return outcome


# issue 16 (event → wake on PostgreSQL): a wake was BEGIN, the locked read of the Loop row, the message's insert with
# the row's UPDATE, and COMMIT — four round trips between the guest's call and the message on the session's stream.
# A wake that its read admits is now that read (no transaction: one statement) and one statement that commits as it
# runs (``Store.single``): the row locked while it still has the incarnation, the state and the window columns the
# verdict was taken on, the message inserted only then, and the row's UPDATE only when the message was inserted.
# The read's store-clock reading is the wake's (harness.md §3: one reading for the change). Anything else — a
# refusal, a duplicate, a window that is not admitting, or a row that changed since the read — returns None, and
# the locked transaction decides, as before (a message the read finds is a duplicate at once, as there).
async def _notify_single(
    store: Store, watch: LimitWatch, limits: Limits, mono_ns: int, loop_id: str, incarnation: int, content: str,
    dedup_key: str, message_id: str,
) -> NotifyOutcome | None:
    async with store.tx(readonly=True) as tx:
        row, exists = await loops.find_loop_locked(tx, loop_id, message_id=message_id, lock=False)
        now = await tx.now_ms()
    if row is None or row.incarnation != incarnation or row.state != lc.ACTIVE:
        return None
    if exists:  # committed: a duplicate, as the locked read would say
        return NotifyOutcome({"status": "duplicate", "message_id": message_id}, None, None, False)
    read = WakeWindow(row.notify_window_start_ms, row.notify_window_count, row.notify_limited_since_ms)
    verdict, window = judge_wake(read, now, watch.elapsed_ns(loop_id, mono_ns), limits)
    if verdict != "admit":
        return None

    message = sessions.message_of(now, session_id=row.session_id, agent_id=row.agent_id, group_id=row.group_id,
                                  kind="loop", content=content, message_id=message_id, loop_id=row.id,
                                  loop_name=row.name, incarnation=row.incarnation, dedup_key=dedup_key)
    params = {f"m_{n}": v for n, v in sessions.inserted_values(message).items()}
    params.update(l_id=row.id, l_inc=incarnation, r_start=read.start_ms, r_count=read.count,
                  r_limited=read.limited_since_ms, now=now, w_start=window.start_ms, w_count=window.count,
                  w_limited=window.limited_since_ms)

    async def work(tx: Tx) -> bool:
        if (await tx.execute(_NOTIFY_SINGLE, params)).scalar_one() != 1:
            return False
        sessions.ring_after_commit(tx, message)
        return True

    if not await store.single(work):
        return None
    watch.record(loop_id, window.limited_since_ms, mono_ns)
    if store.clock is None:  # (the kept wake's statement reads the store's own clock)
        _WAKES.keep((store.url_text, loop_id), _KeptWake(incarnation, row.session_id, row.agent_id, row.group_id,
                                                         row.name, window))
    return NotifyOutcome({"status": "queued", "message_id": message_id}, None, message_id, False)


# issue 16 (event → wake p50 on PostgreSQL): a wake was two round trips — the unlocked read above (the Loop row, the
# store clock, the message's existence), then the single statement. What the read gives is, after the first wake of
# an incarnation, known: the row's session, agent, group and name, and its window as the last wake of this node
# wrote it. Kept (a bounded LRU), the next wake is one statement: it reads the store clock once, locks the row only
# while it still has the incarnation, state and kept window, and admits only where the verdict is "admit" whatever
# the clock reads — inside the kept window with room left (the window counted on), or past it (rolled) with the
# window before not saturated (a new window from the clock's reading, count 1, no limiting mark): ``judge_wake``'s
# admissions, the rest (a refusal to make, a saturated window that rolls) left to the read path. The message is
# inserted only then, its time the clock's reading, the row updated only when it was inserted. A statement that
# writes nothing (any of those, a duplicate, a row changed by anything else) drops what was kept and the read path
# decides as before (one round trip more, once).
@dataclass(frozen=True, slots=True)
class _KeptWake:
    incarnation: int
    session_id: str
    agent_id: str
    group_id: str
    name: str
    window: WakeWindow  # as the last wake of this node wrote it


class _KeptWakes:
    """(store, Loop) → its last wake on this node (``_KeptWake``): at most ``size`` entries, least recent dropped."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], _KeptWake] = OrderedDict()

    def get(self, key: tuple[str, str]) -> _KeptWake | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def keep(self, key: tuple[str, str], value: _KeptWake) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def drop(self, key: tuple[str, str]) -> None:
        self._items.pop(key, None)


_WAKES = _KeptWakes(4096)


async def _notify_kept(
    store: Store, watch: LimitWatch, limits: Limits, mono_ns: int, loop_id: str, incarnation: int, content: str,
    dedup_key: str, message_id: str,
) -> NotifyOutcome | None:
    key = (store.url_text, loop_id)
    kept = _WAKES.get(key)
    if kept is None or kept.incarnation != incarnation or store.clock is not None or not store.singles:
        return None
    read, per = kept.window, limits.notify_per_window
    span = limits.notify_window_s * 1000
    message = sessions.message_of(0, session_id=kept.session_id, agent_id=kept.agent_id, group_id=kept.group_id,
                                  kind="loop", content=content, message_id=message_id, loop_id=loop_id,
                                  loop_name=kept.name, incarnation=incarnation, dedup_key=dedup_key)
    params: dict[str, Any] = {f"m_{n}": v for n, v in sessions.inserted_values(message).items() if n != "created_ms"}
    lo = read.start_ms if read.start_ms is not None else 0
    params.update(l_id=loop_id, l_inc=incarnation, r_start=read.start_ms, r_count=read.count,
                  r_limited=read.limited_since_ms, lo=lo, hi=lo + span if read.start_ms is not None else lo,
                  in_ok=read.count < per, roll_ok=read.count <= per)
    _WAKES.drop(key)  # (kept again below once written: a failure leaves nothing stale behind)
    answer: list[Any] = []

    async def work(tx: Tx) -> bool:
        row = (await tx.execute(_NOTIFY_KEPT, params)).one()
        if row.n != 1:
            return False
        answer.append(row)
        sessions.ring_after_commit(tx, replace(message, created_ms=int(row.now)))
        return True

    if not await store.single(work):
        return None
    now, inside = int(answer[0].now), bool(answer[0].inside)
    window = (WakeWindow(read.start_ms, read.count + 1, read.limited_since_ms) if inside
              else WakeWindow(now, 1, None))
    watch.record(loop_id, window.limited_since_ms, mono_ns)
    _WAKES.keep(key, replace(kept, window=window))
    return NotifyOutcome({"status": "queued", "message_id": message_id}, None, message_id, False)


def _notify_kept_stmt() -> sa.Select[Any]:
    """``_notify_kept``'s statement, built once (parameters: ``m_<column>`` the message but its time, ``l_`` the Loop
    and its fence, ``r_`` the kept window, ``lo``/``hi`` that window's span (``lo = hi``: no window), ``in_ok`` /
    ``roll_ok`` whether a wake inside it / after it is admitted)."""
    P, M, big = sa.bindparam, schema.message, sa.BigInteger
    clock = sa.select(sa.literal_column(STORE_MS_SQL, big).label("now")).cte("wakeful_clock")
    now = sa.select(clock.c.now).scalar_subquery()
    inside = sa.and_(now >= P("lo", type_=big), now < P("hi", type_=big))
    admit = sa.or_(sa.and_(inside, P("in_ok", type_=sa.Boolean)), sa.and_(sa.not_(inside), P("roll_ok", type_=sa.Boolean)))
    held = (sa.select(L.c.id).where(
        L.c.id == P("l_id", type_=sa.String), L.c.incarnation == P("l_inc", type_=big), L.c.state == lc.ACTIVE,
        L.c.notify_window_start_ms.is_not_distinct_from(P("r_start", type_=big)),
        L.c.notify_window_count == P("r_count", type_=sa.Integer),
        L.c.notify_limited_since_ms.is_not_distinct_from(P("r_limited", type_=big)), admit,
    ).with_for_update().cte("wakeful_guard"))
    names = list(sessions.INSERTED)
    row = sa.select(*((now.label(n) if n == "created_ms" else P(f"m_{n}", type_=M.c[n].type).label(n))
                      for n in names)).where(sa.exists(sa.select(held.c.id)))
    ins = (pg_dialect.insert(M).from_select(names, row).on_conflict_do_nothing().returning(M.c.id)
           .cte("wakeful_inserted"))
    upd = (sa.update(L).where(L.c.id == P("l_id", type_=sa.String), sa.exists(sa.select(ins.c.id)))
           .values(updated_ms=now, last_notified_ms=now, notified_since_activation=True,
                   notify_window_start_ms=sa.case((inside, P("lo", type_=big)), else_=now),
                   notify_window_count=sa.case((inside, P("r_count", type_=sa.Integer) + 1), else_=1),
                   notify_limited_since_ms=sa.case((inside, P("r_limited", type_=big)), else_=sa.null()))
           .cte("wakeful_along"))
    return sa.select(sa.select(sa.func.count()).select_from(ins).scalar_subquery().label("n"), now.label("now"),
                     inside.label("inside")).add_cte(upd).add_cte(held)


_NOTIFY_KEPT = _notify_kept_stmt()


def _notify_single_stmt() -> sa.Select[Any]:
    """``_notify_single``'s statement, built once (its parameters: ``m_<column>`` the message, ``l_`` the Loop and its
    fence, ``r_`` the window read, ``w_`` the window written, ``now``)."""
    P, M, big = sa.bindparam, schema.message, sa.BigInteger
    held = (sa.select(L.c.id).where(
        L.c.id == P("l_id", type_=sa.String), L.c.incarnation == P("l_inc", type_=big), L.c.state == lc.ACTIVE,
        L.c.notify_window_start_ms.is_not_distinct_from(P("r_start", type_=big)),
        L.c.notify_window_count == P("r_count", type_=sa.Integer),
        L.c.notify_limited_since_ms.is_not_distinct_from(P("r_limited", type_=big)),
    ).with_for_update().cte("wakeful_guard"))
    names = list(sessions.INSERTED)
    row = sa.select(*(P(f"m_{n}", type_=M.c[n].type).label(n) for n in names)).where(sa.exists(sa.select(held.c.id)))
    ins = (pg_dialect.insert(M).from_select(names, row).on_conflict_do_nothing().returning(M.c.id)
           .cte("wakeful_inserted"))
    upd = (sa.update(L).where(L.c.id == P("l_id", type_=sa.String), sa.exists(sa.select(ins.c.id)))
           .values(updated_ms=P("now", type_=big), last_notified_ms=P("now", type_=big), notified_since_activation=True,
                   notify_window_start_ms=P("w_start", type_=big), notify_window_count=P("w_count", type_=sa.Integer),
                   notify_limited_since_ms=P("w_limited", type_=big))
           .cte("wakeful_along"))
    return sa.select(sa.select(sa.func.count()).select_from(ins).scalar_subquery().label("n")).add_cte(upd).add_cte(held)


_NOTIFY_SINGLE = _notify_single_stmt()


# ``counted``: the wake window's columns after this call, written by the one UPDATE of the Loop row each verdict
# makes (issue 16: one statement fewer per wake than a window update followed by the verdict's own)
async def _apply_verdict(
    tx: Tx, row: Loop, verdict: str, message_id: str, content: str, dedup_key: str, limits: Limits,
    counted: dict[str, Any],
) -> NotifyOutcome:
    if verdict == "limited":
        await loops.update_loop(tx, row.id, **counted)
        refusal = HostCallRefused("rate_limited", f"{limits.notify_per_window} wakes per window already")
        return NotifyOutcome(None, refusal, None, False)
    if verdict == "exhausted":
        # §4.2 row 8 in the same transaction: paused(budget) and the budget notice
        await lc.move(tx, row, lc.PAUSED, "budget", actor="system", detail="wakes rate-limited for an hour",
                      object_id=None, **counted)
        text = notices.budget(row.name, row.id, limits.notify_per_window, limits.notify_window_s // 60)
        notice = await lc.write_notice(tx, row, "budget", text)
        refusal = HostCallRefused("budget_exhausted", "the Loop is paused(budget)")
        return NotifyOutcome(None, refusal, notice, True)
    # issue 16: the Loop row's UPDATE goes with the message's insert (one statement on PostgreSQL), made only when
    # the message is inserted
    counted_too = await loops.loop_update(tx, row.id, last_notified_ms=await tx.now_ms(),
                                          notified_since_activation=True, **counted)
    inserted = await sessions.insert_message(
        tx, session_id=row.session_id, agent_id=row.agent_id, group_id=row.group_id, kind="loop",
        content=content, message_id=message_id, loop_id=row.id, loop_name=row.name,
        incarnation=row.incarnation, dedup_key=dedup_key, along=counted_too,
    )
    if inserted.status == "duplicate":  # committed meanwhile (see notify): nothing counted, nothing written
        return NotifyOutcome({"status": "duplicate", "message_id": message_id}, None, None, False)
    return NotifyOutcome({"status": "queued", "message_id": message_id}, None, message_id, False)


# §9.6 loop.ack: fenced; acked → duplicate; unknown or discarded → unknown_event
async def ack(store: Store, loop_id: str, incarnation: int, args: Any) -> dict[str, Any]:
    event_id = wake_args.ack_event_id(args)
    lane = store.lane(ACK_LANE)
    if store.singles and lane.idle and await lane.single(lambda tx: _ack_single(tx, loop_id, incarnation, event_id)):
        return {"status": "acked", "event_id": event_id, "duplicate": False}
    answer: dict[str, Any] = await store.grouped_batch("loop.ack", _Ack(loop_id, incarnation, event_id), _ack_many,
                                                     lock_of=_ack_loop, lane=ACK_LANE)
    return answer


# issue 16 (event → wake on PostgreSQL): the guest takes its next event only after the ack of the one before has
# committed, so that ack is on the next wake's path; as a batch unit alone it is BEGIN, the fenced share of the Loop
# row with the clock, the UPDATE and COMMIT (four round trips). On an idle ack lane it is one statement that commits
# as it runs (``GroupCommit.single``, which keeps the lane busy meanwhile so concurrent acks still batch): the
# UPDATE of the pending event, made only while its Loop row (shared, as by the batch) has the acking incarnation and
# is active. True: acked. Anything else (a refusal, a duplicate, an unknown event) wrote nothing, and the batch unit
# answers it as before. Built once per clock kind (the store's, or an injected one as a parameter).
async def _ack_single(tx: Tx, loop_id: str, incarnation: int, event_id: str) -> bool:
    injected = tx.clock_column() is None

    def build() -> Any:
        fence = tx.for_share(sa.select(L.c.id).where(
            L.c.id == sa.bindparam("loop"), L.c.incarnation == sa.bindparam("inc"), L.c.state == lc.ACTIVE,
        )).cte("wakeful_fence")
        now: Any = (sa.bindparam("ack_ms", type_=sa.BigInteger) if injected
                    else sa.literal_column(STORE_MS_SQL, sa.BigInteger))
        return sa.update(E).where(
            E.c.loop_id == sa.bindparam("loop"), E.c.event_id == sa.bindparam("event"), E.c.status == "pending",
            sa.exists(sa.select(fence.c.id)),
        ).values(status="acked", acked_ms=now, acked_incarnation=sa.bindparam("inc")).returning(E.c.event_id)

    stmt = built_once("selfcalls.ack.single+ms" if injected else "selfcalls.ack.single", build)
    params: dict[str, Any] = {"loop": loop_id, "inc": incarnation, "event": event_id}
    if injected:
        params["ack_ms"] = await tx.now_ms()
    return (await tx.execute(stmt, params)).first() is not None


@dataclass(frozen=True, slots=True)
class _Ack:
    loop_id: str
    incarnation: int
    event_id: str


# issue 16: the acks waiting together are one unit of the group commit with two statements for the whole batch
# (the Loop rows fenced and shared in id order with the store clock, then one UPDATE of the pending events that
# returns the ones it acked; a third reads the statuses of the rest only when some ack found no pending event),
# each answered as if alone: an ack of an event acked earlier in the same batch is a duplicate, a refused ack
# writes nothing. (Was four statements: the clock and a read of the statuses before the UPDATE — on PostgreSQL
# each a round trip on the event → wake path, where the guest's ack precedes its next event.) The rows are shared,
# not locked: an admission of the same Loop shares them too (``Intake._lock_loops``), a transition's UPDATE waits.
# On PostgreSQL the lists are array parameters, so each statement has one text (and prepared statement) whatever
# the batch's size.
async def _ack_many(tx: Tx, acks: list[_Ack]) -> list[dict[str, Any] | HostCallRefused]:
    loop_ids = sorted({a.loop_id for a in acks})
    clock = tx.clock_column()
    if tx.dialect == "postgresql":
        found = list(await tx.execute(_ack_lock_pg(tx, clock), {"ids": loop_ids}))
    else:
        lock = sa.select(*_ACK_LOCK_COLUMNS).where(L.c.id.in_(loop_ids)).order_by(L.c.id)
        found = list(await tx.execute(lock if clock is None else lock.add_columns(clock)))
    if found:
        tx.seed_now(found[0])
    rows = {r.id: r for r in found}
    fenced: dict[tuple[str, str], int] = {}  # each fenced event → the incarnation acking it
    for a in acks:
        if _fence_refusal(rows.get(a.loop_id), a) is None:
            fenced.setdefault((a.loop_id, a.event_id), a.incarnation)
    acked = await _ack_pending(tx, fenced) if fenced else set()
    status: dict[tuple[str, str], str] = {pair: "pending" for pair in acked}  # (as read before the UPDATE)
    rest = sorted(set(fenced) - acked)
    if rest:  # acked earlier, discarded or unknown: the answer says which (nothing to write)
        status.update(await _statuses(tx, rest))
    return _ack_answers(acks, rows, status)


def _ack_answers(acks: list[_Ack], rows: dict[str, Any],
                 status: dict[tuple[str, str], str]) -> list[dict[str, Any] | HostCallRefused]:
    """Each ack's answer as if alone, from the fenced rows and the events' statuses."""
    answers: list[dict[str, Any] | HostCallRefused] = []
    for a in acks:
        refusal = _fence_refusal(rows.get(a.loop_id), a)
        now = status.get((a.loop_id, a.event_id))
        if refusal is not None:
            answers.append(refusal)
        elif now is None or now == "discarded":
            answers.append(HostCallRefused("unknown_event", f"no pending event {a.event_id!r}"))
        else:
            answers.append({"status": "acked", "event_id": a.event_id, "duplicate": now == "acked"})
            status[(a.loop_id, a.event_id)] = "acked"
    return answers


_TEXTS = pg_dialect.ARRAY(sa.String)
_ACK_LOCK_COLUMNS = (L.c.id, L.c.incarnation, L.c.state)
# issue 16 (ingest on PostgreSQL): an ack batch's statements are built once (``reads.built_once``) and run with their
# bind values — built per batch, they and the cache keys SQLAlchemy derives from each new statement object were ~4 %
# of the node's CPU in the bench's ingest step


def _ack_lock_pg(tx: Tx, clock: sa.ColumnElement[Any] | None) -> Any:
    """The batch's Loop rows shared in id order (ids: the array parameter ``ids``), with the store clock or not."""
    def build() -> Any:
        lock = sa.select(*_ACK_LOCK_COLUMNS).where(L.c.id == sa.any_(sa.bindparam("ids", type_=_TEXTS))).order_by(L.c.id)
        return tx.for_share(lock if clock is None else lock.add_columns(clock))

    return built_once("selfcalls.ack.lock" if clock is None else "selfcalls.ack.lock+clock", build)


def _pairs_table(name: str, incarnations: bool = False) -> Any:
    """PostgreSQL: (Loop id, event id[, incarnation]) triples as a derived table ``l, e[, i]`` of the array
    parameters ``<name>_loops``, ``<name>_events`` (and ``<name>_incs``): ``_pairs_params`` gives their values."""
    columns: list[Any] = [sa.bindparam(f"{name}_loops", type_=_TEXTS), sa.bindparam(f"{name}_events", type_=_TEXTS)]
    labels = ["l", "e"]
    if incarnations:
        columns.append(sa.bindparam(f"{name}_incs", type_=pg_dialect.ARRAY(sa.BigInteger)))
        labels.append("i")
    return sa.func.unnest(*columns).table_valued(*labels).render_derived(name=name, with_types=False)


def _pairs_params(name: str, pairs: list[tuple[str, str]], incarnations: list[int] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {f"{name}_loops": [p[0] for p in pairs], f"{name}_events": [p[1] for p in pairs]}
    if incarnations is not None:
        params[f"{name}_incs"] = incarnations
    return params


def _ack_pending_pg() -> Any:
    def build() -> Any:
        w = _pairs_table("w", incarnations=True)
        return sa.update(E).where(E.c.loop_id == w.c.l, E.c.event_id == w.c.e).values(
            acked_incarnation=w.c.i, status="acked", acked_ms=sa.bindparam("ack_ms", type_=sa.BigInteger),
        ).where(E.c.status == "pending").returning(E.c.loop_id, E.c.event_id)

    return built_once("selfcalls.ack.pending", build)


async def _ack_pending(tx: Tx, fenced: dict[tuple[str, str], int]) -> set[tuple[str, str]]:
    """The fenced acks' events that were pending, acked by one UPDATE (at the acking incarnation) → their pairs."""
    keys = sorted(fenced)
    if tx.dialect == "postgresql":
        params = {**_pairs_params("w", keys, [fenced[k] for k in keys]), "ack_ms": await tx.now_ms()}
        return {(r.loop_id, r.event_id) for r in await tx.execute(_ack_pending_pg(), params)}
    incarnations = set(fenced.values())
    params = {"keys": json_list(keys), "ack_ms": await tx.now_ms()}
    if len(incarnations) == 1:  # (the statement built once, the incarnation a parameter)
        stmt = _ACK_SQLITE
        params["inc"] = next(iter(incarnations))
    else:
        stmt = _ACK_SQLITE.values(acked_incarnation=sa.case(
            {loop_id: inc for (loop_id, _), inc in fenced.items()}, value=E.c.loop_id))
    return {(r.loop_id, r.event_id) for r in await tx.execute(stmt, params)}


async def _statuses(tx: Tx, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The stored status of each (Loop id, event id) pair that has an event."""
    columns = (E.c.loop_id, E.c.event_id, E.c.status)
    if tx.dialect == "postgresql":
        def build() -> Any:
            u = _pairs_table("u")
            return sa.select(*columns).select_from(E.join(u, sa.and_(E.c.loop_id == u.c.l, E.c.event_id == u.c.e)))

        stmt = built_once("selfcalls.ack.statuses", build)
        rows = await tx.execute(stmt, _pairs_params("u", pairs))
    else:
        rows = await tx.execute(_STATUSES_SQLITE, {"pairs": json_list(pairs)})
    return {(r.loop_id, r.event_id): r.status for r in rows}


# SQLite: the batch's pairs as one JSON parameter (``store.each``: a row value IN a VALUES list scanned every stored
# event, per ack batch)
_PAIR = sa.tuple_(E.c.loop_id, E.c.event_id)
_ACK_SQLITE = sa.update(E).where(_PAIR.in_(json_rows("keys", 0, 1)), E.c.status == "pending").values(
    status="acked", acked_ms=sa.bindparam("ack_ms", type_=sa.BigInteger),
    acked_incarnation=sa.bindparam("inc", type_=sa.BigInteger)).returning(E.c.loop_id, E.c.event_id)
_STATUSES_SQLITE = sa.select(E.c.loop_id, E.c.event_id, E.c.status).where(_PAIR.in_(json_rows("pairs", 0, 1)))


def _ack_loop(a: _Ack) -> str:
    return a.loop_id


def _fence_refusal(row: Any, a: _Ack) -> HostCallRefused | None:
    """``lifecycle.fenced_loop``'s refusals, from the row read for the batch."""
    if row is None or row.incarnation != a.incarnation:
        return HostCallRefused("stale_incarnation", f"incarnation {a.incarnation} of {a.loop_id} is retired")
    if row.state != lc.ACTIVE:
        return HostCallRefused("not_active", f"Loop {a.loop_id} is {row.state}")
    return None


# §9.6 loop.log: ≤ 1024 chars, stored with source "loop.log" (the 10/s bound is kept by the dispatcher)
async def write_log(store: Store, loop_id: str, incarnation: int, args: Any) -> dict[str, Any]:
    text = wake_args.log_text(args)
    async with store.tx() as tx:
        await lc.fenced_loop(tx, loop_id, incarnation)
        await lc.append_log(tx, loop_id, incarnation, "loop.log", text)
    return {"status": "logged"}
