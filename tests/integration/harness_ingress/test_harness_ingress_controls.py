"""issue 19: names are one line of text. A C0 or C1 control character (newline, ESC, DEL, NEL) in a group, agent
or Loop name, a session title or a key label is refused by the store with a typed ``invalid_request`` naming the
field, so the CLI, HTTP, MCP and embedding faces refuse it the same way; nothing is written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support.ingress_harness import counter_loop
from support.loops_harness import started

from wakeful.cli.main import main
from wakeful.harness.errors import InvalidRequest

CONTROLS = ["two\nlines", "esc\x1b[31m", "del\x7f", "nel\x85", "tab\t"]


async def test_control_characters_in_names_are_refused(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group_id, agent_id, session_id, loop_id = await counter_loop(h, compile_c)
        art = (await h.get_loop(loop_id))["artifact_sha256"]
        for bad in CONTROLS:
            cases: list[tuple[str, Callable[[str], Awaitable[Any]]]] = [
                ("name", lambda text: h.create_group(text)),
                ("name", lambda text: h.create_agent(group_id, text)),
                ("title", lambda text: h.create_session(agent_id, text)),
                ("label", lambda text: h.create_key("group", group_id=group_id, label=text)),
                ("name", lambda text: h.create_loop(agent_id=agent_id, session_id=session_id,
                                                    artifact=f"sha256:{art}", name=text)),
            ]
            for field, call in cases:
                with pytest.raises(InvalidRequest) as refused:
                    await call(bad)
                    pytest.fail(f"{field} {bad!r}: accepted")
                assert refused.value.details.get("field") == field
                assert "control characters" in refused.value.message
        assert len(await h.list_loops()) == 1
        await h.create_group("plain name, ünïcode ok")  # printable text stays accepted
    finally:
        await h.stop()


def test_cli_refuses_a_newline_in_a_group_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WAKEFUL_SERVER", raising=False)
    assert main(["group", "create", "a\nb"]) == 1
    assert "name must not contain control characters (found U+000A)" in capsys.readouterr().err
