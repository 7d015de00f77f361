"""Slack's size limits for messages and modal views, checked before anything is sent.

Slack answers `invalid_blocks` for a payload over a limit, which a user sees as a silent failure.
The renderers call `check_message` / `check_view` on every payload, so an over-limit message is a
bug caught by the tests instead. Our own walk names the exact place and limit; slack_sdk's
block models then add whatever else they know (required fields, element types).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

MESSAGE_BLOCKS = 50
VIEW_BLOCKS = 100
MESSAGE_TEXT = 40_000
SECTION_TEXT = 3000
SECTION_FIELDS = 10
FIELD_TEXT = 2000
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
CONTEXT_TEXT = 2000  # each text element of a context block
ACTIONS_ELEMENTS = 25
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
BUTTON_URL = 3000
OPTION_TEXT = 75  # an option of a select menu or an overflow menu
OPTION_VALUE = 150
ID_LENGTH = 255  # action_id, block_id, callback_id
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30
VIEW_TEXT = 24  # modal title, close and submit
PRIVATE_METADATA = 3000


class SlackLimitError(ValueError):
    """A payload Slack would reject; `problems` lists each broken limit with its place."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def check_message(payload: Mapping[str, Any]) -> None:
    """Raise SlackLimitError if a chat message payload (`text`, `blocks`) breaks Slack's limits."""
    problems: list[str] = []
    text = payload.get("text")
    # Slack shows `text` in notifications and to screen readers; slack_sdk warns without it.
    if not isinstance(text, str) or not text.strip():
        problems.append("text: a message needs non-empty fallback text")
    else:
        _at_most(problems, "text", len(text), MESSAGE_TEXT)
    blocks = payload.get("blocks", [])
    if not isinstance(blocks, list):
        raise SlackLimitError(["blocks: must be a list"])
    _at_most(problems, "blocks", len(blocks), MESSAGE_BLOCKS, unit="blocks")
    _check_blocks(problems, blocks)
    problems += _sdk_blocks(blocks)
    if problems:
        raise SlackLimitError(problems)


def check_view(view: Mapping[str, Any]) -> None:
    """Raise SlackLimitError if a modal or Home tab view breaks Slack's limits."""
    problems: list[str] = []
    kind = view.get("type")
    if kind not in ("modal", "home"):
        problems.append("type: must be 'modal' or 'home'")
    for key in ("title", "close", "submit"):
        if key in view:
            _at_most(problems, f"{key}.text", len(_text(view[key])), VIEW_TEXT)
    if kind == "modal" and not _text(view.get("title")):
        problems.append("title: a modal needs a title")
    _at_most(problems, "callback_id", len(view.get("callback_id", "")), ID_LENGTH)
    _at_most(problems, "private_metadata", len(view.get("private_metadata", "")), PRIVATE_METADATA)
    blocks = view.get("blocks", [])
    if not isinstance(blocks, list) or not blocks:
        raise SlackLimitError([*problems, "blocks: a view needs 1 to 100 blocks"])
    _at_most(problems, "blocks", len(blocks), VIEW_BLOCKS, unit="blocks")
    _check_blocks(problems, blocks)
    try:
        # to_dict() runs validate_json() on the view and on every nested object, where
        # validate_json() alone stops at the view's own fields.
        View(**view).to_dict()
    except (SlackObjectFormationError, TypeError) as exc:
        problems.append(f"slack_sdk: {exc}")
    if problems:
        raise SlackLimitError(problems)


def _sdk_blocks(blocks: list[Any]) -> list[str]:
    problems: list[str] = []
    for index, raw in enumerate(blocks):
        try:
            block = Block.parse(raw)
            if block is None:
                problems.append(f"blocks[{index}]: slack_sdk does not know this block")
                continue
            block.validate_json()
            block.to_dict()  # validates nested elements, text objects and confirm dialogs
        except (SlackObjectFormationError, TypeError) as exc:
            problems.append(f"blocks[{index}]: slack_sdk: {exc}")
    return problems


def _check_blocks(problems: list[str], blocks: list[Any]) -> None:
    seen: set[str] = set()
    for index, block in enumerate(blocks):
        where = f"blocks[{index}]"
        if not isinstance(block, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            _at_most(problems, f"{where}.block_id", len(block_id), ID_LENGTH)
            if block_id in seen:
                problems.append(f"{where}.block_id: {block_id!r} is used twice")
            seen.add(block_id)
        kind = block.get("type")
        if kind == "section":
            _check_section(problems, where, block)
        elif kind == "header":
            _at_most(problems, f"{where}.text", len(_text(block.get("text"))), HEADER_TEXT)
        elif kind == "context":
            elements = block.get("elements", [])
            _at_most(problems, f"{where}.elements", len(elements), CONTEXT_ELEMENTS, unit="items")
            for n, element in enumerate(elements):
                if isinstance(element, Mapping) and element.get("type") != "image":
                    size = len(_text(element))
                    _at_most(problems, f"{where}.elements[{n}].text", size, CONTEXT_TEXT)
        elif kind == "actions":
            elements = block.get("elements", [])
            _at_most(problems, f"{where}.elements", len(elements), ACTIONS_ELEMENTS, unit="items")
            for n, element in enumerate(elements):
                _check_element(problems, f"{where}.elements[{n}]", element)


def _check_section(problems: list[str], where: str, block: Mapping[str, Any]) -> None:
    if "text" in block:
        _at_most(problems, f"{where}.text", len(_text(block["text"])), SECTION_TEXT)
    fields = block.get("fields", [])
    _at_most(problems, f"{where}.fields", len(fields), SECTION_FIELDS, unit="items")
    for n, field in enumerate(fields):
        _at_most(problems, f"{where}.fields[{n}]", len(_text(field)), FIELD_TEXT)
    if "accessory" in block:
        _check_element(problems, f"{where}.accessory", block["accessory"])


def _check_element(problems: list[str], where: str, element: Mapping[str, Any]) -> None:
    _at_most(problems, f"{where}.action_id", len(element.get("action_id", "")), ID_LENGTH)
    if element.get("type") == "button":
        _at_most(problems, f"{where}.text", len(_text(element.get("text"))), BUTTON_TEXT)
        _at_most(problems, f"{where}.value", len(element.get("value", "")), BUTTON_VALUE)
        _at_most(problems, f"{where}.url", len(element.get("url", "")), BUTTON_URL)
    for n, option in enumerate(element.get("options") or []):
        here = f"{where}.options[{n}]"
        _at_most(problems, f"{here}.text", len(_text(option.get("text"))), OPTION_TEXT)
        _at_most(problems, f"{here}.value", len(option.get("value", "")), OPTION_VALUE)
    confirm = element.get("confirm")
    if confirm is not None:
        here = f"{where}.confirm"
        _at_most(problems, f"{here}.title", len(_text(confirm.get("title"))), CONFIRM_TITLE)
        _at_most(problems, f"{here}.text", len(_text(confirm.get("text"))), CONFIRM_TEXT)
        for key in ("confirm", "deny"):
            _at_most(problems, f"{here}.{key}", len(_text(confirm.get(key))), CONFIRM_BUTTON)


def _text(value: Any) -> str:
    """The string of a text object (or of a bare string, which slack_sdk also accepts)."""
    if isinstance(value, Mapping):
        return str(value.get("text", ""))
    return "" if value is None else str(value)


def _at_most(
    problems: list[str], where: str, size: int, limit: int, *, unit: str = "characters"
) -> None:
    if size > limit:
        problems.append(f"{where}: {size} {unit}, over Slack's limit of {limit}")
