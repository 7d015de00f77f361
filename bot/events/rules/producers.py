"""What a real OpenLineage event means for the watcher: which DAG (and DAG run) it belongs to,
which interval it covers, and the most useful words about its failure.

Pure functions of one event's job and run facets. The rules follow what the producers build
(see tests/fixtures/openlineage/README.md for the sources each is read from):

- A job that says it is a DAG (`JobTypeJobFacet.jobType == "DAG"`, or the Airflow provider's
  DAG-run facet `airflowDagRun`) is its own DAG, even with a `parent` facet: Airflow 3.3 gives a
  DAG run triggered by another DAG a parent naming the triggering task, yet that run, and the
  incident its failure opens, are its own DAG's.
- An Airflow task names its DAG in the `airflow` run facet (`dag.dag_id`): that is definitive,
  more so than `root`, which names the top of the whole chain (for a triggered DAG's task, the
  triggering DAG).
- Anything else with a `parent` belongs where its parent belongs: `ParentRunFacet.root` (the
  top of the chain: a Spark application or a dbt model started by an Airflow task belongs to the
  task's DAG, not to the task or the application), else the direct parent. The store then
  prefers the DAG it already recorded for the parent run, which follows chains deeper than one
  level (dbt: sql → model → `dbt run` → task → DAG) even when a producer sends no `root`.

Where an event sits in Airflow (its DAG run's own run id, and for a task its task id and try
number, for links to the run and to the task's log) is read from the provider's facets as built
by `utils.get_airflow_run_facet` / `get_airflow_dag_run_facet` (providers/openlineage, the same
code for Airflow 2 and 3): `airflow.dagRun.run_id`, `airflow.task.task_id` and
`airflow.taskInstance.try_number` on a task's events, `airflowDagRun.dagRun.run_id` on the DAG
run's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.core.time_bounds import in_bounds

__all__ = [
    "AIRFLOW_ID_MAX",
    "DAG_FACET",
    "TRY_NUMBER_MAX",
    "AirflowRef",
    "Owner",
    "RunLink",
    "airflow_interval",
    "airflow_ref",
    "dag_from_facets",
    "failed_tasks_message",
    "job_type_of",
    "owner_of",
    "parent_facet",
]

DAG_FACET = "airflowDagRun"  # the Airflow provider puts it on DAG-run events only
_TASKS_NAMED = 5
NAME_MAX = 1024  # run_events.dag_id and the other name columns
AIRFLOW_ID_MAX = 250
"""Airflow's own `ID_LEN`: its dag_id, task_id and run_id columns are VARCHAR(250), and so are
the bot's `airflow_run_id` / `task_id` columns. A longer value is no Airflow id."""
TRY_NUMBER_MAX = 100_000
"""Far above any real count of retries and clears, far below the INTEGER column's limit."""


@dataclass(frozen=True)
class RunLink:
    """A run another run points at (`parent` or `parent.root`): its job and run id."""

    namespace: str
    name: str
    run_id: str | None


@dataclass(frozen=True)
class Owner:
    """The DAG an event belongs to, the DAG run, and how that was decided.

    `parent_run_id` is set when the DAG was taken from the `parent`/`root` facets: the store
    looks that run up and, if it knows it, uses the DAG recorded for it instead.
    """

    namespace: str
    name: str
    run_id: str | None
    via: str  # "self", "airflow", "root" or "parent"
    parent_run_id: str | None = None


@dataclass(frozen=True)
class AirflowRef:
    """Where an event sits in Airflow: its DAG run's own run id (as Airflow names the run:
    `scheduled__2021-06-04T00:00:00+00:00`, `manual__…`), and for a task's event the task id
    and the try number."""

    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None


def airflow_ref(facets: Mapping[str, Any]) -> AirflowRef:
    """The Airflow run, task and try an event's facets name; None for each that is missing or
    not usable as it stands.

    A value is taken as sent or not at all: an id cut to fit, or a try number pulled into range,
    would name another run, task or try, and a link to it would mislead. The DAG run's own event
    (`airflowDagRun`, the facet `owner_of` also reads as "this is the DAG") names no task, even
    should an `airflow` facet come with it.
    """
    dag_run = _get(facets, DAG_FACET, "dagRun")
    if isinstance(dag_run, Mapping):
        return AirflowRef(run_id=_airflow_id(dag_run.get("run_id")))
    facet = facets.get("airflow")
    if not isinstance(facet, Mapping):
        return AirflowRef()
    task_id = _airflow_id(_get(facet, "task", "task_id"))
    return AirflowRef(
        run_id=_airflow_id(_get(facet, "dagRun", "run_id")),
        task_id=task_id,
        # a try belongs to its task: without the task it names nothing
        try_number=_try_number(_get(facet, "taskInstance", "try_number")) if task_id else None,
    )


def _airflow_id(value: Any) -> str | None:
    return value if _usable_name(value) and len(value) <= AIRFLOW_ID_MAX else None


def _try_number(value: Any) -> int | None:
    # bool is an int to Python, never a try number; 0 is "not tried yet" (Airflow's own
    # TaskInstance.log_url leaves the try out then too)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= TRY_NUMBER_MAX else None


def job_type_of(job: Mapping[str, Any]) -> str | None:
    """`job.facets.jobType.jobType` upper-cased (DAG, TASK, JOB, QUERY, …), if well formed."""
    facet = _get(job, "facets", "jobType")
    value = facet.get("jobType") if isinstance(facet, Mapping) else None
    if not isinstance(value, str) or not value.strip() or len(value) > 32:
        return None
    return value.strip().upper() if value.isprintable() else None


