"""`wakeful runtime` (the stdio runtime server), `wakeful --help`, `version` and `sdk header` start without loading
the harness or SQLAlchemy: command modules import them when a command runs (start-up time of every runtime process).
Remote-mode commands (`--server`) load only what sends an operation over HTTP (docs/decisions-cli-start.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_remote import ok, serving, wakeful

HEAVY = ("sqlalchemy", "wakeful.harness", "wakeful.control", "fastapi")


def _imported(args: list[str], stdin: bytes | None = b"", home: Path | None = None,
              cwd: Path | None = None) -> tuple[int, set[str], str]:
    env = {**os.environ, **({"WAKEFUL_HOME": str(home)} if home else {})}
    for name in ("WAKEFUL_SERVER", "WAKEFUL_API_KEY", "WAKEFUL_DB_URL", "WAKEFUL_CONFIG"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "wakeful.cli.main", *args], env=env,
                          input=stdin, capture_output=True, timeout=60, cwd=cwd)
    err = proc.stderr.decode()
    names = {line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import time:")}
    return proc.returncode, names, proc.stdout.decode()


def _heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names for h in HEAVY if n == h or n.startswith(h + "."))


def test_the_runtime_server_starts_and_stops_without_the_harness() -> None:
    code, names, _ = _imported(["runtime"])  # pipes for stdin/stdout; EOF on stdin ends it cleanly
    assert code == 0
    assert "wakeful.runtime.stdio" in names  # it really started the server
    assert not _heavy(names), _heavy(names)


@pytest.mark.parametrize("args", [["--help"], ["runtime", "--help"]])
def test_help_does_not_load_the_harness(args: list[str]) -> None:
    code, names, out = _imported(args)
    assert code == 0 and "Usage" in out
    assert not _heavy(names), _heavy(names)


@pytest.mark.parametrize(("args", "shows"), [(["version", "--json"], '"sdk_version"'),
                                             (["version"], "protocol_version: 1"),
                                             (["sdk", "header"], "SF_MAIN")])
def test_commands_without_a_store_load_neither_the_harness_nor_the_runtime(
        args: list[str], shows: str, tmp_path: Path) -> None:
    code, names, out = _imported(args, home=tmp_path, cwd=tmp_path)
    assert code == 0 and shows in out, out
    assert not _heavy(names), _heavy(names)
    assert "wakeful.runtime" not in names  # the runtime loads for `wakeful run`, not for every command
    assert not list(tmp_path.iterdir())  # and nothing is written


# What a remote command truly loads of the harness: the package (its names load lazily), its typed errors (a
# refusal is a ``Refused``), and the operations layer's HttpBackend with the routes it sends (``ops.routes``, data
# alone) and the table module it shares with LocalBackend — never the store, SQLAlchemy, the node or the control
# plane (the routes of its operations are data in ``ops.routes`` too)
REMOTE_HARNESS = {"wakeful.harness", "wakeful.harness.errors", "wakeful.harness.ops", "wakeful.harness.ops.backend",
                  "wakeful.harness.ops.routes", "wakeful.harness.ops.table"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, Path]]:
    root = tmp_path_factory.mktemp("cli-lazy-remote")
    home, away = root / "home", root / "away"
    away.mkdir()
    group = ok(wakeful(home, "group", "create", "g-lazy", "--json"))["id"]
    ok(wakeful(home, "agent", "create", "lazy-worker", "--group", group, "--json"))
    key = ok(wakeful(home, "key", "create", "--role", "group", "--group", group, "--json"))["key"]
    with serving(home, "cli-lazy-remote") as url:
        yield url, key, group, away


@pytest.mark.parametrize(("args", "shows"), [(["goal", "list", "--group", "{group}"], "[]"),
                                             (["loop", "list"], "[]"),
                                             (["agent", "list"], "lazy-worker")])
def test_remote_commands_load_only_the_http_path(
        server: tuple[str, str, str, Path], args: list[str], shows: str) -> None:
    url, key, group, away = server
    code, names, out = _imported(["--server", url, "--key", key, *[a.format(group=group) for a in args], "--json"],
                                 home=away, cwd=away)
    assert code == 0 and shows in out, out
    assert "wakeful.harness.ops.routes" in names and "httpx" in names  # it really went over HTTP
    heavy = [n for n in _heavy(names) if n not in REMOTE_HARNESS]
    assert not heavy, heavy
    assert not [n for n in names if n == "wakeful.runtime" or n.startswith("wakeful.runtime.")]
    assert not list(away.iterdir())


def test_a_store_command_still_loads_the_harness_when_it_runs(tmp_path: Path) -> None:
    code, names, out = _imported(["db", "version", "--json"], stdin=None, home=tmp_path)
    assert code == 0, out
    assert "sqlalchemy" in names and '"code"' in out
