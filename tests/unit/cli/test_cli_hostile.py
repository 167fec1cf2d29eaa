"""Hostile files through the faces: mutated ELFs and replies files end in a typed error, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakeful.cli.main import main

Compile = Callable[..., bytes]
SOURCE = r"""#include <wakeful.h>
static char buf[16];
SF_MAIN sf_i64 main(void) { sf_log("hi"); memset(buf, 1, 8); return buf[3]; }
"""


@pytest.fixture(scope="module")
def elf(compile_c: Compile) -> bytes:
    return compile_c(SOURCE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_elf_is_checked_or_refused(
    elf: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    blob = bytearray(elf)
    for _ in range(data.draw(st.integers(1, 8))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "m.o"
    path.write_bytes(bytes(blob))
    for argv in (["build", "--check", str(path), "--json"], ["vm", "dump", str(path), "--json"]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1), (argv, err)
        doc = json.loads(out)
        assert ("error" in doc) == (code == 1)
        if code == 1:
            assert doc["error"] == "invalid_artifact" and "internal" not in err


@pytest.mark.parametrize(
    "blob",
    [b"", b"\x7fELF", b"\x7fELF" + b"\xff" * 200, b"\x00" * 70_000, b"MZ" + b"\x00" * 100],
)
def test_garbage_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], blob: bytes) -> None:
    path = tmp_path / "g.o"
    path.write_bytes(blob)
    assert main(["build", "--check", str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "invalid_artifact"
    assert main(["run", str(path), "--json", "--timeout", "1"]) == 1
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert record["type"] == "final" and record["state"] == "refused"


def test_hostile_replies_and_events(tmp_path: Path, elf: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "p.o"
    prog.write_bytes(elf)
    replies = tmp_path / "r.json"
    for text in ("[" * 200_000, '{"a": [{"result": 1}], "a": 5}', "\udcff", '{"t": [{"result": Infinity}]}'):
        replies.write_text(text, errors="surrogateescape")
        assert main(["run", str(prog), "--host-replies", str(replies), "--json"]) == 2
        assert json.loads(capsys.readouterr().out)["error"] == "invalid_request"
    big = "t=" + json.dumps({"x": "y" * 20_000})
    assert main(["run", str(prog), "--event", big, "--json"]) == 2
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["type"] == "error" and last["error"] == "invalid_request" and "refused" in last["message"]
