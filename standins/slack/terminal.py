"""Slack messages as terminal text, for the local demo: what a person would see in the channel.
The one terminal renderer: the demo's transcript and `backfill-bot chat` both show messages
through it (`standins.slack.transcript`).

`mrkdwn_to_text` turns Slack mrkdwn into text a terminal shows (links, mentions, entities, emoji,
bold and italic), `render_message` a message's blocks; `render` also returns the buttons, in the
order shown, numbered for the chat to click.

Text reaching a terminal from outside (DAG ids, error messages, what people type) may carry
control characters: every C0/C1 control but newline and tab, and every bidi override, is shown
escaped (ESC as the four characters `\\x1b`) before the renderer adds ANSI codes of its own, so a
hostile value can neither colour the terminal nor move its cursor.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from standins.slack.emoji import emojize
from standins.slack.state import SlackState

__all__ = [
    "BOLD",
    "DIM",
    "THREAD",
    "Directory",
    "MessageLike",
    "indent",
    "mrkdwn_to_text",
    "render",
    "render_message",
    "sanitize",
    "wrap",
]

JsonDict = dict[str, Any]

BOLD = ("\x1b[1m", "\x1b[22m")
ITALIC = ("\x1b[3m", "\x1b[23m")
DIM = ("\x1b[2m", "\x1b[22m")  # 22 ends bold and dim alike
_COLOURS = {"primary": ("\x1b[32m", "\x1b[39m"), "danger": ("\x1b[31m", "\x1b[39m")}
DIVIDER_MAX = 40
THREAD = "  │ "

# Controls a terminal acts on: C0 but newline and tab, DEL, C1; and the bidi embeddings,
# overrides and isolates, which reorder what follows them on the line.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ENTITY = re.compile(r"&(lt|gt|amp);")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&"}
# What mrkdwn keeps from formatting: code blocks, code spans, and `<…>` sequences (links and
# mentions), found left to right.
_VERBATIM = re.compile(r"```.*?```|`[^`\n]+`|<[^<>]*>", re.DOTALL)
# Inside code only `<…>` sequences and entities mean something.
_CODE_TOKEN = re.compile(r"<[^<>]*>|&(?:lt|gt|amp);")
# Stand-ins for verbatim pieces while formatting runs: NUL never survives `sanitize`.
_SLOT = re.compile(r"\x00(\d+)\x00")
# Slack's word-boundary rules: a marker opens where no word character (or marker) is before it
# and a non-space follows, and closes after a non-space where no word character follows; the
# span stays on one line. `snake_case_name` and `a*b` stay as typed.
_STYLE = re.compile(
    r"(?<![\w*_~])(?:"
    r"\*(?=[^\s*])(?P<bold>[^\n]*?[^\s*])\*"
    r"|_(?=[^\s_])(?P<italic>[^\n]*?[^\s_])_"
    r"|~(?=[^\s~])(?P<strike>[^\n]*?[^\s~])~"
    r")(?!\w)"
)


def sanitize(text: str) -> str:
    """`text` with every control character a terminal acts on (C0/C1 but `\\n` and `\\t`, DEL)
    and every bidi override or isolate shown escaped: ESC as `\\x1b`, U+202E as `\\u202e`."""

    def escaped(found: re.Match[str]) -> str:
        code = ord(found.group())
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    return _UNSAFE.sub(escaped, text)


def _decode(text: str) -> str:
    """Slack's three entities decoded in one pass (`&amp;lt;` is `&lt;`, not `<`)."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


@dataclass(frozen=True)
class Directory:
    """Who and what ids name: user names, user-group handles and channel names."""

    users: Mapping[str, str] = field(default_factory=dict)
    handles: Mapping[str, str] = field(default_factory=dict)  # S… id -> handle without `@`
    channels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, state: SlackState, handles: Mapping[str, str] | None = None) -> Directory:
        """The names in `state`. A group mention shows the handle `handles` gives it, else the
        one the workspace knows, else the label it carries, else its id."""
        return cls(
            users={user_id: user.name for user_id, user in state.users.items()},
            handles={**state.usergroup_handles, **(handles or {})},
            channels={channel_id: c.name for channel_id, c in state.channels.items()},
        )

    def user(self, user_id: str, label: str = "") -> str:
        """The user's name (terminal-safe); `label`, then the id, if unknown."""
        return sanitize(self.users.get(user_id) or label or user_id)

    def handle(self, group_id: str, label: str = "") -> str:
        return sanitize(self.handles.get(group_id) or label.lstrip("@") or group_id)

    def channel(self, channel_id: str, label: str = "") -> str:
        return sanitize(self.channels.get(channel_id) or label or channel_id)


_NOBODY = Directory()


