"""HTTP plumbing shared by the stand-in's two APIs: error answers in each API's shape, JSON
bodies, query parameters and datetime formats.

Airflow 2 (connexion) answers errors as RFC 7807 Problem JSON (`application/problem+json`, with
type/title/status/detail) and writes datetimes as `2021-05-24T00:00:00+00:00`; Airflow 3
(FastAPI) answers `{"detail": ...}` and pydantic's validation errors, and writes datetimes as
`2021-05-24T00:00:00Z`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from aiohttp import web

from standins.airflow.dags import utc
from standins.airflow.state import AirflowState

JsonDict = dict[str, Any]
STATE: web.AppKey[AirflowState] = web.AppKey("airflow_state", AirflowState)
USER: web.RequestKey[str] = web.RequestKey("airflow_user", str)
V1_DOCS = "https://airflow.apache.org/docs/apache-airflow/2.10.5/stable-rest-api-ref.html"
_V1_ERROR_NAMES = {
    400: ("BadRequest", "Bad Request"),
    401: ("Unauthenticated", "Unauthorized"),
    403: ("PermissionDenied", "Forbidden"),
    404: ("NotFound", "Not Found"),
    405: ("MethodNotAllowed", "Method Not Allowed"),
    409: ("AlreadyExists", "Conflict"),
    500: ("Unknown", "Internal Server Error"),
}
_MISSING = object()


class HttpError(Exception):
    """An error answer: a JSON body (or plain text when `text` is set)."""

    def __init__(
        self,
        status: int,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> None:
        super().__init__(status)
        self.status, self.body, self.content_type = status, body, content_type
        self.headers, self.text = dict(headers or {}), text

    def response(self) -> web.Response:
        if self.text is not None:
            return web.Response(status=self.status, text=self.text, headers=self.headers)
        return web.Response(
            status=self.status,
            body=json.dumps(self.body).encode(),
            content_type=self.content_type,
            headers=self.headers,
        )


def reply(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


# -- error shapes ---------------------------------------------------------------------------------


def problem(status: int, title: str | None = None, detail: str | None = None) -> HttpError:
    """Airflow 2's Problem JSON (`detail` is left out when Airflow sends none)."""
    name, default_title = _V1_ERROR_NAMES[status]
    body: JsonDict = {
        "type": f"{V1_DOCS}#section/Errors/{name}",
        "title": title or default_title,
        "status": status,
    }
    if detail is not None:
        body["detail"] = detail
    return HttpError(status, body, content_type="application/problem+json")


def detail(status: int, message: Any) -> HttpError:
    """Airflow 3's HTTPException answer."""
    return HttpError(status, {"detail": message})


def invalid(*errors: JsonDict) -> HttpError:
    """Airflow 3's RequestValidationError answer (pydantic errors)."""
    return HttpError(422, {"detail": list(errors)})


def pydantic_error(kind: str, loc: Sequence[str | int], msg: str, value: Any) -> JsonDict:
    return {"type": kind, "loc": list(loc), "msg": msg, "input": value}


# -- datetimes ------------------------------------------------------------------------------------


def iso_v1(value: datetime | None) -> str | None:
    return None if value is None else utc(value).isoformat()


def iso_v2(value: datetime | None) -> str | None:
    return None if value is None else utc(value).isoformat().replace("+00:00", "Z")


def parse_datetime(raw: str) -> datetime | None:
    """An ISO 8601 date or datetime (naive read as UTC), or None when it is not one."""
    parsed = _parse_iso(raw)
    return None if parsed is None else utc(parsed)


def is_naive(raw: str) -> bool:
    """Whether `raw` is a datetime without a UTC offset (Airflow refuses those where it asks
    for an aware one: `AwareDatetime`, Airflow 2's `validate_istimezone`)."""
    parsed = _parse_iso(raw)
    return parsed is not None and parsed.tzinfo is None


def _parse_iso(raw: str) -> datetime | None:
    text = raw.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


# -- JSON bodies ----------------------------------------------------------------------------------


async def json_body(request: web.Request) -> tuple[Any, str | None]:
    """(parsed body, None), or (None, "empty") / (None, the JSON error) when there is none."""
    raw = await request.read()
    if not raw.strip():
        return None, "empty"
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, str(exc)


async def body_v2(request: web.Request) -> Any:
    """The JSON body of an Airflow 3 request; 422 like FastAPI when missing or malformed."""
    body, error = await json_body(request)
    if error == "empty":
        raise invalid(pydantic_error("missing", ["body"], "Field required", None))
    if error is not None:
        raise invalid(
            pydantic_error("json_invalid", ["body", 0], "JSON decode error", {})
            | {"ctx": {"error": error}}
        )
    return body


