"""A Microsoft Teams stand-in: a channel's incoming webhook (the legacy Office 365 connector) and
a Power Automate "Workflows" trigger, both taking the Adaptive Card message `teams_message`
builds. Shared by the tests and the demo.

- `POST /webhookb2/{path}` (the connector): 200 with the body `1` when it delivered; 400 "Bad
  payload received by generic incoming webhook." (Teams' wording) for a body that is not a card
  message; a body over 28 KB gets what the connector really answers: 200 with "Webhook message
  delivery failed with error: Microsoft Teams endpoint returned HTTP error 413 ...".
- `POST /workflows/{id}/triggers/manual/paths/invoke?...&sig=...` (Workflows): 202 with an
  empty body; 401 with a Logic Apps error `{"error": {"code", "message"}}` for a missing or
  wrong `sig` (the message echoes it, as a careless server might), 404 for another workflow id,
  400 for a body that is not a card message and 413 over 28 KB (the real flow accepts those
  and fails later, in its run: here they are answered, so a client sees them).

The real connector also takes MessageCards and `{"text": ...}`; this one only Adaptive Cards.
`fail_next` answers the next requests with a fault before any processing; `fail_next_in_200`
answers them the connector's way, 200 with Teams' error text (its throttling is like that).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from standins.http_server import start_app

__all__ = ["Attempt", "TeamsStandin", "running_teams_standin", "validate", "wrapped_error"]

CARD_TYPE = "application/vnd.microsoft.card.adaptive"
MAX_BODY_BYTES = 28 * 1024
BAD_PAYLOAD = "Bad payload received by generic incoming webhook."
WORKFLOW_QUERY = "api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig="


def wrapped_error(status: int) -> str:
    """The connector's 200 body when Teams behind it answered `status`."""
    return (
        "Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP "
        f"error {status} with ContextId tcid=0,server=standin,cv=standin.0,MS-CV=standin.0.."
    )


def validate(message: Any) -> list[str]:
    """What Teams would refuse in `message` (empty when it is a card message)."""
    if not isinstance(message, dict):
        return ["the body is not a JSON object"]
    problems = []
    if message.get("type") != "message":
        problems.append("'type' must be 'message'")
    attachments = message.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return [*problems, "'attachments' must be a non-empty list"]
    for n, item in enumerate(attachments):
        item = item if isinstance(item, dict) else {}
        if item.get("contentType") != CARD_TYPE:
            problems.append(f"attachments[{n}].contentType must be '{CARD_TYPE}'")
        content = item.get("content")
        if not isinstance(content, dict) or content.get("type") != "AdaptiveCard":
            problems.append(f"attachments[{n}].content.type must be 'AdaptiveCard'")
        elif not isinstance(content.get("body"), list):
            problems.append(f"attachments[{n}].content.body must be a list")
    return problems


@dataclass(frozen=True)
class Attempt:
    """One request: which endpoint ("connector" or "workflow"), our status, its Content-Type."""

    kind: str
    status: int
    content_type: str


@dataclass(frozen=True)
class _Fault:
    status: int
    retry_after: int | None
    body: str | None


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


