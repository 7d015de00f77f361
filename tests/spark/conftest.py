"""Fixtures for the PySpark pipeline tests: one SparkSession for the whole pytest process, and
the seed's story played once for real.

Spark costs seconds to start and every run costs a fraction of one, so the expensive part (a
clean full recompute, the same three weeks with three failed order loads, then the backfill
that repairs them) runs once per session in `story` and the tests check its snapshots.
"""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

from pipeline.food_delivery.session import shared_session
from tests.spark.support import Story, play_story

# A test session is short: the JVM's quick compiler alone gets Spark warm sooner (about a third
# less time here). Set before any test starts the shared session.
os.environ.setdefault("FOOD_DELIVERY_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    """The process-wide session (the bot's executor tests share it); never stopped here."""
    return shared_session()


@pytest.fixture(scope="session")
def story(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Story:
    return play_story(spark, tmp_path_factory)
