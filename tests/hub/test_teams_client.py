"""The Microsoft Teams sink over real HTTP to its stand-in (incoming webhook and Workflows).

One attempt per `send`, classified as Teams answers: the connector's 200 with `1`, its 200 with
an error text (a retry or a refusal, by the status the text names), Workflows' 202 and its
Logic Apps errors. The detail never shows the URL's path or query. The card builder shows
outside text as text and keeps the card within Teams' limits.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.hub.sinks.base import Outcome, SinkClient
from bot.hub.sinks.teams import MAX_MESSAGE_BYTES, TeamsClient, message_size, teams_message
from standins.sinks.teams import BAD_PAYLOAD, TeamsStandin, running_teams_standin, validate

SIG = "S1gN4tureSecretValue0123456789abcdefXYZ"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def teams() -> AsyncIterator[TeamsStandin]:
    async with running_teams_standin(sig=SIG) as server:
        yield server


async def send_once(client: SinkClient, body: dict[str, Any]) -> Outcome:
    try:
        return await client.send(body, delivery_id="d-1")
    finally:
        await client.close()


def card(**fields: Any) -> dict[str, Any]:
    fields.setdefault("title", "orders_daily backfill failed")
    fields.setdefault("text", "3 runs failed")
    return teams_message(**fields)


def hook_url(teams: TeamsStandin, kind: str) -> str:
    return teams.connector_url if kind == "connector" else teams.workflow_url


def secret_parts(url: str) -> list[str]:
    """What of `url` must never appear in a detail: its path, query and their pieces."""
    path, _, query = url.partition("://")[2].partition("/")[2].partition("?")
    parts = [path, query, *re.split(r"[/@&=]", query)]
    parts += [p for p in re.split(r"[/@]", path) if len(p) >= 16]
    return [p for p in parts if len(p) >= 16]


# --- delivery ------------------------------------------------------------------------------


async def test_the_connector_delivers_a_card(teams: TeamsStandin) -> None:
    client = TeamsClient(teams.connector_url)
    assert isinstance(client, SinkClient)
    message = card(facts=[("DAG", "orders_daily")], links=[("Open in Airflow", "https://af/x")])
    outcome = await send_once(client, message)
    assert outcome == Outcome(True, None, f"{teams.url} answered HTTP 200")
    assert teams.messages == [message]
    [attempt] = teams.attempts
    assert (attempt.kind, attempt.status) == ("connector", 200)
    # with a charset: without one the connector reads UTF-16 and halves the size limit
    assert attempt.content_type == "application/json; charset=utf-8"


async def test_a_workflow_delivers_a_card(teams: TeamsStandin) -> None:
    message = card(style="good")
    outcome = await send_once(TeamsClient(teams.workflow_url), message)
    assert outcome == Outcome(True, None, f"{teams.url} answered HTTP 202")
    assert teams.messages == [message]
    assert [a.kind for a in teams.attempts] == ["workflow"]


async def test_a_wrong_sig_is_refused_and_retried_slowly(teams: TeamsStandin) -> None:
    wrong = teams.workflow_url.replace(SIG, "WrongSignatureValue987654321")
    outcome = await send_once(TeamsClient(wrong), card())
    assert (outcome.delivered, outcome.retry_after_s) == (False, 300.0)
    assert outcome.detail.startswith(
        f"{teams.url} answered HTTP 401: DirectApiInvalidAuthorizationSignature: "
    )
    assert "[redacted]" in outcome.detail  # the stand-in echoed the sig; it was cleaned
    assert "WrongSignatureValue" not in outcome.detail
    missing = await send_once(TeamsClient(teams.workflow_url.split("?")[0]), card())
    assert (missing.retry_after_s, missing.detail) == (
        300.0,
        f"{teams.url} answered HTTP 401: DirectApiAuthorizationRequired: "
        "The request must be authenticated only by Shared Access scheme.",
    )
    other = teams.workflow_url.replace(teams.workflow_id, "0123456789abcdef0123456789abcdef")
    gone = await send_once(TeamsClient(other), card())
    assert (gone.retry_after_s, gone.detail) == (
        300.0,
        f"{teams.url} answered HTTP 404: WorkflowNotFound: The workflow '[redacted]' could not "
        "be found.",
    )
    assert teams.messages == []


# --- the connector's HTTP 200 with an error text -------------------------------------------


# A wrapped 400 is the channel (removed, connector disabled), retried slowly; 413 is the card.
@pytest.mark.parametrize(
    ("inner", "expected"), [(429, 15.0), (500, 0.0), (503, 0.0), (413, None), (400, 300.0)]
)
async def test_an_error_text_in_a_200_is_classified_by_its_status(
    teams: TeamsStandin, inner: int, expected: float | None
) -> None:
    teams.fail_next_in_200(inner)
    async with TeamsClient(teams.connector_url) as client:
        failed = await client.send(card(), delivery_id="1")
        again = await client.send(card(), delivery_id="1")
    assert (failed.delivered, failed.retry_after_s) == (False, expected)
    assert failed.detail.startswith(
        f"{teams.url} answered HTTP 200 (Teams: HTTP {inner}): Webhook message delivery failed "
        f"with error: Microsoft Teams endpoint returned HTTP error {inner} with ContextId"
    )
    assert again.delivered
    assert len(teams.messages) == 1


@pytest.mark.parametrize("body", ["", "ok", "Something went wrong", "<html>busy</html>"])
async def test_a_connector_200_without_a_count_is_retried(teams: TeamsStandin, body: str) -> None:
    teams.fail_next(200, body=body)
    outcome = await send_once(TeamsClient(teams.connector_url), card())
    assert (outcome.delivered, outcome.retry_after_s) == (False, 0.0)
    assert outcome.detail.startswith(f"{teams.url} answered HTTP 200 without a count: ")
    assert teams.messages == []


async def test_a_workflow_2xx_needs_no_count(teams: TeamsStandin) -> None:
    teams.fail_next(200, body="")  # a flow with a Response action may answer 200, empty
    assert (await send_once(TeamsClient(teams.workflow_url), card())).delivered


# --- status classification -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["connector", "workflow"])
@pytest.mark.parametrize(
    ("status", "retry_after", "expected"),
    [(429, 7, 7.0), (429, None, 15.0), (500, None, 0.0), (502, 3, 3.0), (408, None, 0.0)],
)
async def test_throttling_and_server_errors_are_retried(
    teams: TeamsStandin, kind: str, status: int, retry_after: int | None, expected: float
) -> None:
    teams.fail_next(status, retry_after=retry_after)
    async with TeamsClient(hook_url(teams, kind)) as client:
        failed = await client.send(card(), delivery_id="1")
        retried = await client.send(card(), delivery_id="1")
    assert (failed.delivered, failed.retry_after_s) == (False, expected)
    assert failed.detail.startswith(f"{teams.url} answered HTTP {status}: ")
    assert retried.delivered
    assert len(teams.messages) == 1
    teams.fail_next(503, times=50)
    teams.recover()
    assert (await send_once(TeamsClient(hook_url(teams, kind)), card())).delivered


async def test_a_bad_payload_is_permanent(teams: TeamsStandin) -> None:
    legacy = {"@type": "MessageCard", "text": "not an adaptive card"}
    outcome = await send_once(TeamsClient(teams.connector_url), legacy)
    assert outcome == Outcome(False, None, f"{teams.url} answered HTTP 400: {BAD_PAYLOAD}")
    flow = await send_once(TeamsClient(teams.workflow_url), {"type": "message"})
    assert flow.permanent
    assert flow.detail.startswith(f"{teams.url} answered HTTP 400: TriggerInputSchemaMismatch: ")
    assert "'attachments' must be a non-empty list" in flow.detail
    assert teams.messages == []


def oversized() -> dict[str, Any]:
    message = card()
    body = message["attachments"][0]["content"]["body"]
    body.append({"type": "TextBlock", "text": "x" * MAX_MESSAGE_BYTES})
    return message


async def test_a_message_too_large_is_permanent(teams: TeamsStandin) -> None:
    legacy = await send_once(TeamsClient(teams.connector_url), oversized())
    assert legacy.permanent
    assert legacy.detail.startswith(f"{teams.url} answered HTTP 200 (Teams: HTTP 413): ")
    flow = await send_once(TeamsClient(teams.workflow_url), oversized())
    too_large = "MessageTooLarge: Message is too large for Microsoft Teams."
    assert flow == Outcome(False, None, f"{teams.url} answered HTTP 413: {too_large}")
    teams.fail_next(400, body="Message is too large")
    worded = await send_once(TeamsClient(teams.connector_url), card())
    assert (worded.permanent, worded.detail) == (
        True,
        f"{teams.url} answered HTTP 413: Message is too large",
    )
    assert teams.messages == []


async def test_a_body_that_is_not_json_is_permanent(teams: TeamsStandin) -> None:
    outcome = await send_once(TeamsClient(teams.connector_url), {"n": float("nan")})
    assert outcome == Outcome(False, None, f"{teams.url}: message is not JSON (ValueError)")
    assert teams.attempts == []


# --- secrets -------------------------------------------------------------------------------


async def echo_server(status: int) -> TestServer:
    """Answers `status` with everything it can see of the URL, as text and as an error."""

    async def echo(request: web.Request) -> web.Response:
        seen = f"{request.path_qs} {request.raw_path} {request.path} {dict(request.query)}"
        seen += " " + " ".join(request.path.split("/"))
        if status >= 400:
            return web.json_response({"error": {"code": "Echo", "message": seen}}, status=status)
        return web.Response(text=f"Microsoft Teams endpoint returned HTTP error 429: {seen}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


@pytest.mark.parametrize("status", [200, 400, 401, 500])
@pytest.mark.parametrize("kind", ["connector", "workflow"])
async def test_the_detail_never_shows_the_path_query_or_sig(
    teams: TeamsStandin, status: int, kind: str
) -> None:
    server = await echo_server(status)
    origin = str(server.make_url("")).rstrip("/")
    try:
        url = hook_url(teams, kind).replace(teams.url, origin)
        outcome = await send_once(TeamsClient(url), card())
    finally:
        await server.close()
    assert not outcome.delivered
    assert outcome.detail.startswith(f"{origin} answered HTTP {status}")
    assert "[redacted]" in outcome.detail  # the echo was there, and was cleaned
    for part in [*secret_parts(url), SIG, teams.workflow_id]:
        assert part not in outcome.detail, part
    assert "IncomingWebhook" in outcome.detail or kind == "workflow"  # not hidden: public


async def test_a_refused_connection_shows_the_origin_only(teams: TeamsStandin) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = teams.workflow_url.replace(teams.url, f"http://127.0.0.1:{port}")
    outcome = await send_once(TeamsClient(url), card())
    assert outcome == Outcome(False, 0.0, f"http://127.0.0.1:{port}: Connection refused")


# --- the card builder ----------------------------------------------------------------------


def content(message: dict[str, Any]) -> dict[str, Any]:
    [attachment] = message["attachments"]
    result: dict[str, Any] = attachment["content"]
    return result


def test_the_card_follows_the_adaptive_card_format() -> None:
    message = teams_message(
        title="orders_daily late",
        text="expected by 06:00",
        facts=[("Owner", "data-eng")],
        links=[("Airflow", "https://airflow.example/dags/orders_daily")],
        style="warning",
    )
    assert message == {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": [
                        {
                            "type": "TextBlock",
                            "text": "orders\\_daily late",
                            "weight": "Bolder",
                            "size": "Medium",
                            "wrap": True,
                            "color": "warning",
                        },
                        {"type": "TextBlock", "text": "expected by 06:00", "wrap": True},
                        {"type": "FactSet", "facts": [{"title": "Owner", "value": "data-eng"}]},
                    ],
                    "actions": [
                        {
                            "type": "Action.OpenUrl",
                            "title": "Airflow",
                            "url": "https://airflow.example/dags/orders_daily",
                        }
                    ],
                },
            }
        ],
    }
    assert validate(message) == []
    plain = content(teams_message(title="t", text=""))
    assert "color" not in plain["body"][0]
    assert len(plain["body"]) == 1  # no empty text block, no empty fact set
    assert content(teams_message(title="t", text="", style="attention"))["body"][0]["color"] == (
        "attention"
    )


UNESCAPED = re.compile(r"(?<!\\)[\[\]()*_`<>#~|]")


def test_hostile_markdown_is_shown_as_text() -> None:
    hostile = "[click](javascript:alert(1)) **x** <at>admin</at> `code` ~~s~~ a|b #tag"
    message = teams_message(
        title=hostile,
        text=f"{hostile}\n- item\n  + more\n12. twelve\n> quote\n=====\n# heading",
        facts=[("DAG", hostile), ("[k](http://evil)", "v")],
    )
    body = content(message)["body"]
    title, text, facts = body[0]["text"], body[1]["text"], body[2]["facts"]
    assert title == (
        r"\[click\]\(javascript:alert\(1\)\) \*\*x\*\* \<at\>admin\</at\> \`code\` \~\~s\~\~ "
        r"a\|b \#tag"
    )
    for shown in (title, text, facts[0]["value"], facts[1]["title"]):
        assert not UNESCAPED.search(shown), shown
    assert text.split("\n")[1:] == [
        r"\- item",
        r"\+ more",  # (whitespace is collapsed: indentation is lost)
        r"12\. twelve",
        r"\> quote",
        r"\=====",
        r"\# heading",
    ]
    assert "5 - 3" in content(teams_message(title="t", text="5 - 3"))["body"][1]["text"]


def test_control_characters_are_dropped() -> None:
    body = content(teams_message(title="a\x00b\u202ec\nd", text="x\r\ny\x07z\u2028w"))["body"]
    assert body[0]["text"] == "a b c d"  # the title is one line
    assert body[1]["text"] == "x\ny z w"


def test_lengths_are_capped() -> None:
    facts = [(f"f{n}", "v" * 900) for n in range(15)]
    body = content(teams_message(title="T" * 500, text="x" * 5000, facts=facts))["body"]
    assert body[0]["text"] == "T" * 199 + "…"
    assert body[1]["text"] == "x" * 1999 + "…"
    rows = body[2]["facts"]
    assert [row["title"] for row in rows] == [f"f{n}" for n in range(10)]
    assert {row["value"] for row in rows} == {"v" * 499 + "…"}
    short = content(teams_message(title="T" * 200, text="x" * 2000))["body"]
    assert (short[0]["text"], short[1]["text"]) == ("T" * 200, "x" * 2000)


def test_only_http_links_are_kept() -> None:
    links = [
        ("ok", "https://airflow.example/dags/a?x=1"),
        ("js", "javascript:alert(1)"),
        ("data", "data:text/html,<script>alert(1)</script>"),
        ("ftp", "ftp://files.example/x"),
        ("relative", "//evil.example/x"),
        ("no host", "http://"),
        ("spaces", "https://a.example/x y"),
        ("plain", "http://marquez.example:5000/jobs"),
        ("long", "https://a.example/" + "x" * 3000),
    ]
    actions = content(teams_message(title="t", text="", links=links))["actions"]
    assert [(a["title"], a["url"]) for a in actions] == [
        ("ok", "https://airflow.example/dags/a?x=1"),
        ("plain", "http://marquez.example:5000/jobs"),
    ]
    many = [(f"l{n}", f"https://a.example/{n}") for n in range(9)]
    assert len(content(teams_message(title="t", text="", links=many))["actions"]) == 6


async def test_the_worst_card_stays_under_the_limit_and_is_accepted(teams: TeamsStandin) -> None:
    worst = "\\" * 3000 + "😀" * 3000
    message = teams_message(
        title=worst,
        text=worst,
        facts=[(worst, worst) for _ in range(12)],
        links=[(worst, "https://a.example/" + '"' * 1980) for _ in range(8)],
    )
    size = message_size(message)
    assert size <= 20 * 1024 < MAX_MESSAGE_BYTES
    body = content(message)["body"]
    assert body[1]["text"].endswith("…")
    assert len(body[2]["facts"]) == 10
    for kind in ("connector", "workflow"):
        assert (await send_once(TeamsClient(hook_url(teams, kind)), message)).delivered
    assert teams.messages == [message, message]
    assert json.loads(json.dumps(message)) == message


def test_the_builder_refuses_an_empty_title_or_unknown_style() -> None:
    with pytest.raises(ValueError, match="title"):
        teams_message(title=" \x00 ", text="x")
    with pytest.raises(ValueError, match="style"):
        teams_message(title="t", text="x", style="loud")  # type: ignore[arg-type]
