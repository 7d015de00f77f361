"""The services a running bot shares between its Slack handlers and background tasks."""

from __future__ import annotations

from dataclasses import dataclass, field

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.backfill.run.runner import Runner
from bot.backfill.service.backfills import BackfillService
from bot.backfill.service.retry import RetryService
from bot.backfill.service.verify import RepairVerifier
from bot.config import BotConfig
from bot.core.metrics import Metrics
from bot.events.service.poller import MarquezPoller
from bot.health.readiness import Readiness
from bot.home.service import HomeService
from bot.hub.service.sender import SinkSender
from bot.hub.service.subscriptions import SubscriptionService
from bot.incidents.service.actions import IncidentActions
from bot.incidents.service.watcher import IncidentService
from bot.lineage.service.reconcile import Reconciler
from bot.settings import Settings
from bot.sla.service import SlaService
from bot.slack.service.clicks import ClickInbox
from bot.slack.service.sender import OutboxSender


@dataclass
class Services:
    settings: Settings
    config: BotConfig
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    slack: AsyncWebClient
    sender: OutboxSender
    backfills: BackfillService
    incidents: IncidentService
    incident_actions: IncidentActions
    home: HomeService
    poller: MarquezPoller
    sla: SlaService
    retries: RetryService
    metrics: Metrics
    readiness: Readiness
    runner: Runner | None = None
    """The step runner, unless backfills are run by hand (BOT_EXECUTOR=manual)."""
    reconciler: Reconciler | None = None
    """Keeps the local lineage index in step with Marquez (None: index disabled)."""
    sinks: SinkSender | None = None
    """Delivers what the hub owes sinks beyond Slack (PagerDuty, webhooks)."""
    subscriptions: SubscriptionService = field(kw_only=True)
    """`/backfill subscribe`, `subscriptions` and `unsubscribe`."""
    clicks: ClickInbox = field(kw_only=True)
    """Deciding clicks, recorded before their ack and replayed after a crash."""
    verifier: RepairVerifier = field(kw_only=True)
    """Verifies what ended backfills rewrote; the restatement ledger (`/backfill history`)."""
