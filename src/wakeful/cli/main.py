"""The `wakeful` command line (interfaces.md §4): typer app, global options, and the error/exit-code seam.

Commands here: `build`, `run`, `vm dump`, `sdk`, `runtime --dump-sdk`, `version`. Never a Python traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from wakeful import __version__
from wakeful.cli import (
    admin_cmd,
    build_cmd,
    capability_cmd,
    config_cmd,
    db_cmd,
    decide_cmd,
    doctor_cmd,
    events_cmd,
    goal_cmd,
    loop_cmd,
    mcp_cmd,
    script_cmd,
    sdk_cmd,
    serve_cmd,
    status_cmd,
    verifier_cmd,
    vm_cmd,
    work_cmd,
)
from wakeful.cli.bench_cmd import bench_app
from wakeful.cli.output import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliExit,
    Out,
    Unavailable,
    UsageError,
    exit_code_for,
    out_for,
    shown,
)
from wakeful.errors import WakefulError

app = typer.Typer(
    name="wakeful",
    help="wakeful: an outer loop for always-on AI agents.",
    no_args_is_help=True,
    add_completion=True,  # issue 19: --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
vm_app = typer.Typer(help="Inspect programs as the VM runs them.", no_args_is_help=True)
sdk_app = typer.Typer(help="The guest SDK: header, guides, examples.", no_args_is_help=True)
app.add_typer(vm_app, name="vm")
app.add_typer(sdk_app, name="sdk")
app.add_typer(bench_app, name="bench")
db_app = typer.Typer(help="The store: init, schema version and upgrade, backup, prune (harness.md §3).", no_args_is_help=True)
app.add_typer(db_app, name="db")
for _name, _sub in loop_cmd.apps().items():
    app.add_typer(_sub, name=_name)
admin_cmd.register(loop_cmd.group_app, loop_cmd.agent_app, loop_cmd.session_app, loop_cmd.key_app)
events_cmd.register(loop_cmd.loop_app, loop_cmd.session_app)  # loop webhook|events|…|tail, session watch
verifier_cmd.register(loop_cmd.loop_app)  # loop webhook-verifier: a webhook's signature check (issue 19)
serve_cmd.register(app)
status_cmd.register(app)  # wakeful status: nodes and leases, Loops, pending, wakes (interfaces.md §4.2)
doctor_cmd.register(app)  # wakeful doctor [--probe-decide]: ok/warn/fail checks (interfaces.md §4.2)
mcp_cmd.register(app)
script_cmd.register(app)
decide_cmd.register(app)  # wakeful decide --state FILE --questions FILE (interfaces.md §4.2)
capability_cmd.register(app)  # wakeful capability list|test: [capabilities] of the config file
config_cmd.register(app)  # wakeful config show [--effective]: the configuration in force (interfaces.md §4.2)
for _name, _sub in {**goal_cmd.apps(), **work_cmd.apps()}.items():  # goal, work, gate, evidence, effect
    app.add_typer(_sub, name=_name)
work_cmd.register_next(app)  # wakeful next --agent … (control-plane.md §7)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


# ---- global options (interfaces.md §4.1) ----


@app.callback()
def _globals(
    ctx: typer.Context,
    json_: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="Only results and errors.")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colours.")] = False,
    verbose: Annotated[int, typer.Option("-v", count=True, help="More detail on stderr.")] = 0,
    config: Annotated[Path | None, typer.Option("--config", help="Configuration file (TOML).")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Data directory.")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Store URL.")] = None,
    server: Annotated[str | None, typer.Option("--server", help="Server URL (remote mode).")] = None,
    key: Annotated[str | None, typer.Option("--key", help="API key (remote mode).")] = None,
) -> None:
    # interfaces.md §4.1, §7: the global options reach every command through the environment they already read
    # (a command's own --server/--key/--config still wins); remote mode = a server URL (remote.py)
    from wakeful.cli import remote

    if db is not None:
        os.environ["WAKEFUL_DB_URL"] = db  # interfaces.md §7: --db over $WAKEFUL_DB_URL
    if data_dir is not None:
        os.environ["WAKEFUL_HOME"] = str(data_dir)  # interfaces.md §7: the same data directory for builds
    if config is not None:
        if not config.is_file():
            raise UsageError(f"--config {config}: no such file")
        os.environ["WAKEFUL_CONFIG"] = str(config.resolve())  # read by harness.config.load_config
    if server is not None:
        os.environ[remote.SERVER_ENV] = server  # an empty --server "" means local mode
    if key is not None:
        os.environ[remote.KEY_ENV] = key
    remote.note_command(ctx.invoked_subcommand)
    from wakeful.cli import which_store

    which_store.begin(json_ or quiet)
    if remote.server_url() is None and ctx.invoked_subcommand != "serve":
        which_store.pick_demo_dir()  # issue 19: the demo store of this folder before the default data directory
    ctx.obj = Out(json=json_, quiet=quiet, color=not no_color, verbose=verbose)


# ---- commands ----


@app.command("build")
def build(
    ctx: typer.Context,
    files: Annotated[
        list[Path] | None, typer.Argument(help="C files of the bundle.", show_default=False)
    ] = None,
    entry: Annotated[str | None, typer.Option("--entry", help="Entry file (default: the first).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the ELF here.")] = None,
    check: Annotated[Path | None, typer.Option("--check", help="Verify a prebuilt ELF instead.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Compile a C bundle to a verified BPF ELF, or verify one with --check."""
    out = out_for(ctx, json_)
    if (check is None) == (not files):
        raise UsageError("give either FILE… to build or --check ELF")
    if check is not None:
        raise CliExit(build_cmd.check_command(out, check))
    raise CliExit(build_cmd.build_command(out, list(files or []), entry, output))


