"""Expansion: scenario x configuration x grid point x seed (+ Cluster Autoscaler per seed), stable keys,
the grid written into every NodePool, and a run executed from its shipped texts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import sweep_files

from karpy.sweep import expand, spec, task


def test_six_runs_in_order_with_readable_names_and_distinct_stable_keys(tmp_path: Path) -> None:
    plan = expand.expand(sweep_files.six_runs(tmp_path))
    assert [r.name for r in plan.runs] == [
        f"small/baseline/consolidateAfter={c}/seed={s}" for c in ("30s", "5m", "30m") for s in (1, 2)
    ]
    assert plan.parameters == ["consolidateAfter"]
    assert plan.root == tmp_path.resolve()
    assert {r.scenario_file for r in plan.runs} == {"small.yaml"}
    keys = [r.key for r in plan.runs]
    assert len(set(keys)) == 6
    assert [r.key for r in expand.expand(tmp_path / "sweep.yaml").runs] == keys  # stable
    # the key follows the scenario's text
    (tmp_path / "small.yaml").write_text((tmp_path / "small.yaml").read_text() + "\n# changed\n")
    assert not set(keys) & {r.key for r in expand.expand(tmp_path / "sweep.yaml").runs}


def test_configurations_and_the_autoscaler_baseline(tmp_path: Path) -> None:
    shutil.copy(sweep_files.SMALL, tmp_path / "small.yaml")
    (tmp_path / "configs").mkdir()
    shutil.copy(sweep_files.ROOT / "examples/sweep/larger-nodes.yaml", tmp_path / "configs/larger.yaml")
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "kind: Sweep\nname: s\nscenarios: [small.yaml]\nseeds: [3, 4]\nclusterAutoscaler: true\n"
        "configurations: [{name: as-is}, {name: larger, file: configs/larger.yaml}]\n"
        "grid: {spot: [true, false]}\n"
    )
    plan = expand.expand(path)
    assert len(plan.runs) == 2 * 2 * 2 + 2
    ca = [r for r in plan.runs if r.mode == spec.CLUSTER_AUTOSCALER]
    assert [(r.name, r.grid, r.config_text) for r in ca] == [
        ("small/cluster-autoscaler/seed=3", {}, None),
        ("small/cluster-autoscaler/seed=4", {}, None),
    ]
    larger = [r for r in plan.runs if r.configuration == "larger"]
    assert {r.config_file for r in larger} == {"configs/larger.yaml"}
    assert larger[0].config_text == (tmp_path / "configs/larger.yaml").read_text()
    assert [r.grid for r in larger] == [{"spot": True}, {"spot": True}, {"spot": False}, {"spot": False}]


def test_files_the_sweep_names_are_checked_with_located_problems(tmp_path: Path) -> None:
    text = sweep_files.SMALL.read_text()
    (tmp_path / "nobaseline.yaml").write_text(text[: text.index("baseline:")])
    (tmp_path / "bad.yaml").write_text(text.replace("duration: 2h", "duration: 2x"))
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "kind: Sweep\nname: s\nclusterAutoscaler: true\n"
        "scenarios: [missing.yaml, nobaseline.yaml, bad.yaml]\n"
    )
    with pytest.raises(spec.SweepError) as caught:
        expand.expand(path)
    lines = [str(p) for p in caught.value.problems]
    head = f'{path}: document 0 (Sweep "s"): '
    assert f"{head}scenarios[0]: missing.yaml: no such file" in lines
    assert f"{head}scenarios[1]: baseline.clusterAutoscaler: required by clusterAutoscaler: true" in lines
    assert any(line.startswith(str(tmp_path / "bad.yaml")) and "duration" in line for line in lines), lines


def test_the_grid_is_written_into_every_nodepool() -> None:
    pools: tuple[dict[str, Any], ...] = (
        {"spec": {"disruption": {"budgets": [{"nodes": "5"}, {"nodes": "0", "schedule": "@daily"}]}}},
        {},
    )
    grid = {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "5m",
        "budgets.nodes": "10%",
        "expireAfter": "24h",
        "spot": False,
    }
    out = task.apply_grid(pools, grid)
    for pool in out:
        assert pool["spec"]["disruption"] == {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "5m",
            "budgets": [{"nodes": "10%"}],
        }
        assert pool["spec"]["template"]["spec"]["expireAfter"] == "24h"
    assert pools[0]["spec"]["disruption"]["budgets"][0] == {"nodes": "5"}  # the input is left as it was


def test_a_run_from_its_payload_applies_spot_false_as_on_demand_only(tmp_path: Path) -> None:
    path = sweep_files.six_runs(tmp_path)
    path.write_text(path.read_text().replace("consolidateAfter: [30s, 5m, 30m]", "spot: [true, false]"))
    path.write_text(path.read_text().replace("seeds: [1, 2]", "seeds: [1]"))
    plan = expand.expand(path)
    spot, on_demand = (task.run(r.payload(str(plan.root))) for r in plan.runs)
    assert spot["node_hours_by_capacity_type"].get("spot", 0) > 0
    assert set(on_demand["node_hours_by_capacity_type"]) == {"on-demand"}
