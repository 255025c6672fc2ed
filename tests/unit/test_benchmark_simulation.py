"""The simulator benchmark's generated ``scale-7d`` cluster (``benchmarks/simulation.py``) is what
``benchmarks/README.md`` says: a valid scenario of 60 services peaking at ~20,000 pods."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from karpy.sim import scenario as scenario_mod

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "simulation.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_simulation", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_simulation"] = module
    spec.loader.exec_module(module)
    return module


def test_scale_scenario_is_valid_deterministic_and_peaks_near_20k_pods() -> None:
    bench = _module()
    raw = bench.scale_scenario()
    assert raw == bench.scale_scenario()
    scenario = scenario_mod.parse(raw, file="<generated>", base_dir=_PATH.parent)
    assert scenario.duration == 7 * 24 * 3600
    assert len(scenario.deployments) == 60 and len(scenario.jobs) == 1
    peaks = [max(int(p[1]) for p in w["replicas"]["points"]) for w in raw["workloads"] if "deployment" in w]
    assert 19_900 <= sum(peaks) <= 20_100
    floors = [w["replicas"]["points"][0][1] for w in raw["workloads"] if "deployment" in w]
    assert sum(floors) < 0.35 * sum(peaks)


def test_targets_scale_with_a_shorter_run() -> None:
    bench = _module()
    assert bench._until("hospital-24h", None) == 24 * 3600
    assert bench._duration("30m") == 1800 and bench._duration("2d") == 2 * 24 * 3600


def test_day_split_gives_the_cpu_of_each_virtual_day_from_progress_reports() -> None:
    bench = _module()
    day = bench.DAY
    clock = iter([10.0, 13.0, 20.0, 31.0, 45.0])  # the CPU counter at each read
    split = bench.DaySplit(cpu=lambda: next(clock))  # start: 10.0
    for done in (600.0, day - 600, day, day + 600, 2 * day - 1):
        split(done)  # read once, at the first report of day 2 (13.0)
    split(2 * day)  # and at the first of day 3 (20.0), which a two-day run ends with
    assert split.days(2 * day, end=21.0) == [3.0, 8.0]
    assert split.days(2.5 * day, end=21.0) == [3.0, 7.0, 1.0]  # a last partial day
    split(3 * day + 1)  # 31.0
    assert split.days(3.5 * day) == [3.0, 7.0, 11.0, 14.0]  # the last day ends now: 45.0


def test_day_split_of_a_report_past_several_day_ends() -> None:
    bench = _module()
    clock = iter([0.0, 5.0])
    split = bench.DaySplit(cpu=lambda: next(clock))
    split(2.5 * bench.DAY)  # one read for both day ends
    assert split.days(3 * bench.DAY, end=6.0) == [5.0, 0.0, 1.0]


def test_a_higher_night_floor_keeps_the_peak_and_lowers_the_daily_churn() -> None:
    bench = _module()
    default, flat = bench.scale_scenario(), bench.scale_scenario(night_floor_percent=60)
    assert default == bench.scale_scenario(night_floor_percent=bench.NIGHT_FLOOR_PERCENT)

    def curves(raw: dict[str, Any]) -> list[list[int]]:
        return [[int(p[1]) for p in w["replicas"]["points"]] for w in raw["workloads"] if "deployment" in w]

    for low, high in zip(curves(default), curves(flat), strict=True):
        assert max(low) == max(high)  # the same peak
        assert high[0] == max(2, max(high) * 60 // 100) and low[0] == max(2, max(low) * 30 // 100)
    scenario_mod.parse(flat, file="<generated>", base_dir=_PATH.parent)


def test_a_row_of_another_night_floor_is_not_judged_against_the_target() -> None:
    bench = _module()
    report = {
        "case": "scale-7d",
        "mode": "karpy",
        "virtual_hours": 24.0,
        "wall_seconds": 1.0,
        "cpu_seconds": 1.0,
        "target_seconds": 42.9,
        "peak_rss_mb": 1.0,
        "figures": {},
    }
    assert bench._row({**report, "night_floor_percent": 30}).endswith("| **met** |")
    row = bench._row({**report, "night_floor_percent": 60})
    assert "scale-7d (night floor 60%)" in row and row.endswith("| n/a |")
