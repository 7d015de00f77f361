"""The `backfill-bot` command end to end: a real process against the Marquez stand-in over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from standins.marquez.server import StandInServer

ROOT = "example.etl_orders"
DOWNSTREAM = [
    "example.etl_orders_7_days",
    "example.etl_delivery_7_days",
    "example.delivery_times_7_days",
]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


async def cli(*args: str, env: Mapping[str, str] | None = None) -> Result:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("MARQUEZ_", "BOT_"))}
    environment.update(env or {})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


def marquez(server: StandInServer) -> dict[str, str]:
    return {"MARQUEZ_URL": server.url}


def one_clear_line(result: Result) -> str:
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    assert lines[0].startswith("backfill-bot: error: ")
    return lines[0]


async def test_plan_json_lists_downstream_once_in_lineage_order(
    food_delivery_marquez: StandInServer,
) -> None:
    result = await cli(
        "plan", ROOT, "2021-06-04..2021-06-06", "--json", env=marquez(food_delivery_marquez)
    )
    assert result.code == 0, result.err
    plan = result.json()
    assert (plan["dag_id"], plan["start"], plan["end"]) == (
        ROOT,
        "2021-06-04T00:00:00Z",
        "2021-06-07T00:00:00Z",
    )
    names = [step["dag_id"] for step in plan["steps"]]
    assert names[0] == ROOT
    assert len(names) == len(set(names))
    for dag in DOWNSTREAM:
        assert dag in names
    assert names.index("example.etl_orders_7_days") < names.index("example.etl_delivery_7_days")
    assert names.index("example.etl_delivery_7_days") < names.index("example.delivery_times_7_days")
    for never in ("example.etl_menus", "example.etl_customers", "example.etl_categories"):
        assert never not in names, f"{never} is upstream or a sibling, not downstream"
    steps = {step["dag_id"]: step for step in plan["steps"]}
    assert steps[ROOT]["intervals"] == [
        {"start": "2021-06-04T00:00:00Z", "end": "2021-06-05T00:00:00Z"},
        {"start": "2021-06-05T00:00:00Z", "end": "2021-06-06T00:00:00Z"},
        {"start": "2021-06-06T00:00:00Z", "end": "2021-06-07T00:00:00Z"},
    ]
    weekly = [
        {"start": "2021-05-30T00:00:00Z", "end": "2021-06-06T00:00:00Z"},
        {"start": "2021-06-06T00:00:00Z", "end": "2021-06-13T00:00:00Z"},
    ]
    for dag in DOWNSTREAM:
        assert steps[dag]["intervals"] == weekly, dag
        assert steps[dag]["namespace"] == "food_delivery"
    assert steps[ROOT]["upstream"] == []
    assert steps["example.etl_delivery_7_days"]["upstream"] == ["example.etl_orders_7_days"]
    assert steps["example.delivery_times_7_days"]["upstream"] == ["example.etl_delivery_7_days"]
    assert "orders" in steps[ROOT]["owners"]  # from the OpenLineage ownership facet


async def test_plan_table_by_default(food_delivery_marquez: StandInServer) -> None:
    result = await cli("plan", ROOT, "2021-06-04..2021-06-06", env=marquez(food_delivery_marquez))
    assert result.code == 0, result.err
    assert f"Backfill plan for {ROOT} (food_delivery), 2021-06-04..2021-06-06" in result.out
    first_row = next(line for line in result.out.splitlines() if line.strip().startswith("1 "))
    assert ROOT in first_row
    assert "2021-06-04 → 2021-06-05" in first_row


async def test_only_and_exclude(food_delivery_marquez: StandInServer) -> None:
    env = marquez(food_delivery_marquez)
    only = await cli("plan", ROOT, "2021-06-05", "--only", "--json", env=env)
    assert [s["dag_id"] for s in only.json()["steps"]] == [ROOT]
    excluded = await cli(
        "plan", ROOT, "2021-06-05", "--json", "--exclude", "example.etl_delivery_7_days", env=env
    )
    assert excluded.code == 0, excluded.err
    names = [s["dag_id"] for s in excluded.json()["steps"]]
    assert names == [ROOT, "example.etl_orders_7_days"]
    wrong = await cli("plan", ROOT, "2021-06-05", "--exclude", "example.etl_menus", env=env)
    assert wrong.code == 2
    assert "not downstream of example.etl_orders" in one_clear_line(wrong)


async def test_impact_names_downstream_datasets_and_owners(
    food_delivery_marquez: StandInServer, tmp_path: Path
) -> None:
    config = tmp_path / "bot.yml"
    config.write_text(
        "teams: [{name: analytics, channel: C1}, {name: orders}]\n"
        "ownership: [{pattern: 'example.*_7_days', team: analytics}]\n"
        "reports: [{name: Delivery times, url: 'https://bi/42', team: analytics,"
        " datasets: ['food_delivery::public.top_delivery_times']}]\n"
    )
    env = {**marquez(food_delivery_marquez), "BOT_CONFIG": str(config)}
    result = await cli("impact", ROOT, env=env)
    assert result.code == 0, result.err
    assert f"Impact of {ROOT} (food_delivery), owners: orders" in result.out
    for dag in DOWNSTREAM:
        assert f"{dag} (food_delivery), owners: analytics" in result.out
    assert "food_delivery:public.orders_7_days" in result.out
    assert "example.etl_menus" not in result.out
    assert "Delivery times (analytics) reads food_delivery:public.top_delivery_times" in result.out
    assert "Teams to notify: analytics, orders" in result.out


async def test_a_task_name_points_at_its_dag(food_delivery_marquez: StandInServer) -> None:
    task = "example.etl_delivery_7_days.load"
    result = await cli("plan", task, "2021-06-04", env=marquez(food_delivery_marquez))
    assert result.code == 2
    assert f"'{task}' is a task of DAG 'example.etl_delivery_7_days'" in one_clear_line(result)


async def test_unknown_dag_suggests_closest_names(food_delivery_marquez: StandInServer) -> None:
    result = await cli(
        "plan", "example.etl_order", "2021-06-04", env=marquez(food_delivery_marquez)
    )
    assert result.code == 2
    line = one_clear_line(result)
    assert "Unknown DAG 'example.etl_order'" in line
    assert "Did you mean: example.etl_orders" in line


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2021-06-06..2021-06-04", "reversed"),
        ("06/04/2021", "is not an ISO date"),
        ("2021-01-01..2021-12-31", "the maximum is 92"),
    ],
)
async def test_bad_ranges_fail_before_asking_marquez(text: str, fragment: str) -> None:
    result = await cli("plan", ROOT, text, env={"MARQUEZ_URL": f"http://127.0.0.1:{closed_port()}"})
    assert result.code == 2
    assert fragment in one_clear_line(result)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_marquez_down_is_one_clear_line() -> None:
    port = closed_port()
    result = await cli("impact", ROOT, "--marquez-url", f"http://127.0.0.1:{port}")
    assert result.code == 3
    line = one_clear_line(result)
    assert f"127.0.0.1:{port}" in line
    assert "unreachable" in line


@pytest.fixture
async def garbage_marquez() -> AsyncIterator[str]:
    async def html(_: web.Request) -> web.Response:
        return web.Response(
            text="<html><title>Welcome to nginx</title></html>", content_type="text/html"
        )

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", html)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_marquez_answering_garbage_is_one_clear_line(garbage_marquez: str) -> None:
    result = await cli("plan", ROOT, "2021-06-04", env={"MARQUEZ_URL": garbage_marquez})
    assert result.code == 3
    assert "Marquez answered badly" in one_clear_line(result)


def completed_run(namespace: str, job: str, output: str) -> list[dict[str, Any]]:
    run = {"runId": "0b5b7a4e-5f9b-4b55-9d0e-8b0cf0a1d2c3"}
    base = {
        "run": run,
        "job": {"namespace": namespace, "name": job},
        "producer": "https://example.com/tests",
        "inputs": [],
        "outputs": [{"namespace": namespace, "name": output}],
    }
    return [
        {**base, "eventType": "START", "eventTime": "2021-06-10T01:00:00Z"},
        {**base, "eventType": "COMPLETE", "eventTime": "2021-06-10T01:05:00Z"},
    ]


async def test_ambiguous_name_asks_for_a_namespace(food_delivery_marquez: StandInServer) -> None:
    for event in completed_run("staging", ROOT, "public.orders_copy"):
        food_delivery_marquez.state.ingest(event)
    env = marquez(food_delivery_marquez)
    ambiguous = await cli("impact", ROOT, env=env)
    assert ambiguous.code == 2
    line = one_clear_line(ambiguous)
    assert "several Marquez namespaces (food_delivery, staging)" in line
    assert "--namespace" in line
    pinned = await cli("plan", ROOT, "2021-06-04", "--namespace", "staging", "--json", env=env)
    assert pinned.code == 0, pinned.err
    assert [(s["dag_id"], s["namespace"]) for s in pinned.json()["steps"]] == [(ROOT, "staging")]
    default = await cli(
        "plan", ROOT, "2021-06-04", "--json", env={**env, "MARQUEZ_NAMESPACE": "food_delivery"}
    )
    assert default.json()["namespace"] == "food_delivery"
    missing = await cli(
        "plan", "example.etl_orders_7_days", "2021-06-04", "--namespace", "staging", env=env
    )
    assert missing.code == 2
    assert "in namespace staging" in one_clear_line(missing)


async def test_bad_settings_and_config_are_exit_4(tmp_path: Path) -> None:
    bad_url = await cli("impact", ROOT, env={"MARQUEZ_URL": "localhost:5000"})
    assert bad_url.code == 4
    assert "MARQUEZ_URL:" in one_clear_line(bad_url)
    bad_flag = await cli("impact", ROOT, "--marquez-url", "foo")
    assert bad_flag.code == 4
    assert "--marquez-url: 'foo' is not an http(s) URL" in one_clear_line(bad_flag)
    config = tmp_path / "bot.yml"
    config.write_text("teams: [{name: a}]\nownership: [{pattern: x, team: nobody}]\n")
    bad_config = await cli("impact", ROOT, env={"BOT_CONFIG": str(config)})
    assert bad_config.code == 4
    assert "refers to team 'nobody'" in one_clear_line(bad_config)
