"""Error answers in the shapes Marquez 0.51.1's Dropwizard/Jersey stack gives them.

- a `WebApplicationException` (NotFoundException and friends) → its status, body
  `{"code":…, "message": <its message>}`; Jersey's own (unknown route, a query/path parameter it
  cannot convert) have no message of their own: `"HTTP 404 Not Found"` (Dropwizard's
  LoggingExceptionMapper);
- a Bean Validation failure on a query parameter → 400 `{"errors": [...]}`;
- any other exception in a resource (IllegalArgumentException, NPE, IllegalStateException …)
  → 500 `"There was an error processing your request. It has been logged (ID …)."`.
"""

from __future__ import annotations

import secrets

from standins.marquez.events import JsonDict

__all__ = ["ApiError", "not_found", "param_not_found", "server_error", "violation", "web_error"]


class ApiError(Exception):
    """An error answer; `body=None` answers with an empty body."""

    def __init__(self, status: int, body: JsonDict | None) -> None:
        super().__init__(status)
        self.status, self.body = status, body


def web_error(status: int, message: str) -> ApiError:
    return ApiError(status, {"code": status, "message": message})


def not_found(message: str) -> ApiError:
    """A NotFoundException with Marquez's text (`Job 'x' not found.`)."""
    return web_error(404, message)


def param_not_found() -> ApiError:
    """Jersey's ParamException for a @QueryParam/@PathParam it cannot convert: 404."""
    return web_error(404, "HTTP 404 Not Found")


def violation(message: str) -> ApiError:
    """JerseyViolationExceptionMapper: 400 with the constraint messages."""
    return ApiError(400, {"errors": [message]})


def server_error() -> ApiError:
    """LoggingExceptionMapper's answer to an unmapped exception (the ID is random per error)."""
    return web_error(
        500,
        "There was an error processing your request. It has been logged "
        f"(ID {secrets.token_hex(8)}).",
    )
