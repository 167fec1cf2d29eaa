"""Turning command-line files into an ELF: C bundles through `wakeful.build`, prebuilt objects as they are.

Shared by `wakeful build` and `wakeful run` (interfaces.md §4.2; build.md §1, §10).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wakeful.cli.output import CliExit, Out, UsageError, escape
from wakeful.errors import BuildUnavailable, BundleError, WakefulError

if TYPE_CHECKING:
    from wakeful.build import LineTable

MAX_ELF_READ = 1 << 20  # the loader's largest max_elf_bytes (README limits); larger files are refused unread


def bundle_from_paths(paths: list[Path], entry: str | None) -> tuple[dict[str, str], str]:
    """Files keyed by their path relative to the deepest common directory; the entry defaults to the first."""
    for path in paths:
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
    root = Path(os.path.commonpath([str(p.resolve().parent) for p in paths]))
    files: dict[str, str] = {}
    for path in paths:
        key = path.resolve().relative_to(root).as_posix()
        try:
            files[key] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 text") from exc
    first = paths[0].resolve().relative_to(root).as_posix()
    return files, _entry_key(files, entry, first, root)


def _entry_key(files: dict[str, str], entry: str | None, first: str, root: Path) -> str:
    if entry is None:
        return first
    if entry in files:
        return entry
    candidate = Path(entry).resolve()
    if candidate.is_relative_to(root) and candidate.relative_to(root).as_posix() in files:
        return candidate.relative_to(root).as_posix()
    raise UsageError(f"--entry {entry} is not one of the files given")


def compile_bundle(files: dict[str, str], entry: str) -> Any:
    """One build through `wakeful.build` (build.md §1); bundle errors are usage errors (exit 2)."""
    try:
        from wakeful.build import compile_sync  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:
        raise BuildUnavailable(f"the build layer is unavailable: {exc}") from exc
    try:
        return compile_sync(files, entry)
    except BundleError as exc:
        raise UsageError(f"invalid bundle ({exc.rule}): {exc.message}") from exc


def build_failed_record(result: Any) -> dict[str, Any]:
    """interfaces.md §2.2: the failed build report."""
    return {
        "state": "failed",
        "kind": "build_failed",
        "failure": getattr(result, "failure", None),
        "error": getattr(result, "error", None),
        "diagnostics": getattr(result, "diagnostics", "") or "",
        "diagnostics_truncated": bool(getattr(result, "diagnostics_truncated", False)),
    }


def print_diagnostics(out: Out, result: Any) -> None:
    """Compiler diagnostics to stderr, verbatim (warnings on success, errors on failure)."""
    text = (getattr(result, "diagnostics", "") or "").rstrip()
    if text and not out.json:
        out.err.print(escape(text))


def load_program(out: Out, path: Path) -> tuple[bytes, LineTable | None]:
    """`wakeful run`'s program and, for a build, its line table (issue 18): a `.c` file is built as a one-file
    bundle named by its base name; a prebuilt ELF has no table."""
    if path.suffix == ".c":
        return _build_one(out, path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_ELF_READ + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    return data, None


def _build_one(out: Out, path: Path) -> tuple[bytes, LineTable | None]:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    return build_elf(out, {path.name: source}, path.name)


def build_elf(out: Out, files: dict[str, str], entry: str) -> tuple[bytes, LineTable | None]:
    """One build for a command that needs the ELF (`run`, `loop create --source`), with its line table: a failed
    build is printed (a JSON ``final`` record with ``--json``) and exits 1; warnings go to stderr."""
    try:
        result = compile_bundle(files, entry)
    except WakefulError as exc:
        out.fail(exc)
    if result.state != "succeeded":
        _report_build_failure(out, result)
        raise CliExit(1)
    print_diagnostics(out, result)
    elf: bytes = result.elf
    return elf, result.lines


def _report_build_failure(out: Out, result: Any) -> None:
    if out.json:
        out.line({"type": "final", **build_failed_record(result)})
        return
    print_failure(out, result)


def print_failure(out: Out, result: Any) -> None:
    """A failed build for people: the error text (diagnostics plus `wakeful:` explanations), then the cause."""
    record = build_failed_record(result)
    text = (record["error"] or record["diagnostics"] or "").rstrip()
    if text:
        out.err.print(escape(text))
    out.err.print(f"[bold red]build failed[/] ({escape(str(record['failure']))})")
