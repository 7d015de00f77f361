"""Signed but malformed interactive payloads and events, over real HTTP, field by field.

tests/slack/test_slack_http_hostile.py holds hand-picked cases; this module generates them. Each
kind of payload Slack sends to the Request URL starts from a well-formed one, and every field in
it, top-level or nested, is in turn left out, set to null, to a value of each other JSON type,
and emptied. Whatever the bot makes of it, it answers 200 (handled) or 400 (refused with a
reason) before any listener work can fail: never a 500, never a dropped connection, no error or
traceback in its log, and the next well-formed request is answered as before. Hypothesis then
plants random JSON anywhere in a payload.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.slack.rules.ids import ActionId, ViewCallbackId
from standins.slack.server import BotReply
from tests.support.e2e import CHANNEL, OWNER, Bot

Path = tuple[str | int, ...]
MISSING = object()  # a mutation: the field is left out
KINDS = (
    "block_actions",
    "view_submission",
    "view_closed",
    "shortcut",
    "message_action",
    "block_suggestion",
    "interactive_message",
    "event_callback",
)
# One value of each JSON type; a field gets every one of a type other than its own.
OF_TYPE: dict[type, Any] = {
    str: "x",
    int: 7,
    bool: True,
    list: ["x"],
    dict: {"x": 1},
}
EMPTY: dict[type, Any] = {str: "", int: 0, bool: False, list: [], dict: {}}


def base(bot: Bot, kind: str) -> dict[str, Any]:
    """A well-formed payload of `kind` as Slack sends it, with a fresh trigger_id, response_url
    and event_id (Slack's are single-use, and a repeated body is dropped as a replay)."""
    st_ = bot.slack.state
    trigger = st_.issue_trigger(OWNER)
    response_url = st_.issue_response_url(bot.slack.url, CHANNEL, OWNER)
    if kind == "event_callback":
        return {
            "token": st_.verification_token,
            "team_id": st_.team_id,
            "api_app_id": st_.app_id,
            "event": {"type": "app_home_opened", "user": OWNER, "channel": "D0", "tab": "home"},
            "type": "event_callback",
            "event_id": "Ev" + secrets.token_hex(8),
            "event_time": int(time.time()),
            "authorizations": [{"team_id": st_.team_id, "user_id": "U0BOT", "is_bot": True}],
            "is_ext_shared_channel": False,
        }
    payload = st_.interaction(kind, OWNER, trigger)
    channel = {"id": CHANNEL, "name": "backfill"}
    message = {"type": "message", "ts": "1.000001", "text": "x", "blocks": [{"type": "divider"}]}
    view = {
        "id": "V0PLAN0001",
        "team_id": st_.team_id,
        "type": "modal",
        "callback_id": ViewCallbackId.PLAN,
        "private_metadata": "",
        "state": {"values": {}},
        "hash": "1.abc",
    }
    click = {"action_id": ActionId.APPROVE, "block_id": "b", "value": "0" * 32, "type": "button"}
    container = {"type": "message", "message_ts": "1.000001", "channel_id": CHANNEL}
    extra: dict[str, dict[str, Any]] = {
        "block_actions": {
            "container": container,
            "channel": channel,
            "message": message,
            "state": {"values": {}},
            "response_url": response_url,
            "actions": [click],
        },
        "view_submission": {"view": view, "response_urls": []},
        "view_closed": {"view": view, "is_cleared": False},
        "shortcut": {"callback_id": "backfill.shortcut", "action_ts": "1.2"},
        "message_action": {
            "callback_id": "backfill.message",
            "channel": channel,
            "message": message,
            "message_ts": "1.000001",
            "response_url": response_url,
        },
        "block_suggestion": {
            "action_id": "backfill.suggest",
            "block_id": "b",
            "value": "ord",
            "container": container,
            "channel": channel,
        },
        "interactive_message": {
            "callback_id": "backfill.legacy",
            "actions": [{"name": "approve", "value": "x", "type": "button"}],
            "channel": channel,
            "response_url": response_url,
            "attachment_id": "1",
            "message_ts": "1.000001",
        },
    }
    return {**payload, **extra[kind]}


def paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every field of `value`: each key of each object, and the first item of each list."""
    children: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list) and value:
        children = [(0, value[0])]
    for key, child in children:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


def mutations(original: Any) -> dict[str, Any]:
    """What a field is set to: left out, null, each other JSON type, and emptied."""
    own = type(original)
    found: dict[str, Any] = {"missing": MISSING, "null": None}
    found.update({kind.__name__: value for kind, value in OF_TYPE.items() if kind is not own})
    if own in EMPTY:
        found["empty"] = EMPTY[own]
    return found


def mutated(payload: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    parent: Any = changed
    for key in path[:-1]:
        parent = parent[key]
    if value is MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(value)
    return changed


def encoded(kind: str, payload: Any) -> tuple[bytes, dict[str, str]]:
    """The body and content type Slack sends `payload` with: JSON for events, else a form."""
    if kind == "event_callback":
        return json.dumps(payload).encode(), {"Content-Type": "application/json"}
    return urlencode({"payload": json.dumps(payload)}).encode(), {}


class Prober:
    """Sends signed payloads and says what went wrong with each answer, log included."""

    def __init__(self, bot: Bot, caplog: pytest.LogCaptureFixture) -> None:
        self.bot, self.caplog = bot, caplog
        self.statuses: Counter[int] = Counter()

    async def wrong(self, kind: str, payload: Any) -> str | None:
        """Why the bot's handling of `payload` is wrong; None if it is right."""
        seen = len(self.caplog.records)
        body, headers = encoded(kind, payload)
        reply: BotReply = await self.bot.slack.send_raw(
            body, {**headers, **self.bot.slack.sign(body)}
        )
        await self.bot.settle()  # what the listeners do after acking is logged by now
        self.statuses[reply.status] += 1
        errors = [r for r in self.caplog.records[seen:] if r.levelno >= logging.ERROR]
        if reply.status not in (200, 400):
            return f"answered {reply.status} {reply.body[:80]!r}"
        if "Traceback" in reply.body or len(reply.body) > 200:
            return f"answered {reply.status} with {reply.body[:80]!r}"
        if reply.status == 400 and ("\n" in reply.body or not reply.body):
            return f"400 without a one-line reason: {reply.body[:80]!r}"
        if errors:
            return f"answered {reply.status}, logged {errors[0].getMessage()[:80]!r}"
        return None


def answers(bot: Bot) -> list[str]:
    """The answers the listeners gave: ephemeral replies and Home tabs published (a publish the
    stand-in rate limited is retried: only the one that went through counts)."""
    told = [f"{e.source} to {e.user}: {e.text[:60]}" for e in bot.slack.state.ephemerals]
    calls = bot.slack.state.calls
    return told + [c.method for c in calls if c.method == "views.publish" and c.error is None]


async def still_answers(bot: Bot) -> None:
    """Well-formed requests after the hostile ones are answered as before."""
    reply = await bot.slack.slash_command("help")
    assert reply.status == 200
    assert "/backfill" in reply.body
    for kind in ("block_actions", "event_callback"):
        before = answers(bot)
        body, headers = encoded(kind, base(bot, kind))
        reply = await bot.slack.send_raw(body, {**headers, **bot.slack.sign(body)})
        assert reply.status == 200
        await bot.settle()
        assert len(answers(bot)) == len(before) + 1, answers(bot)[len(before) - 3 :]


@pytest.mark.parametrize("kind", KINDS)
async def test_every_field_of_a_payload_mutated_is_answered_200_or_400(
    bot: Bot, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.INFO)
    bot.slack.state.add_user(OWNER, "owner")
    prober = Prober(bot, caplog)
    template = base(bot, kind)
    failures: list[str] = []
    cases = 0
    for path in paths(template):
        original: Any = template
        for key in path:
            original = original[key]
        for name, value in mutations(original).items():
            cases += 1
            why = await prober.wrong(kind, mutated(base(bot, kind), path, value))
            if why is not None:
                failures.append(f"{'.'.join(map(str, path))} {name}: {why}")
    assert cases > 40
    assert not failures, f"{len(failures)} of {cases} {kind} cases:\n" + "\n".join(failures)
    assert prober.statuses[400] > 0
    if kind in ("block_actions", "event_callback"):  # the listeners ran on what was let through
        assert prober.statuses[200] > 0
        assert answers(bot)
    await still_answers(bot)


async def test_a_well_formed_payload_no_listener_answers_is_400_naming_it(bot: Bot) -> None:
    answered = {}
    for kind in KINDS:
        body, headers = encoded(kind, base(bot, kind))
        reply = await bot.slack.send_raw(body, {**headers, **bot.slack.sign(body)})
        answered[kind] = (reply.status, reply.body)
    # A submission of a modal with no Submit of ours (only Review plan has one) is not Slack's.
    expected = {kind: (400, f"{kind}: no listener for it") for kind in KINDS}
    expected.update({
        "block_actions": (200, ""), "event_callback": (200, ""),
        "view_submission": (400, "view_submission: no listener for this callback_id"),
    })  # fmt: skip
    assert answered == expected


async def test_every_button_the_bot_puts_on_a_message_is_answered(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    """http.py lets through the clicks of every ActionId: each has a listener."""
    bot.slack.state.add_user(OWNER, "owner")
    prober = Prober(bot, caplog)
    for action_id in ActionId:
        payload = base(bot, "block_actions")
        payload["actions"][0]["action_id"] = action_id
        assert await prober.wrong("block_actions", payload) is None
    assert prober.statuses == {200: len(ActionId)}


async def test_an_event_no_listener_handles_is_acknowledged_and_ignored(bot: Bot) -> None:
    """Slack retries an event answered otherwise, and turns off a failing app's events."""
    for event in ({"type": "message", "channel": CHANNEL, "text": "hi"}, {"type": "x" * 50}):
        payload = {**base(bot, "event_callback"), "event": event}
        body, headers = encoded("event_callback", payload)
        reply = await bot.slack.send_raw(body, {**headers, **bot.slack.sign(body)})
        assert (reply.status, reply.body) == (200, "")
    await bot.settle()
    assert [
        c.method for c in bot.slack.state.calls if c.method.startswith(("views.", "chat."))
    ] == []


def _json() -> st.SearchStrategy[Any]:
    # No capital letters: a string planted is never a well-formed Slack id (U…, C…), which the
    # bot would take at its word and Slack refuse (a Home tab published to nobody is an error).
    text = st.text(st.characters(exclude_categories=["Lu"]), max_size=8)
    leaves = st.none() | st.booleans() | st.integers() | st.floats() | text
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=6,
    )


async def test_random_json_anywhere_in_a_payload_is_answered_200_or_400(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    bot.slack.state.add_user(OWNER, "owner")
    prober = Prober(bot, caplog)
    loop = asyncio.get_running_loop()
    templates = {kind: list(paths(base(bot, kind))) for kind in KINDS}

    def run(coroutine: Any) -> Any:
        # Hypothesis drives a plain function: it runs in a thread, the bot on this loop.
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(data=st.data())
    def probe(data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(KINDS))
        path = data.draw(st.sampled_from(templates[kind]))
        value = data.draw(_json() | st.just(MISSING))
        payload = run(_base(bot, kind))
        if value is not MISSING and isinstance(path[-1], str) and data.draw(st.booleans()):
            path = (*path[:-1], data.draw(st.text(min_size=1, max_size=8)))  # a new field
        assert run(prober.wrong(kind, mutated(payload, path, value))) is None

    await asyncio.to_thread(probe)
    await still_answers(bot)


async def _base(bot: Bot, kind: str) -> dict[str, Any]:
    return base(bot, kind)  # on the bot's loop: the stand-in's state is not thread-safe
