"""issue 16 (ingest on SQLite): the admission batch's figures read costs the same however many events its Loops
already hold. Counted in SQLite virtual-machine steps (``set_progress_handler`` every instruction) on a real SQLite
file: the read for a batch whose Loop holds 10 acked events and for one whose Loop holds 400. The previous
statement found the batch's (Loop, event) pairs by a scan of every stored event and each Loop's newest
received_ms by a ``GROUP BY`` walking all of its acked events: both grew with the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from wakeful.harness import intake
from wakeful.harness.store import schema

E, L = schema.loop_event, schema.loop


def _steps(db: Path, acked: int) -> tuple[int, list[Any]]:
    engine = sa.create_engine(f"sqlite:///{db}")
    schema.metadata.create_all(engine, tables=[L, E])
    with engine.begin() as conn:
        conn.execute(sa.text("PRAGMA foreign_keys=OFF"))
        conn.execute(sa.insert(E), [
            {"loop_id": loop_id, "event_id": f"e{n}", "group_id": "g", "topic": "t", "payload": "1",
             "payload_sha256": "0" * 64, "envelope_bytes": 10, "status": "acked", "source": "api",
             "received_ms": 1_000 + n} for loop_id in ("a", "b") for n in range(acked)])
    params = {"pairs": json.dumps([["a", "new"], ["b", "e1"]]), "live": json.dumps(["a", "b"]), "groups": ["g"]}
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.set_progress_handler(count, 1)
        rows = list(conn.execute(intake._FIGURES, params))
        raw.set_progress_handler(None, 1)
    engine.dispose()
    return steps[0], rows


def test_the_admission_figures_read_costs_the_same_however_many_events_are_stored(tmp_path: Path) -> None:
    few, few_rows = _steps(tmp_path / "few.db", 10)
    many, many_rows = _steps(tmp_path / "many.db", 400)
    # the answers: (b, e1) known; each Loop's newest received_ms
    assert [(r.kind, r.loop_id, r.event_id, r.n) for r in few_rows] == [
        (0, "b", "e1", 0), (3, "a", None, 1_009), (3, "b", None, 1_009)]
    assert [(r.kind, r.loop_id, r.n) for r in many_rows] == [(0, "b", 0), (3, "a", 1_399), (3, "b", 1_399)]
    assert many - few < 100, (few, many)  # (the previous statement: 800 stored events more to walk, thousands)
