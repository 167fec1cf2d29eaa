"""Issue 18: the line table's lookups and its cached JSON form (build/lines.py)."""

from __future__ import annotations

from wakeful.build.lines import LineTable, Row, shown_name

TABLE = LineTable("ab" * 32, (Row(".text", 0, 16, "main.c", 3), Row(".text", 16, 40, "main.c", 9, "wf_str_eq"),
                              Row("spinfoam.main", 0, 8, "lib/x.c", 2)),
                  (("helper", ".text", 8), ("main", "spinfoam.main", 0)))


def test_lines_lookup_by_fault_function_and_pc() -> None:
    assert TABLE.at_fault("helper", 0) == Row(".text", 0, 16, "main.c", 3)
    assert TABLE.at_fault("helper", 1) == Row(".text", 16, 40, "main.c", 9, "wf_str_eq")
    assert TABLE.at_fault("helper", 4) is None  # past the last row of .text
    assert TABLE.at_fault("main", 0) == Row("spinfoam.main", 0, 8, "lib/x.c", 2)
    assert TABLE.at_fault("main", None) is None and TABLE.at_fault(None, 0) is None
    assert TABLE.fault_text("boom", "helper", 2) == "main.c:9: boom (in wf_str_eq)"
    assert TABLE.fault_text("boom", "main", 0) == "lib/x.c:2: boom"
    assert TABLE.fault_text("boom", "main", 5) == "boom"


def test_lines_json_round_trip_and_unknown_format() -> None:
    assert LineTable.from_json(TABLE.to_json()) == TABLE
    assert LineTable.from_json({**TABLE.to_json(), "format": 99}) is None


def test_lines_file_names_shown_like_diagnostics() -> None:
    assert shown_name("src", "main.c") == "main.c"
    assert shown_name("src/lib", "x.c") == "lib/x.c"
    assert shown_name("sdk", "wakeful.h") == "<sdk>/wakeful.h"
    assert shown_name("", "/etc/passwd") == "<host>/passwd"  # a #line naming a host path
    assert shown_name("src", "../../etc/shadow") == "<host>/shadow"
