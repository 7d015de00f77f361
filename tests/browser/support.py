"""Helpers for the browser tests (a module of its own: `conftest` names are ambiguous)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from playwright.async_api import Page

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


class Shots:
    """Numbered screenshots of one test's steps under var/screenshots/<test>/."""

    def __init__(self, page: Page, name: str) -> None:
        self.page, self.folder, self.count = page, SCREENSHOTS / name, 0
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True, exist_ok=True)

    async def take(self, step: str) -> None:
        self.count += 1
        slug = re.sub(r"[^a-z0-9]+", "-", step.lower()).strip("-")
        await self.page.screenshot(path=self.folder / f"{self.count:02d}-{slug}.png")
