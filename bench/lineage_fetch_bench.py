"""The real `plan` path over HTTP: catalog, lineage queries and run history, against the Marquez
stand-in loaded with a synthetic layered pipeline.

Run: .venv/bin/python bench/lineage_fetch_bench.py [--jobs 2000 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.clients.marquez import MarquezClient
from bot.config import BotConfig
from bot.lineage.service.planning import Planner, PlanRequest
from standins.marquez.server import running_standin

PRODUCER = "https://github.com/example/bench"
NS = "bench"


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def events(jobs: int, width: int = 100, seed: int = 11) -> list[dict[str, Any]]:
    """Two daily runs of a layered pipeline: each job reads 1-2 outputs of the layer above."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for index in range(jobs):
        # job00000 alone in the first layer feeds everything, so the plan spans the pipeline
        layer = 0 if index == 0 else (index - 1) // width + 1
        first = 0 if layer <= 1 else (layer - 2) * width + 1
        above = range(first, 1 if layer == 1 else first + width) if layer else range(0)
        reads = sorted(set(rng.sample(list(above), k=min(len(above), rng.randint(1, 2)))))
        for day in (4, 5):
            run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{index}-{day}"))
            body = {
                "run": {
                    "runId": run,
                    "facets": {
                        "nominalTime": {
                            "_producer": PRODUCER,
                            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
                            "nominalStartTime": f"2021-06-0{day}T00:00:00Z",
                            "nominalEndTime": f"2021-06-0{day + 1}T00:00:00Z",
                        }
                    },
                },
                "job": {"namespace": NS, "name": f"job{index:05d}"},
                "producer": PRODUCER,
                "inputs": [{"namespace": NS, "name": f"ds{r:05d}"} for r in reads],
                "outputs": [{"namespace": NS, "name": f"ds{index:05d}"}],
            }
            # Jobs finish at their own times, as real ones do: Marquez lists jobs by updatedAt
            # with no tie-breaker (FIDELITY.md row 6), so thousands of jobs sharing one instant
            # would page unreliably there and in the stand-in alike.
            ended = datetime(2021, 6, day + 1, 1, tzinfo=UTC) + timedelta(milliseconds=100 * index)
            out.append(
                {**body, "eventType": "START", "eventTime": _iso(ended - timedelta(minutes=5))}
            )
            out.append({**body, "eventType": "COMPLETE", "eventTime": _iso(ended)})
    return out


class CountingClient(MarquezClient):
    lineage_calls = 0
    runs_calls = 0

    async def get_lineage(self, node_id: str, *, depth: int = 20) -> list[dict[str, Any]]:
        self.lineage_calls += 1
        return await super().get_lineage(node_id, depth=depth)

    async def list_runs(
        self, namespace: str, job: str, *, max_runs: int | None = None
    ) -> list[dict[str, Any]]:
        self.runs_calls += 1
        return await super().list_runs(namespace, job, max_runs=max_runs)


async def measure(jobs: int) -> None:
    async with running_standin() as server:
        for item in events(jobs):
            server.state.ingest(item)
        config = BotConfig.model_validate({"limits": {"max_plan_dags": jobs}})
        async with CountingClient(server.url) as client:
            began = time.perf_counter()
            plan = await Planner(client, config).plan(
                PlanRequest("job00000", "2021-06-04..2021-06-05")
            )
            took = time.perf_counter() - began
    print(
        f"{jobs:,} jobs: plan of {len(plan.steps):,} DAGs / {plan.run_count:,} runs "
        f"in {took:.2f} s over HTTP ({client.lineage_calls} lineage queries, "
        f"{client.runs_calls} run-history queries)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[500, 2000])
    for jobs in parser.parse_args().jobs:
        asyncio.run(measure(jobs))


if __name__ == "__main__":
    main()
