"""Migration 6: each group's count of active Loops kept by the store, ``loop_active_count`` (issue 16 — frozen:
the version-6 table and triggers, never edited; later changes are new migrations).

The quota admission (harness.md §15) counted the group's active Loops under the group's quota lock with
``count(*) … WHERE group_id = ? AND state = 'active'``: a read of every Loop of the group, once per batch of
creates and serialised by the lock — 10.9 ms a batch at N = 10,000 on PostgreSQL, so creates slowed as the store
filled. Here the store keeps the count: triggers on ``loop`` append a signed row (+1 / −1, per group) for every
insert, delete, state change or group change that enters or leaves ``active``, in the transaction that writes the
Loop, so every path that changes a Loop (creates, lifecycle batches, operator actions, restores) keeps it and it
commits or rolls back with the change. The group's count is the sum of its rows; the admission folds them into
one row under the group's lock (``quota.group_active``). The fill below runs with ``loop`` locked against writes
(the triggers are created in the same transaction), so the count starts exact.

PostgreSQL: statement-level triggers for INSERT and DELETE (one row per group per statement, from the transition
table), a row trigger for ``UPDATE OF state, group_id`` that fires only when the active-ness or the group changes
(the ``WHEN`` is evaluated without calling the function: a checkpoint write calls nothing). SQLite: row triggers
with the same conditions.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

_TABLE = (
    "CREATE TABLE loop_active_count (group_id VARCHAR(40) NOT NULL, n BIGINT NOT NULL)",
    "CREATE INDEX loop_active_count_group ON loop_active_count (group_id)",
)
_FILL = ("INSERT INTO loop_active_count (group_id, n) "
         "SELECT group_id, count(*) FROM loop WHERE state = 'active' GROUP BY group_id")
# the active-ness or the group changed (a paused → failed move, a checkpoint or an attach calls nothing)
_MOVED = "((OLD.state = 'active') <> (NEW.state = 'active') OR OLD.group_id <> NEW.group_id)"

_PG = (
    "LOCK TABLE loop IN SHARE ROW EXCLUSIVE MODE",  # no Loop written between the fill and the triggers
    *_TABLE,
    _FILL,
    """CREATE FUNCTION wakeful_loop_active_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO loop_active_count (group_id, n)
        SELECT group_id, count(*) FROM wakeful_new WHERE state = 'active' GROUP BY group_id;
    RETURN NULL;
END $$""",
    """CREATE FUNCTION wakeful_loop_active_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO loop_active_count (group_id, n)
        SELECT group_id, -count(*) FROM wakeful_old WHERE state = 'active' GROUP BY group_id;
    RETURN NULL;
END $$""",
    """CREATE FUNCTION wakeful_loop_active_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state = 'active' THEN
        INSERT INTO loop_active_count (group_id, n) VALUES (OLD.group_id, -1);
    END IF;
    IF NEW.state = 'active' THEN
        INSERT INTO loop_active_count (group_id, n) VALUES (NEW.group_id, 1);
    END IF;
    RETURN NULL;
END $$""",
    "CREATE TRIGGER loop_active_inserted AFTER INSERT ON loop REFERENCING NEW TABLE AS wakeful_new "
    "FOR EACH STATEMENT EXECUTE FUNCTION wakeful_loop_active_inserted()",
    "CREATE TRIGGER loop_active_deleted AFTER DELETE ON loop REFERENCING OLD TABLE AS wakeful_old "
    "FOR EACH STATEMENT EXECUTE FUNCTION wakeful_loop_active_deleted()",
    f"CREATE TRIGGER loop_active_moved AFTER UPDATE OF state, group_id ON loop FOR EACH ROW WHEN {_MOVED} "
    "EXECUTE FUNCTION wakeful_loop_active_moved()",
)

_SQLITE = (
    *_TABLE,
    _FILL,
    """CREATE TRIGGER loop_active_inserted AFTER INSERT ON loop WHEN NEW.state = 'active' BEGIN
    INSERT INTO loop_active_count (group_id, n) VALUES (NEW.group_id, 1);
END""",
    """CREATE TRIGGER loop_active_deleted AFTER DELETE ON loop WHEN OLD.state = 'active' BEGIN
    INSERT INTO loop_active_count (group_id, n) VALUES (OLD.group_id, -1);
END""",
    f"""CREATE TRIGGER loop_active_moved AFTER UPDATE OF state, group_id ON loop WHEN {_MOVED} BEGIN
    INSERT INTO loop_active_count (group_id, n) SELECT OLD.group_id, -1 WHERE OLD.state = 'active';
    INSERT INTO loop_active_count (group_id, n) SELECT NEW.group_id, 1 WHERE NEW.state = 'active';
END""",
)


def upgrade(conn: Connection) -> None:
    for statement in _PG if conn.dialect.name == "postgresql" else _SQLITE:
        conn.execute(sa.text(statement))
