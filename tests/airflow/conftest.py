"""The `real_airflow` fixture: one real Airflow 3.3.2 for the whole pytest run, and
`openlineage_airflow`: one with OpenLineage on, reporting to a recorder, per test module.

Installing (once, into var/airflow-venv) or starting it can fail on a machine without network
or PostgreSQL: the tests that need it are then skipped, except under CI=true, where they fail
so that CI cannot go green without running them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import AIRFLOW_VERSION, RealAirflow, start_airflow
from openlineage_support import OpenLineageAirflow, running_recorder

TEST_DAGS = Path(__file__).resolve().parent / "dags"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _started(stack: contextlib.ExitStack, **options: Any) -> RealAirflow:
    try:
        return stack.enter_context(start_airflow(**options))
    except Exception as exc:
        reason = f"a real Airflow {AIRFLOW_VERSION} could not be installed or started: {exc}"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def real_airflow() -> Iterator[RealAirflow]:
    """A running Airflow with the food_delivery DAGs (if present) and tests/airflow/dags."""
    with contextlib.ExitStack() as stack:
        yield _started(stack)


@pytest.fixture(scope="module")
def openlineage_airflow() -> Iterator[OpenLineageAirflow]:
    """An Airflow with only tests/airflow/dags, its OpenLineage transport pointed at a recorder
    on 127.0.0.1 (a test points the recorder at its bot)."""
    with contextlib.ExitStack() as stack:
        recorder = stack.enter_context(running_recorder())
        airflow = _started(stack, dags_folders=[TEST_DAGS], openlineage_url=recorder.url)
        yield OpenLineageAirflow(airflow, recorder)
