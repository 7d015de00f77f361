"""`/backfill DAG START..END` with run options, `--at` and `--now`, and `pause` / `resume`, as
bot/slack/rules/commands.py reads them (Slack's smart quotes and dashes included)."""

from __future__ import annotations

import json
import shlex
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.run_options import CONF_CHARS, MAX_ACTIVE, RERUN_CHOICES, RunOptions
from bot.slack.rules.commands import (
    CommandError,
    PauseCommand,
    PlanCommand,
    parse_command,
)

BASE = "example.etl_orders 2021-06-01..2021-06-07"


def plan(options: str) -> PlanCommand:
    parsed = parse_command(f"{BASE} {options}")
    assert isinstance(parsed, PlanCommand)
    assert (parsed.dag, parsed.range_text) == ("example.etl_orders", "2021-06-01..2021-06-07")
    return parsed


def refused(options: str) -> str:
    with pytest.raises(CommandError) as error:
        parse_command(f"{BASE} {options}")
    return str(error.value)


# --- each option -------------------------------------------------------------------------------


def test_without_options_nothing_is_chosen() -> None:
    parsed = plan("")
    assert parsed.options == RunOptions()
    assert (parsed.at, parsed.now, parsed.only, parsed.dry_run) == (None, False, False, False)


@pytest.mark.parametrize("choice", RERUN_CHOICES)
def test_rerun(choice: str) -> None:
    assert plan(f"--rerun {choice}").options.rerun == choice
    assert plan(f"--rerun={choice.upper()}").options.rerun == choice


def test_flags() -> None:
    parsed = plan("--backwards --stop-on-failure --now --only --dry-run --With-Asset-Consumers")
    assert parsed.options == RunOptions(
        backwards=True, stop_on_failure=True, with_asset_consumers=True
    )
    stored = parsed.options.to_json()
    assert RunOptions.from_json(stored, default_rerun="missing").with_asset_consumers
    assert (parsed.now, parsed.only, parsed.dry_run) == (True, True, True)


def test_option_names_ignore_case() -> None:
    parsed = plan("--BACKWARDS --Rerun failed --MAX-ACTIVE 2 --Now")
    assert parsed.options == RunOptions(rerun="failed", backwards=True, max_active=2)
    assert parsed.now


def test_conf() -> None:
    assert plan("""--conf '{"full_refresh": true, "region": "eu"}'""").options.conf == {
        "full_refresh": True,
        "region": "eu",
    }
    assert plan("""--conf '{"a": [1, 2]}' --rerun all""").options.conf == {"a": [1, 2]}


def test_conf_in_double_quotes_without_spaces() -> None:
    # double quotes around JSON only work when the JSON has none inside; single quotes do
    assert plan('--conf "{}"').options.conf == {}


def test_conf_keeps_backslashes() -> None:
    assert plan(r"""--conf '{"pattern": "\\d+", "path": "C:\\tmp"}'""").options.conf == {
        "pattern": r"\d+",
        "path": r"C:\tmp",
    }


def test_max_active() -> None:
    assert plan("--max-active 1").options.max_active == 1
    assert plan("--max-active 64").options.max_active == 64
    assert plan("--max-active=8").options.max_active == 8


def test_reason() -> None:
    assert plan('--reason "orders feed was late"').options.reason == "orders feed was late"
    assert plan("--reason 'feed   late'").options.reason == "feed late"
    assert plan("--reason late").options.reason == "late"


def test_at_is_kept_as_typed_for_the_service_to_read() -> None:
    parsed = plan('--at "2021-06-07 20:00 Europe/Berlin"')
    assert parsed.at == "2021-06-07 20:00 Europe/Berlin"
    assert not parsed.now
    assert plan("--at 2021-06-07T20:00+02:00").at == "2021-06-07T20:00+02:00"


def test_every_option_at_once() -> None:
    parsed = plan(
        "--rerun missing --backwards --conf '{\"full_refresh\": true}' --max-active 4 "
        '--reason "orders feed was late" --stop-on-failure --at "2021-06-07 20:00" '
        "--exclude example.email_discounts --namespace food_delivery --only --dry-run "
        "--priority LOW"
    )
    assert parsed == PlanCommand(
        "example.etl_orders",
        "2021-06-01..2021-06-07",
        only=True,
        exclude=("example.email_discounts",),
        namespace="food_delivery",
        dry_run=True,
        options=RunOptions(
            rerun="missing",
            backwards=True,
            conf={"full_refresh": True},
            max_active=4,
            reason="orders feed was late",
            stop_on_failure=True,
            priority="low",
        ),
        at="2021-06-07 20:00",
        now=False,
    )


