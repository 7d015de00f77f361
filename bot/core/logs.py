"""How the process logs: one handler on the root logger writing text or JSON lines, and the
loggers that would say something on every tick kept quiet.

Log lines that report an event carry its ids as record attributes (`extra={"request_id": …}`):
text shows the message, JSON shows the message and every such field, one object per line.

Outside text reaches log lines (DAG ids from the unauthenticated `POST /api/v1/lineage`, error
bodies), and an operator reads them on a terminal: neither format lets a character through that
a terminal acts on (a newline forging a line, an ANSI escape clearing the screen, a bidi override
reversing what follows). Text writes them as Python escapes, JSON as `\\uXXXX` escapes.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from types import TracebackType
from typing import Literal, TextIO, TypeAlias

__all__ = ["TEXT_FORMAT", "JsonFormatter", "LogFormat", "TextFormatter", "configure", "escaped"]

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Loggers that speak on every tick or request, and the least level they are let say (all of it
# when debugging): APScheduler's INFO "Running job …" / "… executed successfully" for each
# poll, and its WARNING "skipped: maximum number of running instances reached" for each tick
# that a slow poll overlaps (one poll at a time is the design: the lag shows on /metrics);
# aiohttp's access line for each request (a Prometheus scrape or a probe every few seconds).
PER_TICK_LOGGERS = {"apscheduler": logging.ERROR, "aiohttp.access": logging.WARNING}
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
_CORE = ("time", "level", "logger", "message")
# What `Formatter.formatException` takes (typeshed's private `logging._SysExcInfoType`).
_ExcInfo: TypeAlias = (
    tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
)


def escaped(text: str) -> str:
    """`text` with every character that is not printable (`str.isprintable`) written as its
    Python escape: newlines as `\\n`, ESC as `\\x1b`, a bidi override as `\\u202e`. Printable
    text, non-ASCII letters included, is left as it is."""
    if text.isprintable():  # nearly every line: no copy
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _lines_escaped(text: str) -> str:
    # A traceback keeps its line breaks (they are its layout), and loses the rest.
    return "\n".join(escaped(line) for line in text.split("\n"))


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, the message kept on one line (a traceback follows on its own lines), no
    character a terminal would act on let through (see `escaped`)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        # The stock format caches the traceback text on the record, which every handler shares:
        # format a copy, so a raw traceback another handler cached is not reused (nor ours kept).
        copy = logging.makeLogRecord(record.__dict__)
        if copy.exc_info:
            copy.exc_text = None
        elif copy.exc_text:
            copy.exc_text = _lines_escaped(copy.exc_text)
        return super().format(copy)

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(
            logging.makeLogRecord({**record.__dict__, "message": escaped(record.message)})
        )

    def formatException(self, ei: _ExcInfo) -> str:
        return _lines_escaped(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _lines_escaped(super().formatStack(stack_info))


def _json_escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # JSON escapes only UTF-16 code units: a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the fields
    given with `extra=`, and the traceback as `exception` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in _CORE and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: a field the encoder does not know (a datetime, an enum) is still logged
        line = json.dumps(entry, ensure_ascii=False, default=str)
        # json.dumps escapes the C0 controls (ESC, newlines) but, with ensure_ascii=False, lets
        # DEL, the C1 controls (0x9b is a CSI to some terminals), bidi overrides and line
        # separators through as they are. Outside JSON strings the line holds printable ASCII
        # only, so escaping the rest leaves the same JSON, decoding to the same values.
        if line.isprintable():
            return line
        return "".join(c if c.isprintable() else _json_escape(c) for c in line)


class _BotHandler(logging.StreamHandler[TextIO]):
    """The handler `configure` installs (and replaces when called again)."""


def configure(level: int, *, fmt: LogFormat = "text", stream: TextIO | None = None) -> None:
    """Configure the root logger at start-up (`bot/cli.py`): `level`, `fmt` lines to `stream`
    (stderr). Calling it again replaces what it installed, nothing else."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _BotHandler)]:
        root.removeHandler(handler)
    handler = _BotHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # chatty about its plugins
    for name, least in PER_TICK_LOGGERS.items():
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG else least)
