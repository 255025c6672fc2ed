"""``karpy conformance``: PASS/FAIL/SKIP/DISPUTED lines, the summary line and the exit code."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from karpy.cli import app

SUITE = Path(__file__).resolve().parents[2] / "conformance"
runner = CliRunner()


def _copy(tmp_path: Path, *names: str) -> Path:
    (tmp_path / "catalogs").mkdir()
    for catalog in (SUITE / "catalogs").glob("*.yaml"):
        shutil.copyfile(catalog, tmp_path / "catalogs" / catalog.name)
    for name in names:
        shutil.copyfile(SUITE / name, tmp_path / name)
    return tmp_path


def test_passing_scenario(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "core-001-nodepool-template-label-applied.yaml")
    result = runner.invoke(app, ["conformance", str(folder), "--disputed", str(tmp_path / "none.yaml")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "PASS core-001-nodepool-template-label-applied",
        "1 passed, 0 failed, 0 skipped, 0 disputed",
    ]


def test_failing_scenario_exits_1_with_a_reason(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "core-001-nodepool-template-label-applied.yaml")
    scenario = folder / "core-001-nodepool-template-label-applied.yaml"
    scenario.write_text(scenario.read_text().replace("{test-key: test-value}}", "{test-key: other}}"))
    result = runner.invoke(app, ["conformance", str(folder), "--disputed", str(tmp_path / "none.yaml")])
    assert result.exit_code == 1
    assert (
        "FAIL core-001-nodepool-template-label-applied: p1 on node with test-key='test-value'"
        in result.output
    )
    assert result.output.splitlines()[-1] == "0 passed, 1 failed, 0 skipped, 0 disputed"


def test_disputed_scenario_is_never_counted_as_passed(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "core-001-nodepool-template-label-applied.yaml")
    disputed = tmp_path / "disputed.yaml"
    disputed.write_text(
        "disputed:\n"
        "  - name: core-001-nodepool-template-label-applied\n"
        "    upstream: suite_test.go:123\n"
        "    trace: pod p1 -> nodepool default\n"
    )
    result = runner.invoke(app, ["conformance", str(folder), "--disputed", str(disputed)])
    assert result.exit_code == 0
    assert "DISPUTED core-001-nodepool-template-label-applied" in result.output
    assert result.output.splitlines()[-1] == "0 passed, 0 failed, 0 skipped, 1 disputed"


def test_disputed_entry_without_evidence_is_an_input_error(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "core-001-nodepool-template-label-applied.yaml")
    disputed = tmp_path / "disputed.yaml"
    disputed.write_text("disputed:\n  - name: core-001-nodepool-template-label-applied\n")
    result = runner.invoke(app, ["conformance", str(folder), "--disputed", str(disputed)])
    assert result.exit_code == 2
    assert "upstream is required" in result.stderr