class MessageLike(Protocol):
    """What `render_message` reads of a message: a stored `Message`, an `Ephemeral`, …"""

    @property
    def text(self) -> str: ...

    @property
    def blocks(self) -> Sequence[Mapping[str, Any]]: ...


# -- mrkdwn ---------------------------------------------------------------------------------------


def wrap(text: str, codes: tuple[str, str], ansi: bool) -> str:
    return f"{codes[0]}{text}{codes[1]}" if ansi and text else text


def _angle(inner: str, directory: Directory) -> str:
    """A `<…>` sequence (already sanitized) as it reads: link, mention, group, broadcast."""
    target, _, label = inner.partition("|")
    label = emojize(_decode(label))
    if target.startswith("@"):
        return "@" + directory.user(target[1:], label.lstrip("@"))
    if target.startswith("#"):
        return "#" + directory.channel(target[1:], label.lstrip("#"))
    if target.startswith("!subteam^"):
        return "@" + directory.handle(target[len("!subteam^") :], label)
    if target.startswith("!"):
        # <!here>, <!channel>, <!everyone>; <!date^…|fallback> shows its fallback.
        name = target[1:].split("^", 1)[0]
        return label if label and name not in {"here", "channel", "everyone"} else f"@{name}"
    url = _decode(target)
    return f"{label} ({url})" if label and label != url else url


def _code(piece: str, directory: Directory) -> str:
    """A code span or block, backticks kept: links and mentions read as such, entities decoded,
    nothing else (no emoji, no bold)."""

    def token(found: re.Match[str]) -> str:
        text = found.group()
        return _decode(text) if text.startswith("&") else _angle(text[1:-1], directory)

    return _CODE_TOKEN.sub(token, piece)


def _styled(text: str, ansi: bool) -> str:
    """Bold, italic and strike-through of a line of mrkdwn with its verbatim pieces taken out."""

    def style(found: re.Match[str]) -> str:
        if found.group("bold") is not None:
            return wrap(_styled(found.group("bold"), ansi), BOLD, ansi)
        if found.group("italic") is not None:
            return wrap(_styled(found.group("italic"), ansi), ITALIC, ansi)
        return _styled(found.group("strike"), ansi)

    return _STYLE.sub(style, text)


def mrkdwn_to_text(text: str, directory: Directory = _NOBODY, *, ansi: bool = False) -> str:
    """Slack mrkdwn as terminal text: `<url|label>` as `label (url)`, mentions as `@name` and
    `#channel`, entities decoded, emoji shortcodes as emoji, `*bold*` and `_italic_` in ANSI
    bold and italic when `ansi` (else as plain text), `~strike~` as plain text; code spans and
    blocks keep their backticks and are not formatted. Control characters in `text` are shown
    escaped; with `ansi`, every ESC in the result starts one of the renderer's own codes."""
    pieces: list[str] = []

    def slot(found: re.Match[str]) -> str:
        piece = found.group()
        if piece.startswith("`"):
            pieces.append(_code(piece, directory))
        else:
            pieces.append(_angle(piece[1:-1], directory))
        return f"\x00{len(pieces) - 1}\x00"

    held = _VERBATIM.sub(slot, sanitize(text))
    shown = _decode(_styled(emojize(held), ansi))
    return _SLOT.sub(lambda m: pieces[int(m.group(1))], shown)


# -- blocks ---------------------------------------------------------------------------------------


def _width(text: str) -> int:
    """Columns `text` takes in a terminal (ANSI codes take none, wide characters two)."""
    columns = 0
    for char in _ANSI.sub("", text):
        if unicodedata.combining(char) or unicodedata.category(char) in {"Mn", "Me", "Cf"}:
            continue
        columns += 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1
    return columns


def indent(text: str, prefix: str) -> list[str]:
    return [prefix + line if line else prefix.rstrip() for line in text.split("\n")]