def owner_of(
    *,
    namespace: str,
    name: str,
    run_id: str,
    job_type: str | None,
    facets: Mapping[str, Any],
    parent: RunLink | None,
    root: RunLink | None,
) -> Owner:
    """The DAG (and DAG run) the event of job `namespace/name`, run `run_id`, belongs to."""
    if job_type == "DAG" or isinstance(facets.get(DAG_FACET), Mapping):
        # The DAG-run facet names its DAG: Marquez files a DAG run that another DAG triggered
        # under the triggering task (`parent.trigger_task.child_dag`), a name Airflow lacks.
        dag_id = _get(facets, DAG_FACET, "dag", "dag_id")
        return Owner(namespace, dag_id if _usable_name(dag_id) else name, run_id, "self")
    dag_id = _get(facets, "airflow", "dag", "dag_id")
    if _usable_name(dag_id) and dag_id != name:
        run = next(
            (link.run_id for link in (parent, root) if link is not None and link.name == dag_id),
            None,
        )
        return Owner(namespace, dag_id, run, "airflow")
    if parent is None:
        return Owner(namespace, name, run_id, "self")
    top = root if root is not None and root.run_id is not None else parent
    return Owner(
        top.namespace,
        top.name,
        top.run_id,
        "root" if top is root else "parent",
        parent_run_id=parent.run_id,
    )


def parent_facet(run_facets: Mapping[str, Any]) -> Any:
    """The run's parent facet: `parent`, else `parentRun`, the name the old openlineage-airflow
    integration used, which Marquez takes as the same facet (`@JsonAlias("parentRun")`,
    LineageEvent.java#L93-L94 at 0.51.1) and stores as `parent`."""
    facet = run_facets.get("parent")
    return facet if facet is not None else run_facets.get("parentRun")


def dag_from_facets(
    namespace: str, name: str, job_facets: Mapping[str, Any], run_facets: Mapping[str, Any]
) -> tuple[str, str] | None:
    """The DAG of a job Marquez lists, from its latest run's facets (Marquez merges every
    event's run facets into the run), by the same rules as an event's; None when those facets
    say nothing about parents or Airflow (then Marquez's `parentJobName` is all there is)."""
    if not any(key in run_facets for key in ("parent", "parentRun", DAG_FACET, "airflow")):
        return None
    facet = parent_facet(run_facets)
    parent = _loose_link(facet)
    root = _loose_link(facet.get("root") if isinstance(facet, Mapping) else None)
    owner = owner_of(
        namespace=namespace,
        name=name,
        run_id="",
        job_type=job_type_of({"facets": job_facets}),
        facets=run_facets,
        parent=parent,
        root=root,
    )
    return owner.namespace, owner.name


def _loose_link(facet: Any) -> RunLink | None:
    namespace, name = _get(facet, "job", "namespace"), _get(facet, "job", "name")
    if not _usable_name(namespace) or not _usable_name(name):
        return None
    run_id = _get(facet, "run", "runId")
    return RunLink(namespace, name, run_id if isinstance(run_id, str) else None)


def airflow_interval(facets: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The data interval the Airflow provider reports in its run facets (`airflowDagRun` on a
    DAG run, `airflow` on a task), for events without a `nominalTime` facet.

    A run without a data interval (Airflow 3 allows none) falls back to its logical date, as a
    single point: the interval of a manual run whose start equals its end.
    """
    for facet in (DAG_FACET, "airflow"):
        dag_run = _get(facets, facet, "dagRun")
        if not isinstance(dag_run, Mapping):
            continue
        start = _time(dag_run.get("data_interval_start"))
        end = _time(dag_run.get("data_interval_end"))
        if start is not None:
            return start, end if end is not None and end >= start else None
        logical = _time(dag_run.get("logical_date")) or _time(dag_run.get("execution_date"))
        if logical is not None:
            return logical, logical
    return None, None


def failed_tasks_message(facet: Any) -> str | None:
    """`Tasks failed: load, report` from the Airflow provider's `airflowState` facet, for a DAG
    failure that carries no error message of its own."""
    tasks = facet.get("tasksState") if isinstance(facet, Mapping) else None
    if not isinstance(tasks, Mapping):
        return None
    failed = sorted(
        str(task)[:200].replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
        for task, state in tasks.items()
        if isinstance(state, str) and state.lower() == "failed"
    )
    if not failed:
        return None
    more = len(failed) - _TASKS_NAMED
    shown = ", ".join(failed[:_TASKS_NAMED]) + (f" and {more} more" if more > 0 else "")
    return f"Task{'s' if len(failed) > 1 else ''} failed: {shown}"


def _usable_name(value: Any) -> bool:
    """A name from a facet the store can keep (the parser checks job and parent names the
    same way): text, not blank, at most 1,024 characters, no NUL, valid Unicode."""
    if not isinstance(value, str) or not value.strip() or len(value) > NAME_MAX:
        return False
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _time(value: Any) -> datetime | None:
    """An ISO-8601 time from a facet, UTC-aware; None for anything absent, odd or absurd."""
    if not isinstance(value, str) or not 10 <= len(value) <= 40:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed = parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return parsed if in_bounds(parsed) else None


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data
