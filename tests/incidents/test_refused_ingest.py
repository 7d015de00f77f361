"""An event Marquez refused as it updated its model is still in its feed (Marquez stores the raw
event first: OpenLineageService.java#L122-L157 at 0.51.1; FIDELITY.md row 5), naming a job
Marquez may not have built. The watcher alerts on it all the same, its impact from what the
bot's index learnt from the event itself."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from standins.marquez.server import StandInServer
from tests.support.story import (
    ORDERS,
    alerts,
    incident,
    post_events,
    run_event,
    story_bot,
    story_config,
)


async def test_a_failure_marquez_refused_to_model_still_alerts(
    tmp_path: Path, food_delivery_marquez: StandInServer
) -> None:
    day = datetime(2021, 6, 20, tzinfo=UTC)
    failure = run_event("FAIL", day, dag="rogue.etl_payments")
    # a dataset namespace outside Marquez's NamespaceName pattern: 400 after the raw row is kept
    failure["inputs"] = [{"namespace": "bad namespace", "name": "payments"}]
    watch = {
        "poll": False,
        "start_from": "2021-06-09T00:00:00Z",
        "alert_channel": ORDERS,
        "group_wait_s": 0,  # the alert sent at once: nothing here is about gathering it
    }
    async with story_bot(tmp_path, food_delivery_marquez, story_config(watch=watch)) as (bot, _):
        async with aiohttp.ClientSession() as http:
            url = f"{food_delivery_marquez.url}/api/v1/lineage"
            async with http.post(url, json=failure) as reply:
                assert reply.status == 400
        await bot.services.poller.poll_once()
        await post_events(bot, [])
        found = await incident(bot)
        [alert] = alerts(bot, channel=ORDERS)
    assert found.dag_id == "rogue.etl_payments"
    assert "disk full" in alert.text + str(alert.blocks)
    assert "rogue.etl_payments" in str(alert.blocks)
    assert "nothing downstream" in str(alert.blocks)  # the index learnt the job from the event
