"""Golden files of Slack payloads: each case names the template it renders, is checked against
Slack's limits and compared with tests/golden/<case>.json, byte for byte.

Regenerate the golden files after an intended change, then review their diff:
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/*/test_*messages*.py tests/slack/test_golden_files.py
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.core.templates import TEMPLATES, environment
from bot.slack.messages.limits import check_message, check_view

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
MACRO_TEMPLATES = frozenset(
    {"slack/elements.json.j2", "backfill/macros.json.j2", "backfill/progress_macros.json.j2"}
)
"""Templates of macros only: they are rendered through the templates that import them."""


@dataclass(frozen=True)
class Case:
    template: str
    """The Block Kit template the payload comes from (under templates/)."""
    build: Callable[[], dict[str, Any]]


def slack_templates() -> set[str]:
    """Every Block Kit template that renders a payload of its own."""
    found = {str(p.relative_to(TEMPLATES)) for p in TEMPLATES.glob("*/*.json.j2")}
    return found - MACRO_TEMPLATES


def check(payload: Mapping[str, Any]) -> None:
    if payload.get("type") in ("modal", "home"):
        check_view(payload)
    else:
        check_message(payload)


def build_recording(case: Case, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], set[str]]:
    """The case's payload and the names of the templates loaded to render it."""
    env = environment()
    load = env.get_template
    loaded: set[str] = set()

    def recording(name: Any, *args: Any, **kwargs: Any) -> Any:
        loaded.add(str(name))
        return load(name, *args, **kwargs)

    monkeypatch.setattr(env, "get_template", recording)
    payload = case.build()
    monkeypatch.undo()
    return payload, loaded


def assert_golden(name: str, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    payload, loaded = build_recording(case, monkeypatch)
    assert case.template in loaded, f"{name} says {case.template} but rendered {sorted(loaded)}"
    check(payload)
    actual = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"{path} is missing; run UPDATE_GOLDEN=1 pytest on its test")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "golden", "rendered", lineterm=""
        )
        pytest.fail(f"{name} differs from {path} (UPDATE_GOLDEN=1 to accept):\n" + "\n".join(diff))


def elements(payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The interactive elements: in actions blocks and as section accessories."""
    for block in payload["blocks"]:
        if block["type"] == "actions":
            yield from block["elements"]
        if "accessory" in block:
            yield block["accessory"]


def mrkdwn_texts(payload: Mapping[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(payload["blocks"])
    return found
