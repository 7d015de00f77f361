"""A bad day at Slack's edge, on purpose and reproducibly: what the Web API stand-in does to a call
instead of answering it, or after making it, so that a sender can be shown to lose nothing and
post nothing twice.

Each fault is something Slack's edge really does. What matters to a sender is whether Slack acted,
so each kind says so:

- nothing done: `ratelimited` (429 with `Retry-After` and Slack's JSON `ratelimited`),
  `server_error` (500 with Slack's JSON `internal_error`), `unavailable` (503) and `bad_gateway`
  (502), each an HTML page such as an edge or a load balancer serves, `reset` (the connection is
  reset unanswered) and `hang` (no answer for `hang_s`, then the connection is closed);
- done, the answer lost: `lost_error` (made, then 500 `internal_error`: Slack's docs say of it
  "It's possible some aspect of the operation succeeded before the error was raised"),
  `lost_reset` and `lost_hang` (made, then the connection is reset, or hangs). This is how a real
  post reaches Slack while its sender believes it failed.

Which call meets which fault is drawn from `random.Random(seed)`, one draw for every call the
plan covers (after its `script`), so one seed and one order of calls always give the same faults;
`BadDay.faults()` lists them in advance. `SlackState.calls` records each call with its `fault`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import struct
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from aiohttp import web

__all__ = ["DONE_FIRST", "HANG_S", "RETRY_AFTER_S", "BadDay", "Fault", "FaultPlan", "misbehave"]


class Fault(StrEnum):
    """What a call meets, and what a slack_sdk AsyncWebClient then raises."""

    RATELIMITED = "ratelimited"  # SlackApiError: 429, data.error "ratelimited", Retry-After
    SERVER_ERROR = "server_error"  # SlackApiError: 500, data.error "internal_error"
    UNAVAILABLE = "unavailable"  # SlackApiError: 503, data {} (an HTML page)
    BAD_GATEWAY = "bad_gateway"  # SlackApiError: 502, data {} (an HTML page)
    RESET = "reset"  # aiohttp.ClientOSError (ECONNRESET), a ClientConnectionError
    HANG = "hang"  # TimeoutError, or ServerDisconnectedError if it waits out hang_s
    LOST_ERROR = "lost_error"  # as SERVER_ERROR, but the call was made
    LOST_RESET = "lost_reset"  # as RESET, but the call was made
    LOST_HANG = "lost_hang"  # as HANG, but the call was made


DONE_FIRST = frozenset({Fault.LOST_ERROR, Fault.LOST_RESET, Fault.LOST_HANG})
"""The faults that let the call happen (a post is stored) before its answer is lost."""

HANG_S = 30.0  # longer than the bot's client timeouts (bot/app.py, bot/slack/service/client.py)
RETRY_AFTER_S = 1  # Slack's Retry-After is in whole seconds

# BadDay's rate fields, in the order a draw walks them (part of what a seed reproduces).
_RATES = (
    ("ratelimited", Fault.RATELIMITED),
    ("server_errors", Fault.SERVER_ERROR),
    ("unavailable", Fault.UNAVAILABLE),
    ("bad_gateway", Fault.BAD_GATEWAY),
    ("resets", Fault.RESET),
    ("hangs", Fault.HANG),
    ("lost_errors", Fault.LOST_ERROR),
    ("lost_resets", Fault.LOST_RESET),
    ("lost_hangs", Fault.LOST_HANG),
)


@dataclass(frozen=True)
class BadDay:
    """A seeded fault plan. Each rate is the chance (0..1, together at most 1) that a covered call
    meets that fault; `script` fixes the faults of the first covered calls (None: answered
    normally) before the seeded draws begin. `methods` are method-name prefixes (exact names
    work too): `auth.test` is covered only when named."""

    seed: int = 0
    ratelimited: float = 0.0
    server_errors: float = 0.0
    unavailable: float = 0.0
    bad_gateway: float = 0.0
    resets: float = 0.0
    hangs: float = 0.0
    lost_errors: float = 0.0
    lost_resets: float = 0.0
    lost_hangs: float = 0.0
    script: tuple[Fault | None, ...] = ()
    hang_s: float = HANG_S
    retry_after_s: int = RETRY_AFTER_S
    methods: tuple[str, ...] = ("chat.",)

    def __post_init__(self) -> None:
        rates = [getattr(self, name) for name, _ in _RATES]
        if any(not 0.0 <= rate <= 1.0 for rate in rates) or self.chance > 1.0 + 1e-9:
            raise ValueError("BadDay rates are chances: each 0..1, together at most 1")
        if self.hang_s <= 0 or self.retry_after_s < 1:
            raise ValueError("BadDay needs hang_s > 0 and retry_after_s >= 1 (whole seconds)")
        if not self.methods or not all(self.methods):
            raise ValueError("BadDay needs method names or prefixes, e.g. ('chat.',)")
        if any(f is not None and not isinstance(f, Fault) for f in self.script):
            raise ValueError("BadDay.script holds Fault values or None")

    @classmethod
    def typical(cls, seed: int) -> BadDay:
        """A bad day as `backfill-bot standin slack --bad-day SEED` plays it: about one chat.*
        call in four misbehaves, one in sixteen after Slack acted."""
        return cls(
            seed=seed,
            ratelimited=0.08,
            server_errors=0.04,
            unavailable=0.03,
            bad_gateway=0.02,
            resets=0.03,
            hangs=0.02,
            lost_errors=0.02,
            lost_resets=0.02,
            lost_hangs=0.02,
        )

    @property
    def chance(self) -> float:
        """The chance that a covered call meets a fault (after the script)."""
        return sum(float(getattr(self, name)) for name, _ in _RATES)

    def covers(self, method: str) -> bool:
        return any(method.startswith(prefix) for prefix in self.methods)

    def faults(self) -> Iterator[Fault | None]:
        """The fault of each covered call in turn (None: answered normally), without end."""
        yield from self.script
        rng = random.Random(self.seed)
        while True:
            yield self._pick(rng.random())

    def first(self, calls: int) -> list[Fault | None]:
        """The faults the first `calls` covered calls will meet."""
        return list(itertools.islice(self.faults(), calls))

    def _pick(self, draw: float) -> Fault | None:
        edge = 0.0
        for name, fault in _RATES:
            edge += getattr(self, name)
            if draw < edge:
                return fault
        return None


class FaultPlan:
    """The faults a workspace's Web API shows: the fixed rhythm of `fail_every` and a `BadDay`.
    Both may be on; a call `fail_every` fails still uses up its BadDay draw, so turning one on
    never shifts the other's sequence."""

    def __init__(self) -> None:
        self.every = 0
        self.day: BadDay | None = None
        self._counted = 0
        self._draws: Iterator[Fault | None] = iter(())

    def fail_every(self, n: int) -> None:
        """Every `n`-th chat.* call answers 429, then the next such 500 (0: off)."""
        self.every = n

    def bad_day(self, day: BadDay | None) -> None:
        """Start `day` from its first draw (None: a good day again)."""
        self.day = day
        self._draws = iter(()) if day is None else day.faults()

    @property
    def hang_s(self) -> float:
        return self.day.hang_s if self.day is not None else HANG_S

    @property
    def retry_after_s(self) -> int:
        return self.day.retry_after_s if self.day is not None else RETRY_AFTER_S

    def next_fault(self, method: str) -> Fault | None:
        """The fault this call meets, if any (each call asks once, in arrival order)."""
        drawn = next(self._draws) if self.day is not None and self.day.covers(method) else None
        if self.every and method.startswith("chat."):
            self._counted += 1
            if self._counted % self.every == 0:
                alternate = (self._counted // self.every) % 2
                return Fault.RATELIMITED if alternate else Fault.SERVER_ERROR
        return drawn


# -- on the wire ------------------------------------------------------------------------------

_STATUS = {
    Fault.RATELIMITED: 429,
    Fault.SERVER_ERROR: 500,
    Fault.UNAVAILABLE: 503,
    Fault.BAD_GATEWAY: 502,
}
# Pages as an edge or a load balancer serves them: HTML, never Slack's JSON.
_PAGES = {
    503: "<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head>\n"
    "<body><h1>Service Unavailable</h1>\n<p>Slack is temporarily unable to handle this "
    "request. Please try again in a few moments.</p></body></html>\n",
    502: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n",
}
_POLL_S = 0.02  # how often a hanging call looks whether its caller has given up


async def misbehave(
    request: web.Request,
    fault: Fault,
    plan: FaultPlan,
    record: Callable[[int, str | None], None],
    answer: Callable[[], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """Meet `fault`: `answer()` makes the call (and records it) when the fault comes after Slack
    acted; otherwise `record(status, error)` notes what was sent (status 0: nothing)."""
    if fault in DONE_FIRST:
        made = await answer()
        if fault is Fault.LOST_ERROR:
            return web.json_response({"ok": False, "error": "internal_error"}, status=500)
        if fault is Fault.LOST_HANG:
            await _stall(request, plan.hang_s)
        _drop(request, reset=fault is Fault.LOST_RESET)
        return made  # aiohttp finds the connection gone and sends nothing
    status = _STATUS.get(fault, 0)
    error = {429: "ratelimited", 500: "internal_error"}.get(status)
    record(status, error)
    if status in _PAGES:
        return web.Response(status=status, text=_PAGES[status], content_type="text/html")
    if error is not None:
        headers = {"Retry-After": str(plan.retry_after_s)} if status == 429 else {}
        return web.json_response({"ok": False, "error": error}, status=status, headers=headers)
    if fault is Fault.HANG:
        await _stall(request, plan.hang_s)
    _drop(request, reset=fault is Fault.RESET)
    return web.Response(status=204)  # never sent: the connection is gone


async def _stall(request: web.Request, seconds: float) -> None:
    """Answer nothing for `seconds`, or until the caller gives up (nobody is left to answer, and
    the stand-in then stops without waiting out the hang)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while (left := until - loop.time()) > 0:
        if request.transport is None or request.transport.is_closing():
            return
        await asyncio.sleep(min(_POLL_S, left))


def _drop(request: web.Request, *, reset: bool) -> None:
    """Close the connection unanswered: a reset (RST, the caller reads ECONNRESET) or a plain
    close (FIN, the caller sees the server disconnect)."""
    transport = request.transport
    if transport is None:
        return
    if not reset:
        transport.close()
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:  # linger 0: closing sends RST instead of FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
