"""The composition root: builds the clients, services, Slack app and HTTP server that `serve`
(bot/serving.py) runs.

Nothing else constructs real clients; tests build the same objects against the stand-ins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from yarl import URL

import bot.schema  # noqa: F401  (every table registered before a session is made)
import handlers.actions
import handlers.commands
import handlers.home
from bot.app_services import Services
from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.backends import Backend
from bot.backfill.run.manual import ManualExecutor
from bot.backfill.run.runner import Runner
from bot.backfill.run.spark import SparkBackend
from bot.backfill.service.backfills import BackfillService, PlannerFactory
from bot.backfill.service.notices import TeamNotices
from bot.backfill.service.retry import RetryService
from bot.backfill.store.models import BackfillRequest
from bot.backfill.store.parent import StatusMessages
from bot.clients.marquez import MarquezClient, RetryPolicy
from bot.config import BotConfig
from bot.core.db import make_engine, session_factory, upgrade
from bot.core.http import DEFAULT_RETRY
from bot.core.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.core.urls import display_url
from bot.core.worker import Worker
from bot.events.service.poller import MarquezPoller
from bot.events.service.receiver import add_receiver
from bot.health import figures
from bot.health.readiness import CHECK_TIMEOUT_S, Readiness
from bot.home.service import HomeService
from bot.hub.service.hub import Hub
from bot.hub.service.sender import SinkSender
from bot.hub.service.subscriptions import SubscriptionService
from bot.incidents.rules.links import AirflowUi
from bot.incidents.service.actions import IncidentActions
from bot.incidents.service.alerts import AlertOutbox
from bot.incidents.service.notify import IncidentHub
from bot.incidents.service.watcher import IncidentService
from bot.incidents.store.parent import Alerts
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.planning import Planner, PlanSource
from bot.lineage.service.reconcile import Reconciler
from bot.lineage.service.record import record_lineage
from bot.settings import Settings, SetupError
from bot.sla.service import SlaService
from bot.slack.service.calls import counted
from bot.slack.service.groups import SlackGroups
from bot.slack.service.http import SlackEvents
from bot.slack.service.sender import OutboxSender
from bot.slack.store.parents import Parents

logger = logging.getLogger(__name__)
RESUME_EVERY_S = 30.0
# What outbox rows hang off: backfills' status messages and incidents' alerts.
SLACK_PARENTS = Parents(requests=StatusMessages(), incidents=Alerts())
SLA_CHECK_S = 60.0
STOP_TIMEOUT_S = 15.0


def build_services(settings: Settings, config: BotConfig, given: AsyncWebClient) -> Services:
    """Every part of a running bot, each built once with what it needs, in the order they
    depend on each other; nothing is patched in afterwards."""
    engine = make_engine(settings.database_url)
    sessions = session_factory(engine)
    metrics = Metrics(sink_names=[sink.name for sink in config.sinks])
    slack = counted(given, metrics.slack_call)  # bolt's clients are copied from this one
    sender = build_slack_sender(sessions, slack, metrics)
    marquez = marquez_clients(settings, metrics)
    lineage = build_lineage(settings, config, sessions, marquez)
    hub, sinks = build_hub(config, sessions, metrics, lineage)
    groups = SlackGroups(slack)
    backend = build_backend(settings, config)
    notices = TeamNotices(config, metrics=metrics, hub=hub)
    alerts = AlertOutbox(
        config,
        # A link in Slack: never the user and password MARQUEZ_URL may carry.
        marquez_web_url=config.watch.marquez_web_url or display_url(settings.marquez_url),
        clock=utcnow,
        airflow_ui=airflow_ui(settings, config, backend),
        metrics=metrics,
        hub=IncidentHub(hub),
    )

    async def ended(session: AsyncSession, request: BackfillRequest) -> None:
        """A backfill's end owes the other teams' notices and its alert's redraw."""
        await notices.ended(session, request)
        await alerts.backfill_ended(session, request)

    runner = (
        Runner(sessions, backend, config.execution, metrics=metrics, on_end=ended)
        if backend is not None
        else None
    )
    backfills = BackfillService(
        sessions=sessions,
        config=config,
        planners=lineage.planners,
        executor=runner or ManualExecutor(),
        groups=groups,
        notices=notices,
    )
    incidents = IncidentService(sessions, config, lineage.planners, alerts=alerts, metrics=metrics)
    incident_actions = IncidentActions(sessions, alerts, backfills)
    on_events = partial(record_lineage, sessions) if lineage.index is not None else None
    poller = MarquezPoller(sessions, marquez, config.watch, on_events=on_events, metrics=metrics)
    sla = SlaService(
        sessions, config, lineage.planners, links=alerts.links, metrics=metrics, hub=hub
    )
    return Services(
        settings, config, engine, sessions, slack, sender, backfills, incidents,
        incident_actions, HomeService(sessions, config, groups), poller, sla,
        RetryService(sessions=sessions), metrics,
        build_readiness(settings, engine, slack, marquez), runner, lineage.reconciler, sinks,
        subscriptions=SubscriptionService(sessions, config, groups),
    )  # fmt: skip


