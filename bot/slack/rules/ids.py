"""Every id the bot puts on a Slack surface, in one place per kind.

Handlers match clicks and submissions against these values and templates write them, so a
renamed id cannot leave a listener behind. Ids name the action, never the request: the request id
travels in the button's `value` (or a view's `private_metadata`) and is reloaded on every click.
"""

from __future__ import annotations

from enum import StrEnum


class ActionId(StrEnum):
    """`action_id` of interactive elements (buttons)."""

    APPROVE = "backfill.approve"
    CANCEL = "backfill.cancel"
    SHOW_PLAN = "backfill.show_plan"
    INCIDENT_BACKFILL = "incident.backfill"
    INCIDENT_SNOOZE_1H = "incident.snooze_1h"
    INCIDENT_SNOOZE_24H = "incident.snooze_24h"
    INCIDENT_MARQUEZ = "incident.open_marquez"
    INCIDENT_APPROVE = "incident.approve_backfill"
    INCIDENT_REVIEW = "incident.review_plan"
    INCIDENT_ACK = "incident.acknowledge"
    INCIDENT_UNSNOOZE = "incident.unsnooze"
    INCIDENT_DOWNSTREAM = "incident.backfill_downstream"
    INCIDENT_AIRFLOW = "incident.open_airflow"
    INCIDENT_LOG = "incident.open_log"
    RETRY = "backfill.retry"
    RETRY_TASKS = "backfill.retry_failed_tasks"
    """Retry by clearing only the failed tasks of the failed runs (Airflow's clearTaskInstances)."""
    PAUSE = "backfill.pause"
    RESUME = "backfill.resume"
    REVIEW = "backfill.review"
    """The preview's Review plan: the plan and its options in a modal."""
    OPTION = "backfill.option"
    """The one element of each input block of the Review plan modal (block ids tell them)."""
    SLA_ACK = "sla.acknowledge"
    SLA_AIRFLOW = "sla.open_airflow"
    SLA_MARQUEZ = "sla.open_marquez"


DECIDING_CLICKS: frozenset[str] = frozenset(
    {
        ActionId.APPROVE, ActionId.CANCEL, ActionId.RETRY, ActionId.RETRY_TASKS, ActionId.PAUSE,
        ActionId.RESUME,
        ActionId.INCIDENT_APPROVE,
        ActionId.INCIDENT_DOWNSTREAM, ActionId.INCIDENT_BACKFILL, ActionId.INCIDENT_ACK,
        ActionId.INCIDENT_SNOOZE_1H, ActionId.INCIDENT_SNOOZE_24H, ActionId.INCIDENT_UNSNOOZE,
        ActionId.SLA_ACK,
    }
)  # fmt: skip
"""Buttons whose click decides something: recorded before the ack and replayed after a crash
(`bot.slack.service.clicks`). Links and plan views only show; a lost one is clicked again."""


class BlockId(StrEnum):
    """`block_id` of blocks a handler or an update needs to find again."""

    PLAN_ACTIONS = "backfill.plan.actions"
    PLAN_MORE = "backfill.plan.more"
    STATUS_ACTIONS = "backfill.status.actions"
    INCIDENT_ACTIONS = "incident.actions"
    SLA_ACTIONS = "sla.actions"


class ViewCallbackId(StrEnum):
    """`callback_id` of modal views."""

    PLAN = "backfill.plan_modal"
    OPTIONS = "backfill.options_modal"
    """Review plan: a backfill's options, submitted to change a preview or to make one."""


class OptionBlock(StrEnum):
    """`block_id` of the Review plan modal's inputs."""

    RERUN = "backfill.option.rerun"
    FLAGS = "backfill.option.flags"
    CONF = "backfill.option.conf"
    MAX_ACTIVE = "backfill.option.max_active"
    REASON = "backfill.option.reason"
    AT = "backfill.option.at"


def is_direct_message(channel: str) -> bool:
    """Whether a channel id is a direct message (Slack's DM ids start with D)."""
    return channel.startswith("D")
