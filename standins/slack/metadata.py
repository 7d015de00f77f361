"""Slack message metadata: what chat.postMessage and chat.update accept as `metadata`, and how the
reading methods show it.

Slack's rules, from its docs:
- the argument is "JSON object with event_type and event_payload fields, presented as a
  URL-encoded string" (a JSON body may carry the object itself), and a broken one is refused
  with `invalid_metadata_format` (not a JSON object), `invalid_metadata_schema` (no string
  `event_type` or no object `event_payload`) or `metadata_too_large`
  (https://docs.slack.dev/reference/methods/chat.postMessage, .../chat.update);
- chat.update keeps a message's metadata when the argument is absent and removes it when given
  an empty object (https://docs.slack.dev/reference/methods/chat.update);
- reading methods (conversations.history, conversations.replies) return the whole metadata only
  when asked with `include_all_metadata=true`: "If you do not pass include_all_metadata=true, you
  will receive the event_type field only" (https://api.slack.com/metadata/using#direct), the
  posting app's own messages included (slackapi/python-slack-sdk#1501);
- chat.postMessage's and chat.update's answers carry the message with its whole metadata, as
  Slack's recorded answers do (slackapi/java-slack-sdk, json-logs/samples/api/chat.*.json).

The event_type naming guidelines (https://api.slack.com/reference/metadata: alphanumeric,
`<resource>_<action in past tense>`) are "not enforced programmatically", so they are not here.
"""

from __future__ import annotations

import json
from typing import Any

from standins.slack.records import JsonDict, SlackError

__all__ = ["MAX_METADATA_BYTES", "message_metadata", "metadata_json"]

# Slack names `metadata_too_large` but publishes no number; 8 KB is what integrators report.
# The bot's metadata (an event_type and a list of outbox ids) is a few dozen bytes.
MAX_METADATA_BYTES = 8_000


def message_metadata(raw: Any, *, removable: bool = False) -> JsonDict | None:
    """The `metadata` argument checked as Slack checks it (raises SlackError): None when it is
    absent; an empty dict when `removable` (chat.update) and the caller sent `{}` to remove it."""
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise SlackError("invalid_metadata_format") from None
    if not isinstance(value, dict):
        raise SlackError("invalid_metadata_format")
    if not value and removable:
        return {}
    event_type, payload = value.get("event_type"), value.get("event_payload")
    if not isinstance(event_type, str) or not event_type.strip() or not isinstance(payload, dict):
        raise SlackError("invalid_metadata_schema")
    metadata: JsonDict = {"event_type": event_type, "event_payload": payload}
    if len(json.dumps(metadata, separators=(",", ":")).encode()) > MAX_METADATA_BYTES:
        raise SlackError("metadata_too_large")
    return metadata


def metadata_json(metadata: JsonDict, *, all_metadata: bool) -> JsonDict:
    """A message's metadata as a reading method shows it: whole only with include_all_metadata."""
    if all_metadata:
        return {"event_type": metadata["event_type"], "event_payload": metadata["event_payload"]}
    return {"event_type": metadata["event_type"]}
