"""NodePool disruption budgets (karpy.core.disruption.budgets): counts, percents, windows, reasons."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

import builders as b
from karpy.core.disruption import DRIFTED, EMPTY, UNDERUTILIZED, budgets
from karpy.model.objects import Condition

HOUR = 3600.0
DAY = 24 * HOUR


def at(text: str) -> float:
    """Seconds since the epoch of an ISO time (an offset is required)."""
    return datetime.fromisoformat(text).timestamp()


def pool_nodes(count: int, *, pool: str = "default", **kwargs: object) -> list:
    """``count`` managed StateNodes of ``pool`` (initialized, Ready)."""
    managed = [b.managed_node(f"n{i}", pool=pool) for i in range(count)]
    snap = b.managed_snapshot(pools=[b.disruption_pool(pool)], types=[], managed=managed, **kwargs)
    return list(snap.nodes)


# -- nodes: count and percent ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "total", "expected"),
    [
        ("3", 10, 3),
        ("0", 10, 0),
        ("12", 5, 12),
        ("50%", 3, 2),  # 1.5 rounds up
        ("10%", 5, 1),  # 0.5 rounds up
        ("0%", 10, 0),
        ("100%", 7, 7),
        ("30%", 10, 3),  # exact: no float drift to 4
        ("33%", 3, 1),
        ("34%", 3, 2),
        ("10%", 0, 0),
    ],
)
def test_budget_nodes_counts_and_rounds_percentages_up(nodes: str, total: int, expected: int) -> None:
    assert budgets.budget_nodes(b.budget(nodes), total) == expected


def test_allowed_counts_a_percentage_of_the_pools_nodes() -> None:
    pool = b.disruption_pool(budgets=[b.budget("50%")])
    count, why = budgets.allowed(pool, pool_nodes(3), EMPTY, 0.0)
    assert count == 2
    assert "budget[0]" in why and "50%" in why


def test_nodes_of_other_pools_are_not_counted() -> None:
    pool = b.disruption_pool("a", budgets=[b.budget("50%")])
    nodes = pool_nodes(2, pool="a") + pool_nodes(6, pool="b")
    assert budgets.allowed(pool, nodes, EMPTY, 0.0)[0] == 1


def test_uninitialized_nodes_are_not_counted_in_the_total() -> None:
    pool = b.disruption_pool(budgets=[b.budget("50%")])
    managed = [b.managed_node(f"n{i}") for i in range(2)]
    managed += [b.managed_node(f"u{i}", initialized=False) for i in range(4)]
    snap = b.managed_snapshot(pools=[pool], types=[], managed=managed)
    assert budgets.allowed(pool, snap.nodes, EMPTY, 0.0)[0] == 1


# -- schedule windows -------------------------------------------------------------------------------


WORKDAY = b.budget("0", schedule="0 8 * * *", duration=10 * HOUR)


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("2026-03-02T07:59:59+00:00", False),
        ("2026-03-02T08:00:00+00:00", True),  # the fire time itself opens the window
        ("2026-03-02T12:00:00+00:00", True),
        ("2026-03-02T17:59:59+00:00", True),
        ("2026-03-02T18:00:01+00:00", False),
        ("2026-03-03T03:00:00+00:00", False),
    ],
)
def test_schedule_window_active_from_fire_for_duration(when: str, expected: bool) -> None:
    assert budgets.active(WORKDAY, at(when)) is expected


def test_schedule_window_end_is_exclusive() -> None:
    # The window is [fire, fire + duration) (the module docstring; upstream Budget.IsActive is
    # `!cron.Next(now - duration).After(now)` and robfig's Next is strictly after): at exactly
    # 08:00 + 10h the budget is no longer active.
    assert budgets.active(WORKDAY, at("2026-03-02T18:00:00+00:00")) is False


def test_budget_without_schedule_is_always_active() -> None:
    assert budgets.active(b.budget("0"), at("2026-03-02T03:00:00+00:00"))


def test_daily_macro_with_a_duration_longer_than_a_day_is_always_active() -> None:
    forever = b.budget("0", schedule="@daily", duration=36 * HOUR)
    start = at("2026-03-02T00:00:00+00:00")
    assert all(budgets.active(forever, start + k * 1800.0) for k in range(96))


def test_daily_macro_window() -> None:
    daily = b.budget("0", schedule="@daily", duration=2 * HOUR)
    assert budgets.active(daily, at("2026-03-02T01:30:00+00:00"))
    assert not budgets.active(daily, at("2026-03-02T02:30:00+00:00"))


def test_weekly_window_longer_than_a_day_spills_into_the_next_day() -> None:
    monday = b.budget("0", schedule="0 0 * * mon", duration=30 * HOUR)  # Mon 00:00 -> Tue 06:00
    assert budgets.active(monday, at("2026-03-03T05:00:00+00:00"))  # Tuesday
    assert not budgets.active(monday, at("2026-03-03T07:00:00+00:00"))
    assert not budgets.active(monday, at("2026-03-01T23:00:00+00:00"))  # Sunday


def test_schedule_is_evaluated_in_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    nine = b.budget("0", schedule="0 9 * * *", duration=HOUR)
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert budgets.active(nine, at("2026-03-02T09:30:00+00:00"))
        # 09:30 in UTC+02:00 is 07:30 UTC: outside the window
        assert not budgets.active(nine, at("2026-03-02T09:30:00+02:00"))
        # 09:30 JST is 00:30 UTC
        assert not budgets.active(nine, at("2026-03-02T09:30:00+09:00"))
    finally:
        monkeypatch.undo()
        time.tzset()


def test_inactive_scheduled_budget_does_not_limit() -> None:
    pool = b.disruption_pool(budgets=[b.budget("100%"), WORKDAY])
    nodes = pool_nodes(4)
    assert budgets.allowed(pool, nodes, EMPTY, at("2026-03-02T20:00:00+00:00"))[0] == 4
    assert budgets.allowed(pool, nodes, EMPTY, at("2026-03-02T09:00:00+00:00"))[0] == 0


# -- reasons, tightest wins, disrupting nodes ------------------------------------------------------


def test_reasons_scope_a_budget() -> None:
    pool = b.disruption_pool(budgets=[b.budget("3"), b.budget("0", reasons=[DRIFTED])])
    nodes = pool_nodes(10)
    assert budgets.allowed(pool, nodes, DRIFTED, 0.0)[0] == 0
    assert budgets.allowed(pool, nodes, EMPTY, 0.0)[0] == 3
    assert budgets.allowed(pool, nodes, UNDERUTILIZED, 0.0)[0] == 3


def test_tightest_active_budget_wins() -> None:
    closed_now = b.budget("0", schedule="0 1 * * *", duration=HOUR)
    pool = b.disruption_pool(budgets=[b.budget("50%"), b.budget("2"), closed_now, b.budget("80%")])
    count, why = budgets.allowed(pool, pool_nodes(10), EMPTY, at("2026-03-02T12:00:00+00:00"))
    assert count == 2
    assert "budget[1]" in why


def test_no_budget_for_the_reason_allows_every_node() -> None:
    pool = b.disruption_pool(budgets=[b.budget("1", reasons=[DRIFTED])])
    assert budgets.allowed(pool, pool_nodes(5), EMPTY, 0.0)[0] == 5


def test_disrupting_and_not_ready_nodes_are_subtracted() -> None:
    pool = b.disruption_pool(budgets=[b.budget("3")])
    managed = [b.managed_node(f"n{i}") for i in range(8)]
    managed.append(b.managed_node("sick", node_overrides={"ready": False}))
    managed.append(b.managed_node("going", node_overrides={"deleting": True}))
    snap = b.managed_snapshot(pools=[pool], types=[], managed=managed, marked_for_deletion=["n0"])
    count, why = budgets.allowed(pool, snap.nodes, EMPTY, 0.0)
    assert count == 0  # 3 - (marked n0 + NotReady sick + deleting going)
    assert "3 already disrupting" in why


def test_a_deleting_claim_counts_in_the_base_until_its_instance_terminates() -> None:
    """Upstream's ``BuildDisruptionBudgetMapping``: of 10 nodes two are being deleted; 50% is
    taken of all 10 (5), less the 2 disrupting. Once a claim is ``InstanceTerminating`` it leaves
    both counts. An uninitialized NotReady node is in neither."""
    pool = b.disruption_pool(budgets=[b.budget("50%")])
    managed = [b.managed_node(f"n{i}") for i in range(8)]
    managed += [b.managed_node(f"d{i}", claim_overrides={"deleting": True}) for i in range(2)]
    managed.append(b.managed_node("new", initialized=False, node_overrides={"ready": False}))
    snap = b.managed_snapshot(pools=[pool], types=[], managed=managed)
    assert budgets.counts(pool, snap.nodes) == (10, 2)
    assert budgets.allowed(pool, snap.nodes, EMPTY, 0.0)[0] == 3
    terminating = Condition(budgets.INSTANCE_TERMINATING, "True")
    managed[8] = b.managed_node("d0", claim_overrides={"deleting": True}, claim_conditions=[terminating])
    snap = b.managed_snapshot(pools=[pool], types=[], managed=managed)
    assert budgets.counts(pool, snap.nodes) == (9, 1)


def test_disrupting_nodes_reduce_the_count_but_never_below_zero() -> None:
    pool = b.disruption_pool(budgets=[b.budget("2")])
    managed = [b.managed_node(f"n{i}") for i in range(6)]
    snap = b.managed_snapshot(pools=[pool], types=[], managed=managed, marked_for_deletion=["n0"])
    assert budgets.allowed(pool, snap.nodes, EMPTY, 0.0)[0] == 1
    snap = b.managed_snapshot(
        pools=[pool], types=[], managed=managed, marked_for_deletion=["n0", "n1", "n2", "n3"]
    )
    assert budgets.allowed(pool, snap.nodes, EMPTY, 0.0)[0] == 0


@pytest.mark.parametrize(
    "bad",
    [
        b.budget("150%"),
        b.budget("-1"),
        b.budget("10%", schedule="61 * * * *", duration=HOUR),
        b.budget("10%", schedule="0 8 * *", duration=HOUR),
        b.budget("10%", schedule="0 8 * * *"),
    ],
)
def test_invalid_budget_fails_closed_with_a_reason(bad: object) -> None:
    pool = b.disruption_pool(budgets=[b.budget("100%"), bad])
    count, why = budgets.allowed(pool, pool_nodes(5), EMPTY, 0.0)
    assert count == 0
    assert "budget[1]" in why and "invalid" in why


def test_invalid_budget_scoped_to_another_reason_does_not_close_this_one() -> None:
    pool = b.disruption_pool(budgets=[b.budget("2"), b.budget("150%", reasons=[DRIFTED])])
    nodes = pool_nodes(5)
    assert budgets.allowed(pool, nodes, EMPTY, 0.0)[0] == 2
    assert budgets.allowed(pool, nodes, DRIFTED, 0.0)[0] == 0


# -- validate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "word"),
    [
        (b.budget("150%"), "nodes"),
        (b.budget("101%"), "nodes"),
        (b.budget("-1"), "nodes"),
        (b.budget("ten"), "nodes"),
        (b.budget("10%", schedule="61 * * * *", duration=HOUR), "schedule"),
        (b.budget("10%", schedule="0 8 * *", duration=HOUR), "schedule"),
        (b.budget("10%", schedule="0 8 * * * *", duration=HOUR), "schedule"),
        (b.budget("10%", schedule="@fortnightly", duration=HOUR), "schedule"),
        (b.budget("10%", schedule="0 8 * * *"), "duration"),
        (b.budget("10%", duration=HOUR), "duration"),
    ],
)
def test_validate_rejects_bad_budgets(bad: object, word: str) -> None:
    with pytest.raises(budgets.BudgetError, match=word):
        budgets.validate(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "good",
    [
        b.budget("0"),
        b.budget("0%"),
        b.budget("100%"),
        b.budget("25"),
        b.budget("10%", schedule="@daily", duration=DAY * 2),
        b.budget("10%", schedule="0 8 * * mon-fri", duration=10 * HOUR, reasons=[UNDERUTILIZED]),
        b.budget("10%", schedule="*/15 * * * *", duration=300.0),
    ],
)
def test_validate_accepts_good_budgets(good: object) -> None:
    budgets.validate(good)  # type: ignore[arg-type]


def test_budget_error_is_a_value_error() -> None:
    assert issubclass(budgets.BudgetError, ValueError)
