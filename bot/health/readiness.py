"""`GET /readyz`: whether this process can do its job now. The database answers, its schema is
the one the code expects (`bot/core/schema_state.py`, shared with `backfill-bot doctor`), Slack
accepts the bot token (`auth.test`), Marquez answers and, in Socket Mode, the WebSocket to Slack
is up; `lineage_index` reports how far the lineage index is (loading, current or behind). The
checks run at once, each bounded by `timeout_s`, so a probe never hangs on a dead dependency;
each failed check says what failed.

The port is public in HTTP mode, so a request loop must not become a loop of Slack calls (its
rate limit would then fail the check it is spending) nor of database connections: concurrent
probes share one run, an answer is reused for `RESULT_TTL_S`, and an accepted token is not asked
about again for `SLACK_OK_TTL_S`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.clients.marquez import MarquezClient
from bot.core.db import describe_error
from bot.core.http import describe, truncate
from bot.core.schema_state import read_schema_state

__all__ = ["CHECK_TIMEOUT_S", "RESULT_TTL_S", "SLACK_OK_TTL_S", "Readiness"]

CHECK_TIMEOUT_S = 3.0
"""The bound of each check. A probe's own timeout (Kubernetes' timeoutSeconds, 1 s by default)
must be above it, or a slow dependency fails the probe instead of being named in its answer."""
RESULT_TTL_S = 5.0
"""How long an answer is reused: below a probe's usual period (Kubernetes: 10 s), so a change
shows on the next probe, yet a flood of requests runs the checks at most once per interval."""
SLACK_OK_TTL_S = 60.0
"""How long an accepted bot token is trusted without another `auth.test` (its rate limit is the
bot's, shared with its real work): a revoked token shows within a minute."""

Detail = dict[str, Any]
Result = tuple[bool, dict[str, Detail]]


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
        socket_mode: bool = False,
        lineage_index: Callable[[], Awaitable[Detail]] | None = None,
    ) -> None:
        """`marquez` makes a client for one check (no retries: the probe asks again). The
        answer is unauthenticated: `secrets` (say a password in MARQUEZ_URL) never appear in
        it, nor the database URL's. With `socket_mode`, the bot is not ready until `serve`
        hands over its connected client (`watch_socket`) and while that client is down."""
        self.engine = engine
        self.database_url = database_url
        self.slack = slack
        self.marquez = marquez
        self.timeout_s = timeout_s
        self.secrets = [secret for secret in secrets if secret]
        self.socket_mode = socket_mode
        self.lineage_index = lineage_index
        """How far the lineage index is (reported, never failing the probe: plans fetch what
        they need from Marquez while it loads)."""
        self._socket: AsyncBaseSocketModeClient | None = None
        self._answer: tuple[float, Result] | None = None  # (when it was found, what)
        self._running: asyncio.Task[Result] | None = None
        self._slack_ok_at: float | None = None

    def watch_socket(self, client: AsyncBaseSocketModeClient) -> None:
        """The Socket Mode client whose connection the `socket_mode` check reports."""
        self._socket = client

    async def check(self) -> Result:
        """(all passed, each check's `{"ok": …}` with `error` saying what failed): the last
        answer while it is fresh, else the run under way, else a new run."""
        if self._answer is not None and time.monotonic() - self._answer[0] < RESULT_TTL_S:
            return _copy(self._answer[1])
        if self._running is None:
            self._running = asyncio.create_task(self._run(), name="readiness")
        # Shielded: a probe that hangs up must not cancel the run the others are waiting for.
        return _copy(await asyncio.shield(self._running))

    async def _run(self) -> Result:
        try:
            result = await self._check_all()
            self._answer = (time.monotonic(), result)
            return result
        finally:
            self._running = None

    async def _check_all(self) -> Result:
        checks: dict[str, Callable[[], Awaitable[Detail]]] = {
            "database": self._database,
            "migrations": self._migrations,
            "slack": self._slack,
            "marquez": self._marquez,
        }
        if self.socket_mode:
            checks["socket_mode"] = self._socket_mode
        if self.lineage_index is not None:
            checks["lineage_index"] = self.lineage_index
        results = await asyncio.gather(*(self._bounded(name, c) for name, c in checks.items()))
        found = dict(zip(checks, results, strict=True))
        for detail in found.values():
            for key in ("error", "last_error", "summary"):  # the index's words quote errors
                if isinstance(detail.get(key), str):
                    detail[key] = self._redacted(truncate(detail[key]))
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
        accepted = self._slack_ok_at
        if accepted is not None and time.monotonic() - accepted < SLACK_OK_TTL_S:
            return {}
        self._slack_ok_at = None
        try:
            await self.slack.auth_test()
        except SlackApiError as exc:
            code = exc.response.get("error") if exc.response is not None else None
            return {"ok": False, "error": f"auth.test answered {truncate(str(code or exc))}"}
        self._slack_ok_at = time.monotonic()
        return {}

    async def _marquez(self) -> Detail:
        async with self.marquez() as client:
            await client.ping()
        return {}

    async def _socket_mode(self) -> Detail:
        if self._socket is None:
            return {"ok": False, "error": "Socket Mode: not connected to Slack yet"}
        if not await self._socket.is_connected():
            return {"ok": False, "error": "Socket Mode: the WebSocket to Slack is down"}
        return {}


def _copy(result: Result) -> Result:
    # Each caller gets its own dicts: the cached answer is shared by every probe.
    ready, checks = result
    return ready, {name: dict(detail) for name, detail in checks.items()}
