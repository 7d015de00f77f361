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
from bot.settings import Settings
from standins.demo.run import CHANNEL, REQUESTER, Demo, demo_config, running_demo
from standins.slack.terminal import sanitize
from standins.slack.transcript import LiveView

HELP = (
    "Type a slash command as in Slack (e.g. /backfill example.etl_orders 2021-06-04..2021-06-06),"
    " 'click N' to click button N, 'as USER' to act as another user (e.g. as U0ALICE001),"
    " or 'quit'."
)


@dataclass
class Conversation:
    """The demo's workspace as a terminal conversation; the renderer (`LiveView`) numbers the
    buttons a person can click."""

    demo: Demo
    view: LiveView = field(init=False)

    def __post_init__(self) -> None:
        self.view = LiveView(self.demo.slack.state)

    @property
    def buttons(self) -> list[tuple[str, str, dict[str, Any]]]:
        return self.view.buttons

    def show_new(self) -> None:
        """Messages that are new or changed since the last look, in every channel."""
        for text in self.view.new():
            self.demo.out(text)

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