@dataclass
class _Blocks:
    """Renders one message's blocks; collects its buttons, numbered if `first_button` is set."""

    directory: Directory
    ansi: bool
    width: int
    first_button: int | None = None
    buttons: list[JsonDict] = field(default_factory=list)

    def text(self, value: Any) -> str:
        """A text object: mrkdwn rendered, plain_text as typed (with emoji unless turned off)."""
        if isinstance(value, str):
            return mrkdwn_to_text(value, self.directory, ansi=self.ansi)
        if not isinstance(value, Mapping):
            return ""
        text = value.get("text")
        text = text if isinstance(text, str) else ""
        if value.get("type") == "mrkdwn":
            return mrkdwn_to_text(text, self.directory, ansi=self.ansi)
        text = sanitize(text)
        return text if value.get("emoji") is False else emojize(text)

    def element(self, element: Any) -> str:
        """An interactive element or image, as one bracketed word."""
        if not isinstance(element, Mapping):
            return ""
        kind = element.get("type")
        if kind == "button":
            label = self.text(element.get("text"))
            if isinstance(element, dict):
                self.buttons.append(element)
            if self.first_button is not None:
                label = f"{self.first_button + len(self.buttons) - 1}: {label}"
            colour = _COLOURS.get(str(element.get("style")))
            return f"[{wrap(label, colour, self.ansi)}]" if colour else f"[{label}]"
        if kind == "image":
            return f"[image: {sanitize(str(element.get('alt_text', '')))}]"
        if kind == "overflow":
            return "[⋯]"
        initial = element.get("initial_option")
        shown = initial.get("text") if isinstance(initial, Mapping) else None
        shown = shown or element.get("placeholder") or element.get("initial_date")
        label = self.text(shown) if shown else sanitize(str(kind or "element"))
        return f"[{label} ▾]" if str(kind).endswith("select") else f"[{label}]"

    def dim(self, text: str) -> str:
        return wrap(text.replace(DIM[1], DIM[1] + DIM[0]), DIM, self.ansi)

    def fields(self, values: list[str]) -> list[str]:
        """Two fields a line when every pair fits in `width`, else one a line; indented."""
        left, right = values[0::2], values[1::2]
        column = max(_width(v) for v in left)
        if (
            len(values) > 1
            and not any("\n" in v for v in values)
            and 2 + column + 3 + max(_width(v) for v in right) <= self.width
        ):
            lines = []
            for i, first in enumerate(left):
                second = right[i] if i < len(right) else ""
                pad = " " * (column - _width(first) + 3) if second else ""
                lines.append(f"  {first}{pad}{second}")
            return lines
        return [line for value in values for line in indent(value, "  ")]

    def block(self, block: Any) -> list[str]:
        if not isinstance(block, Mapping):
            return ["[unsupported block type]"]
        kind = block.get("type")
        if kind == "header":
            return [wrap(self.text(block.get("text")), BOLD, self.ansi)]
        if kind == "section":
            text = self.text(block.get("text"))
            lines = text.split("\n") if text else []
            accessory = self.element(block.get("accessory"))
            if accessory:
                lines = [*lines[:-1], f"{lines[-1]}  {accessory}"] if lines else [accessory]
            raw = block.get("fields")
            values = [self.text(f) for f in raw] if isinstance(raw, list) else []
            return lines + (self.fields(values) if values else [])
        if kind == "context":
            raw = block.get("elements")
            elements = raw if isinstance(raw, list) else []
            line = "  ".join(
                self.element(e)
                if isinstance(e, Mapping) and e.get("type") == "image"
                else self.text(e)
                for e in elements
            )
            # Dimmed line by line; a bold inside ends with code 22, which ends dim too: renew it.
            return [self.dim(part) for part in line.split("\n")] if line else []
        if kind == "divider":
            return ["─" * max(1, min(self.width, DIVIDER_MAX))]
        if kind == "actions":
            raw = block.get("elements")
            shown = [self.element(e) for e in raw] if isinstance(raw, list) else []
            return [" ".join(s for s in shown if s)]
        if kind == "image":
            return [f"[image: {sanitize(str(block.get('alt_text', '')))}]"]
        if kind == "input":
            return [f"{self.text(block.get('label'))}: ____"]
        return ["[unsupported block type]"]

    def message(self, blocks: Iterable[Any] | None, text: str) -> str:
        if not blocks:
            return mrkdwn_to_text(text, self.directory, ansi=self.ansi)
        lines = [line for block in blocks for line in self.block(block)]
        return "\n".join(lines).strip("\n")


def render_message(
    message: MessageLike, directory: Directory = _NOBODY, *, ansi: bool = False, width: int = 100
) -> str:
    """A message as terminal text: its blocks (a header in bold, a section's fields indented,
    buttons as `[Label]`, a context dimmed when `ansi`, a divider as a rule at most 40 wide),
    or its `text` if it has none. `width` is the terminal's: fields pair up if they fit."""
    return _Blocks(directory, ansi, width).message(message.blocks, message.text)


def render(
    blocks: list[dict[str, Any]] | None,
    text: str,
    *,
    first_button: int | None = None,
    directory: Directory = _NOBODY,
    ansi: bool = False,
    width: int = 100,
) -> tuple[str, list[dict[str, Any]]]:
    """(text, buttons) of a message, buttons in the order shown; with `first_button` they read
    `[3: Approve]`, numbered from it for the demo's chat to click."""
    renderer = _Blocks(directory, ansi, width, first_button)
    return renderer.message(blocks, text), renderer.buttons
