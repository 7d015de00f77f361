"""SLA notices: a DAG whose run is missing, late or running too long, posted to the teams that
own it, and the reports that will be late because of it, posted to the teams that own those.
Each is its own message (templates/sla/sla_notice.json.j2), not a reply in a thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.incidents.messages.alerts import interval_words
from bot.sla.rules import AckOutcome, Miss, NoticeAcknowledged
from bot.slack.messages.common import action_result
from bot.slack.messages.render import NAME, clip, defuse, render, sentence, user_mention, web_url
from bot.slack.rules.ids import ActionId

_REPORTS = 20  # reports named in one notice before "and N more"
_REPORT_NAME = 100  # each of them, so that 20 fit one section
_REASON = 1000

WHAT: dict[str, str] = {
    "missing": "has no run yet",
    "late": "has not succeeded yet",
    "too_long": "is running too long",
}


@dataclass(frozen=True)
class NoticeLinks:
    """What an SLA notice's buttons point at: the miss (Acknowledge) and the DAG's pages."""

    miss_id: str = ""
    airflow_url: str | None = None
    marquez_url: str | None = None


def _view(dag_id: str, miss: Miss, cause: str | None, links: NoticeLinks) -> dict[str, Any]:
    return {
        "miss_id": links.miss_id,
        "airflow_url": web_url(links.airflow_url),
        "marquez_url": web_url(links.marquez_url),
        "cause": clip(cause, NAME) if cause else "",
        "dag_id": clip(dag_id, NAME),
        "what": WHAT[miss.kind],
        "interval": clip(interval_words(miss.interval.start, miss.interval.end), NAME),
        "due": miss.due.strftime("%Y-%m-%d %H:%M UTC"),
        "reason": clip(miss.reason, _REASON),
        "reports": [],
        "more": 0,
    }


def late_notice(
    dag_id: str, miss: Miss, *, cause: str | None = None, links: NoticeLinks = NoticeLinks()
) -> dict[str, Any]:
    """To the DAG's owners and the rule's teams: the run is missing, late or running too long
    (`cause`: the DAG whose open incident explains it, itself or one upstream)."""
    return render("sla/sla_notice.json.j2", _view(dag_id, miss, cause, links))


def reports_late(
    reports: Sequence[str],
    dag_id: str,
    miss: Miss,
    *,
    cause: str | None = None,
    links: NoticeLinks = NoticeLinks(),
) -> dict[str, Any]:
    """To a team whose `reports` read what the late DAG writes (or what is downstream of it)."""
    view = _view(dag_id, miss, cause, links)
    view["reports"] = [clip(name, _REPORT_NAME) for name in reports[:_REPORTS]]
    view["more"] = max(0, len(reports) - _REPORTS)
    return render("sla/sla_notice.json.j2", view)


def acknowledged(message: dict[str, Any], user: str) -> dict[str, Any]:
    """The notice as it was clicked (`message` from the click), saying who is on it and
    without its Acknowledge button: what `chat.update` sends back."""
    blocks = [dict(b) for b in message.get("blocks") or []]
    kept: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "actions":
            elements = [
                e for e in block.get("elements") or [] if e.get("action_id") != ActionId.SLA_ACK
            ]
            line = {"type": "mrkdwn", "text": sentence(":eyes: {} is on it", user_mention(user))}
            kept.append({"type": "context", "elements": [line]})
            if elements:
                kept.append({**block, "elements": elements})
            continue
        if block.get("type") == "context" and ":eyes:" in str(block):
            continue  # acknowledged before: the newest acknowledgement replaces it
        kept.append(block)
    payload = {"text": str(message.get("text") or "SLA notice"), "blocks": kept}
    return defuse(payload, "sla.acknowledged")


def answer(outcome: AckOutcome) -> dict[str, Any]:
    """The ephemeral reply to Acknowledge on an SLA notice."""
    if isinstance(outcome, NoticeAcknowledged):
        return action_result("Acknowledged: the notice shows you are on it.")
    return action_result("This SLA notice is not one the bot knows.")
