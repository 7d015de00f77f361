"""Query and path parameters as Jersey and Dropwizard convert and validate them for Marquez 0.51.1.

Conversion comes first, for every parameter: a plain `int` that is not one (Jersey's
PrimitiveValueOfExtractor: `Integer.valueOf` of the raw text, a blank value means the default)
and a path parameter whose type's constructor throws (NamespaceName's pattern, RunId's UUID) are
Jersey ParamExceptions, 404 `HTTP 404 Not Found`. Then Bean Validation (`@Min(0)`, `@NotNull`,
`@NotBlank`, `@Pattern`): 400 `{"errors": [...]}`. Enums go through Dropwizard's
FuzzyEnumParamConverter: 400 `{"code":400,"message":"… must be one of […]"}`.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

from aiohttp import web

from standins.marquez.errors import ApiError, param_not_found, server_error, violation, web_error
from standins.marquez.events import is_valid_namespace

__all__ = [
    "choice",
    "day",
    "java_int",
    "namespace_param",
    "require_min",
    "run_id_param",
    "zoned",
]

_JAVA_INT = re.compile(r"[+-]?\d+")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_YYYY_MM_DD = r"^\d{4}-\d{2}-\d{2}$"  # SearchResource.java#L39


def java_int(request: web.Request, name: str, default: int) -> int:
    """An `int` @QueryParam with a @DefaultValue."""
    raw = request.query.get(name)
    if raw is None or not raw.strip():
        return default
    if not _JAVA_INT.fullmatch(raw) or not _INT_MIN <= int(raw) <= _INT_MAX:
        raise param_not_found()
    return int(raw)


def require_min(*values: tuple[str, int]) -> None:
    """`@Min(0)` on each (name, value), all violations reported together."""
    errors = [
        f"query param {name} must be greater than or equal to 0" for name, v in values if v < 0
    ]
    if errors:
        raise ApiError(400, {"errors": errors})


def choice(raw: str | None, name: str, allowed: tuple[str, ...]) -> str | None:
    """FuzzyEnumParamConverter: case-insensitive, '-' and ' ' read as '_'; blank is null."""
    if raw is None or not raw.strip():
        return None
    value = raw.strip().upper().replace("-", "_").replace(" ", "_")
    if value not in allowed:
        raise web_error(400, f"{name} must be one of [{', '.join(allowed)}]")
    return value


def zoned(request: web.Request, name: str, default: datetime) -> datetime:
    """Dropwizard's ZonedDateTimeParam (`ZonedDateTime.parse`, an offset or zone required)."""
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise web_error(
            400, f"query param {name} is invalid: Text '{raw}' could not be parsed at index 0"
        )
    return value.astimezone(UTC)


def day(request: web.Request, name: str) -> datetime | None:
    """`@Pattern(regexp = YYYY_MM_DD)` (400), then `LocalDate.parse` (an impossible date throws
    DateTimeParseException in the resource: 500); compared as midnight UTC."""
    raw = request.query.get(name)
    if raw is None:
        return None
    if not re.fullmatch(_YYYY_MM_DD.strip("^$"), raw):
        raise violation(f'query param {name} must match "{_YYYY_MM_DD}"')
    try:
        return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise server_error() from None


def namespace_param(request: web.Request) -> str:
    """`@PathParam("namespace") NamespaceName`: outside its pattern, Jersey answers 404."""
    name = request.match_info["namespace"]
    if not is_valid_namespace(name):
        raise param_not_found()
    return name


def run_id_param(request: web.Request) -> uuid.UUID:
    """`@PathParam("id") RunId`: Utils.toUuid (36 characters, a UUID) or 404."""
    raw = request.match_info["id"]
    if not _UUID.fullmatch(raw):
        raise param_not_found()
    return uuid.UUID(raw)
