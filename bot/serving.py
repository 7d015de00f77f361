"""`backfill-bot serve`: the bot's HTTP server, and its Socket Mode connection when
SLACK_APP_TOKEN is set, until cancelled (SIGTERM, Ctrl-C)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.app import build_services, create_bolt_app
from bot.config import BotConfig
from bot.settings import Settings, SetupError
from bot.slack.service import socket_mode
from bot.slack.service.client import slack_client
from bot.web import create_web_app

__all__ = ["CannotListen", "SetupError", "serve"]


class CannotListen(Exception):
    """BOT_HOST:BOT_PORT cannot be listened on (`error` says why). Only binding raises it: an
    OSError from anything else (say Slack unreachable) is not the address's fault."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


async def serve(settings: Settings, config: BotConfig) -> None:
    """Run until cancelled: HTTP mode, or Socket Mode when SLACK_APP_TOKEN is set."""
    services = build_services(settings, config, slack_client(settings))
    bolt = create_bolt_app(services)
    web_app = create_web_app(bolt, services)
    runner = web.AppRunner(web_app)
    await runner.setup()
    site = web.TCPSite(runner, settings.bot_host, settings.bot_port)
    try:
        await site.start()
    except OSError as exc:  # e.g. the port is taken: stop what setup() started before failing
        await runner.cleanup()
        raise CannotListen(exc) from exc
    print(f"backfill-bot listening on http://{settings.bot_host}:{settings.bot_port}", flush=True)
    handler: AsyncSocketModeHandler | None = None
    try:
        if settings.slack_app_token is not None:
            try:
                handler = await socket_mode.connect(
                    bolt, settings.slack_app_token.get_secret_value()
                )
            except socket_mode.SocketModeRefused as exc:
                raise SetupError(str(exc)) from None
            services.readiness.watch_socket(handler.client)
        await asyncio.Event().wait()
    finally:
        if handler is not None:  # its session and receive loop; listeners finish in cleanup
            await handler.close_async()  # type: ignore[no-untyped-call]
        await runner.cleanup()
