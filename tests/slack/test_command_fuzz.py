"""Whatever text follows /backfill, the bot answers the person (ephemerally) and never fails."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.e2e import CHANNEL, Bot, eventually

WORDS = st.sampled_from(
    [
        "example.etl_orders",
        "example.etl_order",
        "2021-06-04..2021-06-06",
        "2021-06-06..2021-06-04",
        "2021-06-04",
        "2021-01-01..2021-12-31",
        "--only",
        "--exclude",
        "--exclude=example.email_discounts",
        "--dry-run",
        "--namespace",
        "--bogus",
        "status",
        "cancel",
        "help",
        "<@U123>",
        "&amp;",
        "\u2014only",
        "..",
    ]
)
TEXTS = st.one_of(
    st.lists(WORDS, max_size=5).map(" ".join),
    st.text(max_size=80),
)


async def test_any_command_text_gets_an_ephemeral_answer(bot: Bot) -> None:
    loop = asyncio.get_running_loop()

    async def one(text: str, user: str) -> None:
        before = len(bot.slack.state.ephemerals)
        reply = await bot.slack.slash_command(text, user_id=user, channel_id=CHANNEL)
        assert reply.status == 200, (text, reply.status, reply.body)
        # the "Planning …" ack is not an answer; the answer follows it
        await eventually(
            lambda: [
                e
                for e in bot.slack.state.ephemerals[before:]
                if e.user == user and not (e.source == "ack" and "Planning" in e.text)
            ],
            timeout_s=20,
        )

    counter = iter(range(10_000))

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(text=TEXTS)
    def check(text: str) -> None:
        user = f"U0FUZZ{next(counter):04d}"
        asyncio.run_coroutine_threadsafe(one(text, user), loop).result(timeout=60)

    # hypothesis drives a synchronous test; the bot and stand-ins live on this event loop
    await asyncio.to_thread(check)
