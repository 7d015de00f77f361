"""Tiny DAGs whose OpenLineage events the bot is tested on (tests/airflow/test_openlineage_real.py)
and that tests/airflow/capture_openlineage.py records into tests/fixtures/openlineage/.

- `ol_test.success`: two tasks that succeed.
- `ol_test.failing`: its second task raises `FAILING_MESSAGE`.
- `ol_test.parent` triggers `ol_test.child` (TriggerDagRunOperator injects OpenLineage parent
  info into the child run's conf, so the child's DAG run events carry a `parent` facet).
- `ol_test.manual`: "@daily", i.e. a CronTriggerTimetable in Airflow 3: a manual run has one
  logical date (data interval start == end).

The daily ones use `CronDataIntervalTimetable` as bot_test_dags.py does (a run covers
[D, D + 1 day)). No retries, so a failure is final at once. Keep FAILING_MESSAGE in step with
tests/airflow/test_openlineage_real.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

START = datetime(2021, 5, 1, tzinfo=UTC)
FAILING_MESSAGE = "load_orders: 3 of 120 rows have no order_id; refusing to load"
DEFAULTS = {"retries": 0, "owner": "orders-team"}


def daily() -> CronDataIntervalTimetable:
    return CronDataIntervalTimetable("0 0 * * *", timezone="UTC")


def count_rows() -> int:
    return 120


def load_orders() -> None:
    raise ValueError(FAILING_MESSAGE)


with DAG(
    dag_id="ol_test.success",
    schedule=daily(),
    start_date=START,
    catchup=False,
    default_args=DEFAULTS,
    tags=["bot-test", "openlineage"],
):
    extract = BashOperator(task_id="extract", bash_command="echo extracted")
    count = PythonOperator(task_id="count", python_callable=count_rows)
    extract >> count

with DAG(
    dag_id="ol_test.failing",
    schedule=daily(),
    start_date=START,
    catchup=False,
    default_args=DEFAULTS,
    tags=["bot-test", "openlineage"],
):
    prepare = BashOperator(task_id="prepare", bash_command="echo prepared")
    load = PythonOperator(task_id="load", python_callable=load_orders)
    prepare >> load

with DAG(
    dag_id="ol_test.parent",
    schedule=daily(),
    start_date=START,
    catchup=False,
    default_args=DEFAULTS,
    tags=["bot-test", "openlineage"],
):
    TriggerDagRunOperator(task_id="trigger_child", trigger_dag_id="ol_test.child")

with DAG(
    dag_id="ol_test.child",
    schedule="@daily",
    start_date=START,
    catchup=False,
    default_args=DEFAULTS,
    tags=["bot-test", "openlineage"],
):
    BashOperator(task_id="work", bash_command="echo child")

with DAG(
    dag_id="ol_test.manual",
    schedule="@daily",
    start_date=START,
    catchup=False,
    default_args=DEFAULTS,
    tags=["bot-test", "openlineage"],
):
    BashOperator(task_id="work", bash_command="echo manual")
