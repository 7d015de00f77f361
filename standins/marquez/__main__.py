"""`python -m standins.marquez`: the Marquez stand-in on its own, with latency if asked.

`backfill-bot standin marquez` (bot/cli.py) serves the same app without `--latency`; this entry
exists so a slow Marquez (FIDELITY.md row 13) can be tried without touching the bot's CLI:

    python -m standins.marquez --seed food_delivery --latency lineage=15 --latency jobs=2
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from standins.marquez.server import LATENCY_ROUTES, SEEDS, serve_forever


def _latency(text: str) -> tuple[str, float]:
    route, sep, seconds = text.partition("=")
    if not sep or (route not in LATENCY_ROUTES and route != "*"):
        raise argparse.ArgumentTypeError(
            f"expected ROUTE=SECONDS with ROUTE one of {', '.join(LATENCY_ROUTES)}, *"
        )
    try:
        return route, float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {seconds!r}") from None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m standins.marquez", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--seed", choices=sorted(SEEDS), help="load sample lineage")
    parser.add_argument(
        "--latency",
        type=_latency,
        action="append",
        default=[],
        metavar="ROUTE=SECONDS",
        help="delay every request to ROUTE (repeatable; * = every other route)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    asyncio.run(serve_forever(args.host, args.port, args.seed, latency=dict(args.latency)))


if __name__ == "__main__":  # pragma: no cover - exercised by hand
    main()