@app.command("run")
def run_cmd(
    ctx: typer.Context,
    program: Annotated[Path, typer.Argument(help="OBJ.o (prebuilt ELF) or SRC.c (built first).")],
    config: Annotated[str | None, typer.Option("--config", help="Config as a JSON object.")] = None,
    event: Annotated[
        list[str] | None, typer.Option("--event", help="TOPIC=JSON, delivered before the start.")
    ] = None,
    host_replies: Annotated[
        Path | None, typer.Option("--host-replies", help="Scripted replies per capability.")
    ] = None,
    engine: Annotated[str, typer.Option("--engine", help="translate or interp.")] = "translate",
    timeout: Annotated[float, typer.Option("--timeout", help="Stop after this many seconds.")] = 30.0,
    json_: JsonOpt = False,
) -> None:
    """Run one program locally against a scripted host (no store, no server)."""
    from wakeful.cli import run  # the runtime loads when a program runs, not for every command

    out = out_for(ctx, json_)
    request = run.parse_request(program, config, event or [], host_replies, engine, timeout)
    raise CliExit(run.run_command(out, request))


@vm_app.command("dump")
def vm_dump(
    ctx: typer.Context,
    obj: Annotated[Path, typer.Argument(help="A BPF ELF object.")],
    function: Annotated[str | None, typer.Option("--function", help="Only this function.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Print the verifier report, disassembly and generated Python of a program."""
    raise CliExit(vm_cmd.dump_command(out_for(ctx, json_), obj, function))


@sdk_app.command("header")
def sdk_header(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Print wakeful.h."""
    raise CliExit(sdk_cmd.text_command(out_for(ctx, json_), "header"))


@sdk_app.command("guide")
def sdk_guide(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Print the Loop programming guide."""
    raise CliExit(sdk_cmd.text_command(out_for(ctx, json_), "guide"))


@sdk_app.command("script-guide")
def sdk_script_guide(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Print the script programming guide."""
    raise CliExit(sdk_cmd.text_command(out_for(ctx, json_), "script-guide"))


@sdk_app.command("examples")
def sdk_examples(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(help="Directory to write the examples into.")],
    json_: JsonOpt = False,
) -> None:
    """Write the examples and their host-replies files into DIR."""
    raise CliExit(sdk_cmd.examples_command(out_for(ctx, json_), directory))


@db_app.command("version")
def db_version(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Print the store's schema version and the code's."""
    raise CliExit(db_cmd.version_command(out_for(ctx, json_)))


@db_app.command("init")
def db_init(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Create the store of the data directory (or --db) at this schema version; an existing one is kept.

    Example: wakeful --data-dir ./state db init
    """
    raise CliExit(db_cmd.upgrade_command(out_for(ctx, json_)))


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Create or upgrade the store's schema to this version (harness.md §3)."""
    raise CliExit(db_cmd.upgrade_command(out_for(ctx, json_)))


@db_app.command("backup")
def db_backup(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Where to write the copy (must not exist).")],
    json_: JsonOpt = False,
) -> None:
    """Write a consistent copy of the SQLite store to PATH."""
    raise CliExit(db_cmd.backup_command(out_for(ctx, json_), path))


@db_app.command("prune")
def db_prune(
    ctx: typer.Context,
    retention_s: Annotated[
        int | None,
        typer.Option("--retention-s", min=0, help="Keep settled events this long (default: events.dedup_retention_s)."),
    ] = None,
    messages_days: Annotated[
        int | None, typer.Option("--messages-older-than-days", min=0, help="Also delete older messages.")
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Remove what retention allows (settled events, idle buckets, unreferenced artifacts)."""
    out = out_for(ctx, json_)
    if retention_s is None:
        from wakeful.harness.config import load_config

        retention_s = load_config().dedup_retention_s  # the same window the running node prunes with
    raise CliExit(
        db_cmd.prune_command(out, retention_s=retention_s, messages_older_than_days=messages_days)
    )


@app.command(
    "runtime",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def runtime_cmd(
    ctx: typer.Context,
    dump_sdk: Annotated[bool, typer.Option("--dump-sdk", help="Print wakeful.h and exit.")] = False,
) -> None:
    """The stdio JSON-RPC runtime (spinfoam protocol v1); options as runtime-protocol.md §2."""
    if dump_sdk:  # sdk.md §1
        raise CliExit(sdk_cmd.text_command(Out(), "header"))
    try:
        from wakeful.runtime import stdio  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:
        raise Unavailable(f"the stdio runtime is not available: {exc}") from exc
    raise CliExit(int(stdio.main(list(ctx.args))))


@app.command("version")
def version(ctx: typer.Context, json_: JsonOpt = False) -> None:
    """Package, SDK, protocol and schema versions."""
    out = out_for(ctx, json_)
    doc = versions()
    if out.json:
        out.document(doc)
    else:
        for name, value in doc.items():
            out.text(f"{name}: {value if value is not None else '-'}")


def versions() -> dict[str, object]:
    """interfaces.md §4.2 `wakeful version`."""
    from wakeful import sdk

    return {
        "wakeful": __version__,
        "sdk_version": sdk.SDK_ABI,
        "sdk_extensions": sdk.SDK_EXT,
        "protocol_version": 1,
        "schema_version": _schema_version(),
    }


def _schema_version() -> int | None:
    # the schema version this code writes (``ops.store_admin.SCHEMA_HEAD``, what `wakeful db version` calls the
    # code's), read from the migration files' numbers: importing the migrations would load SQLAlchemy, and
    # `version` starts without it (tests/unit/cli/test_cli_lazy_imports.py). It answered null before, reading a
    # name the harness never had. None only when the files are not on disk (a zipped install).
    import re

    folder = Path(__file__).resolve().parents[1] / "harness" / "store" / "migrations"
    numbers = [int(m.group(1)) for f in folder.glob("*.py") if (m := re.fullmatch(r"(\d{4})_\w+\.py", f.name))]
    return max(numbers) if numbers else None


# ---- the error seam: typed errors → message + exit code; never a traceback ----


def main(argv: list[str] | None = None) -> int:
    """Console entry point `wakeful`. Called in process (a test, an embedding program), it leaves the caller's
    ``WAKEFUL_*`` environment as it found it: the global options reach the commands through the environment
    (interfaces.md §7), but only for the length of the call."""
    with kept_environment():
        return _main(argv)


@contextmanager
def kept_environment() -> Iterator[None]:
    """The ``WAKEFUL_*`` environment variables as they were on entry, restored on exit (values set meanwhile
    undone, values removed meanwhile put back)."""
    kept = {key: value for key, value in os.environ.items() if key.startswith("WAKEFUL_")}
    try:
        yield
    finally:
        for key in [key for key in os.environ if key.startswith("WAKEFUL_") and key not in kept]:
            del os.environ[key]
        os.environ.update(kept)


def _main(argv: list[str] | None) -> int:
    from wakeful.cli.examples import attach

    attach(app)  # issue 19: examples at the end of each command's --help
    # docs/spinfoam-compat.md: `wakeful --dump-sdk` (a spinfoam-style spelling) is `wakeful runtime --dump-sdk`
    if (sys.argv[1:] if argv is None else argv) == ["--dump-sdk"]:
        argv = ["runtime", "--dump-sdk"]
    try:
        app(args=argv, prog_name="wakeful", standalone_mode=False)
    except CliExit as done:
        return _exit(done.code)
    except WakefulError as exc:
        out = Out(json="--json" in (argv if argv is not None else sys.argv))
        out.error(exc)
        return _exit(exit_code_for(exc))
    except BrokenPipeError:  # stdout closed by the reader (`wakeful … | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return _exit(EXIT_FAILED)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback to the user
        return _exit(_click_or_internal(exc, json_="--json" in (argv if argv is not None else sys.argv)))
    return _exit(0)


def _click_or_internal(exc: Exception, *, json_: bool = False) -> int:
    # typer vendors click; its exceptions are reachable through typer's public names only
    if isinstance(exc, typer.Exit):
        return int(getattr(exc, "exit_code", 0))
    if isinstance(exc, typer.Abort):
        sys.stderr.write("aborted\n")
        return EXIT_FAILED
    if isinstance(exc, typer.TyperException):
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        code = getattr(exc, "exit_code", EXIT_USAGE)
        return code if isinstance(code, int) else EXIT_USAGE
    # interfaces.md §4.1: with --json even this failure is the one document on stdout; never raw control characters
    if json_:
        Out(json=True).document({"error": "internal", "message": f"{type(exc).__name__}: {exc}"})
    else:
        sys.stderr.write(shown(f"error internal: {type(exc).__name__}: {exc}") + "\n")
    return EXIT_FAILED


def _exit(code: int) -> int:
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