def test_options_may_come_before_the_dag_and_range() -> None:
    parsed = parse_command("--rerun failed --now example.etl_orders 2021-06-01..2021-06-07")
    assert isinstance(parsed, PlanCommand)
    assert parsed.dag == "example.etl_orders"
    assert parsed.options.rerun == "failed"
    assert parsed.now


# --- --option=value ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("--rerun=failed", "rerun", "failed"),
        ("""--conf='{"a": 1}'""", "conf", {"a": 1}),
        ("""'--conf={"a": "x=y"}'""", "conf", {"a": "x=y"}),
        ("--max-active=8", "max_active", 8),
        ('--reason="orders feed was late"', "reason", "orders feed was late"),
        ("--reason=a=b", "reason", "a=b"),
    ],
)
def test_valued_options_take_an_equals_sign(text: str, field: str, value: Any) -> None:
    assert getattr(plan(text).options, field) == value


def test_at_exclude_and_namespace_take_an_equals_sign() -> None:
    parsed = plan('--at="2021-06-07 20:00 Europe/Berlin" --exclude=a,b --exclude c --namespace=ns')
    assert parsed.at == "2021-06-07 20:00 Europe/Berlin"
    assert parsed.exclude == ("a", "b", "c")
    assert parsed.namespace == "ns"


@pytest.mark.parametrize("option", ["--reason=", "--max-active=", "--rerun=", "--conf="])
def test_an_empty_value_after_equals_is_refused(option: str) -> None:
    assert refused(option).startswith(option.rstrip("="))


def test_unquoted_json_loses_its_quotes_and_says_how_to_quote() -> None:
    message = refused('--conf={"a":1}')
    assert message.startswith(
        "--conf must be a JSON object, e.g. --conf '{\"full_refresh\": true}'"
    )


# --- what Slack does to the text ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "conf"),
    [
        ("--conf ‘{“full_refresh”: true}’", {"full_refresh": True}),
        ("--conf '{“full_refresh”: true}'", {"full_refresh": True}),
        ('--conf ‘{"full_refresh": true}’', {"full_refresh": True}),
        ("--conf=‘{“region”: “eu”, “days”: 3}’", {"region": "eu", "days": 3}),
    ],
)
def test_smart_quotes_around_and_inside_conf(text: str, conf: dict[str, Any]) -> None:
    assert plan(text).options.conf == conf


@pytest.mark.parametrize(
    "text",
    ["--reason “orders feed was late”", "--reason ‘orders feed was late’",
     "--reason=“orders feed was late”"],
)  # fmt: skip
def test_smart_quotes_around_a_reason(text: str) -> None:
    assert plan(text).options.reason == "orders feed was late"


def test_an_apostrophe_inside_a_double_quoted_reason() -> None:
    assert plan("--reason “the feed’s late”").options.reason == "the feed's late"


def test_smart_quotes_around_at() -> None:
    assert plan("--at “2021-06-07 20:00 Europe/Berlin”").at == "2021-06-07 20:00 Europe/Berlin"


def test_smart_dashes_and_non_breaking_spaces() -> None:
    parsed = plan("\u2014rerun\u00a0failed \u2013backwards \u2014now \u2014max-active 2")
    assert parsed.options == RunOptions(rerun="failed", backwards=True, max_active=2)
    assert parsed.now


def test_hash_does_not_start_a_comment() -> None:
    parsed = plan('--reason "see <#C0123ABC|backfills> and #incident-42" --now')
    assert parsed.options.reason == "see <#C0123ABC|backfills> and #incident-42"
    assert parsed.now
    parsed = plan("--reason #incident-42 --stop-on-failure")
    assert parsed.options.reason == "#incident-42"
    assert parsed.options.stop_on_failure
    assert plan("""--conf '{"tag": "#1"}' --backwards""").options.conf == {"tag": "#1"}


@pytest.mark.parametrize(
    "text",
    [
        '--reason "orders feed was late',
        "--reason 'orders feed was late",
        '--conf \'{"a": 1}',
        "--reason “orders feed was late",
        "--conf ‘{“a”: 1}",
        '--reason="late',
    ],
)
def test_an_unclosed_quote_says_how_to_quote(text: str) -> None:
    message = refused(text)
    assert message.startswith("A quote is not closed.")
    assert '--reason "orders feed was late"' in message


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '--now --at "2021-06-07 20:00"',
        '--at "2021-06-07 20:00" --now',
        '--at="2021-06-07 20:00" --NOW',
        "—now —at 2021-06-07T20:00",
    ],
)
def test_now_and_at_together_are_refused(text: str) -> None:
    assert refused(text) == "--now and --at contradict each other: give one of them."


