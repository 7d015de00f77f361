"""`backfill-bot events list|retry`: the run events the watcher set aside after failing to
handle them (bot/events/store/set_aside.py), shown with why, and put back to be handled again by the
running bot's next pass."""

from __future__ import annotations

import argparse

from bot.core.db import make_engine, session_factory, upgrade
from bot.events.store import set_aside

SHOWN = 100  # rows `events list` prints


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    events = commands.add_parser("events", help="run events the watcher set aside")
    actions = events.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="list them, with why handling them failed")
    retry = actions.add_parser("retry", help="put them back to be handled again")
    retry.add_argument("ids", nargs="*", type=int, metavar="ID", help="the events to retry")
    retry.add_argument("--all", action="store_true", help="every event set aside")


def check(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot be run (None when they can)."""
    if args.action == "retry" and bool(args.ids) == bool(args.all):
        return "events retry takes the ids to retry or --all (one of them)"
    return None


async def run(args: argparse.Namespace, database_url: str) -> str:
    upgrade(database_url)  # the columns it reads came with a migration
    engine = make_engine(database_url)
    try:
        sessions = session_factory(engine)
        if args.action == "list":
            async with sessions() as session:
                rows = await set_aside.listed(session, limit=SHOWN)
                total = await set_aside.count(session)
            if not rows:
                return "No run events are set aside."
            lines = [
                f"#{row.id} {row.event_type} {row.dag_namespace}/{row.dag_id} "
                f"at {row.event_time.isoformat()}: {row.attempts} tries, set aside "
                f"{row.set_aside_at.isoformat() if row.set_aside_at else '?'}: {row.failure}"
                for row in rows
            ]
            if total > len(rows):
                lines.append(f"… and {total - len(rows)} more")
            return "\n".join(lines)
        async with sessions.begin() as session:
            done = await set_aside.retry(session, None if args.all else args.ids)
        noun = "run event" if done == 1 else "run events"
        return f"{done} {noun} put back; the watcher handles them on its next pass."
    finally:
        await engine.dispose()
