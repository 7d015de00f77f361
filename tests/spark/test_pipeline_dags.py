"""The Airflow DAG file, loaded against a recording stand-in of the few Airflow classes it uses
(real Airflow is too heavy for this suite; tests/airflow runs these DAGs on Airflow 3)."""

from __future__ import annotations

import runpy
import sys
import types
from typing import Any, ClassVar

import pytest

from pipeline.food_delivery.catalog import DAILY, JOBS
from tests.support.paths import REPO as REPO_ROOT

DAG_FILE = REPO_ROOT / "pipeline" / "food_delivery" / "dags" / "food_delivery_dags.py"
CRON = {DAILY: "0 0 * * *", "0 0 * * 0": "0 0 * * 0"}


class Recorder:
    dags: ClassVar[list[Recorder]] = []
    current: ClassVar[Recorder | None] = None

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.tasks: list[dict[str, Any]] = []

    def __enter__(self) -> Recorder:
        Recorder.current = self
        Recorder.dags.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        Recorder.current = None


class Timetable:
    def __init__(self, cron: str, timezone: str) -> None:
        self.cron, self.timezone = cron, timezone


def bash_operator(**kwargs: Any) -> None:
    assert Recorder.current is not None, "task outside its DAG"
    Recorder.current.tasks.append(kwargs)


@pytest.fixture
def load_dags(monkeypatch: pytest.MonkeyPatch) -> Any:
    modules = {
        "airflow": types.ModuleType("airflow"),
        "airflow.sdk": types.ModuleType("airflow.sdk"),
        "airflow.timetables": types.ModuleType("airflow.timetables"),
        "airflow.timetables.interval": types.ModuleType("airflow.timetables.interval"),
        "airflow.providers": types.ModuleType("airflow.providers"),
        "airflow.providers.standard": types.ModuleType("airflow.providers.standard"),
        "airflow.providers.standard.operators": types.ModuleType("x"),
        "airflow.providers.standard.operators.bash": types.ModuleType("x"),
    }
    modules["airflow.sdk"].DAG = Recorder  # type: ignore[attr-defined]
    modules["airflow.timetables.interval"].CronDataIntervalTimetable = Timetable  # type: ignore[attr-defined]
    modules["airflow.providers.standard.operators.bash"].BashOperator = bash_operator  # type: ignore[attr-defined]
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(Recorder, "dags", [])

    def load(**env: str) -> list[Recorder]:
        for name in ("FOOD_DELIVERY_PYTHON", "FOOD_DELIVERY_PYTHONPATH", "PYTHONPATH",
                     "FOOD_DELIVERY_WAREHOUSE"):  # fmt: skip
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        runpy.run_path(str(DAG_FILE))
        return list(Recorder.dags)

    return load


def test_one_dag_per_job_with_interval_timetables(load_dags: Any) -> None:
    dags = load_dags()
    assert [d.kwargs["dag_id"] for d in dags] == list(JOBS)
    for dag in dags:
        job = JOBS[dag.kwargs["dag_id"]]
        kwargs = dag.kwargs
        assert (kwargs["schedule"].cron, kwargs["schedule"].timezone) == (CRON[job.schedule], "UTC")
        assert kwargs["start_date"].isoformat() == "2021-05-24T00:00:00+00:00"
        assert kwargs["catchup"] is False
        assert kwargs["max_active_runs"] == 3
        assert kwargs["default_args"] == {"owner": job.team, "retries": 0}
        [task] = dag.tasks
        assert task["task_id"] == "spark_job"
        assert task["append_env"] is True
        assert task["bash_command"] == (
            f"python3 -m pipeline.food_delivery run {job.name}"
            " --start '{{ data_interval_start.isoformat() }}'"
            " --end '{{ data_interval_end.isoformat() }}'"
        )
        assert task["env"] == {
            "PYTHONPATH": str(REPO_ROOT),
            "FOOD_DELIVERY_WAREHOUSE": str(REPO_ROOT / "var" / "warehouse"),
        }


def test_environment_chooses_python_path_and_warehouse(load_dags: Any) -> None:
    dags = load_dags(
        FOOD_DELIVERY_PYTHON="/opt/spark env/bin/python",
        FOOD_DELIVERY_PYTHONPATH="/srv/bot",
        PYTHONPATH="/usr/lib/extra",
        FOOD_DELIVERY_WAREHOUSE="/data/wh",
    )
    [task] = dags[0].tasks
    assert task["bash_command"].startswith("'/opt/spark env/bin/python' -m pipeline.food_delivery")
    # The warehouse variable is inherited as it is (append_env), so only PYTHONPATH is set.
    assert task["env"] == {"PYTHONPATH": "/srv/bot:/usr/lib/extra"}
