"""Every table of the bot in one MetaData, for Alembic (`migrations/env.py`) and the schema
checks. Each capability declares its tables on `bot.core.tables.Base`; importing this module
registers them all, so a foreign key by table name always finds its table."""

from __future__ import annotations

from bot.backfill.store import models as backfill_models  # noqa: F401  (backfill requests and steps)
from bot.core import audit  # noqa: F401  (the audit log)
from bot.core.tables import Base
from bot.events.store import models as event_models  # noqa: F401  (run events, poll cursors)
from bot.hub.store import models as hub_models  # noqa: F401  (the hub's sinks and subscriptions)
from bot.incidents.store import models as incident_models  # noqa: F401  (incidents)
from bot.lineage.store import models as lineage_models  # noqa: F401  (the lineage index)
from bot.quality.store import models as quality_models  # noqa: F401  (data-quality history)
from bot.sla import store as sla_store  # noqa: F401  (SLA misses)
from bot.slack.store import models as slack_models  # noqa: F401  (the outbox)

metadata = Base.metadata

__all__ = ["Base", "metadata"]
