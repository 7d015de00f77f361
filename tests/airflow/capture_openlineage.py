"""Record the OpenLineage events a real Airflow sends, as fixtures for the bot's tests.

    .venv/bin/python -m tests.airflow.capture_openlineage [--out DIR]
    .venv/bin/python tests/airflow/capture_openlineage.py

Starts the harness's Airflow 3.3.2 (tests/airflow/harness.py) with the OpenLineage provider
pointed at a small receiver on 127.0.0.1, triggers the DAGs of tests/airflow/dags/
openlineage_dags.py through the REST API, waits for every run to end and for the DAG runs' own
terminal events, and writes one JSON array per scenario (events in arrival order, exactly as
sent: run ids, times and durations are left as captured) plus a README.md into
tests/fixtures/openlineage/airflow-<version>/. Needs PostgreSQL as the harness does
(TEST_POSTGRES_ADMIN_URL).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# Run as a script (`python tests/airflow/capture_openlineage.py`): the repository is the root of
# the `tests` package it imports.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.airflow.harness import (
    AIRFLOW_VERSION,
    OPENLINEAGE_NAMESPACE,
    REPO_ROOT,
    VENV_DIR,
    RealAirflow,
    start_airflow,
)
from tests.airflow.openlineage import (
    LineageRecorder,
    dag_of,
    job_name,
    run_reported,
    running_recorder,
    task_instances,
    trigger,
    wait_for_first_run,
    wait_for_run,
)

DAGS = Path(__file__).resolve().parent / "dags"
OUT = REPO_ROOT / "tests" / "fixtures" / "openlineage" / f"airflow-{AIRFLOW_VERSION}"
DAY = datetime(2021, 6, 10, tzinfo=UTC)
MANUAL_AT = datetime(2021, 6, 10, 12, 34, 56, tzinfo=UTC)


@dataclass
class Scenario:
    name: str
    """The fixture's file name, without `.json`."""
    dag_id: str
    description: str
    logical_date: datetime | None
    interval: tuple[datetime, datetime] | None
    also: tuple[str, ...] = ()
    """DAGs whose runs this one triggers (their events belong to this scenario too)."""
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def dag_ids(self) -> frozenset[str]:
        return frozenset((self.dag_id, *self.also))


SCENARIOS = (
    Scenario(
        "success",
        "ol_test.success",
        "two tasks (BashOperator, PythonOperator) succeed; run for [2021-06-10, 2021-06-11)",
        DAY,
        (DAY, DAY + timedelta(days=1)),
    ),
    Scenario(
        "failure",
        "ol_test.failing",
        "task `prepare` succeeds, task `load` (PythonOperator) raises ValueError; run for "
        "[2021-06-10, 2021-06-11)",
        DAY,
        (DAY, DAY + timedelta(days=1)),
    ),
    Scenario(
        "trigger",
        "ol_test.parent",
        'task `trigger_child` (TriggerDagRunOperator) triggers `ol_test.child` ("@daily", '
        "logical date = trigger time); parent run for [2021-06-10, 2021-06-11)",
        DAY,
        (DAY, DAY + timedelta(days=1)),
        also=("ol_test.child",),
    ),
    Scenario(
        "manual",
        "ol_test.manual",
        '"@daily" (CronTriggerTimetable) DAG triggered with logical date '
        "2021-06-10T12:34:56Z and no interval: data interval start == end",
        MANUAL_AT,
        None,
    ),
)


def run_scenarios(airflow: RealAirflow, recorder: LineageRecorder) -> None:
    for scenario in SCENARIOS:
        run_id = trigger(
            airflow, scenario.dag_id, logical_date=scenario.logical_date, interval=scenario.interval
        )
        scenario.runs[scenario.dag_id] = {"dag_run_id": run_id}
    for scenario in SCENARIOS:
        for dag_id in (scenario.dag_id, *scenario.also):
            run_id = scenario.runs.get(dag_id, {}).get("dag_run_id") or wait_for_first_run(
                airflow, dag_id
            )
            scenario.runs[dag_id] = wait_for_run(airflow, dag_id, run_id, timeout_s=180)
            print(f"{dag_id} {run_id}: {scenario.runs[dag_id]['state']}", flush=True)
    tasks = {
        dag_id: [t["task_id"] for t in task_instances(airflow, dag_id, run["dag_run_id"])]
        for scenario in SCENARIOS
        for dag_id, run in scenario.runs.items()
    }
    recorder.wait_for(
        lambda events: all(run_reported(events, d, ids) for d, ids in tasks.items()),
        timeout_s=60,
        quiet_s=3.0,
        what="the terminal events of every DAG run and task",
    )


def installed_versions() -> dict[str, str]:
    names = [
        "apache-airflow",
        "apache-airflow-providers-openlineage",
        "apache-airflow-providers-standard",
        "apache-airflow-providers-common-compat",
        "openlineage-python",
        "openlineage-integration-common",
    ]
    code = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    out = subprocess.run(
        [str(VENV_DIR / "bin" / "python"), "-c", code, *names],
        capture_output=True,
        text=True,
        check=True,
    )
    versions: dict[str, str] = json.loads(out.stdout)
    return versions


