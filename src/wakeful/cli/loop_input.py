"""What `wakeful loop create` is given (issue 19): ``--source`` C files built here, ``--elf`` bytes checked for
the ELF magic with a build hint, ``--artifact`` refused with a hint when it names a local file, and the note of a
local create that a node adopts the Loop later (docs/decisions-cli-store.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wakeful.cli.output import Out, UsageError, escape

__all__ = ["adoption_note", "check_artifact", "elf_from_source", "read_elf"]

ELF_MAGIC = b"\x7fELF"
MAX_ELF_READ = 1 << 20  # the loader's largest max_elf_bytes: a larger file is refused unread


def elf_from_source(out: Out, paths: list[Path], entry: str | None) -> tuple[bytes, Any]:
    """Build the C bundle of ``paths`` (build.md §1): the ELF and its line table (uploaded beside it, so the
    Loop's faults name ``main.c:N``, issue 18); a failed build prints its diagnostics and exits 1."""
    from wakeful.cli.program import build_elf, bundle_from_paths

    files, entry_key = bundle_from_paths(paths, entry)
    return build_elf(out, files, entry_key)


def read_elf(path: Path) -> bytes:
    """The bytes of ``--elf``; C source or any non-ELF file is a usage error that says how to build it."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_ELF_READ + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not data.startswith(ELF_MAGIC):
        raise UsageError(f"--elf {path} is not an ELF object{_source_hint(path, data)}")
    return data


def check_artifact(artifact: str) -> None:
    """``--artifact`` names a stored artifact (``sha256:…`` or the agent's path); a local file gets a hint."""
    if artifact.startswith("sha256:") or not Path(artifact).is_file():
        return
    path = Path(artifact)
    if _is_elf(path):
        hint = f"it is an ELF: use --elf {artifact}"
    elif path.suffix in (".c", ".h"):
        hint = f"it is C source: use --source {artifact}, or `wakeful build {artifact} -o OUT.o` first"
    else:
        hint = "it is a local file: use --source (C) or --elf (a built object)"
    raise UsageError(f"--artifact {artifact} names a local file, not a stored artifact (sha256:<hex> or the "
                     f"agent's /path): {hint}")


def adoption_note(out: Out, view: dict[str, Any], *, signalled: bool = False) -> None:
    """A local create: the Loop waits for a node; say which and how long (the node's reconcile period, from its
    node file, else placement.reconcile_s) — or that the nodes of a PostgreSQL store were asked to adopt it now."""
    runtime = view.get("runtime")
    if (runtime.get("state") if isinstance(runtime, dict) else runtime) not in ("loading", "none", None):
        return
    from wakeful.cli.nodefile import live_node
    from wakeful.harness.config import load_config

    cfg = load_config()
    if signalled:
        out.note(escape("asked the nodes on this store to adopt it now (NOTIFY wakeful_loops); a node that misses "
                        f"the signal adopts it at its next reconcile, up to {cfg.placement.reconcile_s} s"))
        return
    node = live_node(cfg.data_dir)
    if node is None:
        out.note(escape(f"no node runs on {cfg.data_dir}: the Loop starts when `wakeful serve` runs on it"))
        return
    every = node.get("reconcile_s")
    within = every if isinstance(every, int | float) and not isinstance(every, bool) else cfg.placement.reconcile_s
    out.note(escape(f"waiting for the node at {node['url']} to adopt it: its next reconcile, up to "
                    f"{within:g} s (placement.reconcile_s; `--server` adopts at once)"))


def _source_hint(path: Path, data: bytes) -> str:
    if path.suffix in (".c", ".h") or b"#include" in data[:4096]:
        return f": this is C source: use --source {path}, or `wakeful build {path} -o OUT.o` first"
    return ": give a BPF ELF built by `wakeful build`, or C source with --source"


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False
