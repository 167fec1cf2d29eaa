"""Browser fixtures for the dashboard tests (interfaces.md §6): Debian's chromium driven by Playwright for Python
(never a downloaded browser), one browser per module; a failing test saves a screenshot of its page."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = Path(os.environ.get("WAKEFUL_UI_SHOTS", "/tmp/wakeful-ui-failures"))


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _missing(reason: str) -> None:
    # interfaces.md §8: with CI=true a missing browser fails the run; elsewhere the tests skip, saying why
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[test]')")
    path = chromium_path()
    if path is None:
        _missing("chromium is not installed (bash scripts/dev-setup.sh installs Debian's chromium as root)")
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # a generous bound for pages that redraw every 2 s, not a timing assertion
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[FAILED] = report.failed


FAILED = pytest.StashKey[bool]()


@pytest.fixture
def context(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context (its own cookies); on failure every open page is saved as a screenshot."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(20_000)
    try:
        yield ctx
    finally:
        if request.node.stash.get(FAILED, False):
            SHOTS.mkdir(parents=True, exist_ok=True)
            for i, page in enumerate(ctx.pages):
                shot = SHOTS / f"{request.node.name}-{i}.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot of the failing page: {shot}")
        ctx.close()
