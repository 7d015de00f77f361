"""Every table is registered before the ORM first needs it, whichever store a process imports
first: a capability's table points at another's by name (the outbox at backfill_requests and
incidents), so a store used on its own must still flush."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.core.db import upgrade

ONE_STORE = """
import asyncio, sys
from bot.core.db import make_engine, session_factory
from bot.slack.store import outbox

async def main() -> None:
    engine = make_engine(sys.argv[1])
    async with session_factory(engine).begin() as session:
        row = await outbox.enqueue(session, channel="C1", payload={"text": "hello"})
    print(row.id, "bot.schema" in sys.modules)
    await engine.dispose()

asyncio.run(main())
"""


def test_a_store_imported_alone_still_flushes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    upgrade(url)
    done = subprocess.run(
        [sys.executable, "-c", ONE_STORE, url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True"]
