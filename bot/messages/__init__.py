"""Every Slack message, modal and Home view of the bot, as data ready for chat.postMessage /
views.open / views.publish. Services hand over facts; the words are written here and in the
templates (a refusal or a click's result is still a service's one sentence, see `common`).

Three pure steps per message (STYLE.md point 3): domain object → view model (counting and
truncation, in these modules) → Jinja2 Block Kit template (layout and mrkdwn escaping,
templates/backfill/, templates/common/, templates/watch/) → nothing live the bot did not build,
and Slack's limits (bot.slack_limits), all through the one `render` of `_render.py`. Sending
is the caller's business; messages return `{"text", "blocks"}` whichever way they are posted
(ephemeral or not), modals and Home a view.

Truncation budgets are measured in *escaped* characters, so a name full of `&` cannot push a
block over Slack's limits after the template escapes it.

Whatever came from outside (DAG ids, error messages, what people type) is escaped wherever it
lands; only mentions and links the bot built stay live (`_render.py` says how). A sentence a
service hands over is shown as written unless it is `Mrkdwn`: compose one with `sentence`,
`user_mention`, `channel_mention` and `code` to mention someone in it.

    backfill  /backfill: plan preview and modal, status message, status list, help, denials
    common    one sentence and a hint: refusals, acknowledgements, click results
    progress  a running backfill's status rows and thread replies
    watch     an incident's alert and the replies in its thread
    sla       SLA notices: a late DAG, the reports late because of it
    home      the App Home tab
    ops       the ops channel's notices about Marquez
    teams     notices to the teams whose DAGs a backfill reruns
    subscriptions  /backfill subscribe, subscriptions, unsubscribe: their answers
"""

from __future__ import annotations

from bot.messages import home, ops, progress, sla, subscriptions, teams, watch
from bot.messages._render import (
    LIST,
    NAME,
    SENTENCE,
    Mrkdwn,
    channel_mention,
    clip,
    code,
    escape_code,
    escape_mrkdwn,
    join_clipped,
    pack,
    plural,
    sentence,
    user_mention,
)
from bot.messages.backfill import (
    REQUEST_LOOK,
    STATUS_ROWS,
    STEP_LOOK,
    RequestStatus,
    StepStatus,
    denied,
    help_message,
    plan_modal,
    plan_preview,
    request_status,
    status_list,
)
from bot.messages.common import acknowledgement, action_result, refusal

__all__ = [
    "LIST",
    "NAME",
    "REQUEST_LOOK",
    "SENTENCE",
    "STATUS_ROWS",
    "STEP_LOOK",
    "Mrkdwn",
    "RequestStatus",
    "StepStatus",
    "acknowledgement",
    "action_result",
    "channel_mention",
    "clip",
    "code",
    "denied",
    "escape_code",
    "escape_mrkdwn",
    "help_message",
    "home",
    "join_clipped",
    "ops",
    "pack",
    "plan_modal",
    "plan_preview",
    "plural",
    "progress",
    "refusal",
    "request_status",
    "sentence",
    "sla",
    "status_list",
    "subscriptions",
    "teams",
    "user_mention",
    "watch",
]
