"""The demo's transcript of the Slack stand-in: mrkdwn, blocks and a workspace as terminal text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from standins.slack.emoji import EMOJI, emojize
from standins.slack.state import Ephemeral, SlackState
from standins.slack.terminal import (
    Directory,
    mrkdwn_to_text,
    render,
    render_message,
    sanitize,
)
from standins.slack.transcript import transcript

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = Directory(
    users={"U1": "riley", "U2": "alex"},
    handles={"S1": "data-eng"},
    channels={"C1": "backfill"},
)
# The renderer's own ANSI codes: bold, dim, italic and their ends, green, red, default colour.
OUR_CODES = re.compile(r"\x1b\[(?:1|2|3|22|23|31|32|39)m")
HOSTILE = "dag\x1b[2J\x1b[31mred\x07\x9b1A\u202eevil\u2066x\u2069\rgone"


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


def button(label: str, **extra: Any) -> dict[str, Any]:
    return {"type": "button", "text": plain(label), "action_id": label.lower(), **extra}


def text(value: str, *, ansi: bool = False) -> str:
    return mrkdwn_to_text(value, PEOPLE, ansi=ansi)


class Shown:
    """A message-like for render_message."""

    def __init__(self, text: str = "", blocks: list[dict[str, Any]] | None = None) -> None:
        self.text, self.blocks = text, blocks or []


# -- emoji ----------------------------------------------------------------------------------------


def test_every_shortcode_in_the_templates_is_known() -> None:
    used: set[str] = set()
    # the templates, and every capability's messages (a module, or a package of them)
    words = [p for p in (ROOT / "bot").rglob("*.py") if "messages" in (p.stem, *p.parent.parts)]
    for path in [*(ROOT / "templates").rglob("*.j2"), *words]:
        used |= set(re.findall(r":([a-z_0-9+-]+):", path.read_text(encoding="utf-8")))
    assert {"white_check_mark", "warning", "large_green_circle"} <= used  # the scan found them
    assert sorted(used - set(EMOJI)) == []


def test_the_table_is_plain_json_with_the_common_slack_codes() -> None:
    assert json.loads(json.dumps(EMOJI)) == EMOJI
    assert EMOJI["+1"] == EMOJI["thumbsup"] == "👍"
    assert EMOJI["tada"] == "🎉"
    assert EMOJI["warning"] == "⚠\ufe0f"
    assert len(EMOJI) >= 100


def test_emojize_replaces_known_codes_and_leaves_the_rest_as_typed() -> None:
    assert emojize(":white_check_mark: done :x:") == "✅ done ❌"
    assert emojize(":no_such_code: at 12:30:45") == ":no_such_code: at 12:30:45"
    assert emojize(":nope:tada:") == ":nope🎉"  # an unknown code's colon may open the next
    assert emojize(":+1::skin-tone-3:") == "👍🏼"


# -- mrkdwn ---------------------------------------------------------------------------------------


def test_links_read_as_label_then_url() -> None:
    assert (
        text("see <https://a.io/p?x=1&amp;y=2|the plan>") == "see the plan (https://a.io/p?x=1&y=2)"
    )
    assert text("<https://a.io/p>") == "https://a.io/p"
    assert text("<https://a.io|https://a.io>") == "https://a.io"


def test_mentions_read_as_names() -> None:
    assert text("<@U1> and <@U9>") == "@riley and @U9"
    assert text("<#C1> <#C1|old-name> <#C7|general>") == "#backfill #backfill #general"
    assert text("<!subteam^S1> <!subteam^S2|@oncall> <!subteam^S3>") == "@data-eng @oncall @S3"
    assert text("<!here> <!channel>") == "@here @channel"


def test_entities_are_decoded_last() -> None:
    assert text("&lt;b&gt; &amp;lt; a &amp; b") == "<b> &lt; a & b"
    assert text("&lt;@U1&gt;") == "<@U1>"  # typed, not a mention
    assert text("*&lt;tag&gt;*") == "<tag>"


def test_emoji_shortcodes_become_emoji() -> None:
    assert text(":rotating_light: *Incident* :unknown_one:") == "🚨 Incident :unknown_one:"


def test_bold_and_italic_as_plain_text_and_as_ansi() -> None:
    line = "*bold*, _italic_ and ~struck~ (*p*)"
    assert text(line) == "bold, italic and struck (p)"
    assert text(line, ansi=True) == (
        "\x1b[1mbold\x1b[22m, \x1b[3mitalic\x1b[23m and struck (\x1b[1mp\x1b[22m)"
    )
    assert text("*_both_*", ansi=True) == "\x1b[1m\x1b[3mboth\x1b[23m\x1b[22m"


@pytest.mark.parametrize(
    "typed",
    [
        "snake_case_name",
        "a*b*c",
        "2 * 3 * 4",
        "* not bold *",
        "x_y_ and _ z _",
        "file*name*.txt",
        "*two\nlines*",
    ],
)
def test_markers_inside_words_or_around_spaces_stay_as_typed(typed: str) -> None:
    assert text(typed) == typed
    assert text(typed, ansi=True) == typed


def test_code_keeps_its_backticks_and_is_not_formatted() -> None:
    assert text("run `*x* _y_ :tada: &lt;dag&gt;` now") == "run `*x* _y_ :tada: <dag>` now"
    block = "```\n*bold* :tada:\nsnake_case\n```"
    assert text(block, ansi=True) == block
    assert text("*a* `*b*` *c*") == "a `*b*` c"


def test_control_characters_and_bidi_overrides_are_shown_escaped() -> None:
    shown = text(HOSTILE)
    assert shown == ("dag\\x1b[2J\\x1b[31mred\\x07\\x9b1A\\u202eevil\\u2066x\\u2069\\x0dgone")
    assert sanitize("tab\tand\nnewline") == "tab\tand\nnewline"


@pytest.mark.parametrize("ansi", [False, True])
def test_hostile_text_never_reaches_the_terminal_raw(ansi: bool) -> None:
    shown = text(f"*{HOSTILE}* _{HOSTILE}_ `{HOSTILE}` <https://x.io|{HOSTILE}>", ansi=ansi)
    ours_removed = OUR_CODES.sub("", shown)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", ours_removed)
    assert ("\x1b[1m" in shown) is ansi  # our own codes are still there when asked for


def test_hostile_names_and_block_text_are_escaped_too() -> None:
    people = Directory(users={"U1": "ev\x1b[1Ail"}, channels={"C1": "ch\u202ean"})
    blocks = [
        {"type": "header", "text": plain(HOSTILE)},
        {"type": "section", "text": mrkdwn("<@U1> in <#C1>"), "fields": [plain(HOSTILE)]},
        {"type": "context", "elements": [mrkdwn(HOSTILE)]},
        {"type": "actions", "elements": [button(HOSTILE, style="danger")]},
        {"type": "image", "image_url": "https://x.io/a.png", "alt_text": HOSTILE},
    ]
    shown = render_message(Shown(blocks=blocks), people, ansi=True)
    assert "\x1b" not in OUR_CODES.sub("", shown)
    assert "@ev\\x1b[1Ail in #ch\\u202ean" in shown
    assert "\u202e" not in shown


# -- blocks ---------------------------------------------------------------------------------------


def test_a_header_is_bold_not_upper_cased() -> None:
    blocks = [{"type": "header", "text": plain("Backfill plan :tada:")}]
    assert render_message(Shown(blocks=blocks), PEOPLE) == "Backfill plan 🎉"
    assert render_message(Shown(blocks=blocks), PEOPLE, ansi=True) == (
        "\x1b[1mBackfill plan 🎉\x1b[22m"
    )


def test_a_message_without_blocks_shows_its_text() -> None:
    assert render_message(Shown("hi <@U2> *now*"), PEOPLE) == "hi @alex now"


def test_section_text_fields_and_accessory() -> None:
    section = {
        "type": "section",
        "text": mrkdwn("*2 DAGs*, 4 runs"),
        "fields": [mrkdwn("*Owner*"), mrkdwn("<@U1>"), mrkdwn("*State*"), mrkdwn("running")],
        "accessory": button("Show full plan"),
    }
    wide = render_message(Shown(blocks=[section]), PEOPLE)
    assert wide.split("\n") == [
        "2 DAGs, 4 runs  [Show full plan]",
        "  Owner   @riley",
        "  State   running",
    ]
    narrow = render_message(Shown(blocks=[section]), PEOPLE, width=12)
    assert narrow.split("\n")[1:] == ["  Owner", "  @riley", "  State", "  running"]


def test_context_divider_actions_image_input_and_unknown_blocks() -> None:
    blocks = [
        {"type": "context", "elements": [mrkdwn(":zzz: snoozed"), plain("by alex")]},
        {"type": "divider"},
        {"type": "actions", "elements": [button("Approve"), button("Cancel")]},
        {"type": "image", "image_url": "https://x.io/a.png", "alt_text": "lineage graph"},
        {"type": "input", "label": plain("Reason"), "element": {"type": "plain_text_input"}},
        {"type": "rich_text", "elements": []},
    ]
    assert render_message(Shown(blocks=blocks), PEOPLE).split("\n") == [
        "💤 snoozed  by alex",
        "─" * 40,
        "[Approve] [Cancel]",
        "[image: lineage graph]",
        "Reason: ____",
        "[unsupported block type]",
    ]
    assert render_message(Shown(blocks=[{"type": "divider"}]), PEOPLE, width=10) == "─" * 10


def test_a_context_is_dimmed_with_ansi_and_stays_dim_after_bold() -> None:
    blocks = [{"type": "context", "elements": [mrkdwn("a *b* c")]}]
    assert render_message(Shown(blocks=blocks), PEOPLE, ansi=True) == (
        "\x1b[2ma \x1b[1mb\x1b[22m\x1b[2m c\x1b[22m"
    )


def test_render_numbers_buttons_from_first_button_in_order() -> None:
    approve, cancel, more = button("Approve"), button("Cancel"), button("Show full plan")
    blocks = [
        {"type": "header", "text": plain("Backfill plan")},
        {"type": "section", "text": mrkdwn("… and 3 more"), "accessory": more},
        {"type": "actions", "elements": [approve, cancel]},
    ]
    shown, buttons = render(blocks, "fallback", first_button=3)
    assert shown.split("\n") == [
        "Backfill plan",
        "… and 3 more  [3: Show full plan]",
        "[4: Approve] [5: Cancel]",
    ]
    assert buttons == [more, approve, cancel]
    assert render(blocks, "fallback")[0].split("\n")[2] == "[Approve] [Cancel]"
    assert render(None, "just *text*") == ("just text", [])


# -- a workspace ----------------------------------------------------------------------------------


@pytest.fixture
def state() -> SlackState:
    return SlackState()


def lines_of(state: SlackState, **kwargs: Any) -> list[str]:
    return transcript(state, **kwargs).split("\n")


def test_an_edited_message_shows_once_in_its_final_form(state: SlackState) -> None:
    message = state.post("C0BACKFILL", text="Waiting for approval", blocks=[])
    state.update(message, text="Approved by <@U0APPROVE1>", blocks=None)
    shown = transcript(state)
    assert "Waiting for approval" not in shown
    assert shown.count("Approved by @alex") == 1
    assert shown.split("\n")[:4] == [
        "#backfill",
        "",
        f"backfill-bot (app)  {_hhmm(message.ts)}  (edited)",
        "  Approved by @alex",
    ]


def test_times_are_hh_mm_utc(state: SlackState) -> None:
    message = state.post("C0BACKFILL", text="hello", user="U0REQUEST1")
    message.ts = "1700000000.000100"  # 2023-11-14 22:13:20 UTC
    assert "riley  22:13" in lines_of(state)


def test_threads_sit_under_their_parent(state: SlackState) -> None:
    first = state.post("C0BACKFILL", text="plan one")
    state.post("C0BACKFILL", text="plan two")
    state.post("C0BACKFILL", text="started", thread_ts=first.ts)
    state.post("C0BACKFILL", text="ok :+1:", user="U0REQUEST1", thread_ts=first.ts, broadcast=True)
    shown = lines_of(state)
    at = shown.index("  plan one")
    assert shown[at + 1 :][:4] == [
        f"  │ backfill-bot (app)  {_hhmm(first.ts)}",
        "  │   started",
        f"  │ riley  {_hhmm(first.ts)}  (also sent to the channel)",
        "  │   ok 👍",
    ]
    assert shown.index("  plan two") > at + 4
    assert sum("ok 👍" in line for line in shown) == 1  # a broadcast reply is shown once


def test_direct_messages_are_headed_by_the_person(state: SlackState) -> None:
    state.add_channel("D0DM000001", private=True)
    state.post("D0DM000001", text="can you approve?", user="U0APPROVE1")
    state.post("U0APPROVE2", text="your backfill finished")
    shown = lines_of(state)
    assert "Direct message with @alex" in shown
    assert "Direct message with @sam" in shown
    assert "#d0dm000001" not in shown


def test_channels_in_creation_order_and_only_those_asked_for(state: SlackState) -> None:
    state.add_channel("C0ZZZ", "zeta")
    state.add_channel("C0AAA", "alpha")
    state.add_channel("C0QUIET", "quiet")
    for channel in ("C0AAA", "C0ZZZ", "C0BACKFILL"):
        state.post(channel, text=f"in {channel}")
    headings = [line for line in lines_of(state) if line.startswith("#")]
    assert headings == ["#backfill", "#zeta", "#alpha"]  # the quiet one has no messages
    asked = lines_of(state, channels=["C0AAA", "#quiet"])
    assert [line for line in asked if line.startswith("#")] == ["#alpha", "#quiet"]
    assert "  in C0ZZZ" not in asked


def test_ephemerals_follow_the_channel_messages(state: SlackState) -> None:
    state.post("C0BACKFILL", text="for everyone")
    state.ephemerals.append(
        Ephemeral("C0BACKFILL", "U0REQUEST1", "fallback", [mrkdwn_section("*Only* you")], "ack")
    )
    shown = lines_of(state)
    at = shown.index("Only visible to @riley:")
    assert at > shown.index("  for everyone")
    assert shown[at + 1] == "  Only you"


def test_the_transcript_uses_ansi_only_when_asked(state: SlackState) -> None:
    state.post("C0BACKFILL", text=f"*{HOSTILE}*", user="U0REQUEST1")
    assert "\x1b" not in transcript(state)
    coloured = transcript(state, ansi=True)
    assert coloured.startswith("\x1b[1m#backfill\x1b[22m")
    assert "\x1b" not in OUR_CODES.sub("", coloured)


def test_directory_of_a_state_names_users_channels_and_groups(state: SlackState) -> None:
    state.add_usergroup("S0DATAENG1", ["U0APPROVE1"])
    people = Directory.of(state, handles={"S0DATAENG1": "data-eng"})
    assert mrkdwn_to_text("<@U0APPROVE1> <#C0BACKFILL> <!subteam^S0DATAENG1>", people) == (
        "@alex #backfill @data-eng"
    )
    assert mrkdwn_to_text("<!subteam^S0DATAENG1>", Directory.of(state)) == "@S0DATAENG1"


def mrkdwn_section(value: str) -> dict[str, Any]:
    return {"type": "section", "text": mrkdwn(value)}


def _hhmm(ts: str) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%H:%M")
