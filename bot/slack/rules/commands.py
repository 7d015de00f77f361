"""Parsing of `/backfill` text into a typed command, with errors that name the fix."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from bot.config.hub import EVENT_CLASSES, EventClass
from bot.core.run_options import (
    OptionError,
    RunOptions,
    parse_conf,
    parse_max_active,
    parse_priority,
    parse_reason,
    parse_rerun,
)

USAGE = (
    "/backfill DAG START..END [--only] [--exclude DAG[,DAG]] [--namespace NS] [--dry-run] "
    "[--rerun missing|failed|all] [--backwards] [--conf JSON] [--max-active N] "
    '[--reason "TEXT"] [--stop-on-failure] [--priority high|normal|low] [--with-asset-consumers] '
    '[--at "YYYY-MM-DD HH:MM [ZONE]"] [--now]'
)
SUBSCRIBE_USAGE = (
    "/backfill subscribe PATTERN [--failures] [--sla] [--backfills] [--reports] [--downstream]"
)
HISTORY_CHARS = 1024
"""The longest DAG, dataset or report name `/backfill history` takes."""
PATTERN_CHARS = 255
"""The longest DAG pattern `/backfill subscribe` takes (the `subscriptions.pattern` column)."""
SUBSCRIPTION_ID = re.compile(r"[0-9a-f]{8}")
"""A subscription id: 8 lower-case hex characters."""


class CommandError(ValueError):
    """The command text cannot be understood; the message says what to type instead."""


@dataclass(frozen=True)
class HelpCommand:
    pass


@dataclass(frozen=True)
class StatusCommand:
    request_id: str | None = None


@dataclass(frozen=True)
class CancelCommand:
    request_id: str


@dataclass(frozen=True)
class PauseCommand:
    request_id: str
    resume: bool = False
    """`/backfill resume ID` (else `/backfill pause ID`)."""


@dataclass(frozen=True)
class PlanCommand:
    dag: str
    range_text: str
    only: bool = False
    exclude: tuple[str, ...] = ()
    namespace: str | None = None
    dry_run: bool = False
    options: RunOptions = field(default_factory=RunOptions)
    at: str | None = None
    """`--at`, as typed: read by the service, which knows the clock and the bot's time zone."""
    now: bool = False
    """`--now`: run at once, whatever the off-peak window says."""


@dataclass(frozen=True)
class SubscribeCommand:
    pattern: str
    """A DAG glob, `GLOB` or `NS::GLOB` (see `bot.config.matches`)."""
    events: tuple[EventClass, ...] = EVENT_CLASSES
    """The event classes, each once, in `EVENT_CLASSES` order (all four when no flag is given)."""
    downstream: bool = False


@dataclass(frozen=True)
class SubscriptionsCommand:
    pass


@dataclass(frozen=True)
class HistoryCommand:
    subject: str
    """A DAG id, a dataset (`NAME` or `NAMESPACE::NAME`) or a BOT_CONFIG report's name."""


@dataclass(frozen=True)
class UnsubscribeCommand:
    subscription_id: str


Command = (
    HelpCommand
    | StatusCommand
    | CancelCommand
    | PauseCommand
    | PlanCommand
    | SubscribeCommand
    | SubscriptionsCommand
    | UnsubscribeCommand
    | HistoryCommand
)


