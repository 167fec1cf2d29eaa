"""The embedding surface (interfaces.md §5): `wakeful.Harness` is lazy, tools are checked at registration,
and `loop.sdk` hands out the guide and the header."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness
from wakeful.harness.errors import InvalidRequest

SRC = Path(__file__).resolve().parents[3] / "src"


def test_import_wakeful_stays_light_and_harness_is_lazy() -> None:
    code = (
        "import sys, wakeful\n"
        "heavy = ('sqlalchemy', 'wakeful.harness', 'wakeful.control', 'wakeful.embed', 'fastapi', 'uvicorn')\n"
        "assert not [m for m in heavy if m in sys.modules], sorted(sys.modules)\n"
        "H = wakeful.Harness\n"  # first use: the public class, with h.control (control) and h.serve_http
        "from wakeful.embed import Harness\n"
        "from wakeful.control.embed import Harness as ControlHarness\n"
        "from wakeful.harness.embed import Harness as NodeHarness\n"
        "assert H is Harness and issubclass(H, ControlHarness) and issubclass(H, NodeHarness)\n"
        "assert 'sqlalchemy' in sys.modules and callable(H.serve_http) and isinstance(H.control, property)\n"
        "assert 'fastapi' not in sys.modules and 'uvicorn' not in sys.modules\n"  # the HTTP face: on serve_http
        "try:\n    wakeful.Nope\nexcept AttributeError:\n    print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize(
    ("name", "safety"),
    [("Weather", "read"), ("decide", "read"), ("agent.notify", "read"), ("9x", "read"), ("ok.name", "admin")],
)
def test_tool_registration_rules(name: str, safety: str, tmp_path: Path) -> None:
    h = Harness(Config(data_dir=tmp_path), sweeps=False)
    with pytest.raises(InvalidRequest):
        h.register_tool(name, lambda a, c: None, description="x", safety=safety)


def test_duplicate_tools_and_loop_tool_names(tmp_path: Path) -> None:
    h = Harness(Config(data_dir=tmp_path), sweeps=False)
    h.register_tool("weather.get", lambda a, c: None, description="read")
    h.register_tool("tickets.close", lambda a, c: None, description="write", safety="write")
    with pytest.raises(InvalidRequest):
        h.register_tool("weather.get", lambda a, c: None, description="again")
    assert h.registry.loop_tool_names() == frozenset({"weather.get"})


def test_a_harness_that_is_not_started_says_so(tmp_path: Path) -> None:
    h = Harness(Config(data_dir=tmp_path), sweeps=False)
    with pytest.raises(RuntimeError):
        h.node  # noqa: B018


def test_loop_sdk_gives_guide_and_header(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from wakeful.harness.registry import Tool, ToolRegistry
    from wakeful.harness.tools import LoopTools

    registry = ToolRegistry()
    registry.register(Tool("weather.get", lambda a, c: None, "The weather\nnow", "read", 10))
    registry.register(Tool("tickets.close", lambda a, c: None, "Close a ticket", "write", 10))
    tools = LoopTools.__new__(LoopTools)  # sdk() reads only the node's tool registry
    tools.node = SimpleNamespace(tools=registry)  # type: ignore[assignment]
    out = tools.sdk()
    assert "sf_host_call" in out["header"] and "agent.notify" in out["guide"]
    assert "- `weather.get`: The weather now\n" in out["guide"] and "tickets.close" not in out["guide"]