@pytest.mark.parametrize(
    ("text", "option"),
    [
        ("--rerun all --rerun failed", "--rerun"),
        ("--rerun=all --RERUN missing", "--rerun"),
        ("--max-active 2 --max-active 3", "--max-active"),
        ('--reason a --reason "b c"', "--reason"),
        ("""--conf '{"a": 1}' --conf '{"a": 2}'""", "--conf"),
        ('--at "2021-06-07 20:00" --at "2021-06-08 20:00"', "--at"),
        ("--namespace a --namespace b", "--namespace"),
    ],
)
def test_an_option_given_twice_with_different_values_is_refused(text: str, option: str) -> None:
    assert refused(text) == f"{option} is given twice; give it once."


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        ("--bogus", "--bogus"),
        ("--rerun-all", "--rerun-all"),
        ("--max_active 4", "--max_active"),
        ("--force", "--force"),
        ("--now=yes", "--now=yes"),
        ("--backwards=true", "--backwards=true"),
        ("—fast", "--fast"),
    ],
)
def test_unknown_options_are_refused_with_the_usage(text: str, unknown: str) -> None:
    message = refused(text)
    assert message.startswith(f"Unknown option {unknown}. Usage: /backfill DAG START..END")
    assert "--max-active N" in message
    assert "--now]" in message


@pytest.mark.parametrize(
    ("text", "option"),
    [
        ("--rerun", "--rerun"),
        ("--conf", "--conf"),
        ("--max-active", "--max-active"),
        ("--reason", "--reason"),
        ("--at", "--at"),
        ("--reason --now", "--reason"),
        ("--max-active --backwards", "--max-active"),
    ],
)
def test_an_option_without_its_value_is_refused(text: str, option: str) -> None:
    assert refused(text).startswith(f"{option} needs a value. Usage: /backfill")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--rerun sometimes", "--rerun takes missing, failed or all, not 'sometimes'"),
        ("--max-active 0", "--max-active takes a whole number from 1 to 64, not 0."),
        (f"--max-active {MAX_ACTIVE + 1}", "from 1 to 64, not 65."),
        ("--max-active -1", "--max-active takes a whole number from 1 to 64, not -1."),
        ("--max-active four", "--max-active takes a whole number from 1 to 64."),
        ("--conf '[1, 2]'", "--conf must be a JSON object ({\"key\": value, …}), not a list."),
        ("--conf '\"x\"'", "not a str."),
        ("--conf '{\"a\": 1,}'", "--conf must be a JSON object, e.g."),
        ('--reason "   "', "--reason needs some words"),
        ("--reason " + "x" * 301, "--reason is 301 characters long; at most 300."),
        ("--reason 'late\x00feed'", "--reason cannot contain control characters."),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_with_the_options_own_message(text: str, expected: str) -> None:
    assert expected in refused(text)


def test_a_too_long_conf_is_refused() -> None:
    conf = json.dumps({"k": "x" * CONF_CHARS})
    assert f"--conf is {len(conf)} characters long; at most {CONF_CHARS}." in refused(
        f"--conf '{conf}'"
    )


def test_a_deeply_nested_conf_is_a_command_error() -> None:
    nested = '{"a": ' + "[" * 1400 + "]" * 1400 + "}"
    assert "--conf" in refused(f"--conf '{nested}'")


def test_a_conf_with_nan_is_refused() -> None:
    assert "--conf" in refused("""--conf '{"threshold": NaN}'""")


def test_a_value_starting_with_two_dashes_is_taken_as_a_missing_value() -> None:
    assert refused("--reason --late-feed").startswith("--reason needs a value")
    assert plan("--reason=--late-feed").options.reason == "--late-feed"


def test_a_single_dash_word_is_an_extra_argument() -> None:
    assert refused("-n").startswith("Expected a DAG and a date range, got 3 argument(s).")


# --- pause and resume --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("pause 0123abcd", PauseCommand("0123abcd")),
        ("resume 0123abcd", PauseCommand("0123abcd", resume=True)),
        ("PAUSE 0123ABCD", PauseCommand("0123abcd")),
        ("Resume `0123abcd`", PauseCommand("0123abcd", resume=True)),
        ("pause " + "a" * 32, PauseCommand("a" * 32)),
        ("  resume   0123abcdef  ", PauseCommand("0123abcdef", resume=True)),
        ("pause\u00a00123abcd", PauseCommand("0123abcd")),
    ],
)
def test_pause_and_resume_take_a_request_id(text: str, command: PauseCommand) -> None:
    assert parse_command(text) == command


