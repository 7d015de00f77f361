"""Asset DAGs for tests/airflow/test_clear_failed_tasks.py and test_managed_backfills.py
(Airflow 3 only: the Airflow 2 harness loads bot_test_dags.py alone, where
`bot_test.clear_failed` is).

- `bot_test.asset_producer` (daily) produces the assets `bot_test.orders` and
  `bot_test.items`; `bot_test.asset_consumer` is scheduled on `bot_test.orders`. Their URIs'
  `x-` scheme keeps them as written (Airflow normalizes other URIs, e.g. adds a trailing "/").
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Asset

START = datetime(2021, 5, 1, tzinfo=UTC)
ORDERS = Asset(name="bot_test.orders", uri="x-bot-test://orders")
ITEMS = Asset(name="bot_test.items", uri="x-bot-test://items")
with DAG(
    dag_id="bot_test.asset_producer",
    schedule="@daily",
    start_date=START,
    catchup=False,
    tags=["bot-test"],
):
    BashOperator(task_id="publish", bash_command="true", outlets=[ORDERS, ITEMS])

with DAG(
    dag_id="bot_test.asset_consumer",
    schedule=[ORDERS],
    start_date=START,
    catchup=False,
    tags=["bot-test"],
):
    BashOperator(task_id="report", bash_command="true")
