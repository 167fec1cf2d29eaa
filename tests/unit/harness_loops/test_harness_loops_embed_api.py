"""The public embedding API reads as documented (interfaces.md §5): ``wakeful.__all__`` and ``dir(wakeful)`` name
the public classes, every public ``Harness`` method has a docstring, ``create_loop`` a real signature,
``register_tool`` documents ``fn(args, ctx)``, and a configured capability is a tool of the registry."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import wakeful
from wakeful.harness.config import Config
from wakeful.harness.errors import InvalidRequest

SRC = Path(wakeful.__file__).resolve().parents[1]  # the wakeful under test (PYTHONPATH)
PUBLIC = {"Harness", "Config", "load_config", "ToolContext", "WakeMessage", "WakefulError", "HostCallRefused",
          "__version__"}


def test_all_and_dir_name_the_public_api() -> None:
    assert set(wakeful.__all__) == PUBLIC
    listed = dir(wakeful)
    assert set(listed) >= PUBLIC and "Any" not in listed and "TYPE_CHECKING" not in listed
    for name in wakeful.__all__:
        assert getattr(wakeful, name) is not None
    assert wakeful.ToolContext.__module__ == "wakeful.harness.registry"
    assert issubclass(wakeful.HostCallRefused, wakeful.WakefulError)


def test_star_import_gives_the_public_names_and_stays_lazy() -> None:
    code = ("import sys\nfrom wakeful import *\n"
            "assert Harness.__name__ == 'Harness' and callable(load_config)\n"
            "import wakeful\nprint(sorted(n for n in dir(wakeful) if not n.startswith('__')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(sorted(PUBLIC - {"__version__"}))


def test_every_public_harness_method_has_a_docstring() -> None:
    undocumented = [name for name, member in inspect.getmembers(wakeful.Harness)
                    if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
                    and not (member.__doc__ or "").strip()]
    assert undocumented == []


def test_create_loop_has_a_real_signature_and_logs_exists() -> None:
    params = inspect.signature(wakeful.Harness.create_loop).parameters
    assert list(params) == ["self", "agent_id", "session_id", "artifact", "config", "capabilities", "name",
                            "creator"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in params.items() if n != "self")
    doc = wakeful.Harness.create_loop.__doc__ or ""
    assert all(f"``{n}``" in doc for n in params if n != "self")
    assert list(inspect.signature(wakeful.Harness.logs).parameters) == ["self", "loop_id", "limit", "after_seq"]


def test_register_tool_documents_fn_args_ctx() -> None:
    doc = wakeful.Harness.register_tool.__doc__ or ""
    for words in ("fn(args, ctx)", "ToolContext", "principal", "loop_id", "deadline_unix_ms", "tool_failed",
                  "HostCallRefused", 'safety="read"'):
        assert words in doc, words


def test_a_configured_capability_is_a_registered_tool(tmp_path: Path) -> None:
    from wakeful.harness.capability_config import HttpCapabilitySpec

    read = HttpCapabilitySpec(name="ci.run.read", description="Read a run", url="https://ci.example.com/{id}")
    write = HttpCapabilitySpec(name="ci.rerun", description="Rerun", url="https://ci.example.com/{id}",
                               method="POST", read_only=False)
    h = wakeful.Harness(Config(data_dir=tmp_path, capabilities=(read, write)), sweeps=False)
    assert h.registry.loop_tool_names() == frozenset({"ci.run.read"})  # read_only = false: scripts only
    assert h.registry.get("ci.rerun").safety == "write"  # type: ignore[union-attr]
    assert h.registry.guide_entries() == [("ci.run.read", "Read a run")]
    with pytest.raises(InvalidRequest):  # an embedder tool may not take a configured name
        h.register_tool("ci.run.read", lambda a, c: None, description="again")
