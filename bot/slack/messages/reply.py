"""What a service answers the person who acted (an ephemeral message, and whether anything
changed), shared by every service a Slack listener calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Payload = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """What the person who acted sees (ephemeral)."""

    payload: Payload
    changed: bool = False
    request_id: str | None = None
    """The request a preview created."""
