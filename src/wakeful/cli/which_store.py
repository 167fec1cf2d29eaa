"""Which store a local command opens (issue 19, docs/decisions-cli-store.md): the one a running node of the data
directory opened (``<data>/node.json``), else the data directory's, where the data directory is ``--data-dir`` /
``$WAKEFUL_HOME``, else the demo store of the current folder (``./.wakeful-demo``), else the default one.

The command says on stderr which store it uses when it is not the plain default, and when it creates an empty one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from wakeful.cli import nodefile

__all__ = ["DEMO_DIR", "begin", "pick_demo_dir", "resolve"]

DEMO_DIR = ".wakeful-demo"
_why: str | None = None  # why the data directory is not the plain default (set by pick_demo_dir)
_quiet = False  # --json / --quiet at the root: no notes
_noted = False


def begin(quiet: bool) -> None:
    """A new command (the root callback): notes unless ``--json``/``--quiet``, none said yet."""
    global _quiet, _noted, _why
    _quiet, _noted, _why = quiet, False, None


def pick_demo_dir(cwd: Path | None = None) -> None:
    """No ``--data-dir`` / ``$WAKEFUL_HOME``: the demo store of the current folder, when there is one."""
    global _why
    if os.environ.get("WAKEFUL_HOME"):
        return
    demo = (cwd or Path.cwd()) / DEMO_DIR
    if (demo / "wakeful.db").is_file() or (demo / nodefile.FILE).is_file():
        os.environ["WAKEFUL_HOME"] = str(demo)
        _why = f"the demo store of this folder ({demo})"


def resolve() -> str:
    """The store URL of a local command (``$WAKEFUL_DB_URL`` was handled by the caller)."""
    from wakeful.harness.config import load_config, redacted_url

    cfg = load_config()
    node = None if cfg.store_url is not None else nodefile.live_node(cfg.data_dir)  # store.url asked: it wins
    if node is not None and isinstance(node.get("store_url"), str) and node["store_url"]:
        url = str(node["store_url"])
        _note(f"using the store of the node at {node['url']} (pid {node['pid']}): {redacted_url(url)}")
        return url
    url = cfg.effective_store_url
    db_file = cfg.data_dir / "wakeful.db"
    if cfg.store_url is None and not db_file.exists():
        _note(f"no store in {cfg.data_dir} yet: creating an empty one at {db_file} (a node's data is elsewhere? "
              f"give --data-dir DIR, or run in the folder of `wakeful serve --demo`)")
    elif _why is not None:
        _note(f"using {_why}")
    return url


def _note(text: str) -> None:
    global _noted
    if _quiet or _noted:
        return
    _noted = True
    print(f"wakeful: {text}", file=sys.stderr, flush=True)
