"""The Slack stand-in's workspace as terminal text, drawn by the one renderer
(`standins.slack.terminal`): `transcript` shows it whole, as it ended (the demo's headless
output); `LiveView` shows what is new or changed since the last look, for `backfill-bot chat`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from standins.slack.state import Message, SlackState
from standins.slack.terminal import (
    BOLD,
    DIM,
    THREAD,
    Directory,
    indent,
    render,
    render_message,
    sanitize,
    wrap,
)

__all__ = ["LiveView", "transcript"]


def _clock(ts: str) -> str:
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%H:%M")
    except (ValueError, OverflowError, OSError):
        return "--:--"


def _is_dm(channel_id: str) -> bool:
    return channel_id.startswith(("D", "U", "W"))


def _dm_person(state: SlackState, channel_id: str, directory: Directory) -> str:
    """Whom a DM is with: the user whose id it is (a DM opened by user id), else the person who
    wrote or was shown something there, else the channel's name."""
    if channel_id.startswith(("U", "W")):
        return directory.user(channel_id)
    found = state.channels.get(channel_id)
    messages = [*found.messages, *(m for t in found.threads.values() for m in t)] if found else []
    people = [m.user for m in messages if m.bot_id is None and m.user != state.bot_user_id]
    people += [e.user for e in state.ephemerals if e.channel == channel_id]
    if people:
        return directory.user(people[0])
    return sanitize(found.name) if found else sanitize(channel_id)


@dataclass
class _Transcript:
    state: SlackState
    directory: Directory
    ansi: bool
    lines: list[str] = field(default_factory=list)

    def heading(self, channel_id: str) -> str:
        if _is_dm(channel_id):
            title = f"Direct message with @{_dm_person(self.state, channel_id, self.directory)}"
        else:
            title = f"#{self.directory.channel(channel_id)}"
        return wrap(title, BOLD, self.ansi)

    def dim(self, text: str) -> str:
        return wrap(text, DIM, self.ansi)

    def message(self, message: Message, prefix: str, *, also_in_channel: bool = False) -> None:
        sender = self.directory.user(message.user)
        sender = f"{sender} (app)" if message.bot_id is not None else sender
        notes = [_clock(message.ts)]
        if message.edited:
            notes.append("(edited)")
        if also_in_channel:
            notes.append("(also sent to the channel)")
        self.lines.append(f"{prefix}{wrap(sender, BOLD, self.ansi)}  {self.dim('  '.join(notes))}")
        body = render_message(message, self.directory, ansi=self.ansi)
        self.lines += indent(body, prefix + "  ")

    def channel(self, channel_id: str, posted: Callable[[str], Sequence[Message]]) -> None:
        self.lines += ["", self.heading(channel_id)]
        ephemerals = [e for e in self.state.ephemerals if e.channel == channel_id]
        messages = [m for m in posted(channel_id) if m.thread_ts in (None, m.ts)]
        if not messages and not ephemerals:
            self.lines.append(self.dim("  (no messages)"))
        for message in messages:
            self.lines.append("")
            self.message(message, "")
            for reply in self.state.thread(channel_id, message.ts):
                broadcast = reply.subtype == "thread_broadcast"
                self.message(reply, THREAD, also_in_channel=broadcast)
        for ephemeral in ephemerals:
            self.lines += ["", self.dim(f"Only visible to @{self.directory.user(ephemeral.user)}:")]
            self.lines += indent(render_message(ephemeral, self.directory, ansi=self.ansi), "  ")


def _asked_for(channels: Sequence[str]) -> list[str]:
    """Channel ids or names (`#` optional), each once."""
    return list(dict.fromkeys(c.lstrip("#") for c in channels))


def transcript(
    state: SlackState,
    *,
    ansi: bool = False,
    channels: Sequence[str] | None = None,
    directory: Directory | None = None,
) -> str:
    """The workspace as text: each channel with messages (or each of `channels`, ids or names),
    in the order they were created, under `#name` (a DM under `Direct message with @name`);
    each top-level message once, in its final form, with its sender, time (UTC) and `(edited)`,
    its thread replies under it after `  │ `; then what only one person saw there."""
    shown = _Transcript(state, directory or Directory.of(state), ansi)
    known: list[str] = list(state.channels)
    known += [e.channel for e in state.ephemerals if e.channel not in state.channels]
    known = list(dict.fromkeys(known))
    if channels is not None:
        wanted = set(_asked_for(channels))
        named = {c.id for c in state.channels.values() if c.name in wanted}
        picked = [c for c in known if c in wanted or c in named]
        names = {c.name for c in state.channels.values()}
        picked += [c for c in _asked_for(channels) if c not in {*known, *names}]
    else:
        with_ephemerals = {e.channel for e in state.ephemerals}
        picked = [c for c in known if state.messages(c) or c in with_ephemerals]
    for channel_id in picked:
        shown.channel(channel_id, state.messages)
    if not picked:
        return "(no messages)"
    return "\n".join(shown.lines).strip("\n")


@dataclass
class LiveView:
    """What was shown so far, and the buttons a person can click by number: each `new()` gives
    the messages that are new or changed since the last, in every channel, then the ephemerals."""

    state: SlackState
    shown_messages: dict[str, str] = field(default_factory=dict)
    shown_ephemerals: int = 0
    buttons: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def new(self) -> list[str]:
        state, shown = self.state, []
        for item in state.ephemerals[self.shown_ephemerals :]:
            text, _ = render(item.blocks, item.text)
            name = sanitize(state.acting_user(item.user).name)
            shown.append(f"\n(only @{name} sees this)\n{text}")
        self.shown_ephemerals = len(state.ephemerals)
        for channel in list(state.channels.values()):
            for message in channel.messages:
                for one in [message, *state.thread(channel.id, message.ts)]:
                    first = len(self.buttons) + 1
                    text, found = render(one.blocks, one.text, first_button=first)
                    key = f"{one.ts}:{hash(text)}"
                    if self.shown_messages.get(one.ts) == key:
                        continue
                    edited = " (edited)" if one.ts in self.shown_messages else ""
                    where = "  ↳ in thread: " if one is not message else ""
                    self.shown_messages[one.ts] = key
                    self.buttons += [(channel.id, one.ts, b) for b in found]
                    name = sanitize(channel.name)
                    shown.append(f"\n#{name} · backfill-bot{edited}\n{where}{text}")
        return shown
