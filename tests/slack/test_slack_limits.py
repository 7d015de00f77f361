"""Slack's limits for messages and views (bot.slack.messages.limits): every limit rejected one
past it, accepted exactly at it."""

from __future__ import annotations

from typing import Any

import pytest

from bot.slack.messages.limits import SlackLimitError, check_message, check_view


def section(text: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **extra}


def plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def overflow(text: str = "o", value: str = "v") -> dict[str, Any]:
    options = [{"text": plain(text), "value": value}, {"text": plain("p"), "value": "w"}]
    return {
        "text": "t",
        "blocks": [
            {
                "type": "actions",
                "elements": [{"type": "overflow", "action_id": "o", "options": options}],
            }
        ],
    }


def with_button(**changes: Any) -> dict[str, Any]:
    confirm = {"title": plain("t"), "text": plain("x"), "confirm": plain("y"), "deny": plain("n")}
    confirm.update({k[8:]: plain(v) for k, v in changes.items() if k.startswith("confirm_")})
    button = {"type": "button", "text": plain("Go"), "action_id": "a", "value": "v"}
    button.update({k: v for k, v in changes.items() if not k.startswith("confirm_")})
    return {
        "text": "t",
        "blocks": [{"type": "actions", "elements": [{**button, "confirm": confirm}]}],
    }


MESSAGE_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("blocks", {"text": "t", "blocks": [section()] * 51}, "blocks: 51 blocks"),
    ("section", {"text": "t", "blocks": [section("x" * 3001)]}, "blocks[0].text: 3001"),
    (
        "fields",
        {"text": "t", "blocks": [{"type": "section", "fields": [plain("f")] * 11}]},
        "blocks[0].fields: 11 items",
    ),
    (
        "field",
        {"text": "t", "blocks": [{"type": "section", "fields": [plain("f" * 2001)]}]},
        "blocks[0].fields[0]: 2001",
    ),
    ("header", {"text": "t", "blocks": [{"type": "header", "text": plain("h" * 151)}]}, "151"),
    ("button", with_button(text=plain("b" * 76)), "elements[0].text: 76"),
    ("action_id", with_button(action_id="a" * 256), "elements[0].action_id: 256"),
    ("block_id", {"text": "t", "blocks": [section(block_id="b" * 256)]}, "block_id: 256"),
    ("value", with_button(value="v" * 2001), "elements[0].value: 2001"),
    ("url", with_button(url="http://x/" + "u" * 2992), "elements[0].url: 3001"),
    ("context", {"text": "t", "blocks": [context("c" * 2001)]}, "elements[0].text: 2001"),
    ("option", overflow(text="o" * 76), "options[0].text: 76"),
    ("option_value", overflow(value="v" * 151), "options[0].value: 151"),
    ("confirm_title", with_button(confirm_title="t" * 101), "confirm.title: 101"),
    ("confirm_text", with_button(confirm_text="x" * 301), "confirm.text: 301"),
    ("confirm_button", with_button(confirm_confirm="y" * 31), "confirm.confirm: 31"),
    ("deny_button", with_button(confirm_deny="n" * 31), "confirm.deny: 31"),
    ("text", {"text": "t" * 40_001, "blocks": []}, "text: 40001"),
    ("no_text", {"blocks": [section()]}, "non-empty fallback text"),
    ("twice", {"text": "t", "blocks": [section(block_id="b")] * 2}, "'b' is used twice"),
    ("sdk", {"text": "t", "blocks": [{"type": "section"}]}, "text or fields attribute"),
]


@pytest.mark.parametrize(
    ("payload", "problem"), [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES]
)
def test_check_message_rejects(payload: dict[str, Any], problem: str) -> None:
    with pytest.raises(SlackLimitError) as caught:
        check_message(payload)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_check_message_accepts_every_limit_exactly() -> None:
    payload = with_button(text=plain("b" * 75), action_id="a" * 255, value="v" * 2000)
    confirm = payload["blocks"][0]["elements"][0]["confirm"]
    confirm.update(title=plain("t" * 100), text=plain("x" * 300), confirm=plain("y" * 30))
    payload["blocks"] += [section("x" * 3000, block_id="b" * 255)]
    payload["blocks"] += [{"type": "section", "fields": [plain("f" * 2000)] * 10}]
    payload["blocks"] += [{"type": "header", "text": plain("h" * 150)}]
    payload["blocks"] += [context("c" * 2000), *overflow("o" * 75, "v" * 150)["blocks"]]
    payload["blocks"][0]["elements"][0]["url"] = "http://x/" + "u" * 2991
    payload["blocks"] += [section()] * (50 - len(payload["blocks"]))
    payload["text"] = "t" * 40_000
    check_message(payload)


def view(**changes: Any) -> dict[str, Any]:
    return {"type": "modal", "title": plain("Backfill plan"), "blocks": [section()], **changes}


VIEW_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("title", view(title=plain("t" * 25)), "title.text: 25"),
    ("close", view(close=plain("c" * 25)), "close.text: 25"),
    ("submit", view(submit=plain("s" * 25)), "submit.text: 25"),
    ("metadata", view(private_metadata="m" * 3001), "private_metadata: 3001"),
    ("blocks", view(blocks=[section()] * 101), "blocks: 101 blocks"),
    ("callback", view(callback_id="c" * 256), "callback_id: 256"),
    ("section", view(blocks=[section("x" * 3001)]), "blocks[0].text: 3001"),
    ("no_title", {"type": "modal", "blocks": [section()]}, "needs a title"),
]


@pytest.mark.parametrize(
    ("payload", "problem"), [c[1:] for c in VIEW_CASES], ids=[c[0] for c in VIEW_CASES]
)
def test_check_view_rejects(payload: dict[str, Any], problem: str) -> None:
    with pytest.raises(SlackLimitError) as caught:
        check_view(payload)
    assert any(problem in p for p in caught.value.problems), caught.value.problems
