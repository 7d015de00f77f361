"""What a data finding says, in words: a line of an alert (mrkdwn, names in code spans) or of
a sink's notice (plain text). One phrase per kind, both forms from it."""

from __future__ import annotations

from collections.abc import Sequence

from bot.quality.rules.checks import VOLUME, Finding, FindingKind
from bot.quality.rules.verify import Rewrite, Why
from bot.slack.messages.render import Mrkdwn, code, sentence

__all__ = ["amount", "finding_line", "finding_text", "findings_summary", "rewrite_line"]

_COLUMNS = 6  # columns named in one line before "and N more"
_NAME = 120


class _Name(str):
    """A name to show as code in Slack."""


def _phrase(finding: Finding, interval: str) -> tuple[str, list[str]]:
    name = _Name(finding.name)
    if finding.kind == FindingKind.NO_STATISTICS:
        head = "{} was written for {} with no row count, where its runs always sent one"
        tail = " (Spark sends none for a write of nothing)"
        if finding.usual is None:
            return head + tail, [name, interval]
        return head + tail + "; it usually writes about {}", [
            name, interval, _amount(_about(finding.usual), finding.unit),
        ]  # fmt: skip
    if finding.kind in VOLUME:
        wrote = _amount(finding.value or 0, finding.unit)
        head = "{} wrote {} for {}"
        if finding.usual is None:
            return head, [name, wrote, interval]
        return head + "; it usually writes about {}", [
            name, wrote, interval, _amount(_about(finding.usual), finding.unit),
        ]  # fmt: skip
    if finding.kind == FindingKind.ASSERTION:
        test = _Name(finding.assertion or "?")
        if finding.column:
            return "{} failed the check {} on column {} for {}", [
                name, test, _Name(finding.column), interval,
            ]  # fmt: skip
        return "{} failed the check {} for {}", [name, test, interval]
    if finding.kind == FindingKind.COLUMNS:
        parts: list[str] = []
        values: list[str] = [name]
        if finding.lost:
            parts.append("lost " + ("column {}" if len(finding.lost) == 1 else "columns {}"))
            values.append(_columns([f"{c} ({t})" if t else c for c, t in finding.lost]))
        if finding.changed:
            parts.append("changed the type of {}")
            values.append(_columns([f"{c} from {a} to {b}" for c, a, b in finding.changed]))
        template = "{} " + " and ".join(parts) + " in the run for {}"
        values.append(interval)
        more, extra = _column_impact(finding)
        return template + more, values + extra
    verb = "dropped" if finding.lifecycle == "DROP" else "emptied (truncated)"
    return "{} was " + verb + " by the run for {}, and other DAGs read it", [name, interval]


def _column_impact(finding: Finding) -> tuple[str, list[str]]:
    """Who reads the changed columns (column lineage), and who might (table level)."""
    parts: list[str] = []
    values: list[str] = []
    if finding.readers:
        shown = [f"{dag} ({column})" for dag, column in finding.readers]
        more = finding.reader_dags - len({dag for dag, _ in finding.readers})
        parts.append("; read by {}")
        values.append(_columns(shown) + (f" and {more} more DAGs" if more > 0 else ""))
    elif finding.others:
        parts.append("; no DAG reads them")
    if finding.others:
        parts.append("; {} read it but not these columns")
        values.append(f"{finding.others} DAG" + ("s" if finding.others != 1 else ""))
    if finding.table_level:
        parts.append("; table level, without column lineage: {}")
        values.append(_columns(list(finding.table_level)))
    return "".join(parts), values


def finding_line(finding: Finding, interval: str) -> Mrkdwn:
    """The finding as a line of an alert."""
    template, values = _phrase(finding, interval)
    shown = [code(v, _NAME) if isinstance(v, _Name) else v for v in values]
    return sentence(template, *shown)


def finding_text(finding: Finding, interval: str) -> str:
    """The finding in plain text (e-mail, Teams, webhooks, PagerDuty)."""
    template, values = _phrase(finding, interval)
    return template.format(*values)


def findings_summary(findings: Sequence[tuple[Finding, str]]) -> str:
    """Every finding of an incident in plain text, one per line."""
    return "\n".join(finding_text(f, interval) for f, interval in findings)


def _amount(value: int, unit: str) -> str:
    if unit == "rows":
        return f"{value:,} row" if value == 1 else f"{value:,} rows"
    size = float(value)
    for suffix in ("bytes", "KB", "MB", "GB", "TB"):
        if size < 1024 or suffix == "TB":
            return f"{value:,} bytes" if suffix == "bytes" else f"{size:.1f} {suffix}"
        size /= 1024
    return f"{value:,} bytes"  # pragma: no cover - the loop always returns


def _about(value: int) -> int:
    """A usual amount as people say it: two significant digits (41,050 → 41,000)."""
    if value < 100:
        return value
    step = 10 ** (len(str(value)) - 2)
    return int(round(value / step) * step)


def _columns(items: list[str]) -> str:
    more = len(items) - _COLUMNS
    shown = ", ".join(items[:_COLUMNS])
    return f"{shown} and {more} more" if more > 0 else shown


def rewrite_line(rewrite: Rewrite) -> Mrkdwn:
    """A rerun that still looks wrong, as a line of a backfill's verification."""
    day = rewrite.interval.start.date().isoformat()
    wrote = amount(rewrite.after or 0, rewrite.unit)
    head = [code(rewrite.dag.dag_id, _NAME), day, code(rewrite.name or "?", _NAME), wrote]
    if rewrite.why == Why.UNCHANGED:
        return sentence("{} {}: {} wrote {} again, as the run it replaced did", *head)
    if rewrite.usual is None:
        return sentence("{} {}: {} wrote {}", *head)
    usual = amount(_about(rewrite.usual), rewrite.unit)
    return sentence("{} {}: {} wrote {}; it usually writes about {}", *head, usual)


def amount(value: int, unit: str) -> str:
    """Rows, or bytes in the unit people read them in."""
    return _amount(value, unit)
