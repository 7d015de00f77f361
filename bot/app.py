"""The composition root: builds the clients, services, Slack app and HTTP server that `serve`
(bot/serving.py) runs.

Nothing else constructs real clients; tests build the same objects against the stand-ins.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from yarl import URL

import bot.schema  # noqa: F401  (every table registered before a session is made)
import handlers.actions
import handlers.commands
import handlers.home
import handlers.views
from bot.app_services import Services
from bot.backfill.run.airflow import AirflowBackend
from bot.backfill.run.backends import Backend
from bot.backfill.run.manual import ManualExecutor
from bot.backfill.run.runner import Runner
from bot.backfill.run.spark import SparkBackend
from bot.backfill.service.backfills import BackfillService
from bot.backfill.service.notices import TeamNotices
from bot.backfill.service.retry import RetryService
from bot.backfill.service.verify import RepairVerifier
from bot.backfill.store.models import BackfillRequest
from bot.backfill.store.parent import StatusMessages
from bot.clients.marquez import MarquezClient, RetryPolicy
from bot.config import BotConfig
from bot.core.db import make_engine, session_factory
from bot.core.http import DEFAULT_RETRY
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.core.urls import display_url
from bot.events.service.poller import MarquezPoller
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
from bot.lineage.rules.errors import PlanningError
from bot.lineage.rules.planner import Plan
from bot.lineage.service.catalog import UnknownDag
from bot.lineage.service.index import LineageIndex
from bot.lineage.service.index_planner import IndexPlanner
from bot.lineage.service.planning import Planner, PlannerFactory, PlanRequest, PlanSource
from bot.lineage.service.progress import index_state
from bot.lineage.service.reconcile import Reconciler
from bot.lineage.service.record import record_lineage
from bot.quality.service.checks import QualityChecks
from bot.settings import Settings, SetupError
from bot.sla.service import SlaService
from bot.slack.rules.ids import DECIDING_CLICKS
from bot.slack.service.calls import counted
from bot.slack.service.clicks import ClickInbox
from bot.slack.service.groups import SlackGroups
from bot.slack.service.sender import OutboxSender
from bot.slack.store.parents import Parents

logger = logging.getLogger(__name__)
# What outbox rows hang off: backfills' status messages and incidents' alerts.
SLACK_PARENTS = Parents(requests=StatusMessages(), incidents=Alerts())


def build_services(settings: Settings, config: BotConfig, given: AsyncWebClient) -> Services:
    """Every part of a running bot, each built once with what it needs, in the order they
    depend on each other; nothing is patched in afterwards."""
    engine = make_engine(settings.database_url)
    sessions = session_factory(engine)
    metrics = Metrics(sink_names=[sink.name for sink in config.sinks])
    slack = counted(given, metrics.slack_call)  # bolt's clients are copied from this one
    sender = build_slack_sender(sessions, slack, metrics, ops_channel=config.watch.ops_channel)
    marquez = marquez_clients(settings, metrics)
    lineage = build_lineage(settings, config, sessions, marquez, metrics)
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
        proposals=lineage.proposals,
    )

    verifier = RepairVerifier(sessions, config, metrics=metrics)

    async def ended(session: AsyncSession, request: BackfillRequest) -> None:
        """A backfill's end owes the other teams' notices, its alert's redraw and the
        verification of what its reruns wrote."""
        await notices.ended(session, request)
        await alerts.backfill_ended(session, request)
        await verifier.owe(session, request)

    runner = (
        Runner(
            sessions,
            backend,
            config.execution,
            metrics=metrics,
            on_end=ended,
            on_start=notices.reports_started,
        )
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
    # a DROP, TRUNCATE or lost column matters to the DAGs reading it: the index knows who does
    readers = lineage.index.readers if lineage.index is not None else None
    incidents = IncidentService(
        sessions, config, lineage.planners, alerts=alerts, metrics=metrics,
        quality=QualityChecks(config, readers),
    )  # fmt: skip
    incident_actions = IncidentActions(sessions, alerts, backfills)
    on_events = partial(record_lineage, sessions) if lineage.index is not None else None
    poller = MarquezPoller(
        sessions, marquez, config.watch, on_events=on_events, metrics=metrics,
        on_recovered=incidents.refresh_unavailable,
    )  # fmt: skip
    sla = SlaService(
        sessions, config, lineage.planners, links=alerts.links, metrics=metrics, hub=hub
    )
    return Services(
        settings, config, engine, sessions, slack, sender, backfills, incidents,
        incident_actions, HomeService(sessions, config, groups), poller, sla,
        RetryService(sessions=sessions), metrics,
        build_readiness(
            settings, engine, slack, marquez,
            partial(index_state, sessions, config.index, lineage.index) if lineage.index else None,
        ),
        runner, lineage.reconciler, sinks,
        subscriptions=SubscriptionService(sessions, config, groups),
        clicks=ClickInbox(sessions, DECIDING_CLICKS), verifier=verifier,
    )  # fmt: skip


def build_slack_sender(
    sessions: async_sessionmaker[AsyncSession],
    slack: AsyncWebClient,
    metrics: Metrics,
    *,
    ops_channel: str | None,
) -> OutboxSender:
    """The one place that posts to Slack. It rides out 429s itself (Retry-After, per row):
    its client must not also wait them out inside one call, which would outlast the lease.
    A call that hangs past SEND_TIMEOUT_S is tried again (looked for in Slack first), so the
    lease can stay short: a sender that dies holds its channel only that long."""
    # No retry handlers at all: slack_sdk's default one re-sends a call whose connection was
    # reset, which posts twice when the reset came after Slack had posted.
    client = AsyncWebClient(
        token=slack.token, base_url=slack.base_url, timeout=SEND_TIMEOUT_S, retry_handlers=[]
    )
    return OutboxSender(
        sessions,
        counted(client, metrics.slack_call),
        parents=SLACK_PARENTS,
        metrics=metrics,
        lease_s=SEND_LEASE_S,
        ops_channel=ops_channel,
    )


SEND_TIMEOUT_S = 5
SEND_LEASE_S = 10.0  # one call, plus its pace, plus the database round trips around it


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
            lineage_timeout_s=settings.marquez_lineage_timeout_s,
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
    proposals: Callable[[PlanRequest], Plan | None]
    """The plan `planners` would make now, when it would come from the index, else None."""


def build_lineage(
    settings: Settings,
    config: BotConfig,
    sessions: async_sessionmaker[AsyncSession],
    marquez: MarquezClients,
    metrics: Metrics,
) -> Lineage:
    """The local lineage index and its reconcile with Marquez (unless disabled), and where
    plans come from."""
    index = LineageIndex(sessions) if config.index.enabled else None
    reconciler = (
        Reconciler(
            sessions,
            lambda: marquez(config.index.page_size),
            index,
            config.index,
            on_failure=lambda _: metrics.background_failed("lineage-reconcile"),
        )
        if index is not None
        else None
    )

    @asynccontextmanager
    async def planners() -> AsyncIterator[PlanSource]:
        # The local index, from the first second: while it loads, each plan fetches its DAG's
        # downstream from Marquez (bounded) instead of waiting or crawling the whole catalog.
        if reconciler is not None:
            yield IndexPlanner(
                reconciler.index,
                config,
                marquez,
                default_namespace=settings.marquez_namespace,
                refresh=reconciler.refresh,
            )
            return
        async with marquez() as client:  # index.enabled: false
            yield Planner(client, config, default_namespace=settings.marquez_namespace)

    def proposals(request: PlanRequest) -> Plan | None:
        # What Approve backfill will run, from the same index and schedules as `planners`;
        # None while the index is loading (the click then plans, fetching what it needs) or
        # where it could not plan from the index.
        if reconciler is None or not reconciler.index.ready.is_set():
            return None  # `ready`: this process holds the whole index, not half its chunks
        planner = IndexPlanner(
            reconciler.index, config, marquez, default_namespace=settings.marquez_namespace
        )
        try:
            return planner.plan_now(request)
        except (PlanningError, UnknownDag):
            return None

    return Lineage(index, reconciler, planners, proposals)


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
    settings: Settings,
    engine: AsyncEngine,
    slack: AsyncWebClient,
    marquez: MarquezClients,
    lineage_index: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> Readiness:
    # One try, well inside the check's bound (a loaded machine must not make the two race, so
    # the answer names Marquez's own timeout): a probe asks again soon enough.
    probe = partial(marquez, timeout_s=CHECK_TIMEOUT_S / 2, retry=RetryPolicy(attempts=1))
    shown = URL(settings.marquez_url)  # its password may appear decoded or as typed (`p%40ss`)
    return Readiness(
        engine, settings.database_url, slack, probe,
        secrets=[shown.password, shown.raw_password],
        socket_mode=settings.slack_app_token is not None,
        lineage_index=lineage_index,
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
    app.middleware(services.clicks.middleware)  # a deciding click is a row before its ack
    handlers.commands.register(app, services)
    handlers.actions.register(app, services)
    handlers.home.register(app, services)
    handlers.views.register(app, services)
    return app