def _split_exclusions(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if not names:
        raise CommandError("--exclude needs DAG ids, e.g. --exclude example.email_discounts")
    return names


SHORT_ID = 8
"""How many leading characters of a request id `/backfill status` and `cancel` accept."""
_ID = re.compile(rf"[0-9a-f]{{{SHORT_ID},32}}")


def request_id(text: str) -> str:
    """A request id as typed: the whole id (32 hex characters) or at least its first 8."""
    candidate = text.strip("`").lower()
    if not _ID.fullmatch(candidate):
        raise CommandError(
            f"A backfill id is 32 hex characters, or its first {SHORT_ID} or more, "
            "as /backfill status shows them."
        )
    return candidate


def subscription_id(text: str) -> str:
    """A subscription id as typed (in backticks or capitals too): 8 hex characters."""
    candidate = text.strip("`").lower()
    if not SUBSCRIPTION_ID.fullmatch(candidate):
        raise CommandError(
            "A subscription id is 8 hex characters, as /backfill subscriptions shows them. "
            "Usage: /backfill unsubscribe ID"
        )
    return candidate


def check_pattern(pattern: str) -> str:
    """`pattern` if it can be a DAG glob (`GLOB` or `NS::GLOB`), else a CommandError."""
    if len(pattern) > PATTERN_CHARS:
        raise CommandError(
            f"That pattern is {len(pattern)} characters long; at most {PATTERN_CHARS} are "
            "allowed. Use a shorter glob, e.g. example.etl_*"
        )
    if any(not char.isprintable() or char.isspace() for char in pattern):
        raise CommandError(
            "A DAG pattern cannot contain spaces or control characters. "
            "Type one glob, e.g. example.etl_* or food_delivery::example.*"
        )
    if "::" in pattern:
        namespace, _, name = pattern.partition("::")
        if not namespace or not name:
            raise CommandError(
                "NS::GLOB needs a namespace before :: and a DAG glob after it, "
                "e.g. food_delivery::example.*"
            )
    return pattern


_EVENT_FLAGS: dict[str, EventClass] = {f"--{event}": event for event in EVENT_CLASSES}


def _parse_subscribe(words: list[str]) -> SubscribeCommand:
    patterns: list[str] = []
    events: set[EventClass] = set()
    downstream = False
    for word in words:
        flag = word.lower()
        if flag in _EVENT_FLAGS:
            events.add(_EVENT_FLAGS[flag])
        elif flag == "--downstream":
            downstream = True
        elif word.startswith("-"):
            raise CommandError(f"Unknown option {word}. Usage: {SUBSCRIBE_USAGE}")
        else:
            patterns.append(word)
    if len(patterns) != 1:
        got = "no pattern" if not patterns else f"{len(patterns)} patterns"
        raise CommandError(
            f"Expected one DAG pattern, got {got}. Usage: {SUBSCRIBE_USAGE} "
            "(e.g. /backfill subscribe example.etl_* --failures)"
        )
    chosen = tuple(e for e in EVENT_CLASSES if e in events) or EVENT_CLASSES
    return SubscribeCommand(check_pattern(patterns[0]), chosen, downstream)


# Slack clients may send non-breaking spaces, smart dashes and smart quotes from autocorrect.
_TYPED = str.maketrans({"\u00a0": " ", "\u2014": "--", "\u2013": "--", "\u201c": '"',
                        "\u201d": '"', "\u2018": "'", "\u2019": "'"})  # fmt: skip


def _words(text: str) -> list[str]:
    """The command's words, quotes honoured (`--reason "late feed"`, `--conf '{"a": 1}'`)."""
    # Slack sends a command's text with &, < and > escaped: --conf and --reason want them back.
    typed = (text or "").translate(_TYPED).replace("&lt;", "<").replace("&gt;", ">")
    lexer = shlex.shlex(typed.replace("&amp;", "&"), posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.escape = ""  # a backslash is kept as typed: JSON and regexes need it
    lexer.commenters = ""  # `#` is a character like any other (Slack writes channels as <#C…>)
    try:
        return list(lexer)
    except ValueError:
        raise CommandError(
            "A quote is not closed. Put a value with spaces in quotes, e.g. "
            '--reason "orders feed was late" or --conf \'{"full_refresh": true}\''
        ) from None


def parse_command(text: str) -> Command:
    """`help`, `status [ID]`, `cancel ID`, `pause ID`, `resume ID`, `subscribe PATTERN
    [flags]`, `subscriptions`, `unsubscribe ID`, `history SUBJECT`, or `DAG START..END` with
    options."""
    words = _words(text)
    if not words or words[0].lower() in {"help", "-h", "--help"}:
        return HelpCommand()
    head = words[0].lower()
    if head == "status":
        if len(words) > 2:
            raise CommandError("Usage: /backfill status [REQUEST_ID]")
        return StatusCommand(request_id(words[1]) if len(words) == 2 else None)
    if head == "cancel":
        if len(words) != 2:
            raise CommandError("Usage: /backfill cancel REQUEST_ID (see /backfill status)")
        return CancelCommand(request_id(words[1]))
    if head in {"pause", "resume"}:
        if len(words) != 2:
            raise CommandError(f"Usage: /backfill {head} REQUEST_ID (see /backfill status)")
        return PauseCommand(request_id(words[1]), resume=head == "resume")
    if head == "subscribe":
        return _parse_subscribe(words[1:])
    if head == "subscriptions":
        if len(words) != 1:
            raise CommandError(
                "Usage: /backfill subscriptions (it lists this channel's subscriptions)"
            )
        return SubscriptionsCommand()
    if head == "history" and not (len(words) > 1 and ".." in words[1]):
        # (`/backfill history 2021-06-04..2021-06-06` stays a plan of a DAG named history)
        if len(words) < 2:
            raise CommandError(
                "Usage: /backfill history DAG|DATASET|REPORT (what backfills restated it)"
            )
        subject = " ".join(words[1:])
        if len(subject) > HISTORY_CHARS:
            raise CommandError(f"That name is too long: at most {HISTORY_CHARS} characters.")
        return HistoryCommand(subject)
    if head == "unsubscribe":
        if len(words) != 2:
            raise CommandError("Usage: /backfill unsubscribe ID (see /backfill subscriptions)")
        return UnsubscribeCommand(subscription_id(words[1]))
    return _parse_plan(words)


_FLAGS = frozenset(
    {"--only", "--dry-run", "--backwards", "--stop-on-failure", "--now", "--with-asset-consumers"}
)
_VALUED = frozenset(
    {"--exclude", "--namespace", "--rerun", "--conf", "--max-active", "--reason", "--at",
     "--priority"}
)  # fmt: skip


def _parse_plan(words: list[str]) -> PlanCommand:
    positional: list[str] = []
    flags: set[str] = set()
    values: dict[str, str] = {}
    exclude: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        option, equals, inline = word.partition("=")
        if option.lower() in _FLAGS and not equals:
            flags.add(option.lower())
        elif option.lower() in _VALUED:
            option = option.lower()
            if not equals:
                index += 1
                if index >= len(words) or words[index].startswith("--"):
                    raise CommandError(f"{option} needs a value. Usage: {USAGE}")
                inline = words[index]
            if option == "--exclude":
                exclude.extend(_split_exclusions(inline))
            elif option in values and values[option] != inline:
                raise CommandError(f"{option} is given twice; give it once.")
            else:
                values[option] = inline
        elif word.startswith("--"):
            raise CommandError(f"Unknown option {word}. Usage: {USAGE}")
        else:
            positional.append(word)
        index += 1
    if len(positional) != 2:
        raise CommandError(
            f"Expected a DAG and a date range, got {len(positional)} argument(s). Usage: {USAGE}"
        )
    if "--now" in flags and "--at" in values:
        raise CommandError("--now and --at contradict each other: give one of them.")
    return PlanCommand(
        positional[0],
        positional[1],
        "--only" in flags,
        tuple(exclude),
        values.get("--namespace"),
        "--dry-run" in flags,
        _options(flags, values),
        values.get("--at"),
        "--now" in flags,
    )


def _options(flags: set[str], values: dict[str, str]) -> RunOptions:
    try:
        return RunOptions(
            rerun=parse_rerun(values["--rerun"]) if "--rerun" in values else None,
            backwards="--backwards" in flags,
            conf=parse_conf(values["--conf"]) if "--conf" in values else None,
            max_active=parse_max_active(values["--max-active"])
            if "--max-active" in values
            else None,
            reason=parse_reason(values["--reason"]) if "--reason" in values else "",
            stop_on_failure="--stop-on-failure" in flags,
            with_asset_consumers="--with-asset-consumers" in flags,
            priority=parse_priority(values["--priority"]) if "--priority" in values else "normal",
        )
    except OptionError as exc:
        raise CommandError(str(exc)) from None
