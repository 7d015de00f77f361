"""The `real_airflow` fixture: one real Airflow 3.3.2 for the whole pytest run.

Installing (once, into var/airflow-venv) or starting it can fail on a machine without network
or PostgreSQL: the tests that need it are then skipped, except under CI=true, where they fail
so that CI cannot go green without running them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from harness import AIRFLOW_VERSION, RealAirflow, start_airflow


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def real_airflow() -> Iterator[RealAirflow]:
    """A running Airflow with the food_delivery DAGs (if present) and tests/airflow/dags."""
    with contextlib.ExitStack() as stack:
        try:
            airflow = stack.enter_context(start_airflow())
        except Exception as exc:
            reason = f"a real Airflow {AIRFLOW_VERSION} could not be installed or started: {exc}"
            if _in_ci():
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)
        yield airflow
