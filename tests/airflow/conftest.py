"""Fixtures for the tests against a real Airflow: `real_airflow` (3.3.2) and `real_airflow2`
(2.11.2), each with the food_delivery DAGs and tests/airflow/dags, started once per pytest run;
`openlineage_airflow`: an Airflow 3 with OpenLineage on, reporting to a recorder, per module;
`pipeline_marquez`: the Marquez stand-in holding the pipeline's three weeks with failed days.

At most one of `real_airflow` and `real_airflow2` runs at a time (on 2 cores an idle Airflow
still costs a scheduler loop and DAG parsing): asking for the other stops the first. Test files
are grouped by version, so each starts once per run.

Installing (once, into var/) or starting an Airflow can fail on a machine without network or
PostgreSQL: the tests that need it are then skipped, except under CI=true, where they fail so
that CI cannot go green without running them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from pipeline.food_delivery.lineage import history_events
from standins.marquez.server import StandInServer, running_standin
from tests.airflow.harness import AIRFLOW2, AIRFLOW3, AirflowKind, RealAirflow, start_airflow
from tests.airflow.openlineage import OpenLineageAirflow, running_recorder

TEST_DAGS = Path(__file__).resolve().parent / "dags"
FAILED_DAYS = [date(2021, 6, 4), date(2021, 6, 5), date(2021, 6, 6)]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _started(
    stack: contextlib.ExitStack, kind: AirflowKind = AIRFLOW3, **options: Any
) -> RealAirflow:
    try:
        return stack.enter_context(start_airflow(kind=kind, **options))
    except Exception as exc:
        reason = f"a real Airflow {kind.version} could not be installed or started: {exc}"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


class _OneAirflow:
    """The session's shared Airflow: started on first use, replaced when another version is
    asked for, stopped at the end of the session."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._running: RealAirflow | None = None
        self._failed: dict[str, str] = {}

    def get(self, kind: AirflowKind) -> RealAirflow:
        if self._running is not None and self._running.kind == kind:
            return self._running
        self.close()
        if kind.version in self._failed:  # one try per session: a second costs the same again
            message = self._failed[kind.version]
            if _in_ci():
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
        try:
            self._running = _started(self._stack, kind)
        except BaseException as exc:
            self._failed[kind.version] = str(exc)
            raise
        return self._running

    def close(self) -> None:
        self._running = None
        self._stack.close()


@pytest.fixture(scope="session")
def _one_airflow() -> Iterator[_OneAirflow]:
    shared = _OneAirflow()
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def real_airflow(_one_airflow: _OneAirflow) -> RealAirflow:
    """A running Airflow 3.3.2 with the food_delivery DAGs and tests/airflow/dags."""
    return _one_airflow.get(AIRFLOW3)


@pytest.fixture
def real_airflow2(_one_airflow: _OneAirflow) -> RealAirflow:
    """A running Airflow 2.11.2 with the food_delivery DAGs and tests/airflow/dags's
    bot_test_dags.py, its stable REST API (/api/v1) behind basic auth."""
    return _one_airflow.get(AIRFLOW2)


@pytest.fixture(scope="module")
def openlineage_airflow(_one_airflow: _OneAirflow) -> Iterator[OpenLineageAirflow]:
    """An Airflow with only tests/airflow/dags, its OpenLineage transport pointed at a recorder
    on 127.0.0.1 (a test points the recorder at its bot). The shared Airflow is stopped first."""
    _one_airflow.close()
    with contextlib.ExitStack() as stack:
        recorder = stack.enter_context(running_recorder())
        airflow = _started(stack, dags_folders=[TEST_DAGS], openlineage_url=recorder.url)
        yield OpenLineageAirflow(airflow, recorder)


@pytest.fixture
async def pipeline_marquez() -> AsyncIterator[StandInServer]:
    """Marquez holding what the pipeline reported for three weeks, with the failed days."""
    async with running_standin() as server:
        for event in history_events(date(2021, 5, 24), date(2021, 6, 13), fail_dates=FAILED_DAYS):
            server.state.ingest(event)
        yield server
