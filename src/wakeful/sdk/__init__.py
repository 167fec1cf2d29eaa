"""The guest SDK as package data: `wakeful.h`, the programming guides and the examples (sdk.md §1).

Small read-only accessors so build, runtime, harness and the faces never compute file paths themselves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

__all__ = [
    "SDK_ABI",
    "SDK_EXT",
    "Example",
    "example",
    "examples",
    "guide_text",
    "header_bytes",
    "header_text",
    "headers",
    "include_dir",
    "script_guide_text",
    "spinfoam_header_text",
    "write_examples",
]

_RUN_ARG = re.compile(r"^\s*\*\s*run-arg:\s*(--[a-z-]+)\s+(.+)$", re.M)
SDK_ABI = 1  # WAKEFUL_SDK_ABI in wakeful.h
SDK_EXT = 2  # WAKEFUL_SDK_EXT in wakeful.h


@dataclass(frozen=True)
class Example:
    """One shipped example: its C source and its scripted host replies (interfaces.md §4.2)."""

    name: str
    source: str
    replies: str

    def run_args(self) -> list[str]:
        """The extra `wakeful run` arguments from the source's ``run-arg: --option VALUE`` comment lines."""
        args: list[str] = []
        for match in _RUN_ARG.finditer(self.source):
            args += [match.group(1), match.group(2).strip()]
        return args


def _root() -> Traversable:
    return resources.files(__name__)


def include_dir() -> Path:
    """Directory holding the SDK headers (the `-I sdk` of build.md §2.1)."""
    return Path(str(_root().joinpath("include")))


def headers() -> dict[str, bytes]:
    """Every SDK header by file name; their bytes are part of the toolchain fingerprint."""
    inc = _root().joinpath("include")
    return {
        p.name: p.read_bytes() for p in sorted(inc.iterdir(), key=lambda p: p.name) if p.name.endswith(".h")
    }


_INCLUDE_SPINFOAM = '#include "spinfoam.h"\n'


def header_bytes() -> bytes:
    """The bytes of ``header_text()``."""
    return header_text().encode("utf-8")


def header_text() -> str:
    """`wakeful.h` made self-contained (`wakeful sdk header`, `wakeful runtime --dump-sdk`, `loop.sdk`).

    wakeful.h includes spinfoam.h (the ABI-1 part); a reader of one printed header (an agent, an embedder
    saving it next to its sources) needs no second file, so spinfoam.h is inlined where it is included.
    """
    inc = _root().joinpath("include")
    text = inc.joinpath("wakeful.h").read_text(encoding="utf-8")
    assert text.count(_INCLUDE_SPINFOAM) == 1, "wakeful.h includes spinfoam.h once"
    return text.replace(_INCLUDE_SPINFOAM, spinfoam_header_text())


def spinfoam_header_text() -> str:
    """`spinfoam.h`: spinfoam's ABI 1 only, no extensions (`wakeful-spinfoam --dump-sdk`)."""
    return _root().joinpath("include", "spinfoam.h").read_text(encoding="utf-8")


TOOLS_ROW = "| embedder tools (read-only) | the tool's schema | the tool's JSON result |\n"


def guide_text(tools: Iterable[tuple[str, str]] = ()) -> str:
    """The agent-facing programming guide for Loops (sdk.md §15). ``tools``: (name, description) of the node's
    read tools (``register_tool`` and the configuration's ``[capabilities]``), listed after the capability table
    so an agent sees what this node offers."""
    text = _root().joinpath("guide.md").read_text(encoding="utf-8")
    entries = sorted(tools)
    if not entries:
        return text
    listed = "".join(f"- `{name}`: {' '.join(description.split())}\n" for name, description in entries)
    section = f"\n**Tools of this node** (read-only, callable when granted):\n\n{listed}"
    at = text.find(TOOLS_ROW)
    if at < 0:
        return text + section
    at += len(TOOLS_ROW)
    return text[:at] + section + text[at:]


def script_guide_text() -> str:
    """The shorter programming guide for scripts (sdk.md §15, harness.md §18)."""
    return _root().joinpath("script-guide.md").read_text(encoding="utf-8")


def examples() -> list[Example]:
    """Every shipped example, sorted by name."""
    folder = _root().joinpath("examples")
    names = sorted(p.name[:-2] for p in folder.iterdir() if p.name.endswith(".c"))
    return [example(name) for name in names]


def example(name: str) -> Example:
    """One example by base name (e.g. ``"heartbeat"``); raises ``KeyError`` when absent."""
    folder = _root().joinpath("examples")
    src, rep = folder.joinpath(f"{name}.c"), folder.joinpath(f"{name}.replies.json")
    if "/" in name or not src.is_file():
        raise KeyError(name)
    replies = rep.read_text(encoding="utf-8") if rep.is_file() else "{}\n"
    return Example(name, src.read_text(encoding="utf-8"), replies)


def write_examples(directory: Path) -> list[Path]:
    """Write every example (`NAME.c`, `NAME.replies.json`) into ``directory``; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for ex in examples():
        for suffix, text in ((".c", ex.source), (".replies.json", ex.replies)):
            path = directory / f"{ex.name}{suffix}"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
