"""Members of Slack user groups (`usergroups.users.list`), for the rules of who may act."""

from __future__ import annotations

import logging
import time

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

logger = logging.getLogger(__name__)


class SlackGroups:
    """`usergroups.users.list`, cached for a few minutes (group changes are rare)."""

    def __init__(self, client: AsyncWebClient, *, ttl_s: float = 300.0) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def members(self, group_id: str) -> frozenset[str]:
        cached = self._cache.get(group_id)
        if cached and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        try:
            reply = await self.client.usergroups_users_list(usergroup=group_id)
            users = frozenset(str(u) for u in reply.get("users") or ())
        except SlackApiError as exc:
            # Fail closed: an unknown group grants nothing, and the refusal says who may act.
            logger.warning("cannot list user group %s: %s", group_id, exc.response.get("error"))
            users = frozenset()
        self._cache[group_id] = (time.monotonic(), users)
        return users
