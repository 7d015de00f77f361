"""What sinks beyond Slack are sent for an event (pure): the webhook's versioned JSON document
(docs/webhooks.md), PagerDuty's Events API v2 event, an e-mail's subject, text and HTML, and a
Teams Adaptive Card.
No secret is written here: the sender adds a PagerDuty routing key (and an e-mail's relay
settings and recipients) when it sends, so none is stored in the database."""

from __future__ import annotations

from datetime import UTC
from html import escape
from typing import Any, Literal

from bot.config.sinks import EmailSink, PagerDutySink, Sink, TeamsSink
from bot.hub.rules.routing import HubEvent
from bot.hub.sinks.pagerduty import pagerduty_event
from bot.hub.sinks.teams import teams_message

WEBHOOK_VERSION = "1"
_ERROR = 1000  # characters of an error message a document carries


def dedup_key(incident_id: str) -> str:
    """One outage is one PagerDuty alert: its trigger, acknowledge and resolve share this."""
    return f"backfill-bot/incident/{incident_id}"


def body_for(sink: Sink, event: HubEvent) -> dict[str, Any]:
    if isinstance(sink, PagerDutySink):
        return pagerduty_body(sink, event)
    if isinstance(sink, EmailSink):
        return email_body(event)
    if isinstance(sink, TeamsSink):
        return teams_card(event)
    return webhook_document(event)


_STYLES: dict[str, Literal["attention", "good", "warning"]] = {
    "failure.opened": "attention",
    "failure.acknowledged": "warning",
    "failure.resolved": "good",
    "failure.escalated": "attention",
    "sla.missed": "warning",
    "backfill.approved": "warning",
    "backfill.ended": "good",
}


def teams_card(event: HubEvent) -> dict[str, Any]:
    """The Adaptive Card message for a Teams channel (the builder escapes outside text)."""
    headline, facts, error = _summary(event)
    return teams_message(
        title=headline, text=error or headline, facts=facts, style=_STYLES[event.kind]
    )


_HEADLINES = {
    "failure.opened": "{dag} failed for {intervals}",
    "failure.acknowledged": "{dag} failure acknowledged ({intervals})",
    "failure.resolved": "{dag} resolved for {intervals}",
    "failure.escalated": "{dag} failed for {intervals} and nobody has acknowledged it",
    "sla.missed": "{dag} is late for {intervals}",
    "backfill.approved": "Backfill of {dag} {intervals} approved",
    "backfill.ended": "Backfill of {dag} {intervals} {state}",
}


_DATA_HEADLINES = {
    "failure.opened": "{dag} wrote bad data for {intervals}",
    "failure.acknowledged": "{dag} bad data acknowledged ({intervals})",
    "failure.escalated": "{dag} wrote bad data for {intervals} and nobody has acknowledged it",
}


def _summary(event: HubEvent) -> tuple[str, list[tuple[str, str]], str | None]:
    """The headline, facts and error every human-facing sink shows (e-mail, Teams)."""
    headlines = _DATA_HEADLINES if event.incident_kind == "data" else {}
    headline = headlines.get(event.kind, _HEADLINES[event.kind]).format(
        dag=event.dag.dag_id, intervals=event.intervals, state=event.state or "ended"
    )
    facts = [
        ("DAG", f"{event.dag.namespace} / {event.dag.dag_id}"),
        ("Intervals", event.intervals),
        ("Owners", ", ".join(event.owners) or "no team in BOT_CONFIG"),
        ("Severity", event.severity),
    ]
    if event.kind.startswith("failure."):
        runs = "Runs with bad data" if event.incident_kind == "data" else "Failed runs"
        facts[2:2] = [(runs, str(event.failures))]
        facts.append(("Incident", event.incident_id))
    if event.reason:
        facts.append(("Why", event.reason))
    if event.reports:
        facts.append(("Reports at risk", ", ".join(event.reports[:20])))
    if event.dags:
        shown = ", ".join(d.dag_id for d in event.dags[:20])
        more = f" and {len(event.dags) - 20} more" if len(event.dags) > 20 else ""
        facts.append(("Reruns", shown + more))
    if event.actor:
        facts.append(("Approved by", f"Slack user {event.actor}"))
    if event.acknowledged_by:
        facts.append(("Acknowledged by", f"Slack user {event.acknowledged_by}"))
    if event.backfill_request_id:
        facts.append(("Backfill", event.backfill_request_id))
    return headline, facts, _clip(event.error)


