"""Until when a pass's time-derived facts hold (``horizon.next_change``, ``budgets.active_until``),
and the pass memo built on them: over the same objects, a pass before the next change returns
the last pass's decision; the property test runs passes at random later times with one memo and
compares each with a pass from a fresh memo."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_consolidation_stop import NOW, SMALL, clusters

import builders as b
from karpy.core.disruption import Memo, budgets, compute, horizon
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk

MONDAY = datetime(2026, 3, 2, tzinfo=UTC).timestamp()
HOUR = 3600.0


def cron_active(schedule: str, duration: float, t: float) -> bool:
    """The budget rule written out again: the first fire after t - duration is not after t."""
    start = datetime.fromtimestamp(t, UTC) - timedelta(seconds=duration)
    return bool(croniter(schedule, start).get_next(datetime).timestamp() <= t)


def test_a_business_hours_budget_holds_until_its_window_opens_or_closes() -> None:
    day = b.budget("0", schedule="0 9 * * 1-5", duration=8 * HOUR)
    assert not budgets.active(day, MONDAY + 8 * HOUR)
    assert budgets.active_until(day, MONDAY + 8 * HOUR) == MONDAY + 9 * HOUR
    assert budgets.active(day, MONDAY + 10 * HOUR)
    assert budgets.active_until(day, MONDAY + 10 * HOUR) == MONDAY + 17 * HOUR
    assert budgets.active_until(b.budget("1"), MONDAY) == float("inf")


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["0 9 * * 1-5", "*/15 * * * *", "30 2 * * *", "0 0 * * 0", "0 */4 * * *"]),
    st.sampled_from([60.0, 600.0, 3600.0, 8 * HOUR, 3 * 24 * HOUR]),
    st.floats(0, 14 * 24 * HOUR),
    st.lists(st.floats(0, 1), min_size=1, max_size=5),
)
def test_a_budget_answers_the_same_until_active_until(
    schedule: str, duration: float, offset: float, fractions: list[float]
) -> None:
    budget = b.budget("0", schedule=schedule, duration=duration)
    now = MONDAY + offset
    answer = budgets.active(budget, now)
    assert answer == cron_active(schedule, duration, now)
    until = budgets.active_until(budget, now)
    assert until > now
    for fraction in fractions:
        later = now + fraction * (min(until, now + 30 * 24 * HOUR) - now)
        if later < until:
            assert cron_active(schedule, duration, later) == answer, (later - now, until - now)
    if until < float("inf"):
        assert (
            cron_active(schedule, duration, until) != answer
            or cron_active(schedule, duration, until - 1) == answer
        )


def one_node(*, last_event: float, after: float = 300.0, expire_after: float | None = None) -> Snapshot:
    pool = b.disruption_pool(consolidate_after=after, expire_after=expire_after)
    managed = [
        b.managed_node("n1", instance_type=SMALL, claim_overrides={"last_pod_event": last_event}),
        b.managed_node("n2", instance_type=SMALL, claim_overrides={"last_pod_event": NOW - 3600}),
    ]
    pods = [
        b.running_pod("a", "n1", cpu="250m"),
        b.running_pod("b", "n2", cpu="250m", annotations={wk.DO_NOT_DISRUPT: "10m"}, started=NOW - 60),
    ]
    return b.managed_snapshot(pools=[pool], types=[SMALL], managed=managed, pods=pods, now=NOW)


def test_the_next_change_is_the_first_threshold_after_now() -> None:
    snap = one_node(last_event=NOW - 100, expire_after=2 * NOW)
    # n1's consolidateAfter ends at NOW + 200; the pod on n2 may be disrupted from NOW + 540
    assert horizon.next_change(snap, NOW) == NOW + 200
    assert horizon.next_change(snap, NOW + 200) == NOW + 540
    # then the claims' expiry (created at 0)
    assert horizon.next_change(snap, NOW + 540) == 2 * NOW
    assert horizon.next_change(snap, 2 * NOW) == float("inf")


def test_the_moments_kept_on_a_node_follow_the_nodepool_durations() -> None:
    snap = one_node(last_event=NOW - 100, expire_after=2 * NOW)
    assert horizon.next_change(snap, NOW) == NOW + 200
    # the same StateNode objects under a NodePool with other durations: read anew, not the kept ones
    longer = b.disruption_pool(consolidate_after=900.0, expire_after=3 * NOW)
    again = dataclasses.replace(snap, node_pools=(longer,))
    assert again.nodes[0] is snap.nodes[0]
    assert horizon.next_change(again, NOW) == NOW + 540  # n2's do-not-disrupt ends before n1's window
    assert horizon.next_change(again, NOW + 540) == NOW + 800  # n1's 900 s window
    assert horizon.next_change(again, NOW + 3000) == 3 * NOW
    assert horizon.next_change(snap, NOW + 540) == 2 * NOW  # and back


def test_a_pass_before_the_next_change_is_the_last_pass_and_after_it_is_computed() -> None:
    snap = one_node(last_event=NOW - 100)  # n1 becomes consolidatable at NOW + 200
    memo = Memo()
    first = compute(snap, NOW, memo=memo)
    assert first.command is None  # n1 in its window; n2 holds a do-not-disrupt pod
    assert compute(dataclasses.replace(snap, now=NOW + 100), NOW + 100, memo=memo) is first
    later = compute(snap, NOW + 250, memo=memo)
    assert later is not first
    assert later.command is not None and later.command.candidates == ("n1",)
    assert later == compute(snap, NOW + 250)  # a fresh memo agrees


def test_a_pass_over_other_objects_is_computed() -> None:
    snap = one_node(last_event=NOW - 1000)
    memo = Memo()
    first = compute(snap, NOW, memo=memo)
    assert first.command is not None
    rebuilt = dataclasses.replace(snap, nodes=tuple(dataclasses.replace(n) for n in snap.nodes))
    again = compute(rebuilt, NOW, memo=memo)
    assert again is not first and again == first


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(), st.lists(st.sampled_from([0.0, 120.0, 239.0, 240.0, 600.0]) | st.floats(0, 900), min_size=2)
)
def test_passes_with_one_memo_decide_as_fresh_passes(snap: Snapshot, offsets: list[float]) -> None:
    # the clusters' windows end 240 s after NOW (a pod event 60 s before it, consolidateAfter 300 s)
    memo = Memo()
    for offset in sorted(offsets):
        now = NOW + offset
        remembered = compute(snap, now, memo=memo)
        fresh = compute(snap, now)
        assert remembered.command == fresh.command
        assert remembered.records == fresh.records
        assert remembered.budgets == fresh.budgets