class V2Body:
    """Checks a JSON object against a pydantic model's fields, collecting pydantic's errors."""

    def __init__(self, body: Any, extra_forbidden: bool = True) -> None:
        self.body = body
        self.errors: list[JsonDict] = []
        self.values: JsonDict = {}
        self._extra_forbidden = extra_forbidden
        self._known: set[str] = set()
        if not isinstance(body, dict):
            self.errors.append(
                pydantic_error("model_attributes_type", ["body"],
                               "Input should be a valid dictionary or object to extract fields "
                               "from", body)
            )  # fmt: skip

    def field(
        self,
        name: str,
        kind: str,
        *,
        default: Any = _MISSING,
        nullable: bool = False,
        choices: Sequence[str] = (),
        max_length: int | None = None,
    ) -> None:
        self._known.add(name)
        if not isinstance(self.body, dict):
            return
        if name not in self.body:
            if default is _MISSING:
                self.errors.append(
                    pydantic_error("missing", ["body", name], "Field required", self.body)
                )
            else:
                self.values[name] = default
            return
        value = self.body[name]
        if value is None and nullable:
            self.values[name] = None
            return
        checked = _CHECKS[kind](value, choices)
        if max_length is not None and isinstance(checked, str) and len(checked) > max_length:
            error = pydantic_error(
                "string_too_long",
                ["body", name],
                f"String should have at most {max_length} characters",
                value,
            )
            self.errors.append(error | {"ctx": {"max_length": max_length}})
            return
        if isinstance(checked, _Bad):
            error = pydantic_error(checked.kind, ["body", name], checked.msg, value)
            if choices:
                error["ctx"] = {"expected": _expected(choices)}
            self.errors.append(error)
        else:
            self.values[name] = checked

    def result(self) -> JsonDict:
        if isinstance(self.body, dict) and self._extra_forbidden:
            for name, value in self.body.items():
                if name not in self._known:
                    self.errors.append(
                        pydantic_error("extra_forbidden", ["body", name],
                                       "Extra inputs are not permitted", value)
                    )  # fmt: skip
        if self.errors:
            raise invalid(*self.errors)
        return self.values


class _Bad:
    def __init__(self, kind: str, msg: str) -> None:
        self.kind, self.msg = kind, msg


def _expected(choices: Sequence[str]) -> str:
    quoted = [f"'{c}'" for c in choices]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" or {quoted[-1]}"


def _check_str(value: Any, _: Sequence[str]) -> Any:
    return (
        value if isinstance(value, str) else _Bad("string_type", "Input should be a valid string")
    )


def _check_bool(value: Any, _: Sequence[str]) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    lowered = value.lower() if isinstance(value, str) else None
    if lowered in ("true", "1", "yes", "on", "t", "y"):
        return True
    if lowered in ("false", "0", "no", "off", "f", "n"):
        return False
    return _Bad("bool_parsing", "Input should be a valid boolean, unable to interpret input")


def _check_int(value: Any, _: Sequence[str]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return _Bad(
        "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
    )


def _check_datetime(value: Any, _: Sequence[str]) -> Any:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        return _Bad("datetime_from_date_parsing", "Input should be a valid datetime or date")
    return parsed


def _check_aware_datetime(value: Any, choices: Sequence[str]) -> Any:
    if isinstance(value, str) and is_naive(value):
        return _Bad("timezone_aware", "Input should have timezone info")
    return _check_datetime(value, choices)


def _check_str_list(value: Any, _: Sequence[str]) -> Any:
    """A list of task ids, or of [task id, map index] pairs (`list[str | tuple[str, int]]`),
    each pair read as its task id: the stand-in maps no task."""
    if not isinstance(value, list):
        return _Bad("list_type", "Input should be a valid list")
    found = []
    for item in value:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[1], int):
            item = item[0]
        if not isinstance(item, str):
            return _Bad("string_type", "Input should be a valid string")
        found.append(item)
    return found


def _check_dict(value: Any, _: Sequence[str]) -> Any:
    return (
        value
        if isinstance(value, dict)
        else _Bad("dict_type", "Input should be a valid dictionary")
    )


def _check_enum(value: Any, choices: Sequence[str]) -> Any:
    if value in choices:
        return value
    return _Bad("enum", f"Input should be {_expected(choices)}")


_CHECKS: dict[str, Callable[[Any, Sequence[str]], Any]] = {
    "str": _check_str,
    "bool": _check_bool,
    "int": _check_int,
    "datetime": _check_datetime,
    "aware_datetime": _check_aware_datetime,
    "str_list": _check_str_list,
    "dict": _check_dict,
    "enum": _check_enum,
}


# -- query parameters -----------------------------------------------------------------------------


def query_int_v2(request: web.Request, name: str, default: int, cap: int | None = None) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid(
            pydantic_error("int_parsing", ["query", name],
                           "Input should be a valid integer, unable to parse string as an integer",
                           raw)
        ) from None  # fmt: skip
    if value < 0:
        error = pydantic_error(
            "greater_than_equal", ["query", name], "Input should be greater than or equal to 0", raw
        )
        raise invalid(error | {"ctx": {"ge": 0}})
    return min(value, cap) if cap is not None else value


def query_datetime_v2(request: web.Request, name: str) -> datetime | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    parsed = parse_datetime(raw)
    if parsed is None:
        raise invalid(
            pydantic_error("datetime_from_date_parsing", ["query", name],
                           "Input should be a valid datetime or date", raw)
        )  # fmt: skip
    return parsed


def sort_key(
    order_by: Sequence[str],
    allowed: Mapping[str, Callable[[Any], Any]],
    error: Callable[[str], HttpError],
) -> Callable[[list[Any]], list[Any]]:
    """A sorter for `order_by` entries ("-" prefix: descending); unknown attributes raise."""
    keys: list[tuple[Callable[[Any], Any], bool]] = []
    for entry in order_by:
        name = entry.lstrip("-")
        if name not in allowed:
            raise error(name)
        keys.append((allowed[name], entry.startswith("-")))

    def apply(items: list[Any]) -> list[Any]:
        for getter, descending in reversed(keys):
            items = sorted(items, key=lambda item: _nulls_last(getter(item)), reverse=descending)
        return items

    return apply


def _nulls_last(value: Any) -> tuple[bool, Any]:
    if isinstance(value, dict):
        value = json.dumps(value, sort_keys=True)
    return (value is None, value if value is not None else 0)


def ordering_error(name: str) -> str:
    return f"Ordering with '{name}' is disallowed or the attribute does not exist on the model"
