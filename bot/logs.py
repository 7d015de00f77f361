"""How the process logs: one handler on the root logger writing text or JSON lines, and the
loggers that would say something on every tick kept quiet.

Log lines that report an event carry its ids as record attributes (`extra={"request_id": …}`):
text shows the message, JSON shows the message and every such field, one object per line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

__all__ = ["TEXT_FORMAT", "JsonFormatter", "LogFormat", "TextFormatter", "configure"]

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


def _one_line(text: str) -> str:
    # A newline in outside text (a DAG id, an error message) must not forge another log line.
    return text.replace("\r", "\\r").replace("\n", "\\n")


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, the message kept on one line (a traceback follows on its own lines)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(
            logging.makeLogRecord({**record.__dict__, "message": _one_line(record.message)})
        )


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
        return json.dumps(entry, ensure_ascii=False, default=str)


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