def write(out: Path, events: list[dict[str, Any]], took_s: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    every = frozenset(d for s in SCENARIOS for d in s.dag_ids)
    counts = {}
    tables = {}
    for scenario in SCENARIOS:
        mine = [e for e in events if dag_of(e, every) in scenario.dag_ids]
        counts[scenario.name] = len(mine)
        tables[scenario.name] = table(mine)
        (out / f"{scenario.name}.json").write_text(json.dumps(mine, indent=2) + "\n")
    stray = [e for e in events if dag_of(e, every) is None]
    if stray:
        (out / "other.json").write_text(json.dumps(stray, indent=2) + "\n")
    (out / "README.md").write_text(readme(counts, tables, len(stray), took_s))


def table(events: list[dict[str, Any]]) -> str:
    """One Markdown row per event: what the bot reads of it."""
    rows = [
        "| # | eventType | job.name | jobType | parent job | root job | nominalTime | "
        "errorMessage |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, event in enumerate(events, 1):
        run_facets = event.get("run", {}).get("facets", {})
        job_type = event.get("job", {}).get("facets", {}).get("jobType", {}).get("jobType", "")
        parent = run_facets.get("parent") or {}
        root = parent.get("root") or {}
        nominal = run_facets.get("nominalTime")
        nominal_text = (
            f"{nominal.get('nominalStartTime')} → {nominal.get('nominalEndTime')}"
            if nominal
            else ""
        )
        error = (run_facets.get("errorMessage") or {}).get("message", "")
        cells = [
            str(n),
            str(event.get("eventType", "")),
            f"`{job_name(event)}`",
            job_type,
            f"`{parent['job']['name']}`" if parent else "",
            f"`{root['job']['name']}`" if root else "",
            nominal_text,
            f"`{error}`" if error else "",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def readme(counts: dict[str, int], tables: dict[str, str], stray: int, took_s: float) -> str:
    versions = installed_versions()
    listed = "\n".join(f"- {name} {version}" for name, version in versions.items())
    rows = []
    for scenario in SCENARIOS:
        runs = ", ".join(
            f"`{dag}` run `{run['dag_run_id']}` ({run['state']}, data interval "
            f"{run.get('data_interval_start')} → {run.get('data_interval_end')})"
            for dag, run in scenario.runs.items()
        )
        rows.append(
            f"### `{scenario.name}.json`\n\n{counts[scenario.name]} events: "
            f"{scenario.description}. Runs: {runs}.\n\n{tables[scenario.name]}\n"
        )
    scenarios = "\n".join(rows)
    other = f"\n`other.json` holds {stray} events of no scenario's DAG.\n" if stray else ""
    return f"""# OpenLineage events of a real Airflow {AIRFLOW_VERSION}

Captured by `.venv/bin/python -m tests.airflow.capture_openlineage` on
{datetime.now(UTC):%Y-%m-%d %H:%M} UTC (the run took {took_s:.0f} s), from:

{listed}

(as installed by tests/airflow/harness.py into var/airflow-venv: LocalExecutor, PostgreSQL
metadata DB, scheduled runs off). The provider's `[openlineage]` settings were the harness's
`openlineage_env()`: `transport = {{"type": "http", "url": "http://127.0.0.1:<port>",
"endpoint": "api/v1/lineage", "timeout": 5}}`, `namespace = {OPENLINEAGE_NAMESPACE}`, everything
else at the provider's defaults (source code facets on, no selective enable). Task events were
sent by the tasks' worker processes, DAG run events by the scheduler.

The DAGs are in tests/airflow/dags/openlineage_dags.py; each run was triggered through
`POST /api/v2/dags/{{dag_id}}/dagRuns` (with an explicit data interval for the daily ones, as a
scheduled run has). Each file is one JSON array: the events of one scenario's DAG runs and their
tasks in the order the receiver got them (the scenarios ran at the same time; events were
split by job name). Nothing was edited: run ids, event times, durations, paths and source code
are as sent. The tables below show what the bot reads of each event (`jobType` is the job's
JobTypeJobFacet, parent and root are the `parent` run facet's jobs).

Worth knowing when reading them (provider {versions["apache-airflow-providers-openlineage"]}):

- Run ids are UUIDv7s derived from the logical date and the DAG id (plus `clear_number`, or
  task id and try number): a capture repeated for the same logical dates has the same run ids.
- The arrival order of the scheduler's DAG run events and the workers' task events is a race:
  a DAG's COMPLETE/FAIL may come before its last task's COMPLETE/FAIL, and a triggered DAG's
  START before its parent's COMPLETE.
- The DAG's own FAIL says only `task_failure` in `errorMessage` (the failed tasks are in its
  `airflowState` facet); the task's FAIL carries the exception's message and stack trace.

## Scenarios

{scenarios}
{other}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT}")
    args = parser.parse_args(argv)
    started = time.monotonic()
    every_dag = [d for s in SCENARIOS for d in s.dag_ids]
    with (
        running_recorder() as recorder,
        start_airflow(
            dags_folders=[DAGS], openlineage_url=recorder.url, dag_ids=every_dag
        ) as airflow,
    ):
        print(f"Airflow ready at {airflow.url} in {time.monotonic() - started:.0f}s", flush=True)
        run_scenarios(airflow, recorder)
        events = recorder.events()
    took = time.monotonic() - started
    write(args.out, events, took)
    print(f"{len(events)} events written to {args.out} in {took:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
