"""``karpy plan --bound`` and ``--packing``: the JSON ``bound`` and ``packing`` sections, the table line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy.cli import app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "plan"
runner = CliRunner()


def _json(*extra: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "-o", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_bound_section_in_json() -> None:
    doc = _json("--bound")
    section = doc["bound"]
    assert section["method"] == "LP relaxation (HiGHS)"
    assert section["solverStatus"] == "optimal"
    assert "topology spread constraints" in section["ignores"]
    assert "pod affinity and anti-affinity" in section["ignores"]
    assert section["lowerBoundPerHour"] > 0
    assert section["perPodFloorPerHour"] <= section["lpPerHour"] + 1e-6
    assert section["ratio"] >= 1.0
    assert section["ratio"] == pytest.approx(
        doc["summary"]["hourlyCost"] / section["lowerBoundPerHour"], rel=1e-5
    )
    assert section["pods"] == doc["summary"]["scheduledPods"]
    assert section["packing"] == "faithful"
    assert "faithfulRatio" not in section
    assert all(item["nodes"] > 0 for item in section["instanceTypeMix"])
    assert "packing" not in doc


def test_without_the_flag_the_document_is_unchanged() -> None:
    doc = _json()
    assert "bound" not in doc and "packing" not in doc


def test_optimized_packing_reports_both_costs() -> None:
    faithful = _json("--bound")
    doc = _json("--bound", "--packing", "optimized")
    packing, section = doc["packing"], doc["bound"]
    assert packing["mode"] == "optimized"
    assert packing["faithfulHourlyCost"] == faithful["summary"]["hourlyCost"]
    assert packing["hourlyCost"] == doc["summary"]["hourlyCost"] <= packing["faithfulHourlyCost"]
    assert section["lowerBoundPerHour"] == faithful["bound"]["lowerBoundPerHour"]
    assert 1.0 <= section["ratio"] <= section["faithfulRatio"]
    assert section["faithfulRatio"] == faithful["bound"]["ratio"]
    assert sorted(doc["bindings"]) == sorted(faithful["bindings"])
    assert doc["summary"]["scheduledPods"] == faithful["summary"]["scheduledPods"]


def test_table_prints_the_ratio() -> None:
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "--bound"])
    assert result.exit_code == 0, result.output
    assert "cost / lower bound:" in result.output
    assert "LP relaxation (HiGHS)" in result.output


def test_unknown_packing_is_a_usage_error() -> None:
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "--packing", "greedy"])
    assert result.exit_code == 2
    assert "--packing" in result.output
