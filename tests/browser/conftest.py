"""A real browser on the Slack stand-in's page: Playwright (the Python package) driving Debian's
Chromium, headless. `./dev test` installs Chromium; without it these tests are skipped locally
and fail under CI=true. Screenshots of each step go to var/screenshots/ for people to look at."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from bot.config import BotConfig, load_config
from bot.settings import load_settings
from standins.demo.run import EXAMPLE_CONFIG, Demo, running_demo
from tests.browser.support import Shots

# What the machine's closed network needs: no calls home, no first-run UI, no sandbox as root.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_executable() -> str | None:
    given = os.environ.get("BROWSER_EXECUTABLE")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    executable = browser_executable()
    if executable is None:
        message = "Chromium not found (./dev test installs Debian's chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[Demo]:
    """The demo's workspace and bot (example config, Airflow stand-in), no story played."""
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"})
    config: BotConfig = load_config(EXAMPLE_CONFIG)
    async with running_demo(settings, config, lambda _: None) as running:
        yield running


@pytest.fixture
async def page(browser: Browser, demo: Demo) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    # Nothing may be loaded from outside the stand-in.
    outside: list[str] = []
    opened.on(
        "request",
        lambda request: (
            outside.append(request.url) if not request.url.startswith(demo.slack.url) else None
        ),
    )
    await opened.goto(f"{demo.slack.url}/")
    yield opened
    await context.close()
    assert errors == [], f"the page reported errors: {errors}"
    assert outside == [], f"the page loaded from outside the stand-in: {outside}"


@pytest.fixture
def shots(page: Page, request: pytest.FixtureRequest) -> Shots:
    return Shots(page, request.node.name.removeprefix("test_"))
