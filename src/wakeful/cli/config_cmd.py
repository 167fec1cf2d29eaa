"""``wakeful config show [--effective]`` (interfaces.md §4.2, §7): the configuration in force with the source of
each value (default, file, env, flag) and its secrets redacted (``decide.api_key``, the store URL's password).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from wakeful.cli.output import EXIT_OK, CliExit, Out, escape, out_for

__all__ = ["config_app", "register", "show_command"]

config_app = typer.Typer(help="The configuration in force (interfaces.md §7).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``config show`` to the root command group."""
    app.add_typer(config_app, name="config")


@config_app.command("show")
def show(
    ctx: typer.Context,
    effective: Annotated[bool, typer.Option("--effective", help="Every key, defaults included.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """The configuration: keys set by the file, the environment or a flag (all keys with --effective)."""
    raise CliExit(show_command(out_for(ctx, json_), effective=effective))


def show_command(out: Out, *, effective: bool) -> int:
    from wakeful.harness.config import load_config  # the harness loads when the command runs

    cfg = load_config()  # the global --config / --data-dir / --db reach it through the environment
    keys = {k: {"value": v, "source": s} for k, (v, s) in cfg.effective(redact=True).items()
            if effective or s != "default"}
    doc: dict[str, Any] = {"file": str(cfg.file) if cfg.file else None, "effective": effective, "keys": keys}
    if out.json:
        out.document(doc)
        return EXIT_OK
    out.text(f"config file: {escape(doc['file'] or '(none)')}")
    if not keys:
        out.text("every key has its default (wakeful config show --effective lists them)")
    width = max((len(k) for k in keys), default=0)
    for name, entry in keys.items():
        value = entry["value"]
        shown = "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        out.text(f"{escape(name.ljust(width))}  {escape(shown)}  [dim]({escape(entry['source'])})[/]")
    return EXIT_OK
