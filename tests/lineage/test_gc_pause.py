"""The collector is paused only while a planning function runs, whatever happens in it."""

from __future__ import annotations

import gc

import pytest

from bot.lineage.rules.gc_pause import without_cyclic_gc


@without_cyclic_gc
def state(fail: bool = False) -> bool:
    if fail:
        raise ValueError("boom")
    return gc.isenabled()


def test_the_collector_is_paused_during_the_call_and_resumes_after() -> None:
    assert gc.isenabled()
    assert state() is False
    assert gc.isenabled()
    with pytest.raises(ValueError, match="boom"):
        state(fail=True)
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        assert state() is False
        assert not gc.isenabled()
    finally:
        gc.enable()
