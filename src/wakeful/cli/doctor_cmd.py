"""``wakeful doctor [--probe-decide]`` (interfaces.md §4.2): runs the checks of ``wakeful.cli.doctor`` and prints
them as a table, or as one JSON document ``{"schema": "wakeful.doctor/1", "checks": [...], "ok": bool}``.

Exit 1 when any check failed, 0 when every one is ``ok`` or ``warn``; a progress bar on a terminal's stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from wakeful.cli.output import EXIT_FAILED, EXIT_OK, CliExit, Out, escape, out_for

__all__ = ["doctor_command", "register"]

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}
STEPS = 5  # the progress labels run_checks reports: configuration, compiler, VM, store, decide


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to the root command group."""
    app.command("doctor")(doctor)


def doctor(
    ctx: typer.Context,
    probe_decide: Annotated[bool, typer.Option("--probe-decide", help="Ask the decide provider one question.")]
    = False,
    config: Annotated[Path | None, typer.Option("--config", help="Configuration file (TOML).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """Check this machine and configuration: compiler, sandbox, VM, data directory, store, port, decide, web."""
    raise CliExit(doctor_command(out_for(ctx, json_), probe_decide=probe_decide, config=config))


def doctor_command(out: Out, *, probe_decide: bool = False, config: Path | None = None) -> int:
    from wakeful.cli.doctor import DoctorSetup, failed, report, run_checks

    setup = DoctorSetup(config_path=config, probe_decide=probe_decide)
    with _progress(out) as step:
        checks = run_checks(setup, step)
    if out.json:
        out.document(report(checks))
    elif not out.quiet:
        _table(out, report(checks)["checks"])
    elif failed(checks):  # --quiet: only the failures, on stderr
        for c in checks:
            if c.status == "fail":
                out.err.print(f"[bold red]fail[/] {escape(c.name)}: {escape(c.detail)}")
    return EXIT_FAILED if failed(checks) else EXIT_OK


@contextmanager
def _progress(out: Out) -> Iterator[Callable[[str], None]]:
    """interfaces.md §4.1: a bar on stderr only when it is a terminal and neither --json nor --quiet is given."""
    if out.json or out.quiet or not sys.stderr.isatty():
        yield lambda label: None
        return
    from rich.progress import Progress

    with Progress(console=out.err, transient=True) as bar:
        task = bar.add_task("doctor", total=STEPS)

        def step(label: str) -> None:
            bar.update(task, description=label, advance=1)

        yield step


def _table(out: Out, checks: list[dict[str, str]]) -> None:
    from rich.table import Table

    table = Table(title="wakeful doctor", title_justify="left")
    for column in ("check", "status", "detail", "hint"):
        table.add_column(column, overflow="fold")
    for c in checks:
        style = STYLE.get(c["status"], "")
        table.add_row(escape(c["name"]), f"[{style}]{c['status']}[/]", escape(c["detail"]), escape(c["hint"]))
    out.console.print(table)
    bad = sum(c["status"] == "fail" for c in checks)
    warned = sum(c["status"] == "warn" for c in checks)
    out.text(f"{bad} failed, {warned} warnings" if bad or warned else "all checks passed")
