"""Links the bot puts on alerts and notices: a DAG in Marquez, a DAG, a DAG run and a task's
log in Airflow (where Airflow's UI is known). Built from ids that came from outside, so every
part is percent-encoded (bot/incidents/rules/airflow_links.py); a link that cannot be built is left
out, never the message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from bot.config import BotConfig
from bot.core.model import DagRef
from bot.incidents.rules import airflow_links


@dataclass(frozen=True)
class AirflowUi:
    """Where Airflow's web UI is; `version` is asked each time (the executor learns it when it
    first connects)."""

    base: str
    version: Callable[[], int]


class Links:
    def __init__(
        self, config: BotConfig, *, marquez_web_url: str, airflow_ui: AirflowUi | None = None
    ) -> None:
        self.config = config
        self.marquez_web_url = marquez_web_url.rstrip("/")
        self.airflow_ui = airflow_ui

    def marquez_job(self, dag: DagRef) -> str:
        return (
            f"{self.marquez_web_url}/lineage/job/{quote(dag.namespace, safe='')}/"
            f"{quote(dag.dag_id, safe='')}"
        )

    def airflow_dag(self, dag: DagRef) -> str | None:
        if self.airflow_ui is None:
            return None
        try:
            return airflow_links.dag_url(
                self.airflow_ui.base, self.airflow_ui.version(), self._airflow_id(dag)
            )
        except ValueError:  # an id Airflow would not have made: no link rather than no notice
            return None

    def airflow_run(
        self, dag: DagRef, run_id: str | None, *, logical_date: datetime | None = None
    ) -> str | None:
        if self.airflow_ui is None or not run_id:
            return None
        try:
            return airflow_links.run_url(
                self.airflow_ui.base,
                self.airflow_ui.version(),
                self._airflow_id(dag),
                run_id,
                logical_date=logical_date,
            )
        except ValueError:
            return None

    def airflow_log(
        self,
        dag: DagRef,
        run_id: str | None,
        task_id: str | None,
        try_number: int | None,
        *,
        logical_date: datetime | None = None,
    ) -> str | None:
        if self.airflow_ui is None or not run_id or not task_id:
            return None
        try:
            return airflow_links.task_log_url(
                self.airflow_ui.base,
                self.airflow_ui.version(),
                self._airflow_id(dag),
                run_id,
                task_id,
                try_number,
                logical_date=logical_date,
            )
        except ValueError:
            return None

    def _airflow_id(self, dag: DagRef) -> str:
        return self.config.execution.airflow.dag_id_for(dag)
