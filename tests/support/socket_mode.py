"""The bot in Socket Mode, for end-to-end tests: the Slack stand-in delivers over the WebSocket
the bot opens (SLACK_APP_TOKEN set, no signing secret, so no /slack/events), the bot connects
through slack_bolt's AsyncSocketModeHandler as `serve` does, and approved backfills of the
example config (examples/bot-config.yml, as in the demo) run on the Airflow stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.app import create_bolt_app
from bot.config import BotConfig, load_config
from bot.slack.service import socket_mode
from standins.airflow.dags import FOOD_DELIVERY_DAGS, food_delivery_history
from standins.airflow.server import running_airflow_standin
from standins.demo.run import EXAMPLE_CONFIG
from standins.marquez.server import StandInServer
from standins.slack.server import running_slack_standin
from standins.slack.socket_mode import Envelope, EnvelopeType
from tests.support.e2e import Bot, start_bot
from tests.support.execution import airflow_env

REDELIVERY_S = 0.2  # Slack waits a few seconds before sending an unacknowledged event again


def example_config() -> BotConfig:
    """examples/bot-config.yml with a quick executor, as the demo runs it."""
    config = load_config(EXAMPLE_CONFIG)
    quick = config.execution.model_copy(update={"poll_interval_s": 0.1, "progress_update_s": 0.3})
    return config.model_copy(update={"execution": quick})


@asynccontextmanager
async def socket_mode_bot(tmp_path: Path, marquez: StandInServer) -> AsyncIterator[Bot]:
    """The Airflow and Slack stand-ins and the bot connected over Socket Mode."""
    async with (
        running_airflow_standin(
            api=3, dags=FOOD_DELIVERY_DAGS, history=food_delivery_history(), run_seconds=0.05
        ) as airflow,
        running_slack_standin(socket_mode=True, redelivery_s=REDELIVERY_S) as slack,
    ):
        env = {
            "SLACK_SIGNING_SECRET": "",  # blank is unset: Socket Mode needs none
            "SLACK_APP_TOKEN": slack.app_token,
            **airflow_env(airflow.url),
        }
        database = f"sqlite:///{tmp_path / 'bot.db'}"
        services, runner, url = await start_bot(database, slack, marquez, example_config(), env)
        token = services.settings.slack_app_token
        assert token is not None
        # What `serve` does with SLACK_APP_TOKEN (bot/app.py), on a bolt app from the same
        # factory: start_bot keeps its own for the (here Slack-less) web app.
        handler = await socket_mode.connect(create_bolt_app(services), token.get_secret_value())
        services.readiness.watch_socket(handler.client)  # as `serve` hands it over
        try:
            await slack.socket.wait_connected()  # its hello sent: envelopes may follow
            yield Bot(url, services, slack, marquez)
        finally:
            await handler.close_async()
            await runner.cleanup()


def envelopes(bot: Bot, kind: EnvelopeType) -> list[Envelope]:
    """The stand-in's delivery attempts of one kind, oldest first."""
    return [e for e in bot.slack.socket.envelopes if e.type == kind]
