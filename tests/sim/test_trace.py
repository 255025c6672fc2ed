"""Replica curves, daily and cron times, CSV traces and scheduling onto the loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.model.errors import InputError
from karpy.sim import trace

DAY0 = 1_772_409_600.0  # 2026-03-02T00:00:00Z, a Monday
H = 3600.0


def curve(*points: tuple[str, int], interpolate: str = trace.LINEAR) -> trace.Curve:
    return trace.Curve(tuple((trace.parse_clock(t), n) for t, n in points), interpolate, True)


def test_parse_clock() -> None:
    assert trace.parse_clock("07:30") == 7.5 * H
    assert trace.parse_clock("00:00:30") == 30
    assert trace.parse_clock("24:00") == 24 * H
    for bad in ("7h30", "25:00", "12:60", "24:01"):
        with pytest.raises(ValueError):
            trace.parse_clock(bad)


def test_linear_interpolation_rounds_to_whole_pods() -> None:
    c = curve(("00:00", 6), ("07:30", 6), ("08:30", 80), ("10:00", 30))
    assert c.at(DAY0 + 7 * H) == 6
    assert c.at(DAY0 + 8 * H) == 43  # halfway from 6 to 80
    assert c.at(DAY0 + 8.5 * H) == 80
    assert c.at(DAY0 + 9.25 * H) == 55
    assert c.at(DAY0 + 9 * H + 59 * 60) == 31


def test_linear_curve_wraps_from_the_last_point_to_the_next_day() -> None:
    c = curve(("06:00", 10), ("18:00", 30))
    assert c.at(DAY0 + 18 * H) == 30
    assert c.at(DAY0 + 24 * H) == 20  # midnight: halfway from 18:00 (30) to 06:00 (10)
    assert c.at(DAY0 + 3 * H) == 15  # before the first point: still on yesterday's segment
    assert c.at(DAY0 + 5 * 24 * H + 12 * H) == c.at(DAY0 + 12 * H)  # repeats daily


def test_step_interpolation_holds_until_the_next_point() -> None:
    c = curve(("00:00", 2), ("08:00", 20), ("12:00", 5), interpolate=trace.STEP)
    assert c.at(DAY0 + 8 * H - 1) == 2
    assert c.at(DAY0 + 8 * H) == 20
    assert c.at(DAY0 + 11.99 * H) == 20
    assert c.at(DAY0 + 23 * H) == 5


def test_points_must_increase() -> None:
    with pytest.raises(ValueError, match="increase"):
        curve(("08:00", 1), ("07:00", 2))


def test_scale_events_emit_only_changes() -> None:
    step = curve(("00:00", 2), ("08:00", 20), ("12:00", 5), interpolate=trace.STEP)
    assert trace.scale_events(step, DAY0, DAY0 + 24 * H) == [
        (DAY0, 2),
        (DAY0 + 8 * H, 20),
        (DAY0 + 12 * H, 5),
        (DAY0 + 24 * H, 2),
    ]
    linear = curve(("00:00", 0), ("00:10", 10))  # +1 pod a minute, then back down over the day
    events = trace.scale_events(linear, DAY0, DAY0 + 600)
    assert events == [(DAY0 + 60 * k, k) for k in range(11)]


def test_daily_and_cron_times() -> None:
    assert trace.daily_times([10.5 * H, 14 * H], DAY0 + 12 * H, DAY0 + 36 * H) == [
        DAY0 + 14 * H,
        DAY0 + 34.5 * H,
    ]
    assert trace.cron_times("0 3 * * *", DAY0, DAY0 + 48 * H) == [DAY0 + 3 * H, DAY0 + 27 * H]
    assert trace.cron_times("*/30 * * * *", DAY0, DAY0 + H) == [DAY0, DAY0 + 1800]
    with pytest.raises(ValueError, match="cron"):
        trace.cron_times("every day", DAY0, DAY0 + H)


def test_csv_of_times_of_day_and_of_timestamps(tmp_path: Path) -> None:
    daily = tmp_path / "daily.csv"
    daily.write_text("time,replicas\n00:00,4\n12:00,8\n")
    c = trace.load_csv(daily)
    assert c.daily and c.at(DAY0 + 6 * H) == 6
    absolute = tmp_path / "abs.csv"
    absolute.write_text("2026-03-02T01:00:00Z,1\n2026-03-02T03:00:00Z,5\n")
    a = trace.load_csv(absolute, interpolate=trace.STEP)
    assert not a.daily
    assert [a.at(DAY0), a.at(DAY0 + 2 * H), a.at(DAY0 + 10 * H)] == [1, 1, 5]
    bad = tmp_path / "bad.csv"
    bad.write_text("00:00,4\n01:00,many\n")
    with pytest.raises(InputError, match=r"bad.csv:2: replicas"):
        trace.load_csv(bad)
