"""Suite-wide fixtures: the fixture compiler and the CI switch."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

IN_CI = os.environ.get("CI") == "true"


def _bytecode_cache_for_subprocesses() -> None:
    """The suite starts hundreds of Python children (`wakeful serve`, the CLI, bench, cluster nodes) that inherit
    this environment. Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine kind sets it), each child compiled
    every module of ``src/`` it imports from source again: about a quarter of a CLI child's CPU. The children
    keep their bytecode in a cache of the suite's own under the temp directory instead (never in the work tree;
    a stale file is recompiled, since Python checks the source's size and time). This process is unchanged.
    ``WAKEFUL_TEST_PYCACHE=off`` keeps the environment as it was."""
    if os.environ.get("WAKEFUL_TEST_PYCACHE") == "off" or "PYTHONPYCACHEPREFIX" in os.environ:
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "wakeful-test-pycache")


_bytecode_cache_for_subprocesses()


@pytest.fixture(scope="session")
def compile_c():  # type: ignore[no-untyped-def]
    from support.cc import compile_c as cc

    return cc


# harness store fixtures (tests/support/harness_fixtures.py): `store` runs on SQLite and PostgreSQL
from support.harness_fixtures import (  # noqa: E402,F401
    TestClock,
    harness_runner,
    pg_schema,
    store,
    store_clock,
    store_url,
)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    from support.harness_fixtures import run_async_test

    return run_async_test(pyfuncitem)


@pytest.fixture(autouse=True)
def _wakeful_environment_per_test() -> Iterator[None]:
    """Each test starts from the ``WAKEFUL_*`` environment the suite started with: a test that runs the typer
    app in process (``CliRunner``) or a server in this process cannot leave a store URL or data directory for a
    later test's children (``main()`` itself restores it: tests/unit/cli/test_cli_main_environment.py)."""
    from wakeful.cli.main import kept_environment

    with kept_environment():
        yield
