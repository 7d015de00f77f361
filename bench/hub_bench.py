"""The hub's routing decision at scale: `route()` for one event against many teams (each with
routes, quiet hours and an escalation), sinks and subscriptions, as every failure, SLA miss and
backfill calls it once. Pure: no database, no network.

Run: .venv/bin/python bench/hub_bench.py [--teams 200] [--subscriptions 5000] [--rounds 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime

from bot.config import parse_config
from bot.core.model import DagRef
from bot.hub.rules.routing import HubEvent, Subscription, route
from bot.ownership.rules import owners


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--subscriptions", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    sinks = [
        {"name": f"hook-{n}", "kind": "webhook", "url": f"https://h{n}.example.com/x",
         "secret": "s" * 20}
        for n in range(args.teams)
    ]  # fmt: skip
    teams = [
        {"name": f"team-{n}", "sinks": [f"hook-{n}"],
         "routes": [{"events": ["sla", "backfills"], "dags": f"dag_{n}_*", "to": [f"hook-{n}"]},
                    {"events": ["failures"], "severity": "critical",
                     "to": [f"hook-{(n + 1) % args.teams}"]}],
         "quiet_hours": {"start": "22:00", "end": "07:00", "timezone": "Europe/Berlin"},
         "escalation": {"after": "30m", "sinks": [f"hook-{(n + 2) % args.teams}"]}}
        for n in range(args.teams)
    ]  # fmt: skip
    ownership = [{"pattern": f"dag_{n}_*", "team": f"team-{n}"} for n in range(args.teams)]
    config = parse_config({"teams": teams, "ownership": ownership, "sinks": sinks})
    subscriptions = [
        Subscription(f"{n:08x}", f"C{n:09d}", f"dag_{n % args.teams}_*",
                     frozenset({"failures", "sla"}), downstream=n % 3 == 0)
        for n in range(args.subscriptions)
    ]  # fmt: skip
    dag = DagRef("ns", "dag_7_orders")
    upstream = frozenset(DagRef("ns", f"dag_{n}_x") for n in range(0, args.teams, 10))
    event = HubEvent(
        kind="failure.opened", dag=dag, at=datetime(2021, 6, 4, tzinfo=UTC),
        owners=owners(config, dag), severity="critical", upstream=upstream,
        reports=("Weekly KPIs",),
    )  # fmt: skip
    nights = [datetime(2021, 6, 4, 21, 30, tzinfo=UTC), datetime(2021, 6, 4, 12, tzinfo=UTC)]
    timings: list[float] = []
    for round_ in range(args.rounds):
        start = time.perf_counter()
        decision = route(event, config, now=nights[round_ % 2], subscriptions=subscriptions)
        timings.append(time.perf_counter() - start)
    timings.sort()
    print(
        f"route(): {args.teams} teams, {args.subscriptions} subscriptions, "
        f"{len(upstream)} DAGs upstream: median {statistics.median(timings) * 1000:.2f} ms, "
        f"p99 {timings[int(len(timings) * 0.99)] * 1000:.2f} ms over {args.rounds} decisions "
        f"({len(decision.sinks)} sinks, {len(decision.channels)} channels)"
    )


if __name__ == "__main__":
    main()
