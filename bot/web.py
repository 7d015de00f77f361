"""The bot's HTTP application (aiohttp): `POST /slack/events`, `POST /api/v1/lineage`,
`GET /healthz`, `/readyz` and `/metrics`, and the background work that runs beside it (the
senders, the runner, the incident watcher, the scheduler's polls and checks), started with it
and stopped cleanly, never mid-transaction. `bot.serving` listens with it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web
from apscheduler.events import EVENT_JOB_ERROR
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.async_app import AsyncApp

from bot.app_services import Services
from bot.core.db import upgrade
from bot.core.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from bot.core.worker import Worker, on_failures, supervise
from bot.events.service.receiver import add_receiver
from bot.health import figures
from bot.lineage.service.record import record_lineage
from bot.slack.service.http import SlackEvents

logger = logging.getLogger(__name__)
RESUME_EVERY_S = 30.0
SLA_CHECK_S = 60.0
STOP_TIMEOUT_S = 15.0


def is_slack_listener(task: asyncio.Task[Any]) -> bool:
    """A Slack listener bolt runs after acking (its task is unnamed, so it is known by the
    coroutine it wraps): the bot is still answering a person while one runs."""
    name = getattr(task.get_coro(), "__qualname__", "")
    return bool(name.endswith("run_ack_function_asynchronously"))


def _is_scheduler_job(task: asyncio.Task[object]) -> bool:
    """A coroutine job APScheduler's AsyncIOExecutor is running, or a Slack listener: both are
    let finish on shutdown, so none is cut off inside a transaction."""
    name = getattr(task.get_coro(), "__qualname__", "")
    return name == "run_coroutine_job" or is_slack_listener(task)


def create_web_app(
    bolt: AsyncApp, services: Services, *, sla_check_s: float | None = SLA_CHECK_S
) -> web.Application:
    """`POST /slack/events` for commands, interactivity and events; `POST /api/v1/lineage`;
    `GET /healthz` (the process answers), `GET /readyz` (it can work: bot/health/readiness.py) and
    `GET /metrics`. SLA checks run every `sla_check_s` (None: only when called, as in the demo,
    whose SLA clock moves only when a person moves it)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "status": "alive"})

    async def readyz(_: web.Request) -> web.Response:
        ready, checks = await services.readiness.check()
        body = {"status": "ready" if ready else "not ready", "checks": checks}
        return web.json_response(body, status=200 if ready else 503)

    async def metrics(_: web.Request) -> web.Response:
        async with services.sessions() as session:
            services.metrics.refresh(await figures.read(session))
        return web.Response(
            body=services.metrics.exposition(), headers={"Content-Type": METRICS_CONTENT_TYPE}
        )

    async def resume_approved() -> None:
        resumed = await services.backfills.resume()
        if resumed:
            logger.info("handed %d approved backfill(s) to the executor", resumed)

    resumer = Worker("resume-approved", resume_approved, every_s=RESUME_EVERY_S)

    async def background(app: web.Application) -> AsyncIterator[None]:
        await asyncio.to_thread(upgrade, services.settings.database_url)
        # Every failure of background work is logged, counted in /metrics and retried.
        forget = on_failures(services.metrics.background_failed)

        stopping = asyncio.Event()

        def start(name: str, run: Callable[[], Awaitable[object]]) -> None:
            task = supervise(name, run, stopping=stopping)
            tasks.append(asyncio.create_task(task, name=name))

        tasks: list[asyncio.Task[None]] = []
        start("outbox-sender", services.sender.run_forever)
        start("resume-approved", resumer.run_forever)
        # Clicks acknowledged by a process that stopped before deciding them.
        start("click-replay", partial(services.clicks.run_forever, bolt))
        if services.sinks is not None:
            start("sink-sender", services.sinks.run_forever)
        start("incidents", services.incidents.run_forever)
        start("verify-repairs", services.verifier.run_forever)
        scheduler = AsyncIOScheduler(timezone="UTC")
        scheduler.add_listener(
            lambda event: services.metrics.background_failed(event.job_id), EVENT_JOB_ERROR
        )
        services.poller.schedule(scheduler)
        if sla_check_s is not None:
            scheduler.add_job(
                services.sla.check,
                "interval",
                seconds=sla_check_s,
                id="sla-check",
                max_instances=1,
                coalesce=True,
            )
        escalations = services.incidents.escalations
        if escalations.configured:
            scheduler.add_job(
                escalations.check, "interval", seconds=services.config.hub.escalation_check_s,
                id="escalation-check", max_instances=1, coalesce=True,
            )  # fmt: skip
        reconciler = services.reconciler
        if reconciler is not None:
            # Loads the stored index, then reconciles fully (retrying until it succeeds); plans
            # never wait for it.
            start("lineage-index", reconciler.start)
            for job, every in (
                (reconciler.run_incremental, services.config.index.reconcile_interval_s),
                (reconciler.run_full, services.config.index.full_reconcile_s),
            ):
                scheduler.add_job(
                    job, "interval", seconds=every, max_instances=1, coalesce=True,
                    id=f"lineage-{job.__name__}",
                )  # fmt: skip
        scheduler.start()
        if services.runner is not None:
            # Its first pass reconciles every backfill a previous process left running.
            start("step-runner", services.runner.run_forever)
        yield
        # Stop gracefully: a task cancelled inside a transaction would leak its connection.
        stopping.set()
        scheduler.pause()
        resumer.stop()
        services.clicks.stop()
        services.sender.stop()
        if services.sinks is not None:
            services.sinks.stop()
        services.incidents.stop()
        services.verifier.stop()
        if services.runner is not None:
            services.runner.stop()
        if reconciler is not None:
            reconciler.stop()
        jobs = [t for t in asyncio.all_tasks() if _is_scheduler_job(t)]
        _, late = await asyncio.wait([*tasks, *jobs], timeout=STOP_TIMEOUT_S)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        scheduler.shutdown(wait=False)
        forget()
        if services.runner is not None:
            await services.runner.backend.close()
        await services.engine.dispose()

    app = web.Application()
    secret = services.settings.slack_signing_secret
    if secret is not None:
        # Without a secret (Socket Mode) nothing could tell Slack's requests from forgeries.
        slack_events = SlackEvents(bolt, secret.get_secret_value())
        app.router.add_post("/slack/events", slack_events.handle)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    key = services.settings.openlineage_api_key
    add_receiver(
        app,
        sessions=services.sessions,
        api_key=key.get_secret_value() if key else None,
        on_events=partial(record_lineage, services.sessions) if services.reconciler else None,
        metrics=services.metrics,
    )
    app.cleanup_ctx.append(background)
    return app
