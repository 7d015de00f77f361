"""`python -m pipeline.food_delivery`: exit codes 0 / 1 (a run failed) / 2 (bad arguments)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.food_delivery.cli import main
from tests.spark.support import ORDERS_PER_DAY
from tests.support.paths import REPO as REPO_ROOT

ENV = {"FOOD_DELIVERY_ORDERS_PER_DAY": str(ORDERS_PER_DAY)}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "FOOD_DELIVERY_LINEAGE_URL": ""}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.food_delivery", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "example.nope", "--start", "2021-06-04", "--end", "2021-06-05"], "unknown DAG"),
        (["run", "example.etl_orders", "--start", "June", "--end", "2021-06-05"], "ISO 8601"),
        (
            ["run", "example.etl_orders_7_days", "--start", "2021-06-04", "--end", "2021-06-11"],
            "midnight UTC of a Sunday",
        ),
        (["run", "example.etl_orders", "--start", "2021-06-04"], "--end"),
        (["full", "--from", "2021-06-13", "--to", "2021-06-01"], "--from must not be after"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_a_message_before_spark_starts(
    args: list[str], message: str
) -> None:
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""


@pytest.mark.spark
def test_run_exit_codes(spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--warehouse", str(tmp_path), "--lineage-url", ""]
    interval = ["--start", "2021-06-04T00:00:00+00:00", "--end", "2021-06-05T00:00:00+00:00"]
    failing = main(
        ["run", "example.etl_orders", *interval, *common, "--fail-dates", "2021-06-04"], ENV
    )
    out, err = capsys.readouterr()
    assert failing == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: example.etl_orders [2021-06-04T00:00:00+00:00, ")
    assert 'relation "tmp_orders" does not exist' in err
    assert not (tmp_path / "orders").exists()

    assert main(["run", "example.etl_orders", *interval, *common], ENV) == 0
    out, err = capsys.readouterr()
    assert out.startswith("example.etl_orders [2021-06-04T00:00:00+00:00, 2021-06-05T00:00")
    assert "rows to orders/order_date=2021-06-04" in out
    assert err == ""

    # The zero-rows switch: the run succeeds, writes nothing and removes the day's partition.
    emptied = ["run", "example.etl_orders", *interval, *common, "--empty-dates", "2021-06-04"]
    assert main(emptied, ENV) == 0
    out, err = capsys.readouterr()
    assert ": 0 rows to no partitions in " in out
    assert err == ""
    assert not (tmp_path / "orders" / "order_date=2021-06-04").exists()


@pytest.mark.spark
def test_full_reports_every_run_and_fails_if_one_did(
    spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["full", "--from", "2021-06-06", "--to", "2021-06-07", "--warehouse", str(tmp_path)]
    env = {**ENV, "FOOD_DELIVERY_FAIL_DATES": "2021-06-06"}
    assert main([*args, "--lineage-url", ""], env) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith(
        "FAILED example.etl_orders [2021-06-06T00:00:00+00:00, 2021-06-07T00:00:00+00:00): "
    )
    assert "rows to orders/order_date=2021-06-07" in out.splitlines()[1]
    assert err == "error: 1 of 2 runs failed\n"
