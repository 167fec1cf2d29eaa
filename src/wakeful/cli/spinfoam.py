"""`wakeful-spinfoam`: the drop-in for a spinfoam runtime binary (docs/spinfoam-compat.md, issue 21).

An embedder written for spinfoam runs ``<exe> [args] --enable-builds`` and ``<exe> --dump-sdk``; this entry
point accepts that argv unchanged (and every option of `wakeful runtime`, runtime-protocol.md §2) and serves
the same stdio protocol. ``--dump-sdk`` prints spinfoam.h. Deliberately free of typer: it starts fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["PROG", "main"]

PROG = "wakeful-spinfoam"


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point `wakeful-spinfoam`; returns the exit code of runtime-protocol.md §2."""
    from wakeful.runtime import stdio

    return stdio.main(list(sys.argv[1:] if argv is None else argv), prog=PROG, spinfoam=True)


if __name__ == "__main__":
    sys.exit(main())
