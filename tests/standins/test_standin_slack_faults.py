"""The Slack stand-in on a bad day (`standins.slack.faults`), over real HTTP with slack_sdk's
AsyncWebClient: each fault as a sender meets it (what slack_sdk raises), whether Slack acted
before the answer was lost, and that one seed always gives the same faults in the same order.

Most tests use a client without retry handlers (`retry_handlers=[]`), so that one call meets one
fault; the bot's own client (bot/slack/service/client.py) retries only 429s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot import cli
from standins.slack import server as slack_server
from standins.slack.faults import DONE_FIRST, BadDay, Fault
from standins.slack.server import SlackStandIn, running_slack_standin
from standins.slack.state import ApiCall
from tests.standins.test_standin_slack import CHANNEL, client_for

META = {"event_type": "backfill_bot_outbox", "event_payload": {"outbox_ids": "41,42"}}


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    async with running_slack_standin(rate_limits=False) as server:
        yield server


def bare(server: SlackStandIn, **kwargs: Any) -> AsyncWebClient:
    """A client that meets each fault once: no retry handlers at all."""
    return client_for(server, retry_handlers=[], **kwargs)


def posted(server: SlackStandIn) -> list[str]:
    return [m.text for m in server.state.messages(CHANNEL)]


async def post(client: AsyncWebClient, text: str = "hello") -> Any:
    return await client.chat_postMessage(channel=CHANNEL, text=text, metadata=META)


async def failed_post(client: AsyncWebClient) -> SlackApiError:
    with pytest.raises(SlackApiError) as failure:
        await post(client)
    return failure.value


# -- nothing done: 429, 500, HTML 502/503 -----------------------------------------------------


async def test_a_429_carries_retry_after_and_slacks_json_and_posts_nothing(
    standin: SlackStandIn,
) -> None:
    standin.state.bad_day(BadDay(script=(Fault.RATELIMITED,), retry_after_s=2))
    error = await failed_post(bare(standin))
    assert error.response.status_code == 429
    assert error.response.data == {"ok": False, "error": "ratelimited"}
    assert error.response.headers["Retry-After"] == "2"
    assert posted(standin) == []
    assert standin.state.calls == [
        ApiCall("chat.postMessage", "POST", 429, "ratelimited", "ratelimited")
    ]
    await post(bare(standin))  # the script is spent and no rate is set: a good day again
    assert posted(standin) == ["hello"]


async def test_the_bots_kind_of_client_waits_out_retry_after_and_posts_once(
    standin: SlackStandIn,
) -> None:
    standin.state.bad_day(BadDay(script=(Fault.RATELIMITED,)))
    client = client_for(standin, retry_handlers=[AsyncRateLimitErrorRetryHandler(2)])
    started = time.monotonic()
    answer = await post(client)
    assert answer["ok"] is True
    assert time.monotonic() - started >= 1.0  # slack_sdk slept the Retry-After second
    assert posted(standin) == ["hello"]
    assert [c.status for c in standin.state.calls] == [429, 200]


async def test_a_500_is_slacks_internal_error_json_and_posts_nothing(
    standin: SlackStandIn,
) -> None:
    standin.state.bad_day(BadDay(script=(Fault.SERVER_ERROR,)))
    error = await failed_post(bare(standin))
    assert error.response.status_code == 500
    assert error.response.data == {"ok": False, "error": "internal_error"}
    assert posted(standin) == []


@pytest.mark.parametrize(
    ("fault", "status", "title"),
    [(Fault.UNAVAILABLE, 503, "Service Unavailable"), (Fault.BAD_GATEWAY, 502, "Bad Gateway")],
)
async def test_503_and_502_are_html_pages_that_slack_sdk_cannot_read(
    standin: SlackStandIn, fault: Fault, status: int, title: str
) -> None:
    standin.state.bad_day(BadDay(script=(fault, fault)))
    error = await failed_post(bare(standin))
    # slack_sdk reads no JSON from an HTML page: SlackApiError with an empty `data`, no `error`.
    assert error.response.status_code == status
    assert error.response.data == {}
    headers = {"Authorization": f"Bearer {standin.bot_token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{standin.url}/api/chat.postMessage", json={"channel": CHANNEL}, headers=headers
        ) as response,
    ):
        assert response.status == status
        assert response.content_type == "text/html"
        assert title in await response.text()
    assert posted(standin) == []
    assert [(c.status, c.error, c.fault) for c in standin.state.calls] == [
        (status, None, fault.value)
    ] * 2


# -- nothing done: resets and hangs -----------------------------------------------------------


async def test_a_reset_drops_the_connection_unanswered_and_posts_nothing(
    standin: SlackStandIn,
) -> None:
    standin.state.bad_day(BadDay(script=(Fault.RESET,)))
    with pytest.raises(aiohttp.ClientConnectionError) as failure:
        await post(bare(standin))
    # A real reset (RST): aiohttp.ClientOSError, errno ECONNRESET; not an HTTP status.
    assert isinstance(failure.value, aiohttp.ClientOSError)
    assert failure.value.errno == errno.ECONNRESET
    assert posted(standin) == []
    assert standin.state.calls == [ApiCall("chat.postMessage", "POST", 0, None, "reset")]


async def test_slack_sdks_default_client_retries_a_reset_once_which_doubles_a_lost_post(
    standin: SlackStandIn,
) -> None:
    # AsyncWebClient's default retry handler (AsyncConnectionErrorRetryHandler) sends a reset
    # call again: harmless when nothing was done, a second post when the answer was lost.
    standin.state.bad_day(BadDay(script=(Fault.RESET,)))
    assert (await post(client_for(standin), "once"))["ok"] is True
    assert posted(standin) == ["once"]
    standin.state.bad_day(BadDay(script=(Fault.LOST_RESET,)))
    assert (await post(client_for(standin), "twice"))["ok"] is True
    assert posted(standin) == ["once", "twice", "twice"]
    assert [c.fault for c in standin.state.calls] == ["reset", None, "lost_reset", None]


async def test_a_hang_outlasts_the_callers_timeout_posts_nothing_and_ends_when_it_leaves() -> None:
    started = time.monotonic()
    async with running_slack_standin(rate_limits=False) as server:
        server.state.bad_day(BadDay(script=(Fault.HANG,), hang_s=30))
        with pytest.raises(TimeoutError):  # aiohttp's total timeout: the builtin TimeoutError
            await post(bare(server, timeout=0.3))
        assert posted(server) == []
        assert server.state.calls == [ApiCall("chat.postMessage", "POST", 0, None, "hang")]
        await post(bare(server))  # the stand-in answers others meanwhile
    # Stopping did not wait out the 30 s: the hang ended once its caller had gone.
    assert time.monotonic() - started < 10


async def test_a_hang_shorter_than_the_callers_patience_ends_in_a_closed_connection(
    standin: SlackStandIn,
) -> None:
    standin.state.bad_day(BadDay(script=(Fault.HANG,), hang_s=0.2))
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await post(bare(standin, timeout=10))
    assert posted(standin) == []


# -- done, the answer lost --------------------------------------------------------------------


async def history(server: SlackStandIn) -> list[Any]:
    found = await client_for(server).conversations_history(
        channel=CHANNEL, include_all_metadata=True
    )
    return [(m["text"], m.get("metadata")) for m in found["messages"]]


async def test_a_lost_answer_after_a_hang_leaves_the_post_in_history(
    standin: SlackStandIn,
) -> None:
    standin.state.bad_day(BadDay(script=(Fault.LOST_HANG,), hang_s=30))
    with pytest.raises(TimeoutError):
        await post(bare(standin, timeout=0.3))
    assert await history(standin) == [("hello", META)]  # reads are not covered: chat.* only
    assert standin.state.calls[0] == ApiCall("chat.postMessage", "POST", 200, None, "lost_hang")


async def test_a_lost_answer_by_reset_leaves_the_post_in_history(standin: SlackStandIn) -> None:
    standin.state.bad_day(BadDay(script=(Fault.LOST_RESET,)))
    with pytest.raises(aiohttp.ClientConnectionError):
        await post(bare(standin))
    assert await history(standin) == [("hello", META)]


async def test_a_lost_error_is_a_500_for_a_post_that_was_made(standin: SlackStandIn) -> None:
    standin.state.bad_day(BadDay(script=(Fault.LOST_ERROR,)))
    error = await failed_post(bare(standin))
    assert error.response.status_code == 500
    assert error.response.data == {"ok": False, "error": "internal_error"}
    assert await history(standin) == [("hello", META)]


async def test_a_lost_chat_update_still_edits_the_message(standin: SlackStandIn) -> None:
    ts = (await post(bare(standin)))["ts"]
    standin.state.bad_day(BadDay(script=(Fault.LOST_RESET,)))
    with pytest.raises(aiohttp.ClientConnectionError):
        await bare(standin).chat_update(channel=CHANNEL, ts=ts, text="edited")
    assert posted(standin) == ["edited"]


# -- seeds, coverage, switching off -----------------------------------------------------------

MIXED = BadDay(
    seed=7,
    ratelimited=0.2,
    server_errors=0.1,
    unavailable=0.1,
    bad_gateway=0.05,
    resets=0.1,
    lost_errors=0.1,
    lost_resets=0.1,
)


async def play(day: BadDay, calls: int) -> tuple[list[str | None], list[str]]:
    """Post `calls` messages one after another through a stand-in having `day`: the faults its
    calls met and the texts it stored."""
    async with running_slack_standin(rate_limits=False, bad_day=day) as server:
        client = bare(server)
        for i in range(calls):
            with contextlib.suppress(SlackApiError, aiohttp.ClientError):
                await post(client, f"m{i}")
        return [c.fault for c in server.state.calls], posted(server)


async def test_one_seed_gives_the_same_faults_in_the_same_order() -> None:
    faults, stored = await play(MIXED, 40)
    again, stored_again = await play(MIXED, 40)
    assert faults == again == [f and f.value for f in MIXED.first(40)]
    assert stored == stored_again
    assert len(set(faults)) >= 6  # a real mix, not a run of good answers
    assert MIXED.first(40) != dataclasses.replace(MIXED, seed=8).first(40)
    # What was stored is exactly what Slack acted on: the good answers and the lost ones.
    made = [f"m{i}" for i, f in enumerate(MIXED.first(40)) if f is None or f in DONE_FIRST]
    assert stored == made


def test_a_script_comes_first_then_the_seeded_draws() -> None:
    day = BadDay(seed=3, ratelimited=0.5, script=(Fault.RESET, None))
    assert day.first(5) == [Fault.RESET, None, *BadDay(seed=3, ratelimited=0.5).first(3)]


async def test_faults_cover_chat_methods_only_unless_others_are_named(
    standin: SlackStandIn,
) -> None:
    client = bare(standin)
    standin.state.bad_day(BadDay(server_errors=1.0))
    assert (await client.auth_test())["ok"] is True
    assert (await client.conversations_history(channel=CHANNEL))["ok"] is True
    assert (await failed_post(client)).response.status_code == 500
    standin.state.bad_day(BadDay(server_errors=1.0, methods=("auth.test",)))
    with pytest.raises(SlackApiError) as failure:
        await client.auth_test()
    assert failure.value.response.status_code == 500
    assert (await post(client))["ok"] is True


async def test_bad_day_none_is_a_good_day_again(standin: SlackStandIn) -> None:
    standin.state.bad_day(BadDay(ratelimited=1.0))
    assert (await failed_post(bare(standin))).response.status_code == 429
    standin.state.bad_day(None)
    assert (await post(bare(standin)))["ok"] is True


async def test_fail_every_keeps_its_rhythm_of_429_then_500(standin: SlackStandIn) -> None:
    standin.state.fail_every(2)
    statuses = []
    for _ in range(4):
        try:
            await post(bare(standin))
            statuses.append(200)
        except SlackApiError as exc:
            statuses.append(exc.response.status_code)
    assert statuses == [200, 429, 200, 500]
    assert posted(standin) == ["hello", "hello"]


@pytest.mark.parametrize(
    "wrong",
    [
        {"ratelimited": 0.6, "resets": 0.5},
        {"hangs": -0.1},
        {"hang_s": 0},
        {"retry_after_s": 0},
        {"methods": ()},
    ],
)
def test_an_impossible_bad_day_is_refused(wrong: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="BadDay"):
        BadDay(**wrong)


def test_the_cli_plays_a_typical_bad_day_for_a_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}

    async def serve_forever(host: str, port: int, **options: Any) -> None:
        started.update(options, host=host, port=port)
        await asyncio.sleep(0)

    monkeypatch.setattr(slack_server, "serve_forever", serve_forever)
    cli.main(["standin", "slack", "--port", "3999", "--bad-day", "11"])
    assert started["bad_day"] == BadDay.typical(11)
    assert started["port"] == 3999
    assert 0.2 <= BadDay.typical(11).chance <= 0.3  # about one call in four
    cli.main(["standin", "slack", "--port", "3999"])
    assert started["bad_day"] is None
