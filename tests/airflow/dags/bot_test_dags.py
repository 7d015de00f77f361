"""Trivial DAGs for the Airflow clients' contract tests (tests/airflow/test_airflow_client.py on
Airflow 3, test_airflow2_client.py and test_airflow2_cap.py on Airflow 2.11).

`CronDataIntervalTimetable` is explicit: in Airflow 3 a plain cron string gives zero-length
data intervals, while the bot relies on each run covering [D, D + 1 day). `bot_test.long` runs
until it is stopped (a cancel sets its run to failed, which kills the task). `bot_test.clear_failed`
runs `extract >> load`, and `load` fails on its first try when the run's conf has
`"fail_load": true`: a run that fails in one task, once (tests/airflow/test_clear_failed_tasks.py
and the Retry failed tasks story of managed_story.py).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.timetables.interval import CronDataIntervalTimetable

try:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.operators.bash import BashOperator

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
    BashOperator(task_id="sleep", bash_command="sleep 5")

with DAG(
    dag_id="bot_test.idle",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    tags=["bot-test"],
):
    BashOperator(task_id="noop", bash_command="true")

with DAG(
    dag_id="bot_test.long",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    max_active_runs=2,
    tags=["bot-test"],
):
    BashOperator(task_id="sleep", bash_command="sleep 600")

# Rendered by Jinja: conf's flag and the try that is running (1 on the first).
FAIL_ONCE = (
    "if [ '{{ dag_run.conf.get(\"fail_load\", false) }}' = 'True' ] "
    "&& [ '{{ ti.try_number }}' = '1' ]; then echo 'load fails once, as asked'; exit 1; fi"
)

with DAG(
    dag_id="bot_test.clear_failed",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START,
    catchup=False,
    default_args={"retries": 0},
    tags=["bot-test"],
):
    BashOperator(task_id="extract", bash_command="true") >> BashOperator(
        task_id="load", bash_command=FAIL_ONCE
    )
