"""What the Marquez and Airflow stand-in spec checks share: the response shape openapi-core
validates, and its errors as readable lines."""

from __future__ import annotations

from dataclasses import dataclass

from werkzeug.datastructures import Headers


@dataclass
class SpecResponse:
    status_code: int
    data: bytes
    content_type: str
    headers: Headers


def spec_errors(exc: BaseException) -> list[str]:
    found = getattr(exc, "schema_errors", None) or getattr(exc.__cause__, "schema_errors", None)
    return [f"{list(e.absolute_path)}: {e.message}" for e in found or []] or [repr(exc)]