def build_slack_sender(
    sessions: async_sessionmaker[AsyncSession], slack: AsyncWebClient, metrics: Metrics
) -> OutboxSender:
    """The one place that posts to Slack. It rides out 429s itself (Retry-After, per row,
    within its lease): its client must not also wait them out inside one call."""
    client = AsyncWebClient(token=slack.token, base_url=slack.base_url, timeout=20)
    return OutboxSender(
        sessions, counted(client, metrics.slack_call), parents=SLACK_PARENTS, metrics=metrics
    )


MarquezClients = Callable[..., MarquezClient]


def marquez_clients(settings: Settings, metrics: Metrics) -> MarquezClients:
    """A new Marquez client per use (`page_size`, `timeout_s`, `retry` as the use needs)."""
    key = settings.marquez_api_key.get_secret_value() if settings.marquez_api_key else None

    def marquez(
        page_size: int = 100, *, timeout_s: float | None = None, retry: RetryPolicy | None = None
    ) -> MarquezClient:
        return MarquezClient(
            settings.marquez_url,
            api_key=key,
            timeout_s=timeout_s or settings.marquez_timeout_s,
            page_size=page_size,
            on_error=metrics.request_failed,
            retry=retry or DEFAULT_RETRY,
        )

    return marquez


@dataclass(frozen=True)
class Lineage:
    index: LineageIndex | None
    reconciler: Reconciler | None
    planners: PlannerFactory


def build_lineage(
    settings: Settings,
    config: BotConfig,
    sessions: async_sessionmaker[AsyncSession],
    marquez: MarquezClients,
) -> Lineage:
    """The local lineage index and its reconcile with Marquez (unless disabled), and where
    plans come from."""
    index = LineageIndex(sessions) if config.index.enabled else None
    reconciler = (
        Reconciler(sessions, lambda: marquez(config.index.page_size), index, config.index)
        if index is not None
        else None
    )

    @asynccontextmanager
    async def planners() -> AsyncIterator[PlanSource]:
        # The local index once it holds a full reconcile with Marquez; until then (first start,
        # Marquez down at start) the crawl, so no plan is made from less than Marquez knows.
        if reconciler is not None and reconciler.index.freshness.full_reconcile_at is not None:
            yield IndexPlanner(
                reconciler.index,
                config,
                marquez,
                default_namespace=settings.marquez_namespace,
                refresh=reconciler.incremental,
            )
            return
        async with marquez() as client:
            yield Planner(client, config, default_namespace=settings.marquez_namespace)

    return Lineage(index, reconciler, planners)


def build_hub(
    config: BotConfig,
    sessions: async_sessionmaker[AsyncSession],
    metrics: Metrics,
    lineage: Lineage,
) -> tuple[Hub, SinkSender]:
    """The hub: every event routed once, to sinks beyond Slack (PagerDuty, e-mail, webhooks,
    Teams; their rows delivered by one sender) and to the channels subscribed to it."""
    index = lineage.index
    hub = Hub(config, upstream=index.upstream_of if index is not None else lambda _: frozenset())
    return hub, SinkSender(sessions, config, metrics=metrics)