@pytest.mark.parametrize(
    "text", ["pause 0123abc", "pause " + "a" * 33, "resume 0123abcg", "pause 0123-abcd", "pause ''"]
)
def test_pause_with_a_bad_id_says_what_an_id_is(text: str) -> None:
    with pytest.raises(CommandError, match="A backfill id is 32 hex characters, or its first 8"):
        parse_command(text)


@pytest.mark.parametrize(
    ("text", "usage"),
    [
        ("pause", "Usage: /backfill pause REQUEST_ID"),
        ("resume", "Usage: /backfill resume REQUEST_ID"),
        ("pause 0123abcd 4567cdef", "Usage: /backfill pause REQUEST_ID"),
        ("resume 0123abcd --now", "Usage: /backfill resume REQUEST_ID"),
    ],
)
def test_pause_and_resume_take_exactly_one_id(text: str, usage: str) -> None:
    with pytest.raises(CommandError, match=usage):
        parse_command(text)


# --- properties --------------------------------------------------------------------------------

REASON_TEXT = st.text(
    string.ascii_letters + string.digits + " .,!?#<>@:;/()", min_size=1, max_size=60
)
SAFE_TEXT = st.text(string.ascii_letters + string.digits + " _-", max_size=12)
CONFS = st.dictionaries(
    st.text(string.ascii_letters + "_", min_size=1, max_size=8),
    st.none() | st.booleans() | st.integers(-1000, 1000) | SAFE_TEXT,
    max_size=4,
)


@st.composite
def typed_options(draw: st.DrawFn) -> tuple[list[str], RunOptions]:
    """The words someone might type, in any order and style, and the options they mean."""
    words: list[str] = []
    use_equals = draw(st.booleans())

    def valued(name: str, value: str) -> None:
        quoted = shlex.quote(value)
        words.append(f"--{name}={quoted}" if use_equals else f"--{name} {quoted}")

    rerun = draw(st.none() | st.sampled_from(RERUN_CHOICES))
    if rerun:
        valued("rerun", rerun)
    backwards = draw(st.booleans())
    if backwards:
        words.append("--backwards")
    conf = draw(st.none() | CONFS)
    if conf is not None:
        valued("conf", json.dumps(conf))
    max_active = draw(st.none() | st.integers(1, MAX_ACTIVE))
    if max_active is not None:
        valued("max-active", str(max_active))
    reason = draw(REASON_TEXT.filter(lambda r: r.strip() != ""))
    valued("reason", reason)
    stop = draw(st.booleans())
    if stop:
        words.append("--stop-on-failure")
    order = draw(st.permutations(words))
    expected = RunOptions(rerun, backwards, conf, max_active, " ".join(reason.split()), stop)
    return list(order), expected


@settings(max_examples=300, deadline=None)
@given(typed_options())
def test_options_typed_in_any_order_and_style_are_read_back(
    typed: tuple[list[str], RunOptions],
) -> None:
    words, expected = typed
    assert plan(" ".join(words)).options == expected


OPTION_WORDS = st.sampled_from(
    [
        "--rerun", "all", "failed", "--conf", "'{\"a\": 1}'", "‘{“a”: 1}’", "--max-active", "4",
        "0", "--reason", '"late feed"', "“late", "--at", '"2021-06-07 20:00"', "--now",
        "--backwards", "--stop-on-failure", "--bogus", "--rerun=", "#", "<#C123>", "'", '"',
        "pause", "resume", "0123abcd", "example.etl_orders", "2021-06-01..2021-06-07", "—now",
    ]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.lists(OPTION_WORDS, max_size=8).map(" ".join), st.text(max_size=120)))
def test_any_text_is_a_command_or_a_command_error(text: str) -> None:
    try:
        parse_command(text)
    except CommandError as error:
        message = str(error)
        assert message, text


def test_the_escaping_slack_adds_to_a_commands_text_is_undone() -> None:
    # Slack sends &, < and > in a slash command's text as &amp;, &lt; and &gt;.
    command = parse_command(
        'example.etl_orders 2021-06-04 --conf \'{"filter": "a &gt; b &amp;&amp; c &lt; d"}\' '
        '--reason "orders &amp; payments"'
    )
    assert isinstance(command, PlanCommand)
    assert command.options.conf == {"filter": "a > b && c < d"}
    assert command.options.reason == "orders & payments"


def test_a_priority_that_is_not_one_of_three_is_refused() -> None:
    with pytest.raises(CommandError, match="--priority takes high, normal or low"):
        plan("--priority urgent")
    with pytest.raises(CommandError, match="--priority needs a value"):
        plan("--priority")
