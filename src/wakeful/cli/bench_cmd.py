"""``wakeful bench density`` / ``wakeful bench runtime`` (benchmarks.md §1): options → run → JSON and table.

The logic lives in ``wakeful.bench``; this module only wires options, output and the ``--check`` exit code.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from wakeful.cli.output import EXIT_FAILED, EXIT_OK, CliExit, UsageError

bench_app = typer.Typer(help="Benchmarks (benchmarks.md).", no_args_is_help=True)


def _write_json(doc: dict[str, object], path: str) -> None:
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(path).write_text(text, encoding="utf-8")


def _run_and_emit(run: Callable[[Any], dict[str, Any]], validate: Callable[[Any], None],
                  render: Callable[[dict[str, Any], Console], None], json_path: str | None,
                  width: int) -> tuple[Console, dict[str, Any]]:
    """Run with progress bars on stderr, validate the document, write the JSON, render the table."""
    from wakeful.bench.report import RichProgress

    err = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
    with RichProgress(err) as progress:
        doc = run(progress)
    validate(doc)
    if json_path is not None:
        _write_json(doc, json_path)
    render(doc, err if json_path == "-" else Console(width=None if sys.stdout.isatty() else width))
    return err, doc


def _exit_checked(missed: list[str], check: bool, err: Console) -> None:
    """``--check``: exit 1 naming the missed targets; else exit 0."""
    if check and missed:
        err.print(f"targets missed: {', '.join(missed)}")
        raise CliExit(EXIT_FAILED)
    raise CliExit(EXIT_OK)


def density_command(
    count: Annotated[
        int | None, typer.Option("--count", help="Objects to load (default 10,000; 1,000 for structure).")
    ] = None,
    distinct: Annotated[str, typer.Option("--distinct", help="data, imm or structure.")] = "data",
    transport: Annotated[str, typer.Option("--transport", help="inproc, stdio or both.")] = "both",
    samples: Annotated[int, typer.Option("--samples", help="Latency samples.")] = 1_000,
    soak_seconds: Annotated[float, typer.Option("--soak-seconds", help="Idle time before unloading.")] = 10.0,
    builds: Annotated[
        int, typer.Option("--builds", help="Distinct compiles for compile time; 0 skips.")
    ] = 40,
    skip_cpu: Annotated[bool, typer.Option("--skip-cpu", help="Skip the guest CPU kernels.")] = False,
    realistic: Annotated[
        int, typer.Option("--realistic", help="Objects for the realistic variant; 0 skips.")
    ] = 1_000,
    repeat: Annotated[
        int, typer.Option("--repeat", help="Repeat the whole run; judgements use the median.")
    ] = 1,
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the JSON document here (- for stdout).")
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when a checked target is missed.")] = False,
) -> None:
    """Density, latency, guest CPU and compile figures of the runtime (benchmarks.md §1)."""
    from wakeful.bench import density
    from wakeful.bench.report import render
    from wakeful.bench.schema import validate
    from wakeful.bench.variants import BenchError

    options = density.DensityOptions(
        count=count,
        distinct=distinct,
        transport=transport,
        samples=samples,
        soak_seconds=soak_seconds,
        builds=builds,
        skip_cpu=skip_cpu,
        realistic=realistic,
        repeat=repeat,
        check=check,
    )
    try:
        options.validate()
    except BenchError as exc:
        raise UsageError(exc.message) from None
    err, doc = _run_and_emit(lambda progress: density.run_density(options, progress), validate, render,
                             json_path, 120)
    # §1.9 correctness: checked after the document was written, so a failed run is still on record
    density.raise_for_failures(doc)
    _exit_checked(density.failed_checks(doc), check, err)


bench_app.command("density")(density_command)
bench_app.command("runtime", help="The runtime benchmark: the same as `wakeful bench density`.")(
    density_command
)


def harness_command(
    count: Annotated[int, typer.Option("--count", help="Durable Loops (default 10,000).")] = 10_000,
    loops_per_agent: Annotated[int, typer.Option("--loops-per-agent", help="Loops per agent.")] = 20,
    store: Annotated[str, typer.Option("--store", help="sqlite, postgresql or both.")] = "both",
    seconds: Annotated[float, typer.Option("--seconds", help="Ingest duration; 0 skips.")] = 20.0,
    idle_seconds: Annotated[float, typer.Option("--idle-seconds", help="Idle window; 0 skips.")] = 60.0,
    wakes: Annotated[int, typer.Option("--wakes", help="Wake-latency samples at 5/s; 0 skips.")] = 200,
    repeat: Annotated[int, typer.Option("--repeat", help="Rounds; systems alternate, judged on the median.")] = 1,
    peer: Annotated[str, typer.Option("--peer", help="DBOS beside it: auto (when installed), on, off.")] = "auto",
    pg_url: Annotated[str, typer.Option("--pg-url", help="PostgreSQL server (a fresh database per run).")] = (
        "postgresql://postgres@127.0.0.1:5432/test"),
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the JSON document here (- for stdout).")
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when a target (§2.2) is missed.")] = False,
    nodes: Annotated[int, typer.Option("--nodes", help="K nodes on one PostgreSQL (Loops spread by leases).")] = 1,
) -> None:
    """Durable Loops in a real node on SQLite and PostgreSQL, beside DBOS Transact (benchmarks.md §2)."""
    from wakeful.bench import harness_bench
    from wakeful.bench.harness_report import render_harness
    from wakeful.bench.harness_schema import validate_harness
    from wakeful.bench.variants import BenchError

    options = harness_bench.HarnessOptions(count=count, loops_per_agent=loops_per_agent, store=store,
                                           seconds=seconds, idle_seconds=idle_seconds, wakes=wakes, repeat=repeat,
                                           peer=peer, pg_url=pg_url, check=check, nodes=nodes)
    try:
        options.validate()
    except BenchError as exc:
        raise UsageError(exc.message) from None
    err, doc = _run_and_emit(lambda progress: harness_bench.run_harness(options, progress), validate_harness,
                             render_harness, json_path, 160)
    failures = [f for run in doc["runs"] for f in run["failures"]]
    if failures:  # §2.1: any 5xx or an accepted event never acked fails the run, with or without --check
        err.print(f"run failed: {failures[:5]}")
        raise CliExit(EXIT_FAILED)
    _exit_checked(harness_bench.failed_checks(doc), check, err)


bench_app.command("harness")(harness_command)