def build_readiness(
    settings: Settings, engine: AsyncEngine, slack: AsyncWebClient, marquez: MarquezClients
) -> Readiness:
    # One try, well inside the check's bound (a loaded machine must not make the two race, so
    # the answer names Marquez's own timeout): a probe asks again soon enough.
    probe = partial(marquez, timeout_s=CHECK_TIMEOUT_S / 2, retry=RetryPolicy(attempts=1))
    shown = URL(settings.marquez_url)  # its password may appear decoded or as typed (`p%40ss`)
    return Readiness(
        engine, settings.database_url, slack, probe,
        secrets=[shown.password, shown.raw_password],
        socket_mode=settings.slack_app_token is not None,
    )  # fmt: skip


def build_backend(settings: Settings, config: BotConfig) -> Backend | None:
    """Airflow when AIRFLOW_URL is set, else the local Spark session; None for manual."""
    kind = settings.executor_kind
    if kind == "airflow":
        if settings.airflow_url is None:
            raise SetupError("BOT_EXECUTOR=airflow needs AIRFLOW_URL")
        password = settings.airflow_password
        return AirflowBackend(
            settings.airflow_url,
            settings.airflow_username,
            password.get_secret_value() if password else None,
            config.execution.airflow,
        )
    if kind == "spark":
        spark = config.execution.spark
        key = settings.marquez_api_key
        return SparkBackend(
            master=settings.spark_master,
            warehouse=spark.warehouse,
            lineage_url=settings.marquez_url if spark.send_lineage else None,
            lineage_api_key=key.get_secret_value() if key else None,
            options=spark.options,
        )
    return None


def airflow_ui(settings: Settings, config: BotConfig, backend: Backend | None) -> AirflowUi | None:
    """Where alerts link to Airflow runs: `execution.airflow.ui_url`, else AIRFLOW_URL."""
    base = config.execution.airflow.ui_url or (
        display_url(settings.airflow_url) if settings.airflow_url else None
    )
    if not base:
        return None
    if isinstance(backend, AirflowBackend):
        return AirflowUi(base, lambda: backend.version)
    return AirflowUi(base, lambda: 3)


def create_bolt_app(services: Services) -> AsyncApp:
    settings = services.settings
    secret = settings.slack_signing_secret
    if secret is None and settings.slack_app_token is None:
        raise SetupError(
            "SLACK_SIGNING_SECRET is not set: HTTP mode verifies every request with it"
        )
    slack = services.slack
    app = AsyncApp(
        # The token rather than `client=slack`: bolt reads SLACK_BOT_TOKEN from the environment
        # itself, and given a client too it warns at start-up that the token goes unused.
        token=slack.token,
        signing_secret=secret.get_secret_value() if secret else None,
        request_verification_enabled=secret is not None,
        # The bot's own errors become a clear reply, never Slack's "dispatch_failed".
        raise_error_for_unhandled_request=False,
    )
    # Bolt copies the client it built from the token into one per request for the listeners:
    # it goes where the bot's client goes, with its retry handlers (the first counts each call
    # for /metrics).
    app.client.base_url = slack.base_url
    app.client.timeout = slack.timeout
    app.client.retry_handlers = slack.retry_handlers
    handlers.commands.register(app, services)
    handlers.actions.register(app, services)
    handlers.home.register(app, services)
    return app


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
        tasks = [
            asyncio.create_task(services.sender.run_forever(), name="outbox-sender"),
            asyncio.create_task(resumer.run_forever(), name="resume-approved"),
        ]
        if services.sinks is not None:
            tasks.append(asyncio.create_task(services.sinks.run_forever(), name="sink-sender"))
        tasks.append(asyncio.create_task(services.incidents.run_forever(), name="incidents"))
        scheduler = AsyncIOScheduler(timezone="UTC")
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
            # The first full reconcile (or the stored index) makes the index ready to plan.
            tasks.append(asyncio.create_task(reconciler.start(), name="lineage-index"))
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
            tasks.append(asyncio.create_task(services.runner.run_forever(), name="step-runner"))
        yield
        # Stop gracefully: a task cancelled inside a transaction would leak its connection.
        scheduler.pause()
        resumer.stop()
        services.sender.stop()
        if services.sinks is not None:
            services.sinks.stop()
        services.incidents.stop()
        if services.runner is not None:
            services.runner.stop()
        jobs = [t for t in asyncio.all_tasks() if _is_scheduler_job(t)]
        _, late = await asyncio.wait([*tasks, *jobs], timeout=STOP_TIMEOUT_S)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        scheduler.shutdown(wait=False)
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
