"""Small factories for the bot's parts, built with every collaborator they require, as the
composition root (`bot/app.py`) builds them: a test names only what it changes, and gets fresh,
unconnected collaborators (a hub that knows no lineage, its own metrics) for the rest."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.app import SLACK_PARENTS
from bot.backfill.run.backends import Backend
from bot.backfill.run.base import Executor
from bot.backfill.run.runner import Runner
from bot.backfill.service.backfills import BackfillService
from bot.backfill.service.notices import TeamNotices
from bot.backfill.service.retry import RetryService
from bot.clients.marquez import MarquezClient
from bot.config import BotConfig, Execution, Watch
from bot.core.metrics import Metrics
from bot.core.tables import utcnow
from bot.events.service.poller import MarquezPoller
from bot.hub.service.hub import Hub
from bot.incidents.rules.links import Links
from bot.incidents.service.alerts import AlertOutbox
from bot.incidents.service.notify import IncidentHub
from bot.incidents.service.watcher import IncidentService
from bot.lineage.service.planning import PlannerFactory
from bot.ownership.service import GroupDirectory
from bot.sla.service import SlaService
from bot.slack.service.sender import OutboxSender

Sessions = async_sessionmaker[AsyncSession]


def outbox_sender(sessions: Sessions, client: AsyncWebClient, **options: Any) -> OutboxSender:
    """The Slack sender, with the bot's parents of outbox rows (status messages, alerts)."""
    options.setdefault("metrics", Metrics())
    return OutboxSender(sessions, client, parents=SLACK_PARENTS, **options)


def runner(sessions: Sessions, backend: Backend, settings: Execution, **options: Any) -> Runner:
    """The step runner on `backend`."""
    options.setdefault("metrics", Metrics())
    return Runner(sessions, backend, settings, **options)


def poller(
    sessions: Sessions, marquez: Callable[[], MarquezClient], watch: Watch, **options: Any
) -> MarquezPoller:
    """The Marquez poller."""
    options.setdefault("metrics", Metrics())
    return MarquezPoller(sessions, marquez, watch, **options)


def backfill_service(
    sessions: Sessions,
    config: BotConfig,
    planners: PlannerFactory,
    executor: Executor,
    groups: GroupDirectory,
    *,
    notices: TeamNotices | None = None,
) -> BackfillService:
    """/backfill's service; the other teams' notices through a hub of its own."""
    told = notices or TeamNotices(config, metrics=Metrics(), hub=Hub(config))
    return BackfillService(
        sessions=sessions,
        config=config,
        planners=planners,
        executor=executor,
        groups=groups,
        notices=told,
    )


def retry_service(sessions: Sessions, **options: Any) -> RetryService:
    return RetryService(sessions=sessions, **options)


def incident_service(
    sessions: Sessions,
    config: BotConfig,
    planners: PlannerFactory,
    *,
    marquez_web_url: str,
    clock: Callable[[], datetime] = utcnow,
) -> IncidentService:
    """The incident watcher, its alerts routed by a hub of its own."""
    metrics = Metrics()
    alerts = AlertOutbox(
        config,
        marquez_web_url=marquez_web_url,
        clock=clock,
        metrics=metrics,
        hub=IncidentHub(Hub(config)),
        proposals=lambda request: None,  # no index here: alerts estimate
    )
    return IncidentService(sessions, config, planners, alerts=alerts, metrics=metrics, clock=clock)


def sla_service(
    sessions: Sessions, config: BotConfig, planners: PlannerFactory, **options: Any
) -> SlaService:
    """The SLA check; links to Marquez and Airflow only where the test gives them."""
    options.setdefault("links", Links(config, marquez_web_url=""))
    options.setdefault("metrics", Metrics())
    options.setdefault("hub", Hub(config))
    return SlaService(sessions, config, planners, **options)
