"""`wakeful build FILE… [--entry F] [-o OUT]` and `wakeful build --check ELF` (interfaces.md §4.2, build.md §10).

Prints the digest, size, diagnostics and verifier report of a build, or verifies a prebuilt ELF.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wakeful.cli.output import EXIT_FAILED, EXIT_OK, CliExit, Out, Unavailable, UsageError, escape
from wakeful.cli.program import (
    MAX_ELF_READ,
    build_failed_record,
    bundle_from_paths,
    compile_bundle,
    print_diagnostics,
    print_failure,
)
from wakeful.errors import InvalidObject, WakefulError


def build_command(out: Out, files: list[Path], entry: str | None, output: Path | None) -> int:
    """Compile a bundle; exit 0 on success, 1 on a failed build, 2 for a bad bundle, 3 without a compiler."""
    bundle, entry_key = bundle_from_paths(files, entry)
    try:
        result = compile_bundle(bundle, entry_key)
    except WakefulError as exc:
        out.fail(exc)
    if result.state != "succeeded":
        return _print_failure(out, result)
    if output is not None:
        _write_output(output, result.elf)
    _print_success(out, result, output)
    return EXIT_OK


def _write_output(output: Path, elf: bytes) -> None:
    try:
        output.write_bytes(elf)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc}") from exc


def _report_json(result: Any) -> Any:
    report: Any = getattr(result, "report", None)
    to_json = getattr(report, "to_json", None)
    return to_json() if callable(to_json) else report


def success_record(result: Any, output: Path | None) -> dict[str, Any]:
    """interfaces.md §2.2: the succeeded build report (local: no artifact, an output path instead)."""
    return {
        "state": "succeeded",
        "sha256": result.sha256,
        "elf_bytes": len(result.elf),
        "output": str(output) if output is not None else None,
        "diagnostics": getattr(result, "diagnostics", "") or "",
        "diagnostics_truncated": bool(getattr(result, "diagnostics_truncated", False)),
        "sdk_version": 1,
        "toolchain": getattr(result, "toolchain", None),
        "cached": bool(getattr(result, "cached", False)),
        "report": _report_json(result),
    }


def _print_success(out: Out, result: Any, output: Path | None) -> None:
    record = success_record(result, output)
    if out.json:
        out.document(record)
        return
    print_diagnostics(out, result)
    out.text(f"[bold green]built[/] sha256:{record['sha256']}  {record['elf_bytes']} bytes")
    if output is not None:
        out.text(f"wrote {escape(str(output))}")
    if record["report"]:
        print_report(out, record["report"])


def _print_failure(out: Out, result: Any) -> int:
    if out.json:
        out.document(build_failed_record(result))
    else:
        print_failure(out, result)
    return EXIT_FAILED


def check_command(out: Out, elf_path: Path) -> int:
    """build.md §10: verify a prebuilt ELF without running it; exit 0 when accepted, 1 when refused."""
    try:
        with elf_path.open("rb") as f:
            data = f.read(MAX_ELF_READ + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {elf_path}: {exc}") from exc
    try:
        from wakeful.vm import verify_elf  # type: ignore[attr-defined,unused-ignore]
    except ImportError as exc:
        raise Unavailable(f"the VM is unavailable: {exc}") from exc
    try:
        report = verify_elf(data)
    except InvalidObject as exc:
        out.fail(exc)
    doc = report.to_json()
    if out.json:
        out.document({"ok": True, "report": doc})
    else:
        out.text(f"[bold green]ok[/] {escape(str(elf_path))} passes the loader and verifier")
        print_report(out, doc)
    return EXIT_OK


def print_report(out: Out, report: dict[str, Any]) -> None:
    """A VerifyReport (vm.md §4.3) for people."""
    image = report.get("image") or {}
    out.text(
        f"entry [bold]{escape(str(report.get('entry')))}[/], {report.get('instructions')} instructions, "
        f"stack {report.get('stack_bytes')} bytes, image rodata {image.get('rodata_bytes')} / "
        f"data {image.get('data_bytes')} / bss {image.get('bss_bytes')} bytes"
    )
    out.text(f"call chain: {escape(' → '.join(report.get('call_chain') or []))}")
    out.text(f"helpers: {escape(', '.join(report.get('helpers') or []))}")
    for fn in report.get("functions") or []:
        calls = ", ".join(fn.get("calls") or []) or "-"
        out.text(
            f"  {escape(str(fn.get('name')))} [{escape(str(fn.get('section')))}] "
            f"{fn.get('instructions')} insns, frame {fn.get('stack_frame_bytes')} bytes, calls {escape(calls)}"
        )
    if report.get("ignored_sections"):
        out.text(f"ignored sections: {escape(', '.join(report['ignored_sections']))}")


__all__ = ["CliExit", "build_command", "check_command", "print_report", "success_record"]
