"""`wakeful vm dump OBJ.o [--function F]`: a program as the VM runs it (interfaces.md §4.2, vm.md §4.2-4.3).

Prints the verifier report, the RFC 9669 disassembly of each function and the generated Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wakeful.cli.build_cmd import print_report
from wakeful.cli.output import EXIT_OK, Out, Unavailable, UsageError, escape
from wakeful.cli.program import MAX_ELF_READ
from wakeful.errors import WakefulError


def dump_command(out: Out, obj: Path, function: str | None) -> int:
    """Load (verify, link, translate) the object and print what the VM made of it."""
    data = _read(obj)
    try:
        from wakeful.vm import (
            disasm_function,
            load,  # type: ignore[attr-defined,unused-ignore]
        )
    except ImportError as exc:
        raise Unavailable(f"the VM is unavailable: {exc}") from exc
    try:
        program = load(data)
        code = program.code
        indexes = _select(code, function)
        listing = {code.functions[i].name: _numbered(code, i, disasm_function(code, i)) for i in indexes}
        translation = str(program.translation())
    except WakefulError as exc:
        out.fail(exc)
    report = program.report.to_json() if program.report is not None else {}
    if out.json:
        out.document({"report": report, "disassembly": listing, "translation": translation})
    else:
        _print_dump(out, report, listing, translation)
    return EXIT_OK


def _read(obj: Path) -> bytes:
    try:
        with obj.open("rb") as f:
            return f.read(MAX_ELF_READ + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {obj}: {exc}") from exc


def _numbered(code: Any, index: int, lines: list[str]) -> list[str]:
    """Prefix each line with its pc (slot offset in the function; LD_IMM64 takes two slots)."""
    from wakeful.vm import OP_LDDW

    func = code.functions[index]
    slot, numbered = func.start, []
    for line in lines:
        numbered.append(f"{slot - func.start:5d}: {line}")
        slot += 2 if code.insns[slot].op == OP_LDDW else 1
    return numbered


def _select(code: Any, function: str | None) -> list[int]:
    names = [f.name for f in code.functions]
    if function is None:
        return list(range(len(names)))
    if function not in names:
        raise UsageError(f"--function {function}: no such function (have: {', '.join(names)})")
    return [names.index(function)]


def _print_dump(out: Out, report: dict[str, Any], listing: dict[str, list[str]], translation: str) -> None:
    out.text("[bold]verifier report[/]")
    print_report(out, report)
    for name, lines in listing.items():
        out.text(f"\n[bold]disassembly of {escape(name)}[/]")
        for line in lines:
            out.text(f"  {escape(line)}")
    out.text("\n[bold]generated Python[/]")
    if not out.quiet:
        out.plain(translation.rstrip("\n") + "\n")
