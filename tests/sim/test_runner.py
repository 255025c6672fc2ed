"""Whole runs of the small scenario: karpy binds every pod; cost matches the billing log; baselines."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from karpy.sim import runner, scenario

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sim" / "small.yaml"


@pytest.fixture(scope="module")
def small() -> scenario.Scenario:
    return scenario.load(SMALL)


@pytest.fixture(scope="module")
def karpy_run(small: scenario.Scenario) -> runner.RunResult:
    return runner.run(small, seed=3)


def test_karpy_binds_every_pod_of_the_small_scenario(karpy_run: runner.RunResult) -> None:
    r = karpy_run.figures
    assert r["pods_created"] >= 20
    assert r["pods_never_scheduled"] == 0 and r["pods_pending_at_end"] == 0
    assert r["pending_seconds"]["max"] is not None and r["pending_seconds"]["max"] < 300
    assert r["ready_seconds"]["p50"] >= r["pending_seconds"]["p50"]
    assert r["nodes_created"] >= 1 and r["peak_nodes"] >= 1
    assert 0 < r["utilization"]["cpu"] <= 1 and 0 < r["utilization"]["memory"] <= 1
    assert karpy_run.problems == []
    series = r["series"]
    assert series["t"][0] == 0 and series["t"][-1] == 7200
    assert len(series["t"]) == len(series["nodes"]) == len(series["cost"]) == 121
    assert series["cost"] == sorted(series["cost"])  # accumulated


def test_reported_cost_is_the_sum_over_the_billing_log(karpy_run: runner.RunResult) -> None:
    end = karpy_run.end
    independent = 0.0
    for record in karpy_run.billing:
        stop = end if record.terminated_at is None else min(record.terminated_at, end)
        independent += record.price_per_hour * (stop - record.launched_at) / 3600.0
    assert karpy_run.figures["cost_usd"] == pytest.approx(independent, abs=1e-6)
    assert karpy_run.figures["nodes_created"] == len(karpy_run.billing)


def test_no_spot_ablation_launches_only_on_demand(small: scenario.Scenario) -> None:
    result = runner.run(small, seed=3, until=1800, karpy_overrides=runner.Overrides(no_spot=True))
    assert set(result.figures["node_hours_by_capacity_type"]) == {"on-demand"}
    assert result.end - result.start == 1800


def test_cluster_autoscaler_baseline_runs_on_the_same_trace(small: scenario.Scenario) -> None:
    result = runner.run(small, seed=3, until=3600, mode=runner.CLUSTER_AUTOSCALER)
    r = result.figures
    assert r["pods_created"] > 0 and r["nodes_created"] >= 1
    assert set(r["node_hours_by_capacity_type"]) == {"on-demand"}
    assert set(r["node_hours_by_instance_type"]) <= {"m5.xlarge", "m5a.xlarge", "m6i.xlarge"}


def test_unknown_mode_is_refused(small: scenario.Scenario) -> None:
    with pytest.raises(ValueError, match="mode"):
        runner.run(small, seed=1, mode="gke")


def test_the_collector_is_tuned_during_a_run_and_restored_after(small: scenario.Scenario) -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    runner.run(small, seed=1, until=600.0, progress=lambda _done, _total: seen.append(gc.get_threshold()))
    assert seen and all(t == runner._GC_THRESHOLDS for t in seen)
    assert before != runner._GC_THRESHOLDS
    assert gc.get_threshold() == before
