"""`backfill-bot chat`: the demo's workspace in a terminal. A person types `/backfill …`, acts
as another member (`as U0ALICE001`) and clicks buttons by number; each command returns as soon
as the bot has answered. The browser page of the same workspace is open meanwhile."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.config import BotConfig
from bot.demo import CHANNEL, REQUESTER, Demo, demo_config, running_demo
from bot.settings import Settings
from bot.standins.slack_transcript import render, sanitize

HELP = (
    "Type a slash command as in Slack (e.g. /backfill example.etl_orders 2021-06-04..2021-06-06),"
    " 'click N' to click button N, 'as USER' to act as another user (e.g. as U0ALICE001),"
    " or 'quit'."
)


@dataclass
class Conversation:
    """What was shown so far, and the buttons a person can click by number."""

    demo: Demo
    shown_messages: dict[str, str] = field(default_factory=dict)
    shown_ephemerals: int = 0
    buttons: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def show_new(self) -> None:
        """Messages that are new or changed since the last look, in every channel."""
        state, out = self.demo.slack.state, self.demo.out
        for item in state.ephemerals[self.shown_ephemerals :]:
            text, _ = render(item.blocks, item.text)
            name = sanitize(state.acting_user(item.user).name)
            out(f"\n(only @{name} sees this)\n{text}")
        self.shown_ephemerals = len(state.ephemerals)
        for channel in list(state.channels.values()):
            for message in channel.messages:
                for shown in [message, *state.thread(channel.id, message.ts)]:
                    first = len(self.buttons) + 1
                    text, found = render(shown.blocks, shown.text, first_button=first)
                    key = f"{shown.ts}:{hash(text)}"
                    if self.shown_messages.get(shown.ts) == key:
                        continue
                    edited = " (edited)" if shown.ts in self.shown_messages else ""
                    where = "  ↳ in thread: " if shown is not message else ""
                    self.shown_messages[shown.ts] = key
                    self.buttons += [(channel.id, shown.ts, b) for b in found]
                    name = sanitize(channel.name)
                    out(f"\n#{name} · backfill-bot{edited}\n{where}{text}")

    async def type(self, user: str, line: str) -> None:
        command, _, text = line.strip().partition(" ")
        self.demo.out(f"\n@{user}: {sanitize(line.strip())}")
        reply = await self.demo.slack.slash_command(
            text, command=command, user_id=user, channel_id=CHANNEL
        )
        if reply.status != 200:
            error = sanitize(reply.body[:200] or str(reply.status))
            self.demo.out(f'{sanitize(command)} failed with the error "{error}"')
        await self.demo.settle(timeout_s=20)
        self.show_new()

    async def click(self, user: str, number: int) -> None:
        if not 1 <= number <= len(self.buttons):
            self.demo.out(f"There is no button {number}.")
            return
        channel, ts, button = self.buttons[number - 1]
        self.demo.out(f"\n@{user} clicks [{sanitize(str(button['text']['text']))}]")
        try:
            await self.demo.slack.click(
                channel_id=channel,
                message_ts=ts,
                action_id=button["action_id"],
                user_id=user,
                value=button.get("value"),
            )
        except LookupError:
            self.demo.out("That button is no longer there.")
            return
        await self.demo.settle(timeout_s=20)
        self.show_new()


async def interactive(settings: Settings, config: BotConfig, out: Callable[[str], None]) -> None:
    """A terminal Slack: type `/backfill …`, click buttons by number."""
    async with running_demo(settings, demo_config(settings, config), out) as demo:
        talk = Conversation(demo)
        user = REQUESTER
        out(f"The same workspace in a browser: {demo.slack.url}/")
        out(HELP)
        while True:
            out(f"\n[{user}] > ")
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.strip() in {"quit", "exit"}:
                return
            words = line.split()
            if not words:
                continue
            if words[0] == "click" and len(words) == 2 and words[1].isdecimal():
                await talk.click(user, int(words[1]))
            elif words[0] == "as" and len(words) == 2:
                if words[1] in demo.slack.state.users:
                    user = words[1]
                else:  # a typo must not make a stranger of the person typing
                    people = demo.slack.state.users.values()
                    known = ", ".join(f"{u.id} ({u.name})" for u in people if not u.is_bot)
                    out(f"No member {sanitize(words[1])}. Members: {known}")
            elif words[0].startswith("/"):
                await talk.type(user, line)
            else:
                out(HELP)
