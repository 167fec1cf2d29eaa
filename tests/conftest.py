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
