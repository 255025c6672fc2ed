"""``karpy simulate`` through a local Typer app: JSON output, determinism, malformed input."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from karpy.cli.simulate_cmd import simulate

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sim" / "small.yaml"

app = typer.Typer()
app.command()(simulate)
cli = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = cli.invoke(app, [*args, "--no-progress"])
    return result.exit_code, result.output


def test_same_scenario_and_seed_give_identical_json(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    code, out = run(str(SMALL), "--seed", "4", "--until", "45m", "--json", str(first))
    assert code == 0, out
    assert "karpy simulate" in out and "cost (USD)" in out
    code, _ = run(str(SMALL), "--seed", "4", "--until", "45m", "--json", str(second))
    assert code == 0
    assert first.read_text() == second.read_text()
    doc = json.loads(first.read_text())
    assert doc["scenario"] == "small" and doc["seed"] == 4
    r = doc["runs"]["karpy"]
    for key in ("cost_usd", "pods_created", "pods_never_scheduled", "nodes_created", "nodes_removed"):
        assert key in r
    assert set(r["pending_seconds"]) == set(r["ready_seconds"]) == {"p50", "p95", "p99", "max"}
    assert set(r["utilization"]) == {"cpu", "memory"}
    assert isinstance(r["disruptions"], dict) and isinstance(r["evictions"], int) and r["peak_nodes"] >= 1


def test_a_malformed_scenario_is_one_line_naming_the_field_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.read_text().replace("duration: 2h", "duration: two hours"))
    code, out = run(str(bad))
    assert code == 2
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1
    assert str(bad) in lines[0] and "duration:" in lines[0] and "is not a duration" in lines[0]


def test_bad_options_exit_2(tmp_path: Path) -> None:
    assert run(str(SMALL), "--until", "forever")[0] == 2
    assert run(str(SMALL), "--compare", "gke")[0] == 2
    assert run(str(SMALL), "--scoring", "Random")[0] == 2
    assert run(str(tmp_path / "missing.yaml"))[0] == 2


def test_compare_with_runs_the_other_karpy_configuration_on_the_same_trace(tmp_path: Path) -> None:
    other = tmp_path / "on-demand.yaml"
    other.write_text(
        SMALL.read_text()
        .replace("name: small", "name: on-demand-only")
        .replace('values: ["spot", "on-demand"]', 'values: ["on-demand"]')
    )
    out_json = tmp_path / "out.json"
    code, out = run(str(SMALL), "--until", "20m", "--compare-with", str(other), "--json", str(out_json))
    assert code == 0, out
    runs = json.loads(out_json.read_text())["runs"]
    assert list(runs) == ["karpy", "karpy:on-demand-only"]
    assert runs["karpy:on-demand-only"]["pods_created"] == runs["karpy"]["pods_created"]
    assert set(runs["karpy:on-demand-only"]["node_hours_by_capacity_type"]) == {"on-demand"}


def test_outputs_go_into_folders_that_do_not_exist_yet(tmp_path: Path) -> None:
    json_out, html_out = tmp_path / "new" / "run.json", tmp_path / "other" / "report.html"
    code, out = run(str(SMALL), "--until", "20m", "--json", str(json_out), "--report", str(html_out))
    assert code == 0, out
    assert json.loads(json_out.read_text())["scenario"] == "small"
    assert html_out.read_text().startswith("<!doctype html>")
