"""`GET /readyz`: whether this process can do its job now. The database answers, its schema is
the one the code expects (`bot/store/schema_state.py`, shared with `backfill-bot doctor`), Slack
accepts the bot token (`auth.test`), and Marquez answers. The checks run at once, each bounded
by `timeout_s`, so a probe never hangs on a dead dependency; each failed check says what failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.clients.http import describe, truncate
from bot.clients.marquez import MarquezClient
from bot.store.db import describe_error
from bot.store.schema_state import read_schema_state

__all__ = ["CHECK_TIMEOUT_S", "Readiness"]

CHECK_TIMEOUT_S = 3.0
"""The bound of each check. A probe's own timeout (Kubernetes' timeoutSeconds, 1 s by default)
must be above it, or a slow dependency fails the probe instead of being named in its answer."""

Detail = dict[str, Any]


class Readiness:
    def __init__(
        self,
        engine: AsyncEngine,
        database_url: str,
        slack: AsyncWebClient,
        marquez: Callable[[], MarquezClient],
        *,
        timeout_s: float = CHECK_TIMEOUT_S,
        secrets: Sequence[str | None] = (),
    ) -> None:
        """`marquez` makes a client for one check (no retries: the probe asks again). The
        answer is unauthenticated: `secrets` (say a password in MARQUEZ_URL) never appear in
        it, nor the database URL's."""
        self.engine = engine
        self.database_url = database_url
        self.slack = slack
        self.marquez = marquez
        self.timeout_s = timeout_s
        self.secrets = [secret for secret in secrets if secret]

    async def check(self) -> tuple[bool, dict[str, Detail]]:
        """(all passed, each check's `{"ok": …}` with `error` saying what failed)."""
        checks: dict[str, Callable[[], Awaitable[Detail]]] = {
            "database": self._database,
            "migrations": self._migrations,
            "slack": self._slack,
            "marquez": self._marquez,
        }
        results = await asyncio.gather(*(self._bounded(name, c) for name, c in checks.items()))
        found = dict(zip(checks, results, strict=True))
        for detail in found.values():
            if "error" in detail:
                detail["error"] = self._redacted(str(detail["error"]))
        return all(detail["ok"] for detail in found.values()), found

    def _redacted(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    async def _bounded(self, name: str, check: Callable[[], Awaitable[Detail]]) -> Detail:
        try:
            async with asyncio.timeout(self.timeout_s):
                return {"ok": True, **await check()}
        except TimeoutError:
            return {"ok": False, "error": f"{name}: no answer within {self.timeout_s:g}s"}
        except SQLAlchemyError as exc:
            return {"ok": False, "error": truncate(describe_error(exc, self.database_url))}
        except Exception as exc:  # whatever failed, the probe answers and says it
            return {"ok": False, "error": truncate(f"{type(exc).__name__}: {describe(exc)}")}

    async def _database(self) -> Detail:
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return {}

    async def _migrations(self) -> Detail:
        state = await read_schema_state(self.engine)
        if not state.is_current:
            return {"ok": False, "error": state.describe()}
        return {"revision": ", ".join(state.current)}

    async def _slack(self) -> Detail:
        try:
            await self.slack.auth_test()
        except SlackApiError as exc:
            code = exc.response.get("error") if exc.response is not None else None
            return {"ok": False, "error": f"auth.test answered {truncate(str(code or exc))}"}
        return {}

    async def _marquez(self) -> Detail:
        async with self.marquez() as client:
            await client.ping()
        return {}