class TeamsStandin:
    """The stand-in's state: accepted `messages` (both endpoints), `attempts`, queued faults."""

    def __init__(self, sig: str) -> None:
        self.url = ""
        self.sig = sig
        self.workflow_id = uuid.uuid4().hex
        self.hook_path = (
            f"{uuid.uuid4()}@{uuid.uuid4()}/IncomingWebhook/{secrets.token_hex(16)}/{uuid.uuid4()}"
        )
        self.messages: list[dict[str, Any]] = []
        self.attempts: list[Attempt] = []
        self._faults: deque[_Fault] = deque()

    @property
    def connector_url(self) -> str:
        """A legacy incoming-webhook URL into the stand-in."""
        return f"{self.url}/webhookb2/{self.hook_path}"

    @property
    def workflow_url(self) -> str:
        """A Workflows trigger URL into the stand-in, with its `sig`."""
        path = f"/workflows/{self.workflow_id}/triggers/manual/paths/invoke"
        return f"{self.url}{path}?{WORKFLOW_QUERY}{self.sig}"

    def fail_next(
        self, status: int, times: int = 1, retry_after: int | None = None, body: str | None = None
    ) -> None:
        """Answer the next `times` requests with `status` (Retry-After and `body` if given)."""
        self._faults.extend(_Fault(status, retry_after, body) for _ in range(times))

    def fail_next_in_200(self, status: int = 429, times: int = 1) -> None:
        """Answer the next `times` requests as the connector does when Teams refused: HTTP 200
        with its error text naming `status`."""
        self.fail_next(200, times, body=wrapped_error(status))

    def recover(self) -> None:
        """Drop the faults still queued: the next request is processed."""
        self._faults.clear()

    async def _connector(self, request: web.Request) -> web.Response:
        response = self._fault("connector")  # (a Response is a Mapping: never test it by `or`)
        if response is None:
            response = await self._deliver_connector(request)
        return self._log("connector", request, response)

    async def _workflow(self, request: web.Request) -> web.Response:
        response = self._fault("workflow")
        if response is None:
            response = await self._deliver_workflow(request)
        return self._log("workflow", request, response)

    def _log(self, kind: str, request: web.Request, response: web.Response) -> web.Response:
        content_type = request.headers.get("Content-Type", "")
        self.attempts.append(Attempt(kind, response.status, content_type))
        return response

    def _fault(self, kind: str) -> web.Response | None:
        if not self._faults:
            return None
        fault = self._faults.popleft()
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
        if fault.body is not None:
            return web.Response(status=fault.status, text=fault.body, headers=headers)
        if kind == "workflow":
            error = {"code": "InjectedFault", "message": f"injected fault {fault.status}"}
            return web.json_response({"error": error}, status=fault.status, headers=headers)
        return web.Response(
            status=fault.status, text=f"injected fault {fault.status}", headers=headers
        )

    async def _deliver_connector(self, request: web.Request) -> web.Response:
        body = await request.read()
        if len(body) > MAX_BODY_BYTES:
            return web.Response(text=wrapped_error(413))
        message = _parse(body)
        if message is None or validate(message):
            return web.Response(status=400, text=BAD_PAYLOAD)
        self.messages.append(message)
        return web.Response(text="1")

    async def _deliver_workflow(self, request: web.Request) -> web.Response:
        sig = request.query.get("sig")
        if not sig:
            return _error(
                401,
                "DirectApiAuthorizationRequired",
                "The request must be authenticated only by Shared Access scheme.",
            )
        if not secrets.compare_digest(sig.encode(), self.sig.encode()):
            return _error(
                401,
                "DirectApiInvalidAuthorizationSignature",
                f"The provided authorization signature '{sig}' is not valid for the request.",
            )
        workflow = request.match_info["id"]
        if workflow != self.workflow_id:
            return _error(404, "WorkflowNotFound", f"The workflow '{workflow}' could not be found.")
        body = await request.read()
        if len(body) > MAX_BODY_BYTES:
            return _error(413, "MessageTooLarge", "Message is too large for Microsoft Teams.")
        message = _parse(body)
        problems = ["the body is not JSON"] if message is None else validate(message)
        if problems:
            detail = "; ".join(problems)
            text = f"The input body for trigger 'manual' did not match its schema: {detail}."
            return _error(400, "TriggerInputSchemaMismatch", text)
        self.messages.append(message)
        return web.Response(status=202)


def _parse(body: bytes) -> Any:
    """The JSON in `body` (None when it is not JSON)."""
    try:
        return json.loads(body)
    except ValueError:
        return None


@contextlib.asynccontextmanager
async def running_teams_standin(
    *, sig: str = "standin-sig", host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[TeamsStandin]:
    """Start a stand-in whose Workflows trigger takes `sig`, yield it (post to `.connector_url`
    or `.workflow_url`), stop it."""
    standin = TeamsStandin(sig)
    app = web.Application()
    app.router.add_post("/webhookb2/{path:.*}", standin._connector)
    app.router.add_post("/workflows/{id}/triggers/manual/paths/invoke", standin._workflow)
    standin.url, runner = await start_app(app, host, port)
    try:
        yield standin
    finally:
        await runner.cleanup()
