"""OAuth scopes and conversations in the Slack stand-in: which scope each Web API method needs,
who may post where, and `conversations.info`.

Slack answers a call whose token lacks the method's scope with `missing_scope`, naming the scope
`needed` and the scopes `provided`, and reports the token's scopes on every authenticated call in
the `X-OAuth-Scopes` header (the method's own in `X-Accepted-OAuth-Scopes`). Scopes come from
api.slack.com/methods/<method>: views.* and auth.test need none; conversations.info needs the
read scope, and conversations.history and .replies the history scope, of the conversation's type
(channels:, groups:, im:), which the sender needs to find a post whose answer was lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from standins.slack.limits import Args
from standins.slack.state import Channel, JsonDict, SlackError, SlackState

__all__ = [
    "METHOD_SCOPES",
    "accepted_scopes",
    "conversation_json",
    "conversations_info",
    "ensure_postable",
    "ensure_readable",
    "require_scope",
    "visible",
]

METHOD_SCOPES: Mapping[str, str] = MappingProxyType(
    {
        "chat.postMessage": "chat:write",
        "chat.update": "chat:write",
        "chat.postEphemeral": "chat:write",
        "users.info": "users:read",
        "usergroups.users.list": "usergroups:read",
    }
)
# conversations.info needs the read scope of the conversation's type; .history and .replies its
# history scope.
_READ_SCOPES = ("channels:read", "groups:read", "im:read", "mpim:read")
_HISTORY_SCOPES = ("channels:history", "groups:history", "im:history", "mpim:history")


def accepted_scopes(method: str) -> str:
    """The `X-Accepted-OAuth-Scopes` value for `method` (empty when it needs none)."""
    if method == "conversations.info":
        return ",".join(_READ_SCOPES)
    if method in ("conversations.history", "conversations.replies"):
        return ",".join(_HISTORY_SCOPES)
    return METHOD_SCOPES.get(method, "")


def require_scope(state: SlackState, scope: str | None) -> None:
    """Raise Slack's `missing_scope` unless the bot token has `scope` (None: nothing needed)."""
    if scope is None or scope in state.scopes:
        return
    provided = ",".join(sorted(state.scopes))
    raise SlackError("missing_scope", fields={"needed": scope, "provided": provided})


def visible(channel: Channel) -> bool:
    """Whether the bot can see the channel at all: a private one only from inside."""
    return channel.is_member or not channel.is_private


def ensure_postable(state: SlackState, channel: Channel) -> None:
    """Raise what Slack answers a post the bot may not make in `channel`."""
    if not visible(channel):
        raise SlackError("channel_not_found")
    if channel.is_archived:
        raise SlackError("is_archived")
    if not channel.is_member and "chat:write.public" not in state.scopes:
        raise SlackError("not_in_channel")


def ensure_readable(state: SlackState, channel: Channel) -> None:
    """Raise what Slack answers a bot reading `channel`'s messages (conversations.history and
    .replies) without the history scope of its type, or from outside: a bot token reads "any
    conversation the relevant bot is a member of" (docs.slack.dev/reference/methods/
    conversations.history), so a channel it only posts in with chat:write.public is
    `not_in_channel` (channels the stand-in opens on a first post are ones the bot is not in:
    a sender looking there for a lost post meets what Slack answers)."""
    if channel.id.startswith(("D", "U", "W")):  # a DM (kept under the user id it was opened by)
        scope = "im:history"
    else:
        scope = "groups:history" if channel.is_private else "channels:history"
    require_scope(state, scope)
    if not channel.is_member:
        raise SlackError("not_in_channel")


def _kind(channel: Channel) -> str:
    if channel.id.startswith("D"):
        return "im"
    return "private" if channel.is_private else "public"


def conversation_json(state: SlackState, channel: Channel) -> JsonDict:
    """A conversation object as conversations.info renders it to the bot."""
    kind = _kind(channel)
    if kind == "im":
        return {"id": channel.id, "created": channel.created, "is_im": True, "is_org_shared": False}
    empty = {"value": "", "creator": "", "last_set": 0}
    return {
        "id": channel.id,
        "name": channel.name,
        "name_normalized": channel.name,
        "is_channel": kind == "public",
        "is_group": kind == "private",
        "is_im": False,
        "is_mpim": False,
        "is_private": kind == "private",
        "is_archived": channel.is_archived,
        "is_general": False,
        "is_shared": False,
        "is_ext_shared": False,
        "is_org_shared": False,
        "is_member": channel.is_member,
        "created": channel.created,
        "creator": "",
        "context_team_id": state.team_id,
        "topic": dict(empty),
        "purpose": dict(empty),
        "previous_names": [],
    }


def conversations_info(state: SlackState, args: Args) -> JsonDict:
    """`conversations.info`: by id only (a name is `channel_not_found`, as in Slack), never a
    private channel the bot is not in, and only with the read scope of the channel's type."""
    wanted = args.require("channel")
    channel = state.channels.get(wanted)
    # Posting to a user id (U…/W…) reaches the bot's DM with them; the stand-in keeps that DM
    # under the user id, which is no conversation id.
    if channel is None or not wanted.startswith(("C", "G", "D")) or not visible(channel):
        raise SlackError("channel_not_found")
    scope = {"im": "im:read", "private": "groups:read"}.get(_kind(channel), "channels:read")
    require_scope(state, scope)
    return {"channel": conversation_json(state, channel)}
