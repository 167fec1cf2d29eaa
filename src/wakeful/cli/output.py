"""Output conventions of the `wakeful` command (interfaces.md §4.1): people get rich text, `--json` gets JSON.

Also the exit codes and the one place where typed errors become a printed message and an exit status.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.markup import escape as _markup_escape

from wakeful.errors import BuildUnavailable, InvalidParams, WakefulError

if TYPE_CHECKING:
    import typer

# interfaces.md §4.1: exit codes
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3

# C0 and C1 control characters (but tab and newline) and DEL: a guest's log line, a host reply or a C source
# quoted in a diagnostic must never drive the operator's terminal (ESC [ …, OSC 52 clipboard writes, …)
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}


def escape(text: str) -> str:
    """Text for rich markup: markup brackets escaped and control characters shown as ``\\xNN``."""
    return _markup_escape(text.translate(_CONTROLS))


def shown(text: str) -> str:
    """Verbatim text for a terminal: control characters (but tab and newline) shown as ``\\xNN``."""
    return text.translate(_CONTROLS)


class CliExit(Exception):
    """Ends a command with ``code`` after its output was written (raised, never printed).

    Not an error but a signal (``wakeful.errors.SIGNALS``): it must pass through every ``except WakefulError``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class UsageError(InvalidParams):
    """A bad argument or input file given to a command (exit code 2)."""


class Unavailable(WakefulError):
    """A part of wakeful this command needs is not installed or cannot start (exit code 3)."""

    code = "unavailable"


def exit_code_for(error: WakefulError) -> int:
    """interfaces.md §4.1: 2 for usage, 3 for unavailable, 1 for every other refusal."""
    if isinstance(error, UsageError):
        return EXIT_USAGE
    # by code, so the store's StoreUnavailable (a 503 on HTTP) exits 3 without the CLI importing every layer
    if isinstance(error, BuildUnavailable | Unavailable) or error.code in {"unavailable", "compiler_unavailable"}:
        return EXIT_UNAVAILABLE
    return EXIT_FAILED


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 text unescaped (sdk.md §6 encoding)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)


@dataclass
class Out:
    """Where a command writes: stdout carries results only; logs and progress go to stderr."""

    json: bool = False
    quiet: bool = False
    color: bool = True
    verbose: int = 0
    console: Console = field(init=False)
    err: Console = field(init=False)

    def __post_init__(self) -> None:
        no_color = not self.color
        self.console = Console(file=sys.stdout, no_color=no_color, highlight=False, soft_wrap=True)
        self.err = Console(file=sys.stderr, no_color=no_color, highlight=False, soft_wrap=True)

    def document(self, value: Any) -> None:
        """The single JSON document of a `--json` command."""
        sys.stdout.write(dumps(value) + "\n")
        sys.stdout.flush()

    def line(self, value: Any) -> None:
        """One JSON Lines record of a streaming command (`run`)."""
        self.document(value)

    def text(self, markup: str) -> None:
        """Rich text for people on stdout (suppressed by `--quiet`)."""
        if not self.quiet:
            self.console.print(markup)

    def plain(self, text: str) -> None:
        """Verbatim text on stdout (headers, guides), never reformatted."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def note(self, markup: str) -> None:
        """Progress or context on stderr (suppressed by `--quiet` and `--json`)."""
        if not self.quiet and not self.json:
            self.err.print(markup)

    def fail(self, error: WakefulError, *, extra: dict[str, Any] | None = None) -> NoReturn:
        """Print a typed error (JSON with `--json`) and end with its exit code."""
        self.error(error, extra=extra)
        raise CliExit(exit_code_for(error))

    def error(self, error: WakefulError, *, extra: dict[str, Any] | None = None) -> None:
        """Print a typed error without exiting."""
        # one spelling per error at every face: the lowercase code and details the HTTP face answers
        detail = {**error.face_body(), **(extra or {})}
        if self.json:
            self.document(detail)
        else:
            self.err.print(f"[bold red]error[/] [red]{escape(error.code)}[/]: {escape(error.message)}")


def out_for(ctx: typer.Context, json_: bool = False) -> Out:
    """The root command's ``Out``, switched to JSON when this command got its own ``--json``."""
    base = ctx.find_root().obj
    out = base if isinstance(base, Out) else Out()
    return Out(json=True, quiet=out.quiet, color=out.color, verbose=out.verbose) if json_ and not out.json else out
