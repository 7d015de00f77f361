"""The Slack checks of `backfill-bot doctor`: the bot token, its scopes, the channels BOT_CONFIG
posts to and the user groups it names.

The scopes the bot needs follow from the Web API methods it calls (api.slack.com/methods/…):
chat.postMessage, chat.update and chat.postEphemeral (bot/slack/service/sender.py) need
chat:write; usergroups.users.list (bot/ownership/service.py) needs usergroups:read; the /backfill
command needs `commands`; views.open and views.publish (handlers/) and auth.test need none.
chat:write.public lets the bot post in public channels it was not invited to, and doctor's own
conversations.info needs channels:read (public channels) and groups:read (private ones). The
sender reads its own recent posts back (conversations.history and .replies: channels:history,
groups:history, im:history) to find one whose answer was lost before it posts it again.
Slack names a token's scopes in the X-OAuth-Scopes header of every Web API answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import BotConfig
from bot.core.urls import display_url
from bot.doctor.checks import Result, Row, listed
from bot.settings import Settings
from bot.slack.service.client import slack_client  # `serve`'s: same URL, timeout and retries

SCOPE_USES: Mapping[str, str] = {
    "commands": "the /backfill command",
    "chat:write": "chat.postMessage, chat.update and chat.postEphemeral (every message)",
    "usergroups:read": "usergroups.users.list (the user groups in BOT_CONFIG)",
}
OPTIONAL_USES: Mapping[str, str] = {
    "chat:write.public": "posting in public channels the bot was not invited to (without it, "
    "it must be invited to every channel /backfill is typed in)",
    "channels:read": "doctor's look at public channels (conversations.info)",
    "groups:read": "doctor's look at private channels (conversations.info)",
    **{
        scope: f"finding a post in {where} whose answer was lost (a kill, a timeout), instead "
        "of posting it twice (conversations.history and .replies)"
        for scope, where in (
            ("channels:history", "public channels"),
            ("groups:history", "private channels"),
            ("im:history", "direct messages"),
        )
    },
}
SCOPE_FIX = (
    "add {scopes} under OAuth & Permissions → Scopes → Bot Token Scopes (or in manifest.yml), "
    "reinstall the app to the workspace, and set SLACK_BOT_TOKEN to the token it then shows"
)
TOKEN_FIX = (
    "set SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions "
    "page (reinstall the app if the token was revoked)"
)
_CONVERSATION_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
NEEDS_TOKEN = "needs a working SLACK_BOT_TOKEN"


def _error(exc: SlackApiError) -> str:
    return str(exc.response.get("error") or exc.response.status_code)


def _look_up(error: str) -> str:
    return f"see what `{error}` means in Slack's error list (docs.slack.dev/reference/methods)"


def _skipped(config: BotConfig | None, why: str) -> list[Row]:
    rows = [Row("Slack scopes", Result.SKIP, why)]
    if config is not None and (_channels(config) or _groups(config)):
        rows.append(Row("Slack channels and groups", Result.SKIP, why))
    return rows


async def slack_rows(settings: Settings, config: BotConfig | None) -> list[Row]:
    rows = [_verification_row(settings)]
    if settings.slack_bot_token is None:
        missing = Row("Slack token", Result.FAIL, "SLACK_BOT_TOKEN is not set", TOKEN_FIX)
        return [*rows, missing, *_skipped(config, NEEDS_TOKEN)]
    client = slack_client(settings)
    try:
        answer = await client.auth_test()
    except SlackApiError as exc:
        refused = Row("Slack token", Result.FAIL, f"Slack refused it: {_error(exc)}", TOKEN_FIX)
        return [*rows, refused, *_skipped(config, NEEDS_TOKEN)]
    except (aiohttp.ClientError, TimeoutError) as exc:
        shown = display_url(settings.slack_api_url)  # without any credentials in it
        detail = f"cannot reach Slack at {shown}: {type(exc).__name__}: {exc}"
        fix = "check the network (a proxy?) and SLACK_API_URL"
        return [*rows, Row("Slack", Result.FAIL, detail, fix), *_skipped(config, "needs Slack")]
    who = f"@{answer.get('user')} ({answer.get('user_id')}) in {answer.get('team')}"
    if not answer.get("bot_id"):
        detail = f"{who} is a person's token, not the bot's"
        wrong = Row("Slack token", Result.FAIL, detail, TOKEN_FIX)
        return [*rows, wrong, *_skipped(config, NEEDS_TOKEN)]
    rows.append(Row("Slack token", Result.OK, who))
    header = answer.headers.get("x-oauth-scopes")
    granted = None if header is None else frozenset(s.strip() for s in header.split(","))
    rows.append(_scopes_row(granted, config))
    if config is None:
        return rows
    rows += [
        await _channel_row(client, c, labels, granted) for c, labels in _channels(config).items()
    ]
    rows += [await _group_row(client, g, labels) for g, labels in _groups(config).items()]
    return rows


def _verification_row(settings: Settings) -> Row:
    if settings.slack_app_token is not None:
        return Row("Slack requests", Result.OK, "Socket Mode (SLACK_APP_TOKEN is set)")
    if settings.slack_signing_secret is not None:
        return Row("Slack requests", Result.OK, "HTTP, verified with SLACK_SIGNING_SECRET")
    return Row(
        "Slack requests",
        Result.FAIL,
        "neither SLACK_SIGNING_SECRET nor SLACK_APP_TOKEN is set: `serve` will not start",
        "set SLACK_SIGNING_SECRET (Basic Information → App Credentials), or SLACK_APP_TOKEN "
        "(xapp-…, with connections:write) for Socket Mode",
    )


def _scopes_row(granted: frozenset[str] | None, config: BotConfig | None) -> Row:
    if granted is None:
        return Row(
            "Slack scopes",
            Result.WARN,
            "Slack did not name the token's scopes (no X-OAuth-Scopes header)",
            f"make sure the app has {', '.join(SCOPE_USES)}",
        )
    needed = dict(SCOPE_USES)
    if config is not None and not _groups(config):
        del needed["usergroups:read"]  # no user groups to read
    missing = [scope for scope in needed if scope not in granted]
    if missing:
        detail = "missing " + "; ".join(f"{s}, needed by {needed[s]}" for s in missing)
        return Row("Slack scopes", Result.FAIL, detail, SCOPE_FIX.format(scopes=", ".join(missing)))
    optional = [scope for scope in OPTIONAL_USES if scope not in granted]
    if optional:
        detail = "missing " + "; ".join(f"{s}, for {OPTIONAL_USES[s]}" for s in optional)
        return Row(
            "Slack scopes", Result.WARN, detail, SCOPE_FIX.format(scopes=", ".join(optional))
        )
    return Row("Slack scopes", Result.OK, f"has {', '.join(sorted(needed))} and more")


def _channels(config: BotConfig) -> dict[str, list[str]]:
    """Each channel BOT_CONFIG posts to, with what posts there."""
    found: dict[str, list[str]] = {}
    for team in config.teams:
        if team.channel:
            found.setdefault(team.channel, []).append(f"team {team.name}")
    for name in ("ops_channel", "alert_channel"):
        channel = getattr(config.watch, name)
        if channel:
            found.setdefault(channel, []).append(f"watch.{name}")
    return found


def _groups(config: BotConfig) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for team in config.teams:
        for group in team.user_groups:
            found.setdefault(group, []).append(f"team {team.name}")
    for group in config.approvers.user_groups:
        found.setdefault(group, []).append("approvers")
    return found


async def _channel_row(
    client: AsyncWebClient, channel: str, labels: list[str], granted: frozenset[str] | None
) -> Row:
    check = f"Channel {channel} ({listed(labels)})"
    if _USER_ID.match(channel):
        return Row(check, Result.SKIP, "a user id: the bot writes to them in its DM")
    if not _CONVERSATION_ID.match(channel):
        return Row(
            check,
            Result.WARN,
            "not a channel id, so doctor cannot look at it (and a renamed channel breaks it)",
            "use the channel's id (C…): channel name → About → Channel ID, at the bottom",
        )
    try:
        found = (await client.conversations_info(channel=channel))["channel"]
    except SlackApiError as exc:
        error = _error(exc)
        if error == "channel_not_found":
            return Row(
                check,
                Result.FAIL,
                "no such channel, or a private one the bot was not invited to",
                "check the id in BOT_CONFIG; in a private channel, type /invite @backfill-bot",
            )
        if error == "missing_scope":
            needed = str(exc.response.get("needed") or "channels:read")
            fix = SCOPE_FIX.format(scopes=needed)
            return Row(check, Result.WARN, f"not checked: the token lacks {needed}", fix)
        return Row(check, Result.FAIL, f"Slack answered {error}", _look_up(error))
    name = f"#{found.get('name', channel)}"
    if found.get("is_archived"):
        fix = f"unarchive {name}, or give {listed(labels)} a live channel in BOT_CONFIG"
        return Row(check, Result.FAIL, f"{name} is archived: posts there fail", fix)
    if found.get("is_member"):
        return Row(check, Result.OK, f"{name}: the bot is a member")
    if granted is not None and "chat:write.public" in granted and not found.get("is_private"):
        return Row(check, Result.OK, f"{name}: public; the bot posts with chat:write.public")
    return Row(
        check,
        Result.FAIL,
        f"the bot is not a member of {name} and may not post there without chat:write.public",
        f"type /invite @backfill-bot in {name} (or add chat:write.public and reinstall)",
    )


async def _group_row(client: AsyncWebClient, group: str, labels: list[str]) -> Row:
    check = f"User group {group} ({listed(labels)})"
    try:
        users = (await client.usergroups_users_list(usergroup=group)).get("users") or []
    except SlackApiError as exc:
        error = _error(exc)
        if error == "no_such_subteam":
            return Row(
                check,
                Result.FAIL,
                "no such user group: it lets no one approve",
                "check the id (S…) under teams[].user_groups or approvers.user_groups in "
                "BOT_CONFIG (usergroups.list names every group's id)",
            )
        if error == "missing_scope":  # the Slack scopes row has the whole fix
            fix = "add usergroups:read (see the Slack scopes row)"
            return Row(check, Result.FAIL, "cannot read it: the token lacks usergroups:read", fix)
        return Row(check, Result.FAIL, f"Slack answered {error}", _look_up(error))
    if not users:
        return Row(
            check,
            Result.WARN,
            "has no members: it lets no one approve",
            "add people to the group in Slack, or take it out of BOT_CONFIG",
        )
    return Row(check, Result.OK, f"{len(users)} member{'s' if len(users) > 1 else ''}")
