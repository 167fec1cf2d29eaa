"""`wakeful sdk header | guide | script-guide | examples DIR` (interfaces.md §4.2, sdk.md §1).

Prints the SDK texts verbatim, or writes the shipped examples and their replies files into a directory.
"""

from __future__ import annotations

from pathlib import Path

from wakeful import sdk
from wakeful.cli.output import EXIT_OK, Out, UsageError, escape

TEXTS = {
    "header": sdk.header_text,
    "guide": sdk.guide_text,
    "script-guide": sdk.script_guide_text,
}


def text_command(out: Out, what: str) -> int:
    """Print one SDK text; with `--json`, `{name: text}`."""
    text = TEXTS[what]()
    if out.json:
        out.document({what.replace("-", "_"): text, "sdk_version": sdk.SDK_ABI})
    else:
        out.plain(text)
    return EXIT_OK


def examples_command(out: Out, directory: Path) -> int:
    """Write every example (`NAME.c` + `NAME.replies.json`) into ``directory``."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    try:
        written = sdk.write_examples(directory)
    except OSError as exc:
        raise UsageError(f"cannot write examples to {directory}: {exc}") from exc
    if out.json:
        out.document({"directory": str(directory), "files": [str(p) for p in written]})
    else:
        for path in written:
            out.text(f"wrote {escape(str(path))}")
    return EXIT_OK
