"""What sinks beyond Slack are sent for an event (pure): the webhook's versioned JSON document
(docs/webhooks.md) and PagerDuty's Events API v2 event. No secret is written here: the sender
adds a PagerDuty routing key when it sends, so none is stored in the database."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from bot.clients.pagerduty import pagerduty_event
from bot.config_sinks import PagerDutySink, Sink
from bot.domain.routing import HubEvent

WEBHOOK_VERSION = "1"
_ERROR = 1000  # characters of an error message a document carries


def dedup_key(incident_id: str) -> str:
    """One outage is one PagerDuty alert: its trigger, acknowledge and resolve share this."""
    return f"backfill-bot/incident/{incident_id}"


def body_for(sink: Sink, event: HubEvent) -> dict[str, Any]:
    if isinstance(sink, PagerDutySink):
        return pagerduty_body(sink, event)
    return webhook_document(event)


def webhook_document(event: HubEvent) -> dict[str, Any]:
    """Version 1 of the webhook document: what happened, to which incident, when."""
    return {
        "version": WEBHOOK_VERSION,
        "type": event.kind,
        "occurred_at": event.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "incident": {
            "id": event.incident_id,
            "namespace": event.dag.namespace,
            "dag_id": event.dag.dag_id,
            "intervals": event.intervals,
            "failures": event.failures,
            "error": _clip(event.error),
            "owners": list(event.owners),
            "acknowledged_by": event.acknowledged_by,
            "backfill_request_id": event.backfill_request_id,
        },
    }


def pagerduty_body(sink: PagerDutySink, event: HubEvent) -> dict[str, Any]:
    """The Events API v2 event without its routing key (added when sent)."""
    key = dedup_key(event.incident_id)
    if event.kind == "failure.acknowledged":
        body = pagerduty_event("acknowledge", routing_key="-", dedup_key=key)
    elif event.kind == "failure.resolved":
        body = pagerduty_event("resolve", routing_key="-", dedup_key=key)
    else:
        error = f": {event.error}" if event.error else ""
        body = pagerduty_event(
            "trigger",
            routing_key="-",
            dedup_key=key,
            summary=f"{event.dag.dag_id} failed for {event.intervals}{error}",
            source=event.dag.namespace,
            severity=sink.severity,
            timestamp=event.at,
            component=event.dag.dag_id,
            group=event.owners[0] if event.owners else None,
            event_class="airflow_dag_failure",
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
