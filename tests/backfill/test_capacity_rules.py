"""The budget's rules (bot/backfill/rules/capacity.py): grants never pass a limit, the queue goes
in priority, deadline and age order, and a free run never idles while a claim it could serve
waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.backfill.rules.capacity import Claim, Limits, Rank, allocate, places, rank

T0 = datetime(2021, 6, 7, 6, 0, tzinfo=UTC)


def claim(
    step: str,
    *,
    request: str | None = None,
    team: str | None = "t",
    pools: tuple[str, ...] = (),
    wanted: int = 1,
    granted: int = 0,
    level: int = 1,
    due: datetime | None = None,
    since: datetime = T0,
    position: int = 0,
) -> Claim:
    return Claim(step, request or step, team, pools, wanted, granted,
                 Rank(level, due, since, position))  # fmt: skip


def test_a_step_takes_what_is_free_up_to_what_it_asked_for() -> None:
    claims = [claim("a", wanted=3), claim("b", wanted=3, since=T0 + timedelta(1))]
    assert allocate(Limits(total=4), claims) == {"a": 3, "b": 1}


def test_nothing_is_granted_past_a_full_budget() -> None:
    claims = [claim("held", wanted=4, granted=4), claim("a")]
    assert allocate(Limits(total=4), claims) == {}
    place = places(Limits(total=4), claims)["a"]
    assert (place.position, place.of, place.steps) == (1, 1, 1)
    assert [(h.kind, h.used, h.cap) for h in place.held] == [("total", 4, 4)]


def test_high_priority_goes_first_then_due_reports_then_the_oldest() -> None:
    soon = T0 + timedelta(hours=2)
    claims = [
        claim("old", since=T0 - timedelta(hours=5)),
        claim("urgent", due=soon),
        claim("low", level=2, due=soon, since=T0 - timedelta(days=1)),
        claim("high", level=0, since=T0 + timedelta(hours=1)),
    ]
    order = places(Limits(total=1), [claim("x", granted=1), *claims])
    assert sorted(order, key=lambda r: order[r].position) == ["high", "urgent", "old", "low"]
    assert allocate(Limits(total=1), claims) == {"high": 1}


def test_a_step_held_by_its_team_does_not_hold_back_another_team() -> None:
    limits = Limits(total=10, per_team=2)
    claims = [
        claim("f1", team="finance", granted=2),
        claim("f2", team="finance"),
        claim("m1", team="marketing", since=T0 + timedelta(1)),
    ]
    assert allocate(limits, claims) == {"m1": 1}
    held = places(limits, claims)["f2"].held
    assert [(h.kind, h.name, h.used, h.cap) for h in held] == [("team", "finance", 2, 2)]


def test_a_pool_counts_the_runs_of_its_dags_across_backfills() -> None:
    limits = Limits(pools={"finance.*": 2})
    claims = [
        claim("a", pools=("finance.*",), wanted=2),
        claim("b", pools=("finance.*",), since=T0 + timedelta(1)),
        claim("c", since=T0 + timedelta(2), wanted=5),
    ]
    assert allocate(limits, claims) == {"a": 2, "c": 5}


def test_within_a_backfill_steps_go_in_plan_order() -> None:
    claims = [claim("s2", request="r", position=2), claim("s1", request="r", position=1)]
    assert allocate(Limits(total=1), claims) == {"s1": 1}
    assert places(Limits(total=1), [claim("x", granted=1), *claims])["r"].steps == 2


def test_only_deadlines_inside_the_window_make_a_backfill_urgent() -> None:
    now = T0
    within = rank("normal", [now + timedelta(hours=3)], since=now, position=0, now=now,
                  urgent_within=timedelta(hours=12))  # fmt: skip
    beyond = rank("normal", [now + timedelta(hours=30)], since=now, position=0, now=now,
                  urgent_within=timedelta(hours=12))  # fmt: skip
    assert within.due == now + timedelta(hours=3)
    assert beyond.due is None
    assert within.key() < beyond.key()


def numbered(
    i: int, team: str | None, pools: tuple[str, ...], wanted: int, granted: int, level: int
) -> Claim:
    return claim(f"s{i}", team=team, pools=pools, wanted=wanted, granted=granted, level=level,
                 since=T0 + timedelta(minutes=i))  # fmt: skip


CLAIMS = st.lists(
    st.builds(
        numbered,
        st.integers(0, 10_000),
        st.sampled_from([None, "a", "b"]),
        st.sampled_from([(), ("p",), ("p", "q")]),
        st.integers(1, 6),
        st.integers(0, 3),
        st.integers(0, 2),
    ),
    max_size=25,
    unique_by=lambda c: c.step_id,
)
LIMITS = st.builds(
    Limits,
    st.one_of(st.none(), st.integers(1, 12)),
    st.one_of(st.none(), st.integers(1, 6)),
    st.sampled_from([None, {"p": 3}, {"p": 2, "q": 1}]),
)


@settings(max_examples=300, deadline=None)
@given(LIMITS, CLAIMS)
def test_grants_never_pass_a_limit_and_never_leave_a_serviceable_claim_waiting(
    limits: Limits, claims: list[Claim]
) -> None:
    grants = allocate(limits, claims)
    after = [
        Claim(c.step_id, c.request_id, c.team, c.pools, c.wanted, grants.get(c.step_id, 0),
              c.rank) if c.granted == 0 else c
        for c in claims
    ]  # fmt: skip
    for c in claims:
        if c.step_id in grants:
            assert c.granted == 0
            assert 1 <= grants[c.step_id] <= c.wanted
    # Each limit: what was granted now never takes it past its cap (held runs may already
    # have, when the budget was lowered).
    for probe in after:
        for limit in limits.of(probe):
            before = sum(c.granted for c in claims if limit in limits.of(c))
            now = sum(c.granted for c in after if limit in limits.of(c))
            assert now <= max(limit.cap, before)
    # A claim still waiting waits for a full limit.
    waiting = [c for c in after if c.granted == 0]
    for request_id, place in places(limits, claims).items():
        assert place.held, request_id
    assert all(c.wanted >= 1 for c in waiting)
