"""A backfill's run options (bot/core/run_options.py): parsing each value, keeping them in the
request's JSON, describing them, and which runs each `--rerun` choice redoes
(bot/backfill/rules/options.py)."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.backfill.rules.options import RerunCounts, redone, rerun_counts
from bot.core.run_options import (
    CONF_CHARS,
    MAX_ACTIVE,
    REASON_CHARS,
    RERUN_CHOICES,
    OptionError,
    RunOptions,
    conf_text,
    default_rerun,
    parse_conf,
    parse_max_active,
    parse_priority,
    parse_reason,
    parse_rerun,
)

# --- --rerun -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rerun"),
    [("missing", "missing"), ("failed", "failed"), ("all", "all"), (" ALL ", "all"),
     ("Failed", "failed")],
)  # fmt: skip
def test_rerun_choices(text: str, rerun: str) -> None:
    assert parse_rerun(text) == rerun


@pytest.mark.parametrize("text", ["", "none", "completed", "fail", "everything", "all failed"])
def test_an_unknown_rerun_names_the_choices(text: str) -> None:
    with pytest.raises(OptionError, match="--rerun takes missing, failed or all") as error:
        parse_rerun(text)
    assert "missing redoes only intervals with no run" in str(error.value)


def test_a_long_unknown_rerun_is_quoted_short() -> None:
    with pytest.raises(OptionError) as error:
        parse_rerun("x" * 500)
    assert "x" * 40 in str(error.value)
    assert "x" * 41 not in str(error.value)


# --- --conf ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "conf"),
    [
        ('{"full_refresh": true}', {"full_refresh": True}),
        ('  {"a": 1, "b": [1, 2], "c": {"d": null}}  ', {"a": 1, "b": [1, 2], "c": {"d": None}}),
        ("{}", {}),
        ('{"Stadt": "Köln", "emoji": "🚚"}', {"Stadt": "Köln", "emoji": "🚚"}),
        ('{"re": "\\\\d+"}', {"re": "\\d+"}),
    ],
)
def test_conf_is_a_json_object(text: str, conf: dict[str, Any]) -> None:
    assert parse_conf(text) == conf


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1, 2]", "list"), ('"full_refresh"', "str"), ("42", "int"), ("1.5", "float"),
     ("null", "NoneType"), ("true", "bool")],
)  # fmt: skip
def test_conf_that_is_not_an_object_is_refused(text: str, kind: str) -> None:
    with pytest.raises(OptionError, match=f"--conf must be a JSON object .*, not a {kind}"):
        parse_conf(text)


@pytest.mark.parametrize(
    "text", ["", "{", "{'a': 1}", "{a: 1}", '{"a": 1,}', "full_refresh=true", '{"a": 1} x']
)
def test_conf_that_is_not_json_says_what_to_type_and_where(text: str) -> None:
    with pytest.raises(OptionError, match=r"--conf must be a JSON object, e\.g\. --conf") as error:
        parse_conf(text)
    assert "at character" in str(error.value)


def _conf_of_length(length: int) -> str:
    text = '{"k": ""}'
    return text[:-2] + "x" * (length - len(text)) + text[-2:]


def test_conf_may_be_up_to_3000_characters() -> None:
    assert CONF_CHARS == 3000
    longest = _conf_of_length(CONF_CHARS)
    assert len(longest) == CONF_CHARS
    assert parse_conf(f"  {longest}\n") == {"k": "x" * (CONF_CHARS - 9)}
    with pytest.raises(OptionError, match="--conf is 3001 characters long; at most 3000"):
        parse_conf(_conf_of_length(CONF_CHARS + 1))


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_conf_refuses_values_json_does_not_have(constant: str) -> None:
    with pytest.raises(OptionError, match="--conf"):
        parse_conf(f'{{"threshold": {constant}}}')


def test_a_deeply_nested_conf_is_refused_as_an_option_error() -> None:
    text = '{"a": ' + "[" * 1400 + "]" * 1400 + "}"
    assert len(text) < CONF_CHARS
    with pytest.raises(OptionError, match="--conf"):
        parse_conf(text)


# --- --max-active ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("64", 64), (" 8 ", 8), ("+4", 4)])
def test_max_active_is_a_whole_number_from_1_to_64(text: str, value: int) -> None:
    assert MAX_ACTIVE == 64
    assert parse_max_active(text) == value


@pytest.mark.parametrize(("text", "shown"), [("0", "0"), ("65", "65"), ("-1", "-1"),
                                             ("1000", "1000")])  # fmt: skip
def test_max_active_out_of_bounds_is_refused_with_the_number(text: str, shown: str) -> None:
    with pytest.raises(OptionError, match=f"from 1 to 64, not {shown}\\."):
        parse_max_active(text)


@pytest.mark.parametrize("text", ["", "eight", "1.5", "4 runs", "0x10", "1e2"])
def test_max_active_that_is_not_a_number_is_refused(text: str) -> None:
    with pytest.raises(OptionError, match=r"--max-active takes a whole number from 1 to 64\.$"):
        parse_max_active(text)


# --- --reason ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("orders feed was late", "orders feed was late"),
        ("  orders   feed\twas\nlate ", "orders feed was late"),
        ("verspätet 🚚 <@U123> <#C123|ops> #42", "verspätet 🚚 <@U123> <#C123|ops> #42"),
    ],
)  # fmt: skip
def test_a_reason_is_kept_with_its_spaces_collapsed(text: str, reason: str) -> None:
    assert parse_reason(text) == reason


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_reason_asks_for_words(text: str) -> None:
    with pytest.raises(OptionError, match=r'--reason needs some words, e\.g\. --reason "'):
        parse_reason(text)


def test_a_reason_may_be_up_to_300_characters() -> None:
    assert REASON_CHARS == 300
    assert parse_reason("x" * 300) == "x" * 300
    assert parse_reason("  " + "x" * 300 + "  ") == "x" * 300  # counted once tidied
    with pytest.raises(OptionError, match="--reason is 301 characters long; at most 300"):
        parse_reason("x" * 301)
    with pytest.raises(OptionError, match="at most 300"):
        parse_reason("word " * 70)


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\u200b", "\u202e", "\ufeff"])
def test_a_reason_with_control_characters_is_refused(char: str) -> None:
    with pytest.raises(OptionError, match="--reason cannot contain control characters"):
        parse_reason(f"late{char}feed")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_an_accepted_reason_is_tidy_printable_and_short(text: str) -> None:
    try:
        reason = parse_reason(text)
    except OptionError:
        return
    assert reason
    assert reason == reason.strip()
    assert "  " not in reason
    assert len(reason) <= REASON_CHARS
    assert all(c.isprintable() for c in reason)


# --- RunOptions --------------------------------------------------------------------------------


def test_defaults() -> None:
    options = RunOptions()
    assert options.rerun is None
    assert options.chosen_rerun == "all"
    assert options.reprocess_behavior == "completed"
    assert options.to_json() == {
        "rerun": None,
        "backwards": False,
        "conf": None,
        "max_active": None,
        "reason": "",
        "stop_on_failure": False,
        "priority": "normal",
    }


def test_priority_parses_and_survives_storage() -> None:
    assert parse_priority(" HIGH ") == "high"
    with pytest.raises(OptionError, match="--priority takes high, normal or low"):
        parse_priority("urgent")
    stored = RunOptions(priority="low").to_json()
    assert RunOptions.from_json(stored).priority == "low"
    assert RunOptions.from_json({**stored, "priority": "extreme"}).priority == "normal"
    assert "low priority" in RunOptions(priority="low").described()
    assert not any("priority" in w for w in RunOptions().described())


FULL = RunOptions(
    rerun="failed",
    backwards=True,
    conf={"full_refresh": True, "region": "eu", "days": [1, 2]},
    max_active=8,
    reason="orders feed was late",
    stop_on_failure=True,
)


@pytest.mark.parametrize(
    "options",
    [
        FULL,
        RunOptions(rerun="missing"),
        RunOptions(rerun="all", conf={}),
        RunOptions(rerun="all", max_active=1, reason="x"),
        RunOptions(rerun="failed", conf={"nested": {"a": [None, 1.5, "ü"]}}),
    ],
)
def test_options_survive_json(options: RunOptions) -> None:
    stored = json.loads(json.dumps(options.to_json()))
    assert RunOptions.from_json(stored) == options


def test_to_json_copies_the_conf() -> None:
    conf = {"a": 1}
    data = RunOptions(conf=conf).to_json()
    data["conf"]["a"] = 2
    assert conf == {"a": 1}


@pytest.mark.parametrize("data", [None, {}])
def test_a_request_from_before_options_gets_the_defaults(data: Any) -> None:
    assert RunOptions.from_json(data) == RunOptions(rerun="all")
    assert RunOptions.from_json(data, default_rerun="missing") == RunOptions(rerun="missing")


def test_a_stored_unset_rerun_gets_the_default() -> None:
    stored = RunOptions().to_json()
    assert RunOptions.from_json(stored, default_rerun="failed").rerun == "failed"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"rerun": "sometimes"}, RunOptions(rerun="all")),
        ({"rerun": ["all"]}, RunOptions(rerun="all")),
        ({"rerun": "FAILED"}, RunOptions(rerun="all")),
        ({"conf": "full_refresh"}, RunOptions(rerun="all")),
        ({"conf": [1, 2]}, RunOptions(rerun="all")),
        ({"max_active": 0}, RunOptions(rerun="all")),
        ({"max_active": -3}, RunOptions(rerun="all")),
        ({"max_active": "8"}, RunOptions(rerun="all")),
        ({"max_active": 2.5}, RunOptions(rerun="all")),
        ({"reason": None}, RunOptions(rerun="all")),
        ({"reason": 42}, RunOptions(rerun="all", reason="42")),
        ({"backwards": 1, "stop_on_failure": 0}, RunOptions(rerun="all", backwards=True)),
        ({"unknown": "kept out", "rerun": "missing"}, RunOptions(rerun="missing")),
    ],
)
def test_bad_stored_options_fall_back_field_by_field(
    data: dict[str, Any], expected: RunOptions
) -> None:
    assert RunOptions.from_json(data) == expected


def test_a_stored_boolean_max_active_is_dropped() -> None:
    assert RunOptions.from_json({"max_active": True}).max_active is None


@pytest.mark.parametrize("data", [["rerun", "all"], "all"])
def test_stored_options_that_are_not_an_object_give_the_defaults(data: Any) -> None:
    assert RunOptions.from_json(data) == RunOptions(rerun="all")


@pytest.mark.parametrize(
    ("rerun", "default", "chosen"),
    [(None, "missing", "missing"), (None, "all", "all"), ("failed", "missing", "failed"),
     ("all", "missing", "all")],
)  # fmt: skip
def test_resolved_fills_in_the_bots_default_only_when_none_was_given(
    rerun: Any, default: Any, chosen: str
) -> None:
    options = RunOptions(rerun=rerun, backwards=True, max_active=3)
    resolved = options.resolved(default)
    assert resolved.rerun == chosen
    assert (resolved.backwards, resolved.max_active) == (True, 3)
    if rerun is not None:
        assert resolved is options


@pytest.mark.parametrize(
    ("rerun", "behavior"),
    [("missing", "none"), ("failed", "failed"), ("all", "completed"), (None, "completed")],
)
def test_reprocess_behavior_is_airflows_word_for_the_choice(rerun: Any, behavior: str) -> None:
    assert RunOptions(rerun=rerun).reprocess_behavior == behavior


@pytest.mark.parametrize(
    ("behavior", "rerun"),
    [("none", "missing"), ("failed", "failed"), ("completed", "all"), ("bogus", "all")],
)
def test_default_rerun_reads_the_bots_reprocess_behavior(behavior: str, rerun: str) -> None:
    assert default_rerun(behavior) == rerun


def test_described_in_words() -> None:
    assert RunOptions().described() == ("reruns every interval",)
    assert RunOptions(rerun="missing").described() == ("reruns only intervals with no run",)
    assert FULL.described() == (
        "reruns failed and missing runs",
        "newest interval first",
        "at most 8 runs of a DAG at once",
        'conf {"days": [1, 2], "full_refresh": true, "region": "eu"}',
        "pauses at the first failed run",
    )
    assert RunOptions(max_active=1).described()[1] == "at most 1 run of a DAG at once"
    assert RunOptions(conf={}).described() == ("reruns every interval",)


def test_conf_text_is_sorted_json_kept_readable() -> None:
    assert conf_text({"b": "Köln", "a": None}) == '{"a": null, "b": "Köln"}'


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
OPTIONS = st.builds(
    RunOptions,
    rerun=st.sampled_from(RERUN_CHOICES),
    backwards=st.booleans(),
    conf=st.none() | st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4),
    max_active=st.none() | st.integers(1, MAX_ACTIVE),
    reason=st.text(string.ascii_letters + " ", max_size=40),
    stop_on_failure=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(OPTIONS)
def test_any_options_survive_json(options: RunOptions) -> None:
    assert RunOptions.from_json(json.loads(json.dumps(options.to_json()))) == options
    assert options.described()[0].startswith("reruns ")


# --- which runs a choice redoes ----------------------------------------------------------------

# the latest run's state → whether --rerun missing, failed, all redoes the interval
REDONE = {
    None: (True, True, True),
    "success": (False, False, True),
    "failed": (False, True, True),
    "queued": (False, False, True),
    "running": (False, False, True),
}


@pytest.mark.parametrize("state", list(REDONE))
@pytest.mark.parametrize("rerun", RERUN_CHOICES)
def test_redone_follows_airflows_reprocess_behavior(state: str | None, rerun: Any) -> None:
    assert redone(state, rerun) is REDONE[state][RERUN_CHOICES.index(rerun)]


def test_rerun_counts_count_each_choice() -> None:
    states = [None, None, "success", "failed", "failed", "running", "queued", "success"]
    counts = rerun_counts(states)
    assert (counts.missing, counts.failed, counts.all, counts.known) == (2, 4, 8, True)
    assert [counts.of(c) for c in RERUN_CHOICES] == [2, 4, 8]
    assert rerun_counts(iter(states)) == counts  # any iterable, read once
    assert rerun_counts([]) == RerunCounts(0, 0, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(REDONE))))
def test_each_choice_redoes_at_least_what_the_narrower_one_does(states: list[str | None]) -> None:
    counts = rerun_counts(states)
    assert counts.missing == states.count(None)
    assert counts.missing <= counts.failed <= counts.all == len(states)
    for choice in RERUN_CHOICES:
        assert counts.of(choice) == sum(redone(s, choice) for s in states)


def test_rerun_counts_survive_json() -> None:
    counts = RerunCounts(2, 4, 8, known=False)
    assert RerunCounts.from_json(json.loads(json.dumps(counts.to_json()))) == counts
    assert RerunCounts.from_json({"missing": 1, "failed": 2, "all": 3}) == RerunCounts(1, 2, 3)


@pytest.mark.parametrize(
    "data", [None, [], "1,2,3", {}, {"missing": 1, "failed": 2}, {"missing": "x", "failed": 2,
                                                                   "all": 3}]
)  # fmt: skip
def test_unreadable_rerun_counts_are_none(data: Any) -> None:
    assert RerunCounts.from_json(data) is None


@pytest.mark.parametrize("text", ['{"a": 1e400}', '{"a": -1e999}'])
def test_a_conf_number_too_large_for_json_is_refused(text: str) -> None:
    with pytest.raises(OptionError, match="is not a JSON number"):
        parse_conf(text)
