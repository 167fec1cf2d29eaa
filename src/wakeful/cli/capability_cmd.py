"""``wakeful capability list|test`` (docs/decisions-config.md "Configured capabilities"): the HTTP capabilities
declared in the configuration file, and one call of one of them as the operator.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from wakeful.cli.output import EXIT_FAILED, EXIT_OK, CliExit, Out, UsageError, escape, out_for

__all__ = ["capability_app", "list_command", "register", "test_command"]

capability_app = typer.Typer(help="Capabilities declared in the configuration file ([capabilities.\"name\"]).",
                             no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]


def register(app: typer.Typer) -> None:
    """Add ``capability list|test`` to the root command group."""
    app.add_typer(capability_app, name="capability")


@capability_app.command("list")
def list_(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """The configured capabilities: name, method, URL template, arguments, read-only, description.

    Example: wakeful capability list --json
    """
    raise CliExit(list_command(out_for(ctx, json_)))


@capability_app.command("test")
def test(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The capability's name, e.g. ci.run.read.")],
    args: Annotated[str, typer.Option("--args", help="The call's arguments as a JSON object.")] = "{}",
    json_: JsonOpt = False,
) -> None:
    """Make one real call of a configured capability as the operator and print its result or typed error.

    Example: wakeful capability test ci.run.read --args '{"run_id": 42}'
    """
    raise CliExit(test_command(out_for(ctx, json_), name, args))


def list_command(out: Out) -> int:
    from wakeful.harness.config import load_config  # the harness loads when the command runs

    specs = [spec.describe() for spec in load_config().capabilities]
    if out.json:
        out.document({"capabilities": specs})
        return EXIT_OK
    if not specs:
        out.text('no capabilities configured (declare [capabilities."name"] in the config file)')
        return EXIT_OK
    from rich.table import Table

    table = Table(title="capabilities", title_justify="left")
    for column in ("name", "method", "url", "arguments", "read-only", "description"):
        table.add_column(column, overflow="fold", no_wrap=column in ("name", "method"))  # a URL is never cut
    for s in specs:
        table.add_row(escape(s["name"]), s["method"], escape(s["url"]), escape(", ".join(s["arguments"]) or "-"),
                      "yes" if s["read_only"] else "no", escape(s["description"]))
    out.console.print(table)
    return EXIT_OK


def test_command(out: Out, name: str, raw_args: str) -> int:
    import asyncio

    from wakeful.harness.config import load_config
    from wakeful.harness.errors import HostCallRefused
    from wakeful.harness.ops import local

    cfg = load_config()
    if not any(s.name == name for s in cfg.capabilities):
        raise UsageError(f"no capability {name!r} is configured (wakeful capability list shows them)")
    args = _arguments(raw_args)
    try:
        result = asyncio.run(local.test_capability(cfg, name, args))
        assert result is not None
    except HostCallRefused as refused:
        if out.json:
            out.document({"error": {"code": refused.code, "message": refused.message}})
        else:
            out.err.print(f"[bold red]error[/] [red]{escape(refused.code)}[/]: {escape(refused.message)}")
        return EXIT_FAILED
    if out.json:
        out.document({"result": result})
    else:
        out.text(f"status {result['status']}")
        out.text(escape(json.dumps(result["body"], indent=2, ensure_ascii=False)))
    return EXIT_OK


def _arguments(raw: str) -> Any:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"--args is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("--args must be a JSON object")
    return value
