"""Slack messages as terminal text, for the local demo: what a person would see in the channel."""

from __future__ import annotations

import re
from typing import Any

_LINK = re.compile(r"<([^|>]+)\|([^>]+)>")
_MENTION = re.compile(r"<[@#!]([^>|]+)(?:\|[^>]*)?>")


def _text(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    text = str(value.get("text", ""))
    text = _LINK.sub(r"\2 (\1)", text)
    text = _MENTION.sub(r"@\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _button(element: dict[str, Any], number: int) -> str:
    return f"[{number}: {_text(element.get('text'))}]"


def render(
    blocks: list[dict[str, Any]] | None, text: str, *, first_button: int = 1
) -> tuple[str, list[dict[str, Any]]]:
    """(text, buttons) of a message; buttons are numbered from `first_button` for clicking."""
    if not blocks:
        return _text({"text": text}), []
    lines: list[str] = []
    found: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind in {"header", "section"}:
            line = _text(block.get("text"))
            fields = [_text(f) for f in block.get("fields", [])]
            accessory = block.get("accessory")
            if isinstance(accessory, dict) and accessory.get("type") == "button":
                found.append(accessory)
                line += "  " + _button(accessory, first_button + len(found) - 1)
            lines.append(line.upper() if kind == "header" else line)
            lines.extend(f"  {f}" for f in fields)
        elif kind == "context":
            lines.append("  " + "  ".join(_text(e) for e in block.get("elements", [])))
        elif kind == "divider":
            lines.append("-" * 40)
        elif kind == "actions":
            labels = []
            for element in block.get("elements", []):
                if element.get("type") == "button":
                    found.append(element)
                    labels.append(_button(element, first_button + len(found) - 1))
            lines.append("  ".join(labels))
    return "\n".join(line for line in lines if line.strip()), found
