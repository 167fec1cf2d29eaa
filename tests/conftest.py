"""Suite-wide fixtures: the fixture compiler and the CI switch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

IN_CI = os.environ.get("CI") == "true"


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
