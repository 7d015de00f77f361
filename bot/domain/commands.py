"""Parsing of `/backfill` text into a typed command, with errors that name the fix."""

from __future__ import annotations

import re
from dataclasses import dataclass

USAGE = "/backfill DAG START..END [--only] [--exclude DAG[,DAG]] [--namespace NS] [--dry-run]"


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
class PlanCommand:
    dag: str
    range_text: str
    only: bool = False
    exclude: tuple[str, ...] = ()
    namespace: str | None = None
    dry_run: bool = False


Command = HelpCommand | StatusCommand | CancelCommand | PlanCommand


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


def parse_command(text: str) -> Command:
    """`help`, `status [ID]`, `cancel ID`, or `DAG START..END` with options."""
    # Slack clients may send non-breaking spaces and smart dashes from autocorrect.
    cleaned = (text or "").replace("\u00a0", " ").replace("\u2014", "--").replace("\u2013", "--")
    words = cleaned.split()
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
    positional: list[str] = []
    only = dry_run = False
    exclude: list[str] = []
    namespace: str | None = None
    index = 0
    while index < len(words):
        word = words[index]
        option, _, inline = word.partition("=")
        if option in {"--only", "--dry-run"} and not inline:
            only = only or option == "--only"
            dry_run = dry_run or option == "--dry-run"
        elif option in {"--exclude", "--namespace"}:
            if not inline:
                index += 1
                if index >= len(words) or words[index].startswith("--"):
                    raise CommandError(f"{option} needs a value. Usage: {USAGE}")
                inline = words[index]
            if option == "--exclude":
                exclude.extend(_split_exclusions(inline))
            else:
                namespace = inline
        elif word.startswith("--"):
            raise CommandError(f"Unknown option {word}. Usage: {USAGE}")
        else:
            positional.append(word)
        index += 1
    if len(positional) != 2:
        raise CommandError(
            f"Expected a DAG and a date range, got {len(positional)} argument(s). Usage: {USAGE}"
        )
    return PlanCommand(positional[0], positional[1], only, tuple(exclude), namespace, dry_run)
