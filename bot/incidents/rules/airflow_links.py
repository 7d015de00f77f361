"""Links into the Airflow UI: a DAG run, and the log of a task's try in it.

Pure functions of plain data. The shapes are the ones Airflow itself builds and routes:

- Airflow 2 (Flask webserver, React grid): `TaskInstance.log_url` links
  `/dags/{dag_id}/grid?dag_run_id=…&task_id=…&base_date=…&tab=logs`. The grid selects the run
  and task from `dag_run_id` / `task_id` (www/static/js/dag/useSelection.ts), the tab from `tab`
  (dag/details/index.tsx: `logs`), and lists the runs up to `base_date` (useFilters.ts,
  api/useGridData.ts): without it only the newest runs are loaded, and a run older than those
  shows no logs tab. The log tab opens on the task's latest try; no URL parameter picks another.
- Airflow 3 (FastAPI + React UI, ui/src/router.tsx): a run is `dags/:dagId/runs/:runId`, a task
  instance `dags/:dagId/runs/:runId/tasks/:taskId`, whose index tab is its log; `?try_number=`
  picks the try (pages/TaskInstance/Logs/Logs.tsx). This is `TaskInstance.log_url` of Airflow 3
  too, e.g. `/dags/ol_test.failing/runs/manual__2026-11-24T01%3A09%3A59.421277%2B00%3A00/tasks/
  load?try_number=1` as a real 3.3.2 sent it (tests/fixtures/openlineage/airflow-3.3.2).

Every path segment and query value is percent-encoded in full (`quote(…, safe="")`): run ids
hold `:` and `+` (`scheduled__2021-06-04T00:00:00+00:00`), and an id with `/`, `?`, `#` or `&`
must stay one segment or one value, never become another path or parameter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

__all__ = ["dag_url", "run_url", "task_log_url"]


def dag_url(base: str, version: int, dag_id: str) -> str:
    """The page of `dag_id` in the Airflow UI at `base`: Airflow 3's `dags/:dagId`, Airflow
    2's grid. Raises ValueError for a blank base or id, or a version before 2."""
    root = _root(base)
    dag = _segment(dag_id, "dag_id")
    return f"{root}/dags/{dag}" if _new_ui(version) else f"{root}/dags/{dag}/grid"


def run_url(
    base: str, version: int, dag_id: str, run_id: str, *, logical_date: datetime | None = None
) -> str:
    """The page of DAG run `run_id` of `dag_id` in the Airflow UI at `base` (its major version).

    `logical_date` (Airflow 2 only, ignored by 3) is the run's logical date: the grid then
    lists the runs up to it, so an older run is in view. Raises ValueError for a blank base or
    id, or a version before 2.
    """
    root = _root(base)
    dag, run = _segment(dag_id, "dag_id"), _segment(run_id, "run_id")
    if _new_ui(version):
        return f"{root}/dags/{dag}/runs/{run}"
    return f"{root}/dags/{dag}/grid?" + _query(
        ("dag_run_id", run), ("base_date", _date(logical_date))
    )


def task_log_url(
    base: str,
    version: int,
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: int | None,
    *,
    logical_date: datetime | None = None,
) -> str:
    """The log of task `task_id` in DAG run `run_id` of `dag_id`, at try `try_number` where the
    UI can select it (Airflow 3; Airflow 2's grid opens on the latest try). A try number that is
    not a positive int is left out (Airflow's own log_url does the same for 0), and the UI shows
    the latest try. `logical_date` as for `run_url`.
    """
    root = _root(base)
    dag, run = _segment(dag_id, "dag_id"), _segment(run_id, "run_id")
    task = _segment(task_id, "task_id")
    tried = try_number if _try(try_number) else None
    if _new_ui(version):
        page = f"{root}/dags/{dag}/runs/{run}/tasks/{task}"
        return page if tried is None else f"{page}?try_number={tried}"
    return f"{root}/dags/{dag}/grid?" + _query(
        ("dag_run_id", run), ("task_id", task), ("base_date", _date(logical_date)), ("tab", "logs")
    )


def _new_ui(version: int) -> bool:
    """Airflow 3's UI (and, until it changes them, its successors' routes); 2's grid."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 2:
        raise ValueError(f"no Airflow UI links for version {version!r}: 2 or later")
    return version >= 3


def _root(base: str) -> str:
    root = base.strip().rstrip("/")
    if not root:
        raise ValueError("an Airflow UI link needs the UI's base URL")
    return root


def _segment(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"an Airflow UI link needs a {name}, got {value!r}")
    return _encoded(value)


def _encoded(value: str) -> str:
    # errors="replace": a lone surrogate cannot be UTF-8; it becomes "?" (%3F), not a crash
    return quote(value, safe="", errors="replace")


def _date(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return _encoded(aware.astimezone(UTC).isoformat())


def _query(*pairs: tuple[str, str | None]) -> str:
    """`key=value` pairs, values already encoded; a None value is left out."""
    return "&".join(f"{key}={value}" for key, value in pairs if value is not None)


def _try(value: int | None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
