"""Airflow DAGs of the food_delivery example: one DAG per job, one `spark_job` task each.

Works on Airflow 2.11 and 3.x (tests/airflow runs them on 2.11.2 and 3.3.2). Each task runs
the job as a subprocess,
`python -m pipeline.food_delivery run <dag> --start <interval start> --end <interval end>`,
so this file imports nothing of the pipeline (Airflow's environment needs no PySpark).
Environment, read when the file is parsed:

- FOOD_DELIVERY_PYTHON: the interpreter with PySpark (default: `python3` on the task's PATH)
- FOOD_DELIVERY_PYTHONPATH: where `pipeline` is importable from (default: this repository)
- FOOD_DELIVERY_WAREHOUSE, FOOD_DELIVERY_LINEAGE_URL, SPARK_MASTER, ...: passed through to the
  task (the warehouse defaults to `var/warehouse` of this repository).

Explicit CronDataIntervalTimetable schedules make each run's data interval one whole period
([D, D+1) or Sunday to Sunday) on Airflow 3 too, where a plain cron string would give
zero-length intervals.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from airflow.timetables.interval import CronDataIntervalTimetable

try:
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator
try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

REPO_ROOT = Path(__file__).resolve().parents[3]
START_DATE = datetime(2021, 5, 24, tzinfo=UTC)
DAILY, WEEKLY = "0 0 * * *", "0 0 * * 0"

# dag_id: (cron, owning team, description); mirrors pipeline/food_delivery/catalog.py.
PIPELINE: dict[str, tuple[str, str, str]] = {
    "example.etl_orders": (DAILY, "orders", "Loads newly placed orders daily."),
    "example.etl_orders_7_days": (WEEKLY, "orders", "Loads newly placed orders weekly."),
    "example.etl_delivery_7_days": (WEEKLY, "logistics", "Loads new deliveries for the week."),
    "example.delivery_times_7_days": (
        WEEKLY,
        "logistics",
        "Determine weekly top delivery times by restaurant.",
    ),
    "example.orders_popular_day_of_week": (
        WEEKLY,
        "analytics",
        "Determines the popular day of week orders are placed.",
    ),
}


def task_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Variables the task adds to the environment it inherits (append_env=True)."""
    pythonpath = environ.get("FOOD_DELIVERY_PYTHONPATH") or str(REPO_ROOT)
    inherited = environ.get("PYTHONPATH")
    env = {"PYTHONPATH": os.pathsep.join([pythonpath, inherited] if inherited else [pythonpath])}
    if not environ.get("FOOD_DELIVERY_WAREHOUSE"):
        env["FOOD_DELIVERY_WAREHOUSE"] = str(REPO_ROOT / "var" / "warehouse")
    return env


def bash_command(dag_id: str, python: str) -> str:
    return (
        f"{shlex.quote(python)} -m pipeline.food_delivery run {shlex.quote(dag_id)}"
        " --start '{{ data_interval_start.isoformat() }}'"
        " --end '{{ data_interval_end.isoformat() }}'"
    )


def build_dag(dag_id: str, cron: str, team: str, description: str) -> DAG:
    with DAG(
        dag_id=dag_id,
        description=description,
        schedule=CronDataIntervalTimetable(cron, timezone="UTC"),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=3,
        default_args={"owner": team, "retries": 0},
        tags=["food_delivery", f"team:{team}"],
    ) as dag:
        BashOperator(
            task_id="spark_job",
            bash_command=bash_command(dag_id, os.environ.get("FOOD_DELIVERY_PYTHON") or "python3"),
            env=task_env(os.environ),
            append_env=True,
        )
    return dag


for _dag_id, (_cron, _team, _description) in PIPELINE.items():
    globals()[_dag_id.replace(".", "_")] = build_dag(_dag_id, _cron, _team, _description)
