"""The App Home tab, rebuilt each time a user opens it."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.app_services import Services

logger = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_home_opened")
    async def home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event.get("user") or "")
        try:
            view = await services.home.view(user)
            await client.views_publish(user_id=user, view=view)
        except Exception:  # the tab keeps its last content; the next opening tries again
            logger.exception("could not publish the Home tab of %s", user)