def _problem(event: HubEvent) -> str:
    """What a failure.* headline says happened."""
    return "wrote bad data" if event.incident_kind == "data" else "failed"


def email_body(event: HubEvent) -> dict[str, Any]:
    """Subject, plain text and HTML of the e-mail for `event` (every value from outside is
    escaped in the HTML; the plain text is plain)."""
    headline, facts, error = _summary(event)
    text = "\n".join(
        [headline, "", *(f"{name}: {value}" for name, value in facts)]
        + (["", "Error:", error] if error else [])
        + ["", "-- backfill-bot"]
    )
    rows = "".join(
        f'<tr><th align="left">{escape(name)}</th><td>{escape(value)}</td></tr>'
        for name, value in facts
    )
    html = (
        f"<p><strong>{escape(headline)}</strong></p><table>{rows}</table>"
        + (f"<p>Error:</p><pre>{escape(error)}</pre>" if error else "")
        + "<p>&#8212; backfill-bot</p>"
    )
    return {"subject": f"[backfill-bot] {headline}"[:200], "text": text, "html": html}


def webhook_document(event: HubEvent) -> dict[str, Any]:
    """Version 1 of the webhook document: what happened, to what, when."""
    document: dict[str, Any] = {
        "version": WEBHOOK_VERSION,
        "type": event.kind,
        "occurred_at": event.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "severity": event.severity,
    }
    if event.kind == "sla.missed":
        document["sla"] = {
            "id": event.miss_id,
            "namespace": event.dag.namespace,
            "dag_id": event.dag.dag_id,
            "intervals": event.intervals,
            "reason": event.reason,
            "owners": list(event.owners),
            "reports": list(event.reports),
        }
        return document
    if event.kind.startswith("backfill."):
        document["backfill"] = {
            "id": event.backfill_request_id,
            "namespace": event.dag.namespace,
            "dag_id": event.dag.dag_id,
            "range": event.intervals,
            "state": event.state,
            "approved_by": event.actor,
            "owners": list(event.owners),
            "dags": [{"namespace": d.namespace, "dag_id": d.dag_id} for d in event.dags],
        }
        return document
    document["incident"] = {
        "id": event.incident_id,
        "kind": event.incident_kind,
        "namespace": event.dag.namespace,
        "dag_id": event.dag.dag_id,
        "intervals": event.intervals,
        "failures": event.failures,
        "error": _clip(event.error),
        "owners": list(event.owners),
        "acknowledged_by": event.acknowledged_by,
        "backfill_request_id": event.backfill_request_id,
        "reports": list(event.reports),
    }
    return document


def pagerduty_body(sink: PagerDutySink, event: HubEvent) -> dict[str, Any]:
    """The Events API v2 event without its routing key (added when sent)."""
    key = dedup_key(event.incident_id)
    if event.kind == "failure.acknowledged":
        body = pagerduty_event("acknowledge", routing_key="-", dedup_key=key)
    elif event.kind == "failure.resolved":
        body = pagerduty_event("resolve", routing_key="-", dedup_key=key)
    else:
        error = f": {event.error}" if event.error else ""
        late = " (nobody acknowledged it)" if event.kind == "failure.escalated" else ""
        body = pagerduty_event(
            "trigger",
            routing_key="-",
            dedup_key=key,
            summary=f"{event.dag.dag_id} {_problem(event)} for {event.intervals}{late}{error}",
            source=event.dag.namespace,
            severity=sink.severity,
            timestamp=event.at,
            component=event.dag.dag_id,
            group=event.owners[0] if event.owners else None,
            event_class="airflow_dag_bad_data"
            if event.incident_kind == "data"
            else "airflow_dag_failure",
            custom_details={
                "incident": event.incident_id,
                "dag": event.dag.dag_id,
                "namespace": event.dag.namespace,
                "intervals": event.intervals,
                "failures": event.failures,
                "owners": ", ".join(event.owners),
                "error": _clip(event.error),
            },
        )
    body.pop("routing_key", None)
    return body


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= _ERROR:
        return text
    return text[: _ERROR - 1] + "…"
