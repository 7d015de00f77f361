"""Trivial DAGs for the Airflow client's contract tests (tests/airflow/test_airflow_client.py).

`CronDataIntervalTimetable` is explicit: in Airflow 3 a plain cron string gives zero-length
data intervals, while the bot relies on each run covering [D, D + 1 day).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

START = datetime(2021, 5, 1, tzinfo=UTC)

with DAG(
    dag_id="bot_test.quick",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    tags=["bot-test"],
):
    BashOperator(task_id="sleep", bash_command="sleep 1")

with DAG(
    dag_id="bot_test.slow",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    tags=["bot-test"],
):
    BashOperator(task_id="sleep", bash_command="sleep 8")

with DAG(
    dag_id="bot_test.idle",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    tags=["bot-test"],
):
    BashOperator(task_id="noop", bash_command="true")
