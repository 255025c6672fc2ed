"""The merged statistics on hand-made run figures: mean, Student t 95% interval, nulls, failures;
and the HTML report's plots (a scatter per scenario, heatmaps for a two-parameter grid)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from karpy.sweep import expand, merge, report, spec
from karpy.sweep.execute import Outcome


def test_mean_and_t_interval() -> None:
    s = merge.stats([1.0, 2.0, 3.0])
    half = 4.302653 / math.sqrt(3)  # t(0.975, 2) = 4.302653; s = 1
    assert s["n"] == 3 and s["mean"] == 2.0
    assert s["ci95"] == pytest.approx([2.0 - half, 2.0 + half], abs=1e-6)
    s = merge.stats([10.0, 12.0])  # t(0.975, 1) = 12.706205, s = sqrt(2)
    assert s["ci95"] == pytest.approx([11 - 12.706205, 11 + 12.706205], abs=1e-5)


def test_one_value_has_no_interval_and_nulls_are_left_out() -> None:
    assert merge.stats([4.0]) == {"n": 1, "mean": 4.0, "ci95": None, "values": [4.0]}
    assert merge.stats([None, 4.0, None]) == {"n": 1, "mean": 4.0, "ci95": None, "values": [None, 4.0, None]}
    assert merge.stats([]) == {"n": 0, "mean": None, "ci95": None, "values": []}


def _figures(cost: float, p95: float | None, created: int = 2, removed: int = 1) -> dict[str, Any]:
    return {
        "cost_usd": cost,
        "pending_seconds": {"p50": 1.0, "p95": p95},
        "ready_seconds": {"p50": 2.0, "p95": None if p95 is None else p95 + 30},
        "evictions": 3,
        "nodes_created": created,
        "nodes_removed": removed,
        "pods_never_scheduled": 0,
        "node_hours": 1.5,
    }


def _run(config: str, grid: dict[str, Any], seed: int) -> expand.Run:
    label = expand.point_label(grid)
    return expand.Run(
        key=f"{config}-{label}-{seed}",
        name=f"s/{config}/{label}/seed={seed}",
        scenario="s",
        configuration=config,
        grid=grid,
        seed=seed,
        mode="karpy",
        scenario_file="s.yaml",
        scenario_text="",
    )


def _plan(parameters: list[str], runs: list[expand.Run]) -> expand.Plan:
    sweep = spec.parse({"kind": "Sweep", "name": "hand", "scenarios": ["s.yaml"], "seeds": [1, 2, 3]})
    return expand.Plan(sweep, Path("sweep.yaml"), Path("."), runs, parameters)


def test_document_groups_by_configuration_and_grid_point_and_lists_failures() -> None:
    runs = [_run("a", {"consolidateAfter": "30s"}, s) for s in (1, 2, 3)] + [
        _run("b", {"consolidateAfter": "30s"}, 1)
    ]
    outcomes = [
        Outcome(runs[0], _figures(1.0, 10.0), None, 1),
        Outcome(runs[1], _figures(2.0, None), None, 1),
        Outcome(runs[2], None, "ValueError: boom", 2),
        Outcome(runs[3], _figures(5.0, 50.0, 4, 4), None, 0),
    ]
    doc = merge.document(_plan(["consolidateAfter"], runs), outcomes)
    a, b = doc["groups"]
    assert (a["configuration"], a["label"], a["seeds"], a["failed"]) == (
        "a",
        "consolidateAfter=30s",
        [1, 2],
        1,
    )
    assert a["figures"]["cost_usd"]["mean"] == 1.5
    assert a["figures"]["pending_p95_seconds"] == {"n": 1, "mean": 10.0, "ci95": None, "values": [10.0, None]}
    assert a["figures"]["churn_nodes"]["mean"] == 3.0
    assert b["figures"]["churn_nodes"]["values"] == [8.0]
    assert doc["runs"] == {"total": 4, "succeeded": 3, "failed": 1}
    assert doc["failedRuns"] == [
        {
            "key": runs[2].key,
            "name": runs[2].name,
            "description": runs[2].description(),
            "error": "ValueError: boom",
            "attempts": 2,
        }
    ]
    text = merge.dumps(doc)
    assert text == merge.dumps(merge.document(_plan(["consolidateAfter"], runs), list(outcomes)))
    assert text.index('"apiVersion"') < text.index('"failedRuns"') < text.index('"groups"')  # sorted keys


def test_report_has_a_scatter_and_heatmaps_for_a_two_parameter_grid(tmp_path: Path) -> None:
    runs, outcomes = [], []
    for i, (after, nodes) in enumerate([(a, n) for a in ("30s", "5m") for n in ("1", "10%")]):
        for seed in (1, 2):
            run = _run("a", {"consolidateAfter": after, "budgets.nodes": nodes}, seed)
            runs.append(run)
            outcomes.append(Outcome(run, _figures(1.0 + i + seed / 10, 10.0 * (i + 1) + seed), None, 1))
    doc = merge.document(_plan(["consolidateAfter", "budgets.nodes"], runs), outcomes)
    path = tmp_path / "r.html"
    report.write_html(doc, path)
    page = path.read_text()
    assert len(re.findall(r"data:image/png;base64,", page)) == 3  # scatter + cost and pending heatmaps
    assert "consolidateAfter=30s,budgets.nodes=10%" in page
    assert "http" not in page.replace("http-equiv", "")
    one = tmp_path / "one.html"
    report.write_html(merge.document(_plan(["consolidateAfter"], runs[:2]), outcomes[:2]), one)
    assert len(re.findall(r"data:image/png;base64,", one.read_text())) == 1
