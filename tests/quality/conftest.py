"""The two ways run events reach the bot: pushed to its receiver, read by its poller."""

from __future__ import annotations

import pytest

from tests.support.producers import Deliver, delivery


@pytest.fixture(params=["receiver", "poller"])
async def deliver(request: pytest.FixtureRequest) -> Deliver:
    return delivery(request.param)
